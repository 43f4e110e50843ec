"""The pure fold: unit cases for each rule and hypothesis properties over random event sequences."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from corrigenda.store.fold import Fold, fold
from corrigenda.store.ids import new_event_id, new_note_id
from corrigenda.store.model import ChainStatus, Event, EventKind, Note, NoteState
from hypothesis import given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 1, 1, tzinfo=UTC)

EXCLUDING = (EventKind.SUPERSEDES, EventKind.REVOKES)  # what a reinstatement can retract


def t(i: int) -> datetime:
    return T0 + timedelta(minutes=i)


def note(i: int, **kw: object) -> Note:
    return Note(id=new_note_id(), text=f"note {i}", scope="s", recorded_at=t(i), **kw)  # type: ignore[arg-type]


def edge(kind: EventKind, src: str | None, dst: str, i: int, reason: str = "because") -> Event:
    return Event(id=new_event_id(), kind=kind, src=src, dst=dst, scope="s", reason=reason, recorded_at=t(i))


def states(folded: Fold) -> dict[str, NoteState]:
    return {i: s.state for i, s in folded.status.items()}


def test_correction_supersedes_and_heads_the_chain() -> None:
    a, b = note(0), note(1)
    f = fold([a, b], [edge(EventKind.SUPERSEDES, b.id, a.id, 2)], t(3))
    assert f.state(a.id) is NoteState.SUPERSEDED and f.status[a.id].by == b.id
    chain = f.chain(a.id)
    assert chain.heads == (b.id,) and chain.status is ChainStatus.CURRENT
    assert chain.members == (a.id, b.id) and chain.id == a.id


def test_revoking_the_correction_brings_back_what_it_replaced() -> None:
    a, b = note(0), note(1)
    events = [edge(EventKind.SUPERSEDES, b.id, a.id, 2), edge(EventKind.REVOKES, None, b.id, 3)]
    f = fold([a, b], events, t(4))
    assert f.state(a.id) is NoteState.ACTIVE and f.state(b.id) is NoteState.REVOKED
    assert f.chain(a.id).heads == (a.id,)


def test_reinstating_a_note_retracts_every_earlier_exclusion() -> None:
    a, b = note(0), note(1)
    sup, rev = edge(EventKind.SUPERSEDES, b.id, a.id, 2), edge(EventKind.REVOKES, None, a.id, 3)
    back = edge(EventKind.REINSTATES, None, a.id, 4)
    f = fold([a, b], [sup, rev, back], t(5))
    assert f.state(a.id) is NoteState.ACTIVE and f.status[a.id].reinstated_by == back
    assert not f.in_force(sup) and not f.in_force(rev)
    assert f.chain(a.id).status is ChainStatus.CONTESTED  # a and b are both current and disagree


def test_reinstating_a_supersedes_event_of_two_corrections_makes_the_chain_contested() -> None:
    a, b, c = note(0), note(1), note(2)
    s1, s2 = edge(EventKind.SUPERSEDES, b.id, a.id, 3), edge(EventKind.SUPERSEDES, c.id, b.id, 4)
    f = fold([a, b, c], [s1, s2, edge(EventKind.REINSTATES, None, s2.id, 5)], t(6))
    assert f.state(b.id) is NoteState.ACTIVE and f.state(a.id) is NoteState.SUPERSEDED
    assert set(f.chain(a.id).heads) == {b.id, c.id} and f.chain(a.id).status is ChainStatus.CONTESTED


def test_refinements_are_current_together_not_contested() -> None:
    a, b = note(0), note(1)
    f = fold([a, b], [edge(EventKind.REFINES, b.id, a.id, 2)], t(3))
    assert set(f.chain(a.id).heads) == {a.id, b.id} and f.chain(a.id).status is ChainStatus.CURRENT


def test_validity_window_is_a_state_not_a_delete() -> None:
    a = note(0, valid_until=t(5))
    b = note(1, valid_from=t(10))
    assert fold([a, b], [], t(4)).state(a.id) is NoteState.ACTIVE
    later = fold([a, b], [], t(6))
    assert later.state(a.id) is NoteState.EXPIRED and later.chain(a.id).status is ChainStatus.EXPIRED
    assert later.state(b.id) is NoteState.PENDING
    assert fold([a, b], [], t(11)).state(b.id) is NoteState.ACTIVE


def test_events_naming_missing_notes_are_ignored() -> None:
    a = note(0)
    f = fold([a], [edge(EventKind.SUPERSEDES, new_note_id(), a.id, 1)], t(2))
    assert f.state(a.id) is NoteState.ACTIVE and f.events == []


def test_age_alone_never_changes_state() -> None:
    a = note(0)
    assert fold([a], [], t(10**6)).state(a.id) is NoteState.ACTIVE


# -- properties --------------------------------------------------------------------------------

N_NOTES = 5


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Note], list[Event]]:
    notes = [note(i) for i in range(N_NOTES)]
    events: list[Event] = []
    for step in range(draw(st.integers(0, 14))):
        i = N_NOTES + step
        kind = draw(st.sampled_from(list(EventKind)))
        dst = draw(st.sampled_from(notes)).id
        if kind in (EventKind.REVOKES, EventKind.FORGETS):
            events.append(edge(kind, None, dst, i))
        elif kind is EventKind.REINSTATES:
            excluding = [e for e in events if e.kind in (EventKind.SUPERSEDES, EventKind.REVOKES)]
            if len(excluding) > 0 and draw(st.booleans()):
                dst = draw(st.sampled_from(excluding)).id
            events.append(edge(kind, None, dst, i))
        else:
            src = draw(st.sampled_from([n for n in notes if n.id != dst])).id
            events.append(edge(kind, src, dst, i))
    return notes, events


@settings(max_examples=300, deadline=None)
@given(histories())
def test_no_head_is_superseded_by_an_active_note(history: tuple[list[Note], list[Event]]) -> None:
    notes, events = history
    f = fold(notes, events, t(100))
    for n in f.notes:
        chain = f.chain(n)
        for head in chain.heads:
            assert f.state(head) is NoteState.ACTIVE
            superseders = [
                e.src for e in f.events if e.kind is EventKind.SUPERSEDES and e.dst == head and f.in_force(e)
            ]
            assert all(f.state(s) is NoteState.REVOKED for s in superseders if s is not None)
        assert (chain.status in (ChainStatus.RETRACTED, ChainStatus.EXPIRED)) == (not chain.heads)


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, N_NOTES - 1), st.booleans())
def test_revoke_then_reinstate_restores_the_prior_state(
    history: tuple[list[Note], list[Event]], pick: int, by_event: bool
) -> None:
    notes, events = history
    target = notes[pick].id
    before = fold(notes, events, t(100))
    if target not in before.notes:
        return  # forgotten: there is nothing to revoke
    revoke = edge(EventKind.REVOKES, None, target, 101)
    back = edge(EventKind.REINSTATES, None, revoke.id if by_event else target, 102)
    after = fold(notes, [*events, revoke, back], t(103))
    if by_event:
        assert states(after) == states(before)
        return
    # Reinstating the note retracts every earlier exclusion of it too (fold.py), even one that excluded
    # nothing then (a supersedes from a revoked note): that one no longer closes a cycle, so a supersedes
    # set aside for closing it can come into force. So the revocation is undone exactly, and the rest is
    # what the reinstatement alone does.
    alone = fold(notes, [*events, edge(EventKind.REINSTATES, None, target, 102)], t(103))
    assert states(after) == states(alone)
    assert after.state(target) is NoteState.ACTIVE
    earlier = [e for e in before.events if e.dst == target and e.kind in EXCLUDING and e.id not in before.retracted_by]
    if not earlier:  # nothing else to retract: everything as it was
        assert states(after) == states(before)


def test_reinstating_a_note_by_id_retracts_a_supersedes_that_excluded_nothing_and_the_cycle_it_closed_opens() -> None:
    """The case hypothesis found: a supersedes from a revoked note excludes nothing, but it still closes
    a cycle, which sets aside a later supersedes. Revoking and reinstating the note it names retracts
    it (every earlier exclusion of a reinstated note is retracted), and the edge set aside comes into
    force."""
    notes = [note(i) for i in range(3)]
    a, b, c = (n.id for n in notes)
    events = [
        edge(EventKind.REVOKES, None, a, 5),
        edge(EventKind.SUPERSEDES, a, c, 6),  # from a revoked note: c stays active
        edge(EventKind.SUPERSEDES, b, a, 7),
        edge(EventKind.SUPERSEDES, c, b, 8),  # closes c -> b -> a -> c: set aside
    ]
    before = fold(notes, events, t(100))
    assert (before.state(b), before.state(c)) == (NoteState.ACTIVE, NoteState.ACTIVE)
    assert events[3].id in before.conflicts
    revoke = edge(EventKind.REVOKES, None, c, 101)
    after = fold(notes, [*events, revoke, edge(EventKind.REINSTATES, None, c, 102)], t(103))
    assert after.state(c) is NoteState.ACTIVE
    assert events[1].id in after.retracted_by and events[3].id not in after.conflicts
    assert after.state(b) is NoteState.SUPERSEDED


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 30))
def test_as_of_before_an_event_equals_the_fold_without_it(history: tuple[list[Note], list[Event]], cut: int) -> None:
    notes, events = history
    at = t(cut)
    replay = fold(notes, events, at)
    # a forgotten note is gone at every time, so its tombstone counts whenever it was written
    without_later = fold(notes, [e for e in events if e.recorded_at <= at or e.kind is EventKind.FORGETS], at)
    assert replay.status == without_later.status
    assert [e.id for e in replay.events] == [e.id for e in without_later.events]
    for n in replay.notes:
        assert replay.chain(n) == without_later.chain(n)


def test_a_cycle_from_racing_writers_sets_the_later_edge_aside_whatever_order_it_was_read_in() -> None:
    a, b = note(0), note(1)
    ab, ba = edge(EventKind.SUPERSEDES, a.id, b.id, 2), edge(EventKind.SUPERSEDES, b.id, a.id, 3)
    for events in ([ab, ba], [ba, ab]):
        f = fold([a, b], events, t(4))
        assert f.in_force(ab) and not f.in_force(ba)
        assert f.conflicts == {ba.id: (ab.id,)}
        assert f.chain(a.id).heads == (a.id,) and f.chain(a.id).status is ChainStatus.CURRENT
        assert f.state(b.id) is NoteState.SUPERSEDED


def test_a_longer_cycle_names_every_edge_it_would_close() -> None:
    a, b, c = note(0), note(1), note(2)
    ab, bc = edge(EventKind.SUPERSEDES, a.id, b.id, 3), edge(EventKind.SUPERSEDES, b.id, c.id, 4)
    ca = edge(EventKind.SUPERSEDES, c.id, a.id, 5)
    f = fold([a, b, c], [ca, bc, ab], t(6))
    assert f.conflicts == {ca.id: (ab.id, bc.id)}
    assert f.chain(a.id).heads == (a.id,)


def test_a_forgotten_note_is_gone_at_every_time_and_its_edges_with_it() -> None:
    a, b = note(0), note(1)
    sup = edge(EventKind.SUPERSEDES, b.id, a.id, 2)
    gone = edge(EventKind.FORGETS, None, b.id, 5)
    for at in (t(3), t(6)):
        f = fold([a, b], [sup, gone], at)
        assert b.id not in f.notes and f.state(a.id) is NoteState.ACTIVE and f.events == []


@settings(max_examples=300, deadline=None)
@given(histories())
def test_supersessions_alone_never_leave_a_chain_without_a_current_note(
    history: tuple[list[Note], list[Event]],
) -> None:
    """Only a revocation (or a validity window) can empty a chain: no cycle, however it came about."""
    notes, events = history
    only = [e for e in events if e.kind in (EventKind.SUPERSEDES, EventKind.REFINES, EventKind.DEPENDS_ON)]
    f = fold(notes, only, t(100))
    for n in f.notes:
        assert f.chain(n).heads, f"chain of {n} has no head: {f.conflicts}"


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 30))
def test_a_notes_edges_and_chain_id_are_read_off_the_visible_events(
    history: tuple[list[Note], list[Event]], cut: int
) -> None:
    """The fold answers `depends_on`, `refines` and `chain_id` from what it indexed once: the same as
    reading them off the events visible at that time, oldest link first."""
    notes, events = history
    f = fold(notes, events, t(N_NOTES + cut))
    for n in f.notes:
        for kind, found in ((EventKind.DEPENDS_ON, f.depends_on(n)), (EventKind.REFINES, f.refines(n))):
            assert found == [e.dst for e in f.events if e.kind is kind and e.src == n]
        assert f.chain_id(n) == f.chain(n).id
    assert f.depends_on("no such note") == [] and f.chain_id("no such note") == "no such note"
