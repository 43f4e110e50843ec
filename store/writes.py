"""The write path: remember, correct, revoke, reinstate, link, forget and bulk imports of notes.

Each write is checked in full before anything is stored, so a refused call changes nothing. It reads
what it needs once (the notes it names, then its scope's graph and the notes reachable from them),
folds that once, appends (edges first, the note last: its row is the commit point, see commit.py),
and folds what it wrote in memory. `Memory` (memory.py) offers these as its operations.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from . import recall, subjects, updates
from .chains import build_chain, event_view, note_view
from .checks import checked_reason, checked_text, current_or_refuse, exist, new_event, new_note, recorded_time
from .confirms import Confirms
from .errors import Conflict, InvalidArgument, NotFound
from .fold import Fold
from .forgets import Forgets
from .ids import NOTE_PREFIX, check_id, is_note_id
from .model import MAX_LINKS, Draft, Event, EventKind, Note, NoteState
from .part import Collaborators, Part
from .recall import Candidate
from .views import Corrected, LifecycleChange, LikelyUpdate, Linked, Remembered, Similar
from .where import check_scope

SIMILAR_SHOWN = 5
# A remember's similar-notes search takes this many hits from each retriever (a recall takes
# `per_retriever`, 20): enough for SIMILAR_SHOWN current ones and for the note's identical twin, which
# is its closest match densely and by words; each hit is a row read and its chain folded.
SIMILAR_SEARCHED = 2 * SIMILAR_SHOWN
# What a correction keeps of the note it corrects, unless its draft sets it: what the note is about.
CORRECTION_KEEPS = ("kind", "subject", "tags")
LINK_KINDS = (EventKind.DEPENDS_ON, EventKind.REFINES, EventKind.SUPERSEDES, EventKind.DISTINCT)
# Where writes embed their note while they read (Writes.embed_note): a thread per call under way.
_EMBEDDING = ThreadPoolExecutor(max_workers=4, thread_name_prefix="corrigenda-embed")
NEW_NOTE = "<new note id>"  # the new note in a likely update's call, before it is stored


def _likely_update(new_id: str, proposal: updates.Proposal, folded: Fold) -> LikelyUpdate:
    reason = proposal.change.reason
    call = (
        f'link(src_id="{new_id}", dst_id="{proposal.note.id}", kind="supersedes", '
        f"reason={json.dumps(reason, ensure_ascii=False)})"
    )
    return LikelyUpdate(note=note_view(proposal.note, folded), similarity=proposal.similarity, reason=reason, call=call)


class Writes(Part):
    """Every write of one store (part.py: what it is handed; recall's settings serve the similar-notes
    search), each committed through `commits` (commit.py)."""

    def __init__(self, given: Collaborators) -> None:
        super().__init__(given)
        self.subjects = subjects.Subjects(given)
        self.forgets = Forgets(given)
        self.commits = self.forgets.commits
        self.confirms = Confirms(given, self.commits)

    def remember(
        self,
        draft: Draft,
        scope: str = "default",
        supersedes: Sequence[str] = (),
        depends_on: Sequence[str] = (),
        actor: str | None = None,
        reason: str | None = None,
        one_value: bool = False,
    ) -> Remembered:
        """Store a note (and the edges it names). The draft's `at` back-dates it, for imports.

        A note whose text is exactly that of a current note of the scope is not stored twice: the
        answer is that note, `changed: false` (README, "Guard rails"). A note whose subject holds one
        value in the scope (subjects.py; `one_value` declares it so) supersedes that subject's current
        notes in the same write, and the answer says what it replaced (`replaced`).
        """
        scope = check_scope(scope)
        now = recorded_time(draft.at, self.clock)
        note = new_note(draft, scope, actor, now)
        for field, targets in (("supersedes", supersedes), ("depends_on", depends_on)):
            if len(set(targets)) != len(targets):
                raise InvalidArgument(field, "lists a note more than once")
        declaration, of_subject = self.subjects.for_note(note, one_value, now)
        embedding = self.embed_note(note.text)
        named = self._targets(note, {"supersedes": supersedes, "depends_on": depends_on})
        candidates, readable, similar_to, identical = self._search_similar(note, embedding)
        vector = embedding.result()
        around = [*named.values(), *(c.note for c in similar_to), *identical, *of_subject]
        before = self.lookup.load(scope, now, around)
        exist(before, named, {"supersedes": supersedes, "depends_on": depends_on})
        same = self._current_among(identical, before)
        if same is not None:
            return self._unchanged(same, before, bool(supersedes or depends_on), declaration)
        replaced = subjects.replacing(note, of_subject, before, supersedes)
        events = self._edges(note, declaration, supersedes, replaced, depends_on, reason)
        # a search of a scope with notes finds some; only when it found none is the store asked
        made = (
            not candidates
            and not named
            and not self.graphs.get(scope).events
            and scope not in self.tables.search.scopes()
        )
        after = self.commits.write(before, events, (note, vector, readable))
        ends = {"supersedes": [*supersedes, *replaced], "depends_on": depends_on}
        self.commits.refuse_if_raced(before, events, note, ends, actor)
        active = self._active(similar_to, readable, before)
        similar = [Similar(note=note_view(n, before), similarity=s) for n, s in active[:SIMILAR_SHOWN]]
        named_now = {*supersedes, *replaced}
        proposals = updates.likely_updates(note, [(n, s) for n, s in active if n.id not in named_now])
        return Remembered(
            note=note_view(note, after), changed=True, similar_active=[s for s in similar if s.note.id not in named_now],
            likely_updates=[_likely_update(note.id, p, before) for p in proposals],
            events=[event_view(e, after) for e in events if e.kind not in subjects.DECLARING], scope_created=made,
            replaced=subjects.replaced(note, declaration is not None, replaced, events, after)
            if declaration is not None or replaced else None,
            unreadable=sorted(self.tables.search.unreadable & candidates.keys()),
        )  # fmt: skip

    def _unchanged(self, same: Note, before: Fold, linking: bool, declaration: Event | None) -> Remembered:
        """A remember of exactly the text of current note `same`: it, unchanged (and the declaration of
        its subject, if the call made one)."""
        if linking:
            raise InvalidArgument(
                "text", f"current note {same.id} already says exactly this; to relate it, call "
                f"link(src_id={same.id}, dst_id=…, kind=supersedes or depends_on) instead",
            )  # fmt: skip
        if declaration is not None:
            self.commits.write(before, [declaration])
        return Remembered(note=note_view(same, before), changed=False, similar_active=[], events=[])

    @staticmethod
    def _edges(
        note: Note, declaration: Event | None, supersedes: Sequence[str], replaced: Sequence[str],
        depends_on: Sequence[str], reason: str | None,
    ) -> list[Event]:  # fmt: skip
        """A remember's events: the declaration it makes, then its edges (those a one-value subject
        makes with a reason naming it)."""
        why = subjects.one_value_reason(note.subject or "")
        edges = [(EventKind.SUPERSEDES, t, reason) for t in supersedes]
        edges += [(EventKind.SUPERSEDES, t, why) for t in replaced] + [
            (EventKind.DEPENDS_ON, t, reason) for t in depends_on
        ]
        made = [new_event(k, note.id, t, note.scope, r, note.actor, note.recorded_at) for k, t, r in edges]
        return [declaration, *made] if declaration is not None else made

    def likely_updates(
        self, draft: Draft, scope: str = "default", supersedes: Sequence[str] = ()
    ) -> list[LikelyUpdate]:
        """What `remember(draft, scope, supersedes)` would now propose under `likely_updates`, without
        storing anything: the active notes the draft's note would likely replace, best first. Their
        `call` names the new note `<new note id>`, since it has none yet. Nothing when a current note
        already has exactly the draft's text (`remember` would store nothing)."""
        scope = check_scope(scope)
        now = self.clock()
        note = new_note(draft, scope, None, now)
        _, readable, similar_to, identical = self._search_similar(note, self.embed_note(note.text))
        before = self.lookup.load(scope, now, [*(c.note for c in similar_to), *identical])
        if self._current_among(identical, before) is not None:
            return []
        named = set(supersedes)
        active = [(n, s) for n, s in self._active(similar_to, readable, before) if n.id not in named]
        return [_likely_update(NEW_NOTE, p, before) for p in updates.likely_updates(note, active)]

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
        reason = checked_reason(reason)
        embedding = self.embed_note(checked_text(draft))
        old = self.lookup.note(note_id, "note_id")
        if scope is not None and check_scope(scope) != old.scope:
            raise InvalidArgument("scope", f"note {note_id} is in scope {old.scope!r}; a correction stays in its scope")
        now = recorded_time(draft.at, self.clock)
        kept = {field: getattr(old, field) for field in CORRECTION_KEEPS if field not in draft.model_fields_set}
        note = new_note(draft.model_copy(update=kept), old.scope, actor, now)
        if depends_on is not None and len(set(depends_on)) != len(depends_on):
            raise InvalidArgument("depends_on", "lists a note more than once")
        named = self._targets(note, {"depends_on": depends_on or ()})
        before = self.lookup.load(old.scope, now, [old, *named.values()])
        if note_id not in before.notes:
            raise NotFound("note", note_id, "note_id")
        if not fork:
            current_or_refuse(before, note_id)
        if depends_on is None:
            depends_on = list(dict.fromkeys(d for d in before.depends_on(note_id) if d in before.notes))
        exist(before, named, {"depends_on": depends_on})
        edges = [(EventKind.SUPERSEDES, note_id)] + [(EventKind.DEPENDS_ON, t) for t in depends_on]
        events = [new_event(k, note.id, t, old.scope, reason, actor, now) for k, t in edges]
        after = self.commits.write(before, events, (note, embedding.result(), self.embedder.readable(note.text)))
        targets = {"note_id": [note_id], "depends_on": depends_on}
        self.commits.refuse_if_raced(before, events, note, targets, actor, corrected=None if fork else note_id)
        return Corrected(
            note=note_view(note, after), supersedes=note_id, event=event_view(events[0], after),
            chain=build_chain(after, note_id),
        )  # fmt: skip

    def revoke(
        self, note_id: str, reason: str, actor: str | None = None, at: datetime | None = None
    ) -> LifecycleChange:
        """Mark a note as wrong, with no replacement. Revoking a correction brings back what it replaced."""
        reason = checked_reason(reason)
        note = self.lookup.note(note_id, "note_id")
        now = recorded_time(at, self.clock)
        before = self.lookup.load(note.scope, now, [note])
        exist(before, {note_id: note}, {"note_id": [note_id]})
        status = before.status[note_id]
        if status.state is NoteState.REVOKED:
            standing = event_view(status.event, before) if status.event else None
            return LifecycleChange(event=standing, changed=False, chain=build_chain(before, note_id))
        event = new_event(EventKind.REVOKES, None, note_id, note.scope, reason, actor, now)
        after = self.commits.write(before, [event])
        self.commits.refuse_if_raced(before, [event], None, {"note_id": [note_id]}, actor)
        return LifecycleChange(event=event_view(event, after), changed=True, chain=build_chain(after, note_id))

    def reinstate(
        self, target_id: str, reason: str, actor: str | None = None, at: datetime | None = None
    ) -> LifecycleChange:
        """Undo what excludes a note (a note id), or retract one revocation or supersession (an event id)."""
        reason = checked_reason(reason)
        check_id(target_id, "target_id")
        now = recorded_time(at, self.clock)
        if is_note_id(target_id):
            note = self.lookup.note(target_id, "target_id")
            before = self.lookup.load(note.scope, now, [note])
            exist(before, {target_id: note}, {"target_id": [target_id]})
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
            target = self.tables.events.event(target_id)
            if target is None:
                raise NotFound("event", target_id, "target_id")
            if target.kind not in (EventKind.REVOKES, EventKind.SUPERSEDES):
                raise InvalidArgument(
                    "target_id",
                    f"event {target_id} is a {target.kind.value} event; only revokes and supersedes events can be retracted",
                )
            note = self.lookup.note(target.dst, "target_id")
            before = self.lookup.load(target.scope, now, [note])
            exist(before, {note.id: note}, {"target_id": [note.id]})
            retracting = before.retracted_by.get(target_id)
            if retracting is not None:
                return LifecycleChange(
                    event=event_view(retracting, before), changed=False, chain=build_chain(before, note.id)
                )
        event = new_event(EventKind.REINSTATES, None, target_id, note.scope, reason, actor, now)
        after = self.commits.write(before, [event])
        self.commits.refuse_if_raced(before, [event], None, {"target_id": [note.id]}, actor)
        return LifecycleChange(event=event_view(event, after), changed=True, chain=build_chain(after, note.id))

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
            reason = checked_reason(reason)
        src = self.lookup.note(src_id, "src_id")
        now = recorded_time(at, self.clock)
        named = self._targets(src, {"dst_id": [dst_id]})
        before = self.lookup.load(src.scope, now, [src, *named.values()])
        exist(before, {src_id: src, **named}, {"src_id": [src_id], "dst_id": [dst_id]})
        for e in before.events:
            if e.kind == kind and e.src == src_id and e.dst == dst_id:
                return Linked(event=event_view(e, before), changed=False, chain=build_chain(before, src_id))
        if kind == EventKind.SUPERSEDES and before.supersedes_path(dst_id, src_id):
            raise Conflict(
                f"dst_id: {dst_id} already supersedes {src_id} (directly or through others); that would be a cycle"
            )
        event = new_event(EventKind(kind), src_id, dst_id, src.scope, reason, actor, now)
        after = self.commits.write(before, [event])
        self.commits.refuse_if_raced(before, [event], None, {"src_id": [src_id], "dst_id": [dst_id]}, actor)
        return Linked(event=event_view(event, after), changed=True, chain=build_chain(after, src_id))

    # -- internals ---------------------------------------------------------------------------

    def _search_similar(
        self, note: Note, embedding: Future[list[float]]
    ) -> tuple[Mapping[str, Candidate], bool, list[Candidate], list[Note]]:
        """A write's similar-notes search in its note's scope: the candidates, whether the model could
        read the note, those that qualify as similar, and those with exactly its text."""
        searched = dataclasses.replace(self.settings, per_retriever=SIMILAR_SEARCHED)
        candidates, readable = recall.find_candidates(
            self.lookup.reader(note.scope), self.embedder, note.text, None, searched, embedding.result
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

    def _targets(self, src: Note, fields: Mapping[str, Sequence[str]]) -> dict[str, Note]:
        """The notes named by a write's edges, read at once and checked: ids, not itself, same scope."""
        for field, ids in fields.items():
            if len(ids) > MAX_LINKS:
                raise InvalidArgument(field, f"names {len(ids)} notes; the limit is {MAX_LINKS}")
            for target in ids:
                check_id(target, field, prefix=NOTE_PREFIX)
                if target == src.id:
                    raise InvalidArgument(field, "a note cannot link to itself")
        found = self.graphs.notes_anywhere((t for ids in fields.values() for t in ids), self.tables.search.notes)
        for field, ids in fields.items():
            for target in ids:
                if target not in found:
                    raise NotFound("note", target, field)
                if found[target].scope != src.scope:
                    raise InvalidArgument(
                        field, f"note {target} is in scope {found[target].scope!r}, not {src.scope!r}"
                    )
        return found
