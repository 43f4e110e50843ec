"""The memory engine's public face: every operation the MCP tools and the CLI offer.

Each write is checked in full before anything is stored, so a refused call changes nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, TypeVar

import numpy as np

from . import browse, recall, transfer, updates
from .chains import build_chain, event_view, note_view
from .embedder import Embedder, SentenceTransformerEmbedder
from .errors import Conflict, CorrigendaError, InvalidArgument, NotFound
from .explain import explain
from .fold import Fold, fold
from .graph import Graphs
from .ids import NOTE_PREFIX, check_id, is_note_id, new_event_id, new_note_id
from .model import MAX_LINKS, MAX_QUERY, Draft, Event, EventKind, Note, NoteFields, NoteState, check_event, check_fields
from .model import MAX_TEXT as MAX_TEXT  # bench/longmemeval_ku.py reads the limit here
from .reader import ScopeReader
from .recall import Candidate, RetrievalSettings, Trace
from .tables import Tables
from .views import (
    Changes,
    Corrected,
    Exclusion,
    Forgotten,
    Imported,
    LifecycleChange,
    LikelyUpdate,
    Linked,
    NoteHistory,
    NoteList,
    NoteView,
    RecallResult,
    Remembered,
    ScopeCount,
    ScopeList,
    Similar,
    StateFilter,
)
from .where import check_scope

log = logging.getLogger(__name__)

SIMILAR_SHOWN = 5
SCOPES_NAMED = 5  # the nearest scopes an error about an unknown scope names
CLOSE_WAIT = 120.0  # seconds `close` waits for this process's erasures and compaction
# A remember's similar-notes search takes this many hits from each retriever (a recall takes
# `per_retriever`, 20): enough for SIMILAR_SHOWN current ones and for the note's identical twin, which
# is its closest match densely and by words; each hit is a row read and its chain folded.
SIMILAR_SEARCHED = 2 * SIMILAR_SHOWN
# What a correction keeps of the note it corrects, unless its draft sets it: what the note is about.
CORRECTION_KEEPS = ("kind", "subject", "tags")
LINK_KINDS = (EventKind.DEPENDS_ON, EventKind.REFINES, EventKind.SUPERSEDES, EventKind.DISTINCT)
# Where writes embed their note while they read (Memory.embed_note): a thread per call under way.
_EMBEDDING = ThreadPoolExecutor(max_workers=4, thread_name_prefix="corrigenda-embed")


P = ParamSpec("P")
R = TypeVar("R")


def _operation(method: Callable[Concatenate[Memory, P], R]) -> Callable[Concatenate[Memory, P], R]:
    """A public operation: it starts by catching up with every write made so far, by any process, and
    reads that state without checking again (Tables.refresh). An object store that stops answering
    fails it with StoreUnavailable, which says so, rather than with the storage layer's error."""

    @functools.wraps(method)
    def operation(self: Memory, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            self.tables.refresh()
            return method(self, *args, **kwargs)
        except CorrigendaError:
            raise
        except Exception as exc:
            outage = self.tables.outage(exc)
            if outage is None:
                raise
            raise outage from exc

    return operation


NEW_NOTE = "<new note id>"  # the new note in a likely update's call, before it is stored


def _likely_update(new_id: str, proposal: updates.Proposal, folded: Fold) -> LikelyUpdate:
    reason = proposal.change.reason
    call = (
        f'link(src_id="{new_id}", dst_id="{proposal.note.id}", kind="supersedes", '
        f"reason={json.dumps(reason, ensure_ascii=False)})"
    )
    return LikelyUpdate(note=note_view(proposal.note, folded), similarity=proposal.similarity, reason=reason, call=call)


def _utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


class Memory:
    """A store of notes and lifecycle events in one LanceDB database (a directory or `s3://…`)."""

    def __init__(
        self,
        uri: str,
        embedder: Embedder | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        settings: RetrievalSettings | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.tables = Tables(uri, storage_options)
        self.graphs = Graphs(
            self.tables.events_version, self.tables.scope_events, self.tables.scope_rows, self.tables.events_since,
            catch_up_from=self.tables.catch_up_from,
        )  # fmt: skip
        self.embedder = embedder or SentenceTransformerEmbedder()
        self.clock = clock
        self.settings = settings or RetrievalSettings()
        self._written = threading.local()  # the events table's version of this thread's last write
        self._loaded = threading.local()  # the events table's version of the last fold this thread loaded

    def warm(self, then: Callable[[], None] | None = None) -> threading.Thread:
        """Open the database and load the model in the background, then call `then` (on that thread,
        whatever came of it); calls that come first wait."""

        def load() -> None:
            try:
                self.tables.check_model(self.embedder.name)
                self.embedder.embed(["warm up"])
                self.tables.erase_soon()  # what a process that forgot and then stopped left, if anything
                self.tables.compact_if_due()
            except CorrigendaError as exc:  # each call will meet (and report) the same problem
                log.error("%s", exc)
            except Exception:
                log.exception("warming the store failed")
            if then is not None:
                then()

        thread = threading.Thread(target=load, name="corrigenda-warm", daemon=True)
        thread.start()
        return thread

    # -- writing -----------------------------------------------------------------------------
    # Each write reads what it needs once (the notes it names, then its scope's graph and the
    # notes reachable from them), folds that once, appends (edges first, the note last: its
    # row is the commit point, see tables.py), and folds what it wrote in memory.

    @_operation
    def remember(
        self,
        draft: Draft,
        scope: str = "default",
        supersedes: Sequence[str] = (),
        depends_on: Sequence[str] = (),
        actor: str | None = None,
        reason: str | None = None,
    ) -> Remembered:
        """Store a note (and the edges it names). The draft's `at` back-dates it, for imports.

        A note whose text is exactly that of a current note of the scope is not stored twice: the
        answer is that note, `changed: false` (README, "Guard rails").
        """
        scope = check_scope(scope)
        now = _utc(draft.at) or self.clock()
        note = self._new_note(draft, scope, actor, now)
        for field, targets in (("supersedes", supersedes), ("depends_on", depends_on)):
            if len(set(targets)) != len(targets):
                raise InvalidArgument(field, "lists a note more than once")
        embedding = self.embed_note(note.text)
        named = self._targets(note, {"supersedes": supersedes, "depends_on": depends_on})
        candidates, readable, similar_to, identical = self._search_similar(note, embedding)
        vector = embedding.result()
        before = self._load(scope, now, [*named.values(), *(c.note for c in similar_to), *identical])
        self._exist(before, named, {"supersedes": supersedes, "depends_on": depends_on})
        same = self._current_among(identical, before)
        if same is not None:
            if supersedes or depends_on:
                raise InvalidArgument(
                    "text",
                    f"current note {same.id} already says exactly this; to relate it, call "
                    f"link(src_id={same.id}, dst_id=…, kind=supersedes or depends_on) instead",
                )
            return Remembered(note=note_view(same, before), changed=False, similar_active=[], events=[])
        edges = [(EventKind.SUPERSEDES, t) for t in supersedes] + [(EventKind.DEPENDS_ON, t) for t in depends_on]
        events = [self._event(k, note.id, t, scope, reason, actor, now) for k, t in edges]
        # a search of a scope with notes finds some; only when it found none is the store asked
        made = not candidates and not named and not self.graphs.get(scope).events and scope not in self.tables.scopes()
        after = self._write(before, events, (note, vector, readable))
        self._refuse_if_raced(before, events, note, {"supersedes": supersedes, "depends_on": depends_on}, actor)
        active = self._active(similar_to, readable, before)
        similar = [Similar(note=note_view(n, before), similarity=s) for n, s in active[:SIMILAR_SHOWN]]
        named_now = set(supersedes)
        proposals = updates.likely_updates(note, [(n, s) for n, s in active if n.id not in named_now])
        return Remembered(
            note=note_view(note, after), changed=True, similar_active=similar,
            likely_updates=[_likely_update(note.id, p, before) for p in proposals],
            events=[event_view(e, after) for e in events], scope_created=made,
        )  # fmt: skip

    @_operation
    def likely_updates(
        self, draft: Draft, scope: str = "default", supersedes: Sequence[str] = ()
    ) -> list[LikelyUpdate]:
        """What `remember(draft, scope, supersedes)` would now propose under `likely_updates`, without
        storing anything: the active notes the draft's note would likely replace, best first. Their
        `call` names the new note `<new note id>`, since it has none yet. Nothing when a current note
        already has exactly the draft's text (`remember` would store nothing)."""
        scope = check_scope(scope)
        now = self.clock()
        note = self._new_note(draft, scope, None, now)
        _, readable, similar_to, identical = self._search_similar(note, self.embed_note(note.text))
        before = self._load(scope, now, [*(c.note for c in similar_to), *identical])
        if self._current_among(identical, before) is not None:
            return []
        named = set(supersedes)
        active = [(n, s) for n, s in self._active(similar_to, readable, before) if n.id not in named]
        return [_likely_update(NEW_NOTE, p, before) for p in updates.likely_updates(note, active)]

    @_operation
    def import_notes(self, drafts: Sequence[Draft], scope: str = "default", actor: str | None = None) -> list[NoteView]:
        """Store many notes (a conversation history, an export): no edges, no similar-notes check.

        Every draft is checked before anything is stored; then each batch of `transfer.BATCH` notes is
        embedded at once and appended in one write (transfer.write_notes), so a long import is several
        writes, not one.
        """
        now = self.clock()
        scope = check_scope(scope)
        notes = [self._new_note(d, scope, actor, now) for d in drafts]
        transfer.write_notes(self.tables, self.embedder, notes)
        after = fold(notes, [], max([now, *(n.recorded_at for n in notes)]))  # new notes have no edges yet
        return [note_view(n, after) for n in notes]

    @_operation
    def correct(
        self,
        note_id: str,
        draft: Draft,
        reason: str,
        scope: str | None = None,
        depends_on: Sequence[str] | None = None,
        actor: str | None = None,
        fork: bool = False,
    ) -> Corrected:
        """Write the corrected note and a `supersedes` edge to the old one, which becomes history.

        The correction stays in the old note's scope (`scope`, if given, must be it) and keeps the old
        note's kind, subject and tags unless the draft sets them. Unless `depends_on` is given, it needs
        what the old note needed. A note that is no longer current (superseded or revoked) is corrected
        only with `fork`: otherwise the chain would get a second current note beside the one that
        replaced it, and the error names that one (README, "Guard rails").
        """
        reason = self._reason(reason)
        embedding = self.embed_note(self._checked_text(draft))
        old = self._note(note_id, "note_id")
        if scope is not None and check_scope(scope) != old.scope:
            raise InvalidArgument("scope", f"note {note_id} is in scope {old.scope!r}; a correction stays in its scope")
        now = _utc(draft.at) or self.clock()
        kept = {field: getattr(old, field) for field in CORRECTION_KEEPS if field not in draft.model_fields_set}
        note = self._new_note(draft.model_copy(update=kept), old.scope, actor, now)
        if depends_on is not None and len(set(depends_on)) != len(depends_on):
            raise InvalidArgument("depends_on", "lists a note more than once")
        named = self._targets(note, {"depends_on": depends_on or ()})
        before = self._load(old.scope, now, [old, *named.values()])
        if note_id not in before.notes:
            raise NotFound("note", note_id, "note_id")
        if not fork:
            self._current_or_refuse(before, note_id)
        if depends_on is None:
            depends_on = list(dict.fromkeys(d for d in before.depends_on(note_id) if d in before.notes))
        self._exist(before, named, {"depends_on": depends_on})
        edges = [(EventKind.SUPERSEDES, note_id)] + [(EventKind.DEPENDS_ON, t) for t in depends_on]
        events = [self._event(k, note.id, t, old.scope, reason, actor, now) for k, t in edges]
        after = self._write(before, events, (note, embedding.result(), self.embedder.readable(note.text)))
        targets = {"note_id": [note_id], "depends_on": depends_on}
        self._refuse_if_raced(before, events, note, targets, actor, corrected=None if fork else note_id)
        return Corrected(
            note=note_view(note, after), supersedes=note_id, event=event_view(events[0], after),
            chain=build_chain(after, note_id),
        )  # fmt: skip

    @_operation
    def revoke(
        self, note_id: str, reason: str, actor: str | None = None, at: datetime | None = None
    ) -> LifecycleChange:
        """Mark a note as wrong, with no replacement. Revoking a correction brings back what it replaced."""
        reason = self._reason(reason)
        note = self._note(note_id, "note_id")
        now = _utc(at) or self.clock()
        before = self._load(note.scope, now, [note])
        self._exist(before, {note_id: note}, {"note_id": [note_id]})
        status = before.status[note_id]
        if status.state is NoteState.REVOKED:
            standing = event_view(status.event, before) if status.event else None
            return LifecycleChange(event=standing, changed=False, chain=build_chain(before, note_id))
        event = self._event(EventKind.REVOKES, None, note_id, note.scope, reason, actor, now)
        after = self._write(before, [event])
        self._refuse_if_raced(before, [event], None, {"note_id": [note_id]}, actor)
        return LifecycleChange(event=event_view(event, after), changed=True, chain=build_chain(after, note_id))

    @_operation
    def reinstate(
        self, target_id: str, reason: str, actor: str | None = None, at: datetime | None = None
    ) -> LifecycleChange:
        """Undo what excludes a note (a note id), or retract one revocation or supersession (an event id)."""
        reason = self._reason(reason)
        check_id(target_id, "target_id")
        now = _utc(at) or self.clock()
        if is_note_id(target_id):
            note = self._note(target_id, "target_id")
            before = self._load(note.scope, now, [note])
            self._exist(before, {target_id: note}, {"target_id": [target_id]})
            status = before.status[target_id]
            if status.state in (NoteState.EXPIRED, NoteState.PENDING):
                raise InvalidArgument(
                    "target_id",
                    f"note {target_id} is {status.state.value} by its validity window, not by an event; "
                    "correct it with a new valid_from/valid_until instead",
                )
            if status.state is NoteState.ACTIVE:
                last = status.reinstated_by
                standing = event_view(last, before) if last else None
                return LifecycleChange(event=standing, changed=False, chain=build_chain(before, target_id))
        else:
            target = self.tables.event(target_id)
            if target is None:
                raise NotFound("event", target_id, "target_id")
            if target.kind not in (EventKind.REVOKES, EventKind.SUPERSEDES):
                raise InvalidArgument(
                    "target_id",
                    f"event {target_id} is a {target.kind.value} event; only revokes and supersedes events can be retracted",
                )
            note = self._note(target.dst, "target_id")
            before = self._load(target.scope, now, [note])
            self._exist(before, {note.id: note}, {"target_id": [note.id]})
            retracting = before.retracted_by.get(target_id)
            if retracting is not None:
                return LifecycleChange(
                    event=event_view(retracting, before), changed=False, chain=build_chain(before, note.id)
                )
        event = self._event(EventKind.REINSTATES, None, target_id, note.scope, reason, actor, now)
        after = self._write(before, [event])
        self._refuse_if_raced(before, [event], None, {"target_id": [note.id]}, actor)
        return LifecycleChange(event=event_view(event, after), changed=True, chain=build_chain(after, note.id))

    @_operation
    def link(
        self,
        src_id: str,
        dst_id: str,
        kind: str,
        reason: str | None = None,
        actor: str | None = None,
        at: datetime | None = None,
    ) -> Linked:
        """Record that src depends on dst (`depends_on`), adds detail to it (`refines`), replaces it
        (`supersedes`: for two notes already stored; `correct` writes the replacement and the edge at once),
        or states another fact than it (`distinct`: both stay current, and recall does not mark either as
        possibly outdated by the other, as it does two unlinked notes that look like one fact's values).

        Two writers can still link two notes each way at once; the fold then sets the later
        supersession aside as a conflict (fold.py), shown in `history` and `why_excluded`."""
        if kind not in LINK_KINDS:
            *others, last = (repr(k.value) for k in LINK_KINDS)
            raise InvalidArgument("kind", f"{kind!r} is not a link kind: use {', '.join(others)} or {last}")
        if kind == EventKind.SUPERSEDES:
            reason = self._reason(reason)
        src = self._note(src_id, "src_id")
        now = _utc(at) or self.clock()
        named = self._targets(src, {"dst_id": [dst_id]})
        before = self._load(src.scope, now, [src, *named.values()])
        self._exist(before, {src_id: src, **named}, {"src_id": [src_id], "dst_id": [dst_id]})
        for e in before.events:
            if e.kind == kind and e.src == src_id and e.dst == dst_id:
                return Linked(event=event_view(e, before), changed=False, chain=build_chain(before, src_id))
        if kind == EventKind.SUPERSEDES and before.supersedes_path(dst_id, src_id):
            raise Conflict(
                f"dst_id: {dst_id} already supersedes {src_id} (directly or through others); that would be a cycle"
            )
        event = self._event(EventKind(kind), src_id, dst_id, src.scope, reason, actor, now)
        after = self._write(before, [event])
        self._refuse_if_raced(before, [event], None, {"src_id": [src_id], "dst_id": [dst_id]}, actor)
        return Linked(event=event_view(event, after), changed=True, chain=build_chain(after, src_id))

    @_operation
    def forget(self, note_id: str, reason: str, actor: str | None = None) -> Forgotten:
        """Delete a note for real, with every event that names it, and say what that changed.

        First a `forgets` tombstone (no text of the note) is appended: from then on the note
        does not exist for any reader. Then an erasure pass removes its row and the events naming it
        from every file (storage/erasure.py): before this answers on a disk, on a thread of this process on
        object storage (`erasure: pending`, and any process's next upkeep finishes what a stopped
        one left). A repeated call, or one after an interrupted erasure, finishes whatever is left
        and answers `changed: false`.
        """
        reason = self._reason(reason)
        check_id(note_id, "note_id", prefix=NOTE_PREFIX)
        note = self.tables.notes([note_id]).get(note_id)
        tombstone = self.tables.tombstone(note_id)
        if note is None and tombstone is None:
            raise NotFound("note", note_id, "note_id")
        now = self.clock()
        changed: list[NoteView] = []
        fresh = tombstone is None
        if tombstone is None:
            assert note is not None
            before = self._load(note.scope, now, [note])
            tombstone = self._event(EventKind.FORGETS, None, note_id, note.scope, reason, actor, now)
            after = self._write(before, [tombstone])  # the commit point: the note is gone for every reader
            changed = [
                note_view(after.notes[n], after)
                for n in sorted(before.notes)
                if n in after.notes and after.state(n) is not before.state(n)
            ]
        removed = self.tables.erasure_events([note_id])
        erased = not fresh and bool(self.tables.erased([note_id]))
        if not erased and self.tables.erase_later:
            self.tables.erase_soon()
        elif not erased:
            self.tables.erase_forgotten()
            erased = True
        self.graphs.drop_all()
        return Forgotten(
            note_id=note_id, changed=fresh, events_removed=removed, notes_changed=changed,
            erasure="done" if erased else "pending",
        )  # fmt: skip

    @_operation
    def tombstone(self, note_id: str) -> Event | None:
        """The `forgets` event that erased a note, if one did: when, by whom and why (never its text)."""
        check_id(note_id, "note_id", prefix=NOTE_PREFIX)
        return self.tables.tombstone(note_id)

    def close(self, timeout: float = CLOSE_WAIT) -> bool:
        """Finish the background work this process started (erasures, a compaction) and start no more:
        before the program ends. Whether all of it finished within `timeout` seconds."""
        return self.finish_upkeep(timeout)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finish_upkeep(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the erasures this process's forgets left under way (object
        storage) and for a compaction it is running: before a server stops. Whether none is left."""
        return self.tables.finish_upkeep(timeout)

    # -- reading -----------------------------------------------------------------------------

    @_operation
    def history(self, note_id: str, as_of: datetime | None = None) -> NoteHistory:
        note = self._note(note_id, "note_id")
        at = _utc(as_of) or self.clock()
        folded = self._load(note.scope, at, [note])
        if note_id not in folded.notes:
            if self._load(note.scope, note.recorded_at, [note]).notes.get(note_id) is None:
                raise NotFound("note", note_id, "note_id")  # forgotten; its erasure is under way
            raise InvalidArgument(
                "as_of", f"note {note_id} was recorded at {note.recorded_at.isoformat()}, after as_of"
            )
        members = folded.chain(note_id).members
        # an edge into the chain from a note its fold does not reach (a dependant, a note said to state
        # another fact) shows once that note is read too
        reader = self.reader(note.scope)
        linked = reader.linked_from(members) - folded.notes.keys()
        if linked:
            folded = self._load(note.scope, at, [note, *reader.found(sorted(linked)).values()])
        chain = build_chain(folded, note_id)
        in_chain = {*members, *(p.id for p in chain.prerequisites)}
        events = folded.events_of(members)
        named = {i for e in events for i in (e.src, e.dst) if i in folded.notes and i not in in_chain}
        return NoteHistory(
            note=note_view(note, folded),
            chain=chain,
            events=[event_view(e, folded) for e in events],
            related=[note_view(folded.notes[i], folded) for i in sorted(named)],
        )

    @_operation
    def recall(
        self,
        query: str,
        scope: str = "default",
        budget_tokens: int = 2000,
        max_chains: int | None = None,
        include_history: bool = True,
        as_of: datetime | None = None,
    ) -> RecallResult:
        trace = self._run(query, scope, budget_tokens, max_chains, include_history, as_of)
        assert trace.result is not None
        if not trace.result.chains and not trace.result.omitted and not self.graphs.get(trace.result.scope).events:
            self._unknown_scope(trace.result.scope)  # found nothing: is there anything there at all?
        return trace.result

    recall_chains = recall  # the tool's name

    @_operation
    def trace(
        self,
        query: str,
        scope: str = "default",
        budget_tokens: int = 2000,
        max_chains: int | None = None,
        include_history: bool = True,
        as_of: datetime | None = None,
    ) -> Trace:
        """The recall `recall` makes, with all it weighed: every candidate with its ranks and score, the
        fold, the chains built, those trimmed or dropped as duplicates, and what recall returns
        (`trace.result`). What `why_excluded` reads; tests and benches check the scores here."""
        return self._run(query, scope, budget_tokens, max_chains, include_history, as_of)

    @_operation
    def why_excluded(
        self,
        note_id: str,
        query: str | None = None,
        scope: str = "default",
        budget_tokens: int = 2000,
        as_of: datetime | None = None,
    ) -> Exclusion:
        note = self._note(note_id, "note_id")
        scope = check_scope(scope)
        at = _utc(as_of) or self.clock()
        if query is not None and note.scope == scope:
            # one recall, whose fold also covers this note's chain: explain reads that same fold
            trace = self._run(query, scope, budget_tokens, None, True, as_of, also=[note])
            if note_id in trace.fold.notes:
                return explain(note, trace.fold, scope, trace)
        folded = self._load(note.scope, at, [note])
        if note_id not in folded.notes and note.recorded_at <= at:
            raise NotFound("note", note_id, "note_id")  # forgotten
        return explain(note, folded, scope, None)

    @_operation
    def scopes(self) -> list[ScopeCount]:
        """Every scope that holds notes or events, with how many of each, busiest first."""
        counts = self.tables.scopes()
        listed = [ScopeCount(scope=name, **count) for name, count in counts.items()]
        return sorted(listed, key=lambda c: (-c.notes, c.scope))

    @_operation
    def scope_page(
        self,
        offset: int = 0,
        limit: int = 100,
        contains: str | None = None,
        default_scope: str | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> ScopeList:
        """A page of the store's scopes, the most recently changed first (ties by name), each with its
        counts; only those whose name contains `contains` (any case) if given, and only those `visible`
        accepts if given (pages and totals count those alone). `limit` is 1 to browse.PAGE_MAX.
        `default_scope`'s counts come with the page whether it is on it or not."""
        counts = self.tables.scopes()
        listed = (ScopeCount(scope=name, **count) for name, count in counts.items() if visible is None or visible(name))
        return browse.list_scopes(listed, offset, limit, contains, default_scope)

    @_operation
    def scope_of(self, target_id: str, field: str = "note_id") -> str:
        """The scope of a note (kept, or forgotten with its tombstone left) or of an event, by id;
        NotFound naming `field` when there is none."""
        check_id(target_id, field)
        if is_note_id(target_id):
            try:
                return self._note(target_id, field).scope
            except NotFound:
                tombstone = self.tables.tombstone(target_id)
                if tombstone is None:
                    raise
                return tombstone.scope
        event = self.tables.event(target_id)
        if event is None:
            raise NotFound("event", target_id, field)
        return event.scope

    @_operation
    def stats(self) -> dict[str, object]:
        stored = self.tables.stored_model()
        return {
            "db": self.tables.uri,
            "model": stored[0] if stored else self.embedder.name,
            "dimension": stored[1] if stored else None,
            **self.tables.count(),
        }

    # -- internals ---------------------------------------------------------------------------

    def _run(
        self,
        query: str,
        scope: str,
        budget: int,
        max_chains: int | None,
        include_history: bool,
        as_of: datetime | None,
        also: Sequence[Note] = (),
    ) -> Trace:
        if not query.strip():
            raise InvalidArgument("query", "must not be empty")
        if len(query) > MAX_QUERY:
            raise InvalidArgument("query", f"has {len(query)} characters; the limit is {MAX_QUERY}")
        if budget < 1:
            raise InvalidArgument("budget_tokens", "must be at least 1")
        scope = check_scope(scope)

        reader = self.reader(scope, also)
        trace = recall.run(
            reader, self.embedder, query, now=self.clock(), as_of=_utc(as_of), budget_tokens=budget,
            max_chains=max_chains, include_history=include_history, settings=self.settings,
        )  # fmt: skip
        self._loaded.version = reader.version
        return trace

    def reader(self, scope: str, also: Sequence[Note] = ()) -> ScopeReader:
        """A reader of `scope` for one call (reader.py): what recall and the writes' checks read through.
        It reads the store as this process last caught up with it: an operation (`recall`, a write)
        catches up first; a caller outside one calls `tables.refresh()` before, if it must see every
        process's latest writes."""
        return ScopeReader(self.tables, self.graphs, scope, also)

    def _load(self, scope: str, at: datetime, around: Sequence[Note]) -> Fold:
        """The fold of the chains and prerequisites of `around` (notes already read), with the version it
        read kept for the write's race check (`_refuse_if_raced`)."""
        reader = self.reader(scope)
        folded = reader.fold(around, at)
        self._loaded.version = reader.version
        return folded

    def _write(
        self, before: Fold, events: Sequence[Event], note: tuple[Note, Sequence[float], bool] | None = None
    ) -> Fold:
        """Append `events` and then `note` (with its vector and whether the model could read it; its
        row is the commit point), and fold them into `before`. The events table's version the edges
        made is `self._written.version` (on this thread)."""
        new_notes = []
        if note is not None:
            stored, vector, readable = note
            version = self.tables.add_notes([note], self.embedder.name, events)
            new_notes.append(stored)
            self.graphs.notes.put({stored.id: stored})  # the next call that reaches it need not read it
            if readable:
                self.graphs.vectors.put({stored.id: np.asarray(vector, np.float32)})
        else:
            version = self.tables.add_events(events)
        if events and version is not None:
            self.graphs.appended(events[0].scope, events, version)
        self._written.version = version
        at = max([before.at, *(n.recorded_at for n in new_notes)])
        return fold([*before.notes.values(), *new_notes], [*before.events, *events], at)

    def _search_similar(
        self, note: Note, embedding: Future[list[float]]
    ) -> tuple[Mapping[str, Candidate], bool, list[Candidate], list[Note]]:
        """A write's similar-notes search in its note's scope: the candidates, whether the model could
        read the note, those that qualify as similar, and those with exactly its text."""
        searched = dataclasses.replace(self.settings, per_retriever=SIMILAR_SEARCHED)
        candidates, readable = recall.find_candidates(
            self.reader(note.scope), self.embedder, note.text, None, searched, embedding.result
        )
        similar_to = [c for c in candidates.values() if c.qualified]
        identical = [c.note for c in candidates.values() if c.note.text == note.text]
        return candidates, readable, similar_to, identical

    @staticmethod
    def _active(similar_to: Sequence[Candidate], readable: bool, before: Fold) -> list[tuple[Note, float | None]]:
        """The similar notes that are active, with their similarity (None where it was not measured)."""
        return [
            (cand.note, cand.similarity if readable and cand.dense_readable else None)
            for cand in similar_to
            if cand.note.id in before.notes and before.state(cand.note.id) is NoteState.ACTIVE
        ]

    def embed_note(self, text: str) -> Future[list[float]]:
        """A write's note embedded beside the reads it makes first, which mostly wait on the store:
        the model keeps to half the cores (embedder.torch_threads). Every write embeds its note here
        (bench/overlap.py puts the embedding first instead, to measure what this saves)."""
        return _EMBEDDING.submit(lambda: self.embedder.embed([text])[0])

    @staticmethod
    def _current_among(notes: Iterable[Note], before: Fold) -> Note | None:
        """The first of `notes` that is current: for a remember, among the candidates of the similar-notes
        search with exactly its text (an identical text is its closest match, densely and by words)."""
        return next((n for n in notes if n.id in before.notes and before.state(n.id) is NoteState.ACTIVE), None)

    def _refuse_if_raced(
        self,
        before: Fold,
        written: Sequence[Event],
        note: Note | None,
        targets: Mapping[str, Sequence[str]],
        actor: str | None,
        corrected: str | None = None,
    ) -> None:
        """A write's checks (`_exist`; `_current_or_refuse` of `corrected`), made again after its commit
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
        mine = self._written.version
        checked = getattr(self._loaded, "version", None)
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
                self.forget(note.id, reason="withdrawn: a note it named was forgotten while it was being written")
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
        revoked = self._event(EventKind.REVOKES, None, note.id, note.scope, reason, actor, self.clock())
        self._write(self._load(note.scope, self.clock(), [note]), [revoked])
        raise Conflict(
            f"note_id: {corrected} was corrected by {winner} while this correction was being written, so this one "
            f"({note.id}) is withdrawn. To update the fact, correct the current note ({winner}) instead; to keep a "
            "second current version beside it on purpose, pass fork=true"
        )

    @staticmethod
    def _current_or_refuse(before: Fold, note_id: str) -> None:
        """Refuse to correct a note that something already replaced or withdrew, naming what is current."""
        status = before.status[note_id]
        if status.state not in (NoteState.SUPERSEDED, NoteState.REVOKED):
            return
        how = f"superseded by {status.by}" if status.state is NoteState.SUPERSEDED else "revoked"
        heads = before.chain(note_id).heads
        if heads:
            now = ", ".join(heads)
            fix = f"correct the current note ({now}) instead"
        else:
            now = "nothing"
            fix = f"reinstate {note_id} first, or remember the fact anew"
        raise Conflict(
            f"note_id: {note_id} is no longer current ({how}); its chain's current note is {now}. "
            f"To update the fact, {fix}; to keep a second current version beside it on purpose, pass fork=true"
        )

    def _targets(self, src: Note, fields: Mapping[str, Sequence[str]]) -> dict[str, Note]:
        """The notes named by a write's edges, read at once and checked: ids, not itself, same scope."""
        for field, ids in fields.items():
            if len(ids) > MAX_LINKS:
                raise InvalidArgument(field, f"names {len(ids)} notes; the limit is {MAX_LINKS}")
            for target in ids:
                check_id(target, field, prefix=NOTE_PREFIX)
                if target == src.id:
                    raise InvalidArgument(field, "a note cannot link to itself")
        found = self.graphs.notes_anywhere((t for ids in fields.values() for t in ids), self.tables.notes)
        for field, ids in fields.items():
            for target in ids:
                if target not in found:
                    raise NotFound("note", target, field)
                if found[target].scope != src.scope:
                    raise InvalidArgument(
                        field, f"note {target} is in scope {found[target].scope!r}, not {src.scope!r}"
                    )
        return found

    @staticmethod
    def _exist(folded: Fold, named: Mapping[str, Note], fields: Mapping[str, Sequence[str]]) -> None:
        """Named notes that were read but are forgotten (a tombstone, erasure under way) do not exist."""
        for field, ids in fields.items():
            for target in ids:
                note = named.get(target)
                if note is not None and note.recorded_at <= folded.at and target not in folded.notes:
                    raise NotFound("note", target, field)

    def _note(self, note_id: str, field: str) -> Note:
        """The note a write or a look names, kept or read (whether it still exists is for the fold to say:
        a kept note another process forgot is dropped by its tombstone)."""
        check_id(note_id, field, prefix=NOTE_PREFIX)
        found = self.graphs.notes_anywhere([note_id], self.tables.notes)
        if note_id not in found:
            # Before saying so, one more look at the latest version: in a bucket test, a server's read
            # once missed a note another server had just acknowledged (docs/faults.md, "Known limits").
            self.tables.refresh()
            found = self.tables.notes([note_id])
        if note_id not in found:
            raise NotFound("note", note_id, field)
        return found[note_id]

    @staticmethod
    def _reason(reason: str | None) -> str:
        if reason is None or not reason.strip():
            raise InvalidArgument("reason", "say why: it is kept with the event and shown with the history")
        return reason.strip()

    @staticmethod
    def _checked_text(draft: Draft) -> str:
        """A draft's fields checked, and the text its note stores (what a write embeds)."""
        check_fields(draft)
        return draft.text.strip()

    @classmethod
    def _new_note(cls, draft: Draft, scope: str, actor: str | None, now: datetime) -> Note:
        """The note a draft makes, checked: recorded at the draft's `at`, or else `now`."""
        text = cls._checked_text(draft)
        valid_from, valid_until = _utc(draft.valid_from), _utc(draft.valid_until)
        fields = draft.model_dump(include=set(NoteFields.model_fields)) | {
            "text": text, "kind": draft.kind.strip(), "tags": [t.strip() for t in draft.tags if t.strip()],
            "valid_from": valid_from, "valid_until": valid_until,
        }  # fmt: skip
        return Note(
            **fields, id=new_note_id(), scope=check_scope(scope), actor=actor, recorded_at=_utc(draft.at) or now
        )

    @staticmethod
    def _event(
        kind: EventKind, src: str | None, dst: str, scope: str, reason: str | None, actor: str | None, now: datetime
    ) -> Event:
        event = Event(
            id=new_event_id(), kind=kind, src=src, dst=dst, scope=scope, reason=reason, actor=actor, recorded_at=now
        )
        check_event(event)
        return event

    # -- looking through a memory: browse.py -------------------------------------------------

    @_operation
    def list_notes(
        self,
        scope: str = "default",
        state: StateFilter = "all",
        offset: int = 0,
        limit: int = 50,
        as_of: datetime | None = None,
    ) -> NoteList:
        """A page of a scope's notes, newest first, filtered by state, with the scope's counts by state."""
        scope = check_scope(scope)
        if state not in ("current", "history", "all"):
            raise InvalidArgument("state", f"{state!r} is not a state filter: use 'current', 'history' or 'all'")
        browse.check_page(offset, limit)
        notes = [note for note, _ in self.tables.scope_notes(scope)]
        graph = self.graphs.get(scope)  # after the notes were read (graph.py)
        if not notes and not graph.events:
            self._unknown_scope(scope)
        folded = fold(notes, graph.all_events(), _utc(as_of) or self.clock())
        return browse.list_notes(folded, scope, state, offset, limit, _utc(as_of))

    @_operation
    def changes(self, since: datetime, scope: str = "default", limit: int = 50) -> Changes:
        """What was corrected, revoked, reinstated or forgotten in a scope after `since`, newest first,
        each with its chain's current notes."""
        scope = check_scope(scope)
        browse.check_page(0, limit)
        since_utc = _utc(since)
        assert since_utc is not None
        now = self.clock()
        graph = self.graphs.get(scope)
        if not graph.events and scope not in self.tables.scopes():
            self._unknown_scope(scope)
        listed = browse.changed_since(graph.all_events(), since_utc)
        named: set[str] = set()
        for e in listed:
            if e.kind is not EventKind.FORGETS:
                named.add(e.dst if is_note_id(e.dst) or e.dst not in graph.events else graph.events[e.dst].dst)
                named.update([e.src] if e.src else [])
        notes = self.tables.notes(named)
        folded = self._load(scope, now, list(notes.values()))
        return browse.changes(folded, listed, scope, since_utc, limit)

    def _unknown_scope(self, scope: str) -> None:
        """Reading a scope nothing was ever stored in, while others exist, is most often a typo (of a
        scope, or of the store's path): an error that names the nearest scopes, never an empty answer
        that looks like a memory lost. In a store with no scope at all there is nothing to mistype."""
        counts = {c.scope: c for c in self.scopes()}
        if not counts or scope in counts:
            return
        names = list(counts)
        nearest = difflib.get_close_matches(scope, names, n=SCOPES_NAMED, cutoff=0.0) if len(names) > 1 else names
        listed = ", ".join(f"{name!r} ({_count(counts[name].notes, 'note')})" for name in nearest)
        more = ""
        if len(names) > len(nearest):
            more = f", and {len(names) - len(nearest)} more (`scopes` lists them; its `contains` finds one by name)"
        raise InvalidArgument(
            "scope",
            f"nothing was ever stored in scope {scope!r} (mistyped, or a project with no notes yet?); the nearest "
            f"scopes: {listed}{more}. A write to {scope!r} makes it",
        )

    # -- moving a memory: transfer.py --------------------------------------------------------

    @_operation
    def export(self, scope: str | None = None, vectors: bool = False) -> Iterator[str]:
        """One scope (every scope, for None) as JSON Lines: notes and events with every stored field."""
        if scope is not None:
            scope = check_scope(scope)
            if scope not in self.tables.scopes():
                self._unknown_scope(scope)
        scopes = [scope] if scope is not None else sorted(self.tables.scopes())
        return transfer.export_lines(self.tables, scopes, self.embedder.name, self.clock(), vectors)

    @_operation
    def import_lines(
        self,
        lines: Iterable[str],
        scope: str = "default",
        actor: str | None = None,
        source: str = "import",
        progress: transfer.Progress | None = None,
        partial: bool = False,
    ) -> Imported:
        """Import a corrigenda export (into the scopes it names) or a knowledge-graph memory.jsonl (into
        `scope`), checked in full first; records already stored are left as they are. An export without
        its trailer, or not matching it, is refused unless `partial` (transfer.py)."""
        parsed = transfer.parse(lines, scope, actor, source, self.clock(), partial)
        imported = transfer.import_parsed(self.tables, self.embedder, parsed, progress)
        self.graphs.drop_all()  # its events were appended outside the graphs' bookkeeping
        return imported


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
