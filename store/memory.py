"""The memory engine's public face: every operation the MCP tools and the CLI offer.

Each write is checked in full before anything is stored, so a refused call changes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from . import recall
from .embedder import Embedder, SentenceTransformerEmbedder
from .errors import Conflict, InvalidArgument, NotFound
from .explain import explain
from .fold import Fold, fold, reachable, supersedes_path
from .ids import NOTE_PREFIX, check_id, is_note_id, new_event_id, new_note_id
from .model import Draft, Event, EventKind, Note, NoteState
from .recall import RetrievalSettings, Trace
from .tables import Tables
from .views import (
    Corrected,
    EventView,
    Exclusion,
    Forgotten,
    LifecycleChange,
    Linked,
    NoteHistory,
    NoteView,
    RecallResult,
    Remembered,
    Similar,
)
from .where import check_scope

log = logging.getLogger(__name__)

MAX_TEXT = 20_000
SIMILAR_SHOWN = 5


def _utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _event_view(event: Event, folded: Fold) -> EventView:
    retracting = folded.retracted_by.get(event.id)
    return EventView(
        id=event.id, kind=event.kind, src=event.src, dst=event.dst, reason=event.reason, actor=event.actor,
        recorded_at=event.recorded_at, in_force=retracting is None,
        retracted_by=retracting.id if retracting else None,
    )  # fmt: skip


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
        self.embedder = embedder or SentenceTransformerEmbedder()
        self.clock = clock
        self.settings = settings or RetrievalSettings()

    def warm(self) -> threading.Thread:
        """Open the database and load the model in the background; calls that come first wait."""

        def load() -> None:
            try:
                self.tables.check_model(self.embedder.name)
                self.embedder.embed(["warm up"])
                self.tables.compact_if_fragmented()
            except Exception:  # each call will meet (and report) the same problem
                log.exception("warming the store failed")

        thread = threading.Thread(target=load, name="corrigenda-warm", daemon=True)
        thread.start()
        return thread

    # -- writing -----------------------------------------------------------------------------

    def remember(
        self,
        text: str,
        scope: str = "default",
        kind: str = "fact",
        subject: str | None = None,
        tags: Sequence[str] = (),
        source: str | None = None,
        confidence: float = 1.0,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        supersedes: Sequence[str] = (),
        depends_on: Sequence[str] = (),
        actor: str | None = None,
        at: datetime | None = None,
        reason: str | None = None,
    ) -> Remembered:
        """Store a note (and the edges it names). `at` back-dates it, for imports."""
        now = _utc(at) or self.clock()
        note = self._new_note(text, scope, kind, subject, tags, source, actor, confidence, valid_from, valid_until, now)
        for field, targets in (("supersedes", supersedes), ("depends_on", depends_on)):
            if len(set(targets)) != len(targets):
                raise InvalidArgument(field, "lists a note more than once")
        edges = [(EventKind.SUPERSEDES, t, "supersedes") for t in supersedes]
        edges += [(EventKind.DEPENDS_ON, t, "depends_on") for t in depends_on]
        events = [self._edge(kind_, note, target, field, reason, actor) for kind_, target, field in edges]

        vector = self.embedder.embed([note.text])[0]
        similar = self._similar_active(note, vector)
        self.tables.add_note(note, vector, self.embedder.readable(note.text), self.embedder.name)
        self.tables.add_events(events)
        after = self._fold(scope, now, [note])
        return Remembered(
            note=recall.note_view(note, after), similar_active=similar, events=[_event_view(e, after) for e in events]
        )

    def import_notes(self, drafts: Sequence[Draft], scope: str = "default", actor: str | None = None) -> list[NoteView]:
        """Store many notes in one write (a conversation history, an export): no edges, no similar-notes check.

        Every draft is checked before anything is stored; texts are embedded in one batch.
        """
        now = self.clock()
        notes = [self._draft_note(d, scope, actor, _utc(d.at) or now) for d in drafts]
        vectors = self.embedder.embed([n.text for n in notes]) if notes else []
        rows = [(n, v, self.embedder.readable(n.text)) for n, v in zip(notes, vectors, strict=True)]
        self.tables.add_notes(rows, self.embedder.name)
        after = self._fold(scope, max([now, *(n.recorded_at for n in notes)]), notes)
        return [recall.note_view(n, after) for n in notes]

    def correct(
        self,
        note_id: str,
        text: str,
        reason: str,
        scope: str | None = None,
        kind: str | None = None,
        subject: str | None = None,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        confidence: float = 1.0,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        depends_on: Sequence[str] | None = None,
        actor: str | None = None,
        at: datetime | None = None,
    ) -> Corrected:
        """Write the corrected note and a `supersedes` edge to the old one, which becomes history.

        Unless `depends_on` is given, the correction needs what the old note needed.
        """
        old = self._note(note_id, "note_id")
        if scope is not None and check_scope(scope) != old.scope:
            raise InvalidArgument("scope", f"note {note_id} is in scope {old.scope!r}; a correction stays in its scope")
        if depends_on is None:
            depends_on = list(dict.fromkeys(self._fold(old.scope, _utc(at) or self.clock(), [old]).depends_on(note_id)))
        remembered = self.remember(
            text, old.scope, kind or old.kind, subject if subject is not None else old.subject,
            list(tags) if tags is not None else old.tags, source, confidence, valid_from, valid_until,
            supersedes=[note_id], depends_on=depends_on, actor=actor, at=at, reason=self._reason(reason),
        )  # fmt: skip
        folded = self._fold(old.scope, remembered.note.recorded_at, [old])
        event = remembered.events[0]
        return Corrected(
            note=remembered.note, supersedes=note_id, event=event, chain=recall.build_chain(folded, note_id)
        )

    def revoke(
        self, note_id: str, reason: str, actor: str | None = None, at: datetime | None = None
    ) -> LifecycleChange:
        """Mark a note as wrong, with no replacement. Revoking a correction brings back what it replaced."""
        note = self._note(note_id, "note_id")
        now = _utc(at) or self.clock()
        folded = self._fold(note.scope, now, [note])
        status = folded.status[note_id]
        if status.state is NoteState.REVOKED:
            return LifecycleChange(
                event=_event_view(status.event, folded) if status.event else None,
                changed=False,
                chain=recall.build_chain(folded, note_id),
            )
        event = Event(
            id=new_event_id(), kind=EventKind.REVOKES, src=None, dst=note_id, scope=note.scope,
            reason=self._reason(reason), actor=actor, recorded_at=now,
        )  # fmt: skip
        return self._commit(event, note, now)

    def reinstate(
        self, target_id: str, reason: str, actor: str | None = None, at: datetime | None = None
    ) -> LifecycleChange:
        """Undo what excludes a note (a note id), or retract one revocation or supersession (an event id)."""
        check_id(target_id, "target_id")
        now = _utc(at) or self.clock()
        if is_note_id(target_id):
            note = self._note(target_id, "target_id")
            scope, note_id = note.scope, target_id
            folded = self._fold(scope, now, [note])
            status = folded.status[note_id]
            if status.state in (NoteState.EXPIRED, NoteState.PENDING):
                raise InvalidArgument(
                    "target_id",
                    f"note {note_id} is {status.state.value} by its validity window, not by an event; "
                    "correct it with a new valid_from/valid_until instead",
                )
            if status.state is NoteState.ACTIVE:
                last = status.reinstated_by
                return LifecycleChange(
                    event=_event_view(last, folded) if last else None,
                    changed=False,
                    chain=recall.build_chain(folded, note_id),
                )
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
            scope, note_id = target.scope, target.dst
            folded = self._fold(scope, now, [note])
            retracting = folded.retracted_by.get(target_id)
            if retracting is not None:
                return LifecycleChange(
                    event=_event_view(retracting, folded), changed=False, chain=recall.build_chain(folded, note_id)
                )
        event = Event(
            id=new_event_id(), kind=EventKind.REINSTATES, src=None, dst=target_id, scope=scope,
            reason=self._reason(reason), actor=actor, recorded_at=now,
        )  # fmt: skip
        return self._commit(event, note, now)

    def link(
        self,
        src_id: str,
        dst_id: str,
        kind: str,
        reason: str | None = None,
        actor: str | None = None,
        at: datetime | None = None,
    ) -> Linked:
        """Record that src depends on dst (`depends_on`), adds detail to it (`refines`), or replaces it
        (`supersedes`: for two notes already stored; `correct` writes the replacement and the edge at once)."""
        if kind not in (EventKind.DEPENDS_ON, EventKind.REFINES, EventKind.SUPERSEDES):
            raise InvalidArgument("kind", f"{kind!r} is not a link kind: use 'depends_on', 'refines' or 'supersedes'")
        if kind == EventKind.SUPERSEDES:
            reason = self._reason(reason)
        src = self._note(src_id, "src_id")
        now = _utc(at) or self.clock()
        folded = self._fold(src.scope, now, [src])
        for e in folded.events:
            if e.kind == kind and e.src == src_id and e.dst == dst_id:
                return Linked(event=_event_view(e, folded), changed=False, chain=recall.build_chain(folded, src_id))
        event = self._edge(EventKind(kind), src, dst_id, "dst_id", reason, actor, now)
        self.tables.add_events([event])
        after = self._fold(src.scope, now, [src])
        return Linked(event=_event_view(event, after), changed=True, chain=recall.build_chain(after, src_id))

    def forget(self, note_id: str, reason: str) -> Forgotten:
        """Delete a note for real, with every event that names it, and say what that changed."""
        self._reason(reason)
        note = self._note(note_id, "note_id")
        now = self.clock()
        before = self._fold(note.scope, now, [note])
        touched = {e.id for e in before.events if note_id in (e.src, e.dst)}
        touched |= {e.id for e in before.events if e.dst in touched}
        neighbours = reachable(before.events, [note_id]) - {note_id}
        self.tables.delete(note_id, sorted(touched))
        after = self._fold(note.scope, now, [before.notes[n] for n in neighbours if n in before.notes])
        changed = [
            recall.note_view(after.notes[n], after)
            for n in sorted(neighbours)
            if n in after.notes and after.state(n) is not before.state(n)
        ]
        return Forgotten(note_id=note_id, events_removed=sorted(touched), notes_changed=changed)

    # -- reading -----------------------------------------------------------------------------

    def history(self, note_id: str, as_of: datetime | None = None) -> NoteHistory:
        note = self._note(note_id, "note_id")
        at = _utc(as_of) or self.clock()
        folded = self._fold(note.scope, at, [note])
        if note_id not in folded.notes:
            raise InvalidArgument(
                "as_of", f"note {note_id} was recorded at {note.recorded_at.isoformat()}, after as_of"
            )
        chain = recall.build_chain(folded, note_id)
        members = folded.chain(note_id).members
        return NoteHistory(
            note=recall.note_view(note, folded),
            chain=chain,
            events=[_event_view(e, folded) for e in folded.events_of(members)],
        )

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
        return trace.result

    def why_excluded(
        self,
        note_id: str,
        query: str | None = None,
        scope: str = "default",
        budget_tokens: int = 2000,
        as_of: datetime | None = None,
    ) -> Exclusion:
        note = self._note(note_id, "note_id")
        check_scope(scope)
        at = _utc(as_of) or self.clock()
        folded = self._fold(note.scope, at, [note])
        trace = None
        if query is not None and note.scope == scope and note_id in folded.notes:
            trace = self._run(query, scope, budget_tokens, None, True, as_of)
        return explain(note, folded, scope, trace)

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
        self, query: str, scope: str, budget: int, max_chains: int | None, include_history: bool, as_of: datetime | None
    ) -> Trace:
        if not query.strip():
            raise InvalidArgument("query", "must not be empty")
        if budget < 1:
            raise InvalidArgument("budget_tokens", "must be at least 1")
        check_scope(scope)
        return recall.run(
            self.tables, self.embedder, query, scope, now=self.clock(), as_of=_utc(as_of),
            budget_tokens=budget, max_chains=max_chains, include_history=include_history, settings=self.settings,
        )  # fmt: skip

    def _fold(self, scope: str, at: datetime, around: Sequence[Note] = ()) -> Fold:
        """The fold of the chains (and prerequisites) of `around`, with every event in scope."""
        events = self.tables.events(scope, at)
        known = {n.id: n for n in around}
        notes = self.tables.notes(reachable(events, known) - known.keys())
        return fold([*notes.values(), *known.values()], events, at)

    def _note(self, note_id: str, field: str) -> Note:
        check_id(note_id, field, prefix=NOTE_PREFIX)
        found = self.tables.notes([note_id])
        if note_id not in found:
            raise NotFound("note", note_id, field)
        return found[note_id]

    @staticmethod
    def _reason(reason: str | None) -> str:
        if reason is None or not reason.strip():
            raise InvalidArgument("reason", "say why: it is kept with the event and shown with the history")
        return reason.strip()

    def _new_note(
        self, text: str, scope: str, kind: str, subject: str | None, tags: Sequence[str], source: str | None,
        actor: str | None, confidence: float, valid_from: datetime | None, valid_until: datetime | None, now: datetime,
    ) -> Note:  # fmt: skip
        if not text or not text.strip():
            raise InvalidArgument("text", "must not be empty")
        if len(text) > MAX_TEXT:
            raise InvalidArgument("text", f"is {len(text)} characters; the limit is {MAX_TEXT}")
        if not 0.0 <= confidence <= 1.0:
            raise InvalidArgument("confidence", f"{confidence} is outside 0..1")
        if not kind or not kind.strip():
            raise InvalidArgument("kind", "must not be empty")
        valid_from, valid_until = _utc(valid_from), _utc(valid_until)
        if valid_from and valid_until and valid_until <= valid_from:
            raise InvalidArgument("valid_until", "must be later than valid_from")
        return Note(
            id=new_note_id(), text=text.strip(), scope=check_scope(scope), kind=kind.strip(), subject=subject,
            tags=[t.strip() for t in tags if t.strip()], source=source, actor=actor, confidence=confidence,
            recorded_at=now, valid_from=valid_from, valid_until=valid_until,
        )  # fmt: skip

    def _draft_note(self, d: Draft, scope: str, actor: str | None, now: datetime) -> Note:
        return self._new_note(
            d.text, scope, d.kind, d.subject, d.tags, d.source, actor, d.confidence, d.valid_from, d.valid_until, now
        )

    def _edge(
        self, kind: EventKind, src: Note, target: str, field: str, reason: str | None, actor: str | None,
        now: datetime | None = None,
    ) -> Event:  # fmt: skip
        """A checked edge from `src` (which may be a note not yet written) to an existing note."""
        check_id(target, field, prefix=NOTE_PREFIX)
        if target == src.id:
            raise InvalidArgument(field, "a note cannot link to itself")
        found = self.tables.notes([target]).get(target)
        if found is None:
            raise NotFound("note", target, field)
        if found.scope != src.scope:
            raise InvalidArgument(field, f"note {target} is in scope {found.scope!r}, not {src.scope!r}")
        if kind is EventKind.SUPERSEDES:
            folded = self._fold(src.scope, now or src.recorded_at, [found])
            if supersedes_path(folded.events, folded.retracted_by, target, src.id):
                raise Conflict(
                    f"{field}: {target} already supersedes {src.id} (directly or through others); that would be a cycle"
                )
        return Event(
            id=new_event_id(), kind=kind, src=src.id, dst=target, scope=src.scope, reason=reason, actor=actor,
            recorded_at=now or src.recorded_at,
        )  # fmt: skip

    def _commit(self, event: Event, note: Note, now: datetime) -> LifecycleChange:
        self.tables.add_events([event])
        after = self._fold(note.scope, now, [note])
        return LifecycleChange(event=_event_view(event, after), changed=True, chain=recall.build_chain(after, note.id))

    def _similar_active(self, note: Note, vector: Sequence[float]) -> list[Similar]:
        candidates, readable = recall.find_candidates(
            self.tables, self.embedder, note.text, note.scope, None, self.settings, vector
        )
        qualified = [c for c in candidates.values() if c.qualified and c.note.id != note.id]
        if not qualified:
            return []
        folded = self._fold(note.scope, note.recorded_at, [c.note for c in qualified])
        similar = []
        for cand in qualified:
            if cand.note.id in folded.notes and folded.state(cand.note.id) is NoteState.ACTIVE:
                similarity = cand.similarity if readable and cand.dense_readable else None
                similar.append(Similar(note=recall.note_view(cand.note, folded), similarity=similarity))
            if len(similar) == SIMILAR_SHOWN:
                break
        return similar
