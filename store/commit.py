"""How a write lands: its events, then its note (whose row is the commit point), appended and folded into
what the write read; and, once committed, the write's checks made again for what another writer
committed between its check and its commit (`refuse_if_raced`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .checks import new_event
from .errors import Conflict, NotFound
from .fold import Fold, fold
from .model import Event, EventKind, Note
from .part import Collaborators


class Commits:
    """The commits of one store's writes, through what a part is `given` (part.py; `model` names the
    embeddings a note's row holds, the embedder's); `withdraw`
    forgets a note (id, reason) whose write lost a race to a forget of a note it names."""

    def __init__(self, given: Collaborators, withdraw: Callable[[str, str], object]) -> None:
        self.tables = given.tables
        self.graphs = given.graphs
        self.lookup = given.lookup
        self.model = given.embedder.name
        self.clock = given.clock
        self.withdraw = withdraw
        # The versions this thread's last write made: `events` (of the events table, None without
        # events), `notes` (of the notes table, None without a note).
        self.written = threading.local()

    def write(
        self, before: Fold, events: Sequence[Event], note: tuple[Note, Sequence[float], bool] | None = None
    ) -> Fold:
        """Append `events` and then `note` (with its vector and whether the model could read it; its
        row is the commit point), and fold them into `before`. The versions the write made are
        `self.written.events` and `self.written.notes` (on this thread)."""
        new_notes = []
        self.written.notes = None
        if note is not None:
            stored, vector, readable = note
            version, self.written.notes = self.tables.commit_notes([note], self.model, events)
            new_notes.append(stored)
            self.graphs.notes.put({stored.id: stored})  # the next call that reaches it need not read it
            if readable:
                self.graphs.vectors.put({stored.id: np.asarray(vector, np.float32)})
        else:
            version = self.tables.add_events(events)
        if events and version is not None:
            self.graphs.appended(events[0].scope, events, version)
        self.written.events = version
        at = max([before.at, *(n.recorded_at for n in new_notes)])
        return fold([*before.notes.values(), *new_notes], [*before.events, *events], at)

    def refuse_if_raced(
        self,
        before: Fold,
        written: Sequence[Event],
        note: Note | None,
        targets: Mapping[str, Sequence[str]],
        actor: str | None,
        corrected: str | None = None,
    ) -> None:
        """A write's checks (`checks.exist`; `checks.current_or_refuse` of `corrected`), made again after its commit
        for what another writer committed between the check and the write; the later commit loses:
        - a note it names (`targets`, by field) was forgotten: the write is refused as for any note that
          is gone (NotFound) and leaves nothing: its note is forgotten, or else its events erased. The
          tombstone is the forget's commit point, so the events committed before the write's are looked
          at; when the write's commit is the events table's version right after the one its check read,
          nothing lies between. A forget committed after the write needs nothing here: its erasure reads
          the events after its tombstone.
        - another correction of `corrected` that the check did not see committed first: the write's
          note is withdrawn (revoked, naming the winner) and the caller gets the guard rail's error.
          (`_corrected_first` says how the two commits are ordered.)"""
        mine = self.written.events
        checked = getattr(self.lookup.loaded, "version", None)
        named = [t for ids in targets.values() for t in ids]
        if mine is not None and named and (checked is None or mine != checked + 1):
            self._refuse_if_forgotten(mine, written, note, targets, named)
        if corrected is None or note is None:
            return
        winners = self._corrected_first(before, note, corrected)
        if not winners:
            return
        winner = min(winners, key=lambda e: (e.recorded_at, e.id)).src
        reason = f"withdrawn: {winner} corrected {corrected} first, while this correction was being written"
        revoked = new_event(EventKind.REVOKES, None, note.id, note.scope, reason, actor, self.clock())
        self.write(self.lookup.load(note.scope, self.clock(), [note]), [revoked])
        raise Conflict(
            f"note_id: {corrected} was corrected by {winner} while this correction was being written, so this one "
            f"({note.id}) is withdrawn. To update the fact, correct the current note ({winner}) instead; to keep a "
            "second current version beside it on purpose, pass fork=true"
        )

    def _refuse_if_forgotten(
        self, mine: int, written: Sequence[Event], note: Note | None, targets: Mapping[str, Sequence[str]],
        named: Sequence[str],
    ) -> None:  # fmt: skip
        """NotFound, leaving nothing of the write, if a tombstone of a note it names was committed before
        the write's events (`mine`) and after its check; where the version before `mine` is no longer kept,
        if any tombstone of one is there now."""
        raced = self.tables.events.events_committed_before(mine, [EventKind.FORGETS], named)
        if raced is None:  # that version is gone: what is there now
            raced = [e for e in self.graphs.get(written[0].scope).all_events()
                     if e.kind is EventKind.FORGETS and e.dst in named]  # fmt: skip
        forgotten = {e.dst for e in raced}
        if not forgotten:
            return
        if note is not None:  # the note's tombstone; its erasure takes the events naming it
            self.withdraw(note.id, "withdrawn: a note it named was forgotten while it was being written")
        else:
            self.tables.erasure.erase_forgotten(events=[e.id for e in written])
            self.graphs.drop_all()
        field, target = next((f, t) for f, ids in targets.items() for t in ids if t in forgotten)
        raise NotFound("note", target, field)

    def _corrected_first(self, before: Fold, note: Note, corrected: str) -> list[Event]:
        """The edges of other corrections of `corrected` that its check did not see and that were committed
        before `note` (this write's, just committed).

        A correction's commit point is its note's row, so two corrections are ordered by the notes table's
        versions their notes made, not by their edges: the edges land first, and a check can read a rival's
        edge before its note (the fold ignores the edge until then), or read neither and commit its edge
        first, yet its note last. So the events are read at their latest version, after this write's note
        landed: every rival whose note landed before it has its edge there. A rival the check saw (an edge
        it folded: one revoked since, say) is not one; of the others, those whose note the notes table held
        at the version before this write's note are. Where that version is no longer kept (an erasure pass
        keeps only the latest), the rivals stored now that are earlier by (recorded_at, id) are."""
        self.tables.events.catch_up_events()
        events = self.graphs.get(note.scope).all_events()
        known = {e.id for e in before.events}
        forgotten = {e.dst for e in events if e.kind is EventKind.FORGETS}
        rivals = {
            e.src: e for e in events
            if e.kind is EventKind.SUPERSEDES and e.dst == corrected and e.src is not None
            and e.src != note.id and e.id not in known and e.src not in forgotten
        }  # fmt: skip
        if not rivals:
            return []
        first = self.tables.notes_committed_before(self.written.notes, sorted(rivals))
        if first is None:
            first = {
                i
                for i in self.tables.search.notes(sorted(rivals))
                if (rivals[i].recorded_at, i) < (note.recorded_at, note.id)
            }
        return [rivals[i] for i in sorted(first)]
