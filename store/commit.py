"""How a write lands: its events, then its note (whose row is the commit point), appended and folded into
what the write read; and, once committed, the write's checks made again for what another writer
committed between its check and its commit (`refuse_if_raced`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

import numpy as np

from .checks import new_event
from .errors import Conflict, NotFound
from .fold import Fold, fold
from .graph import Graphs
from .lookup import Lookup
from .model import Event, EventKind, Note
from .tables import Tables


class Commits:
    """The commits of one store's writes. `model` names the embeddings a note's row holds; `withdraw`
    forgets a note (id, reason) whose write lost a race to a forget of a note it names."""

    def __init__(
        self,
        tables: Tables,
        graphs: Graphs,
        lookup: Lookup,
        model: str,
        clock: Callable[[], datetime],
        withdraw: Callable[[str, str], object],
    ) -> None:
        self.tables = tables
        self.graphs = graphs
        self.lookup = lookup
        self.model = model
        self.clock = clock
        self.withdraw = withdraw
        self.written = threading.local()  # the events table's version of this thread's last write

    def write(
        self, before: Fold, events: Sequence[Event], note: tuple[Note, Sequence[float], bool] | None = None
    ) -> Fold:
        """Append `events` and then `note` (with its vector and whether the model could read it; its
        row is the commit point), and fold them into `before`. The events table's version the edges
        made is `self.written.version` (on this thread)."""
        new_notes = []
        if note is not None:
            stored, vector, readable = note
            version = self.tables.add_notes([note], self.model, events)
            new_notes.append(stored)
            self.graphs.notes.put({stored.id: stored})  # the next call that reaches it need not read it
            if readable:
                self.graphs.vectors.put({stored.id: np.asarray(vector, np.float32)})
        else:
            version = self.tables.add_events(events)
        if events and version is not None:
            self.graphs.appended(events[0].scope, events, version)
        self.written.version = version
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
        for what another writer committed between the check and the write. Each writer sees the events
        committed before its own, and the later commit loses:
        - a note it names (`targets`, by field) was forgotten: the write is refused as for any note that
          is gone (NotFound) and leaves nothing: its note is forgotten, or else its events erased. A forget
          committed after the write needs nothing here: its erasure reads the events after its tombstone.
        - another correction of `corrected` landed: the write's note is withdrawn (revoked, naming the
          winner) and the caller gets the guard rail's error.
        When the write's commit is the version right after the one its check read, nothing lies between.
        Where the version before the write is no longer kept, any tombstone of a target loses the write,
        and the earlier (recorded_at, id) of two corrections wins."""
        mine = self.written.version
        checked = getattr(self.lookup.loaded, "version", None)
        if mine is None or (checked is not None and mine == checked + 1):
            return
        named = [t for ids in targets.values() for t in ids]
        kinds = [EventKind.FORGETS, *([EventKind.SUPERSEDES] if corrected else [])]
        raced = self.tables.committed_before(mine, kinds, named)
        if raced is None:  # that version is gone: what is there now, corrections ordered by their own times
            raced = [e for e in self.graphs.get(written[0].scope).all_events() if e.dst in named and (
                e.kind is EventKind.FORGETS or (e.kind is EventKind.SUPERSEDES and e.dst == corrected
                and note is not None and (e.recorded_at, e.id) < (note.recorded_at, note.id)))]  # fmt: skip
        forgotten = {e.dst for e in raced if e.kind is EventKind.FORGETS}
        if forgotten:
            if note is not None:  # the note's tombstone; its erasure takes the events naming it
                self.withdraw(note.id, "withdrawn: a note it named was forgotten while it was being written")
            else:
                self.tables.erase_forgotten(events=[e.id for e in written])
                self.graphs.drop_all()
            field, target = next((f, t) for f, ids in targets.items() for t in ids if t in forgotten)
            raise NotFound("note", target, field)
        if corrected is None or note is None:
            return
        known = {e.id for e in before.events}  # what the check saw: a correction revoked since, say
        winners = [e for e in raced if e.kind is EventKind.SUPERSEDES and e.dst == corrected
                   and e.id not in known and e.src != note.id]  # fmt: skip
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
