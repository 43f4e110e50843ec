"""A note's chain as an agent receives it: heads, history, prerequisites, and the events' views.

Built from a fold; used by recall, by every write's answer and by `why_excluded`, so none of
them depends on the retrieval pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence

from .fold import Fold
from .model import Event, Note, NoteState
from .views import Chain, Check, Entry, EventView, HistoryEntry, NoteView, Prerequisite


def note_view(note: Note, folded: Fold) -> NoteView:
    status = folded.status[note.id]
    confirmed = folded.checked.get(note.id)
    return NoteView(
        **note.model_dump(),
        state=status.state,
        reinstated_by=status.reinstated_by.id if status.reinstated_by else None,
        refines=folded.refines(note.id),
        last_checked=Check(event_id=confirmed.id, at=confirmed.recorded_at, actor=confirmed.actor,
                           reason=confirmed.reason) if confirmed is not None else None,
        unchecked_since=folded.unchecked_since(note.id),
    )  # fmt: skip


def event_view(event: Event, folded: Fold) -> EventView:
    retracting = folded.retracted_by.get(event.id)
    return EventView(
        id=event.id, kind=event.kind, src=event.src, dst=event.dst, reason=event.reason, actor=event.actor,
        recorded_at=event.recorded_at, in_force=folded.in_force(event),
        retracted_by=retracting.id if retracting else None, conflict_with=list(folded.conflicts.get(event.id, ())),
    )  # fmt: skip


def build_chain(folded: Fold, note_id: str, entry: Entry | None = None, decay: float = 0.5) -> Chain:
    """The whole chain of `note_id`: heads, history newest first, prerequisites nearest first."""
    shape = folded.chain(note_id)
    notes = folded.notes
    history = []
    for member in shape.members:
        status = folded.status[member]
        if status.state is NoteState.ACTIVE:
            continue
        event = status.event
        history.append(
            HistoryEntry(
                note=note_view(notes[member], folded),
                role=status.state,
                by=status.by,
                at=status.at,
                reason=event.reason if event else None,
                event_id=event.id if event else None,
                actor=event.actor if event else None,
            )
        )
    history.sort(key=lambda h: (h.at or h.note.recorded_at, h.note.id), reverse=True)
    base = entry.chain_score if entry is not None else 1.0
    return Chain(
        chain_id=shape.id,
        status=shape.status,
        heads=[note_view(notes[h], folded) for h in shape.heads],
        history=history,
        prerequisites=prerequisites(folded, shape.heads, set(shape.members), base, decay),
        entry=entry,
    )


def prerequisites(
    folded: Fold, heads: Sequence[str], members: set[str], liveness: float, decay: float
) -> list[Prerequisite]:
    """Breadth-first along `depends_on` from the heads, as far as it goes: nearest first, each once."""
    found: list[Prerequisite] = []
    seen = set(members)
    frontier = [(head, 0) for head in heads]
    for note_id, hops in frontier:  # grows while it is walked
        for target in folded.depends_on(note_id):
            for resolved in current_of(folded, target):
                if resolved in seen:
                    continue
                seen.add(resolved)
                frontier.append((resolved, hops + 1))
                found.append(
                    Prerequisite(
                        **note_view(folded.notes[resolved], folded).model_dump(),
                        needed_by=note_id,
                        hops=hops + 1,
                        liveness=liveness * decay ** (hops + 1),
                    )
                )
    return found


def current_of(folded: Fold, note_id: str) -> list[str]:
    """A prerequisite as it stands now: itself if active, else what replaced it."""
    if note_id not in folded.notes:
        return []
    if folded.state(note_id) is NoteState.ACTIVE:
        return [note_id]
    heads = folded.chain(note_id).heads
    return list(heads) if heads else [note_id]
