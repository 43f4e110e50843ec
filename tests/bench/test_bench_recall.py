"""bench/longmemeval_recall.py's measure: recall@k by turn and by session, and its two rankings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from corrigenda.store import Memory, SentenceTransformerEmbedder
from embedding_cache import CachedEmbedder
from longmemeval_ku import Question, Turn
from longmemeval_recall import (
    PlainHybrid,
    Retrieved,
    delivered_notes,
    first_sessions,
    plain_sessions,
    session_recall,
    store_turns,
    turn_recall,
)


def _ranking(*sessions: str) -> list[Retrieved]:
    """One note per turn, turn i of the given session."""
    return [Retrieved(f"n{i}", (f"{s}#{i}",), (s,)) for i, s in enumerate(sessions)]


def test_recall_by_turn_counts_the_first_k_notes_and_by_session_the_first_k_sessions() -> None:
    ranking = _ranking("A", "A", "B", "A", "C", "D")
    assert first_sessions(ranking, 3) == ["A", "B", "C"]
    # C's turn is the fifth note: outside the top 3 turns, inside the top 3 sessions
    assert turn_recall(ranking, ["C#4"], 3) == {"any": False, "all": False}
    assert session_recall(ranking, ["C"], 3) == {"any": True, "all": True}
    assert session_recall(ranking, ["C", "D"], 3) == {"any": True, "all": False}
    assert session_recall(ranking, ["C", "D"], 4) == {"any": True, "all": True}
    assert turn_recall(ranking, ["A#0", "B#2"], 3) == {"any": True, "all": True}
    assert turn_recall(ranking, ["B#2", "D#5"], 5) == {"any": True, "all": False}


def test_a_note_standing_for_two_turns_finds_both_and_names_both_sessions() -> None:
    ranking = [Retrieved("n0", ("A#0", "B#3"), ("A", "B")), *_ranking("C")]
    assert first_sessions(ranking, 2) == ["A", "B"]
    assert turn_recall(ranking, ["B#3"], 1) == {"any": True, "all": True}
    assert session_recall(ranking, ["C"], 2) == {"any": False, "all": False}


def test_plain_widens_its_limit_until_it_names_k_sessions_or_runs_out() -> None:
    from longmemeval_recall import Stored

    order = ["a", "b", "c", "d", "e"]
    sessions = {"a": "S1", "b": "S1", "c": "S2", "d": "S1", "e": "S3"}
    turns = {
        n: [Turn(f"{sessions[n]}#{n}", sessions[n], n, datetime.now(UTC), datetime.now(UTC), False)] for n in order
    }
    stored = Stored("x", turns)  # type: ignore[arg-type]
    asked: list[int] = []

    def top(limit: int) -> list[str]:
        asked.append(limit)
        return order[:limit]

    assert [r.note_id for r in plain_sessions(top, stored, 2)] == ["a", "b", "c"]
    assert asked == [2, 3]
    assert first_sessions(plain_sessions(top, stored, 3), 3) == ["S1", "S2", "S3"]
    asked.clear()
    assert len(plain_sessions(top, stored, 4)) == 5  # three sessions in all: it stops when the notes run out
    assert asked[-1] == 6


def test_both_systems_rank_the_same_notes_as_of_the_question(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    start = datetime(2023, 5, 1, tzinfo=UTC)

    def turn(session: str, position: int, text: str, days: int, evidence: bool = False) -> Turn:
        at = start + timedelta(days=days, milliseconds=position)
        return Turn(f"{session}#{position}", session, text, at, start + timedelta(days=days), evidence)

    moved = turn("s2", 0, "I moved to Lisbon last month and I love the trams.", 2, evidence=True)
    turns = (
        turn("s1", 0, "Can you suggest a recipe for a quick weeknight pasta?", 0),
        turn("s1", 2, "Thanks, that helps.", 0),
        moved,
        turn("s3", 0, "Thanks, that helps.", 4),  # the same text again: the same note
        turn("s4", 0, "I moved again, to Porto this time.", 9),  # after the question
    )
    q = Question(
        id="q", kind="current", question="Which city do I live in?", answer="Lisbon", question_date=start,
        asked_at=start + timedelta(days=5), evidence=(moved,), haystacks={"s": turns}, index_order=True,
        missing_entity=None,
    )  # fmt: skip
    cached = CachedEmbedder(embedder)
    memory = Memory(str(tmp_path / "store"), cached)
    stored = store_turns(memory, q)
    assert sorted(len(t) for t in stored.turns.values()) == [1, 1, 1, 2]
    (twice,) = [r for r in stored.retrieved(stored.turns) if len(r.turns) == 2]
    assert twice.turns == ("s1#2", "s3#0") and twice.sessions == ("s1", "s3")

    plain = PlainHybrid(str(tmp_path / "plain"), memory, stored.scope)
    assert plain.table.count_rows() == len(stored.turns) == 4  # every note, the one after the question too
    plain_ids = plain.top(q, cached.embed([q.question])[0], stored.scope, 10)
    ours = delivered_notes(memory, q, stored.scope, 10**9)
    later = next(n for n, ts in stored.turns.items() if ts[0].key == "s4#0")
    assert later not in plain_ids and later not in ours  # recorded after the question: hidden from both
    assert set(plain_ids) <= set(stored.turns) and len(plain_ids) == 3
    lisbon = next(n for n, ts in stored.turns.items() if ts[0] is moved)
    assert plain_ids[0] == lisbon and ours[0] == lisbon
    assert turn_recall(stored.retrieved(ours), ["s2#0"], 1) == {"any": True, "all": True}
