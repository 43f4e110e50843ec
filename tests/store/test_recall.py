"""The recall engine at full depth: multi-hop prerequisites, packing, the near-duplicate pass, and
why_excluded on each of them. Real LanceDB, real model."""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from corrigenda.store import Draft, Memory, RetrievalSettings, SentenceTransformerEmbedder
from corrigenda.store import recall as retrieval
from corrigenda.store.errors import InvalidArgument
from corrigenda.store.ids import new_note_id
from corrigenda.store.model import ChainStatus, Note, NoteState
from corrigenda.store.updates import conflict, subject_key, unlinked_conflicts
from corrigenda.store.views import Chain, NoteView, RecallResult

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
QUERY = "How does CI run the test suite with pytest?"


def delivered(result: RecallResult) -> set[str]:
    ids = set()
    for chain in result.chains:
        ids |= {h.id for h in chain.heads} | {p.id for p in chain.prerequisites} | {h.note.id for h in chain.history}
    return ids


@pytest.fixture
def reasoning(memory: Memory) -> dict[str, str]:
    """A four-step reasoning chain whose root shares no words with the query, and two look-alikes."""
    ids: dict[str, str] = {}

    def note(key: str, text: str, minutes: int, depends_on: tuple[str, ...] = ()) -> None:
        at = T0 + timedelta(minutes=minutes)
        ids[key] = memory.remember(Draft(text=text, at=at), depends_on=[ids[d] for d in depends_on]).note.id

    note("grammar", "The global Python lacked the tree-sitter grammar package in June.", 0)
    note("venv", "So the project interpreter is the venv one, which has that package.", 1, ("grammar",))
    note("pin", "Because of that, the pipeline pins its interpreter to .venv/bin/python.", 2, ("venv",))
    note("ci", "CI runs the test suite with pytest using the pinned interpreter.", 3, ("pin",))
    note("decoy1", "CI runs the lint job before the test suite on every pull request.", 4)
    note("decoy2", "The test suite in CI is split into four shards that run in parallel.", 5)
    return ids


def test_prerequisites_travel_with_their_head_as_far_as_the_edges_go(memory: Memory, reasoning: dict[str, str]) -> None:
    result = memory.recall(QUERY, budget_tokens=4000)
    chain = next(c for c in result.chains if c.heads[0].id == reasoning["ci"])
    assert [(p.id, p.hops, p.needed_by) for p in chain.prerequisites] == [
        (reasoning["pin"], 1, reasoning["ci"]),
        (reasoning["venv"], 2, reasoning["pin"]),
        (reasoning["grammar"], 3, reasoning["venv"]),
    ]
    assert chain.entry is not None
    for prereq in chain.prerequisites:  # liveness halves at each hop
        assert prereq.liveness == pytest.approx(chain.entry.score * 0.5**prereq.hops)


def test_a_replaced_prerequisite_stands_in_as_its_current_note(memory: Memory, reasoning: dict[str, str]) -> None:
    fixed = memory.correct(
        reasoning["grammar"],
        Draft(text="The global Python lacked the grammar package until the July upgrade."),
        reason="it was fixed",
    )
    chain = next(c for c in memory.recall(QUERY, budget_tokens=4000).chains if c.heads[0].id == reasoning["ci"])
    assert [p.id for p in chain.prerequisites][-1] == fixed.note.id
    assert reasoning["grammar"] not in {p.id for p in chain.prerequisites}


def test_packing_keeps_the_whole_reasoning_chain_before_more_query_like_notes(
    memory: Memory, reasoning: dict[str, str]
) -> None:
    full = memory.recall(QUERY, budget_tokens=4000)
    ci_chain = next(c for c in full.chains if c.heads[0].id == reasoning["ci"])
    decoys = [c for c in full.chains if c.heads[0].id in (reasoning["decoy1"], reasoning["decoy2"])]
    assert decoys and full.chains[0].heads[0].id == reasoning["ci"]  # the look-alikes are reached too

    tight = memory.recall(QUERY, budget_tokens=ci_chain.tokens + 5)
    assert delivered(tight) == {reasoning[k] for k in ("ci", "pin", "venv", "grammar")}
    assert {o.chain_id for o in tight.omitted} >= {c.chain_id for c in decoys}
    assert all(o.reason == "budget" for o in tight.omitted)


def test_a_core_too_big_for_the_budget_loses_its_farthest_prerequisites_first(
    memory: Memory, reasoning: dict[str, str]
) -> None:
    full = memory.recall(QUERY, budget_tokens=4000, max_chains=1)
    chain = full.chains[0]
    without_root = chain.tokens - (memory.settings.count_tokens(chain.prerequisites[-1].text) + 12)
    result = memory.recall(QUERY, budget_tokens=without_root, max_chains=1)
    kept = result.chains[0]
    assert [p.id for p in kept.prerequisites] == [reasoning["pin"], reasoning["venv"]]
    assert kept.trimmed_prerequisites == 1

    why = memory.why_excluded(reasoning["grammar"], query=QUERY, budget_tokens=without_root)
    assert why.verdict == "excluded"
    stages = [r.stage for r in why.reasons]
    assert "prerequisite" in stages and stages[-1] == "budget"
    assert "3 hops away" in next(r.detail for r in why.reasons if r.stage == "prerequisite")

    shown = memory.why_excluded(reasoning["venv"], query=QUERY, budget_tokens=without_root)
    assert shown.verdict == "current"
    assert [r.stage for r in shown.reasons][-2:] == ["prerequisite", "delivered"]


def test_a_prerequisite_shown_in_one_chain_is_not_repeated_in_another(memory: Memory) -> None:
    base = memory.remember(Draft(text="Staging uses the eu-west-1 region.", at=T0)).note.id
    first = memory.remember(Draft(text="Staging deploys go through the blue pool.", at=T0), depends_on=[base]).note.id
    second = memory.remember(Draft(text="Staging deploys need the release tag.", at=T0), depends_on=[base]).note.id
    result = memory.recall("How do staging deploys work?")
    by_head = {c.heads[0].id: c for c in result.chains}
    assert {first, second} <= by_head.keys()
    owners = [c for c in (by_head[first], by_head[second]) if base in {p.id for p in c.prerequisites}]
    others = [c for c in (by_head[first], by_head[second]) if base in c.prerequisites_elsewhere]
    assert len(owners) == 1 and len(others) == 1


def test_a_chain_that_repeats_a_better_one_is_dropped_and_explained(memory: Memory) -> None:
    kept = memory.remember(Draft(text="Nightly backups run at 02:00 UTC on the db-main host.", at=T0)).note.id
    again = memory.remember(  # not the very same text, which remember would answer with the first note
        Draft(text="nightly backups run at 02:00 UTC on the db-main host.", at=T0 + timedelta(hours=1))
    )
    other_day = memory.remember(
        Draft(text="Nightly backups run at 03:00 UTC on the db-main host.", at=T0 + timedelta(hours=2))
    )
    result = memory.recall("When do nightly backups run?")
    heads = [c.heads[0].id for c in result.chains]
    assert other_day.note.id in heads  # different numbers: a disagreement, never a duplicate
    duplicate = [o for o in result.omitted if o.reason == "duplicate"]
    assert len(duplicate) == 1
    assert {kept, again.note.id} - set(heads) == {duplicate[0].entry.note_id}
    assert duplicate[0].duplicate_of in {c.chain_id for c in result.chains}

    why = memory.why_excluded(duplicate[0].entry.note_id, query="When do nightly backups run?")
    assert why.verdict == "excluded" and why.reasons[-1].stage == "diversity"


def test_the_near_duplicate_pass_never_drops_a_correction(memory: Memory) -> None:
    old = memory.remember(Draft(text="The API gateway listens on port 8080.", at=T0)).note.id
    fixed = memory.correct(
        old, Draft(text="The API gateway listens on port 9090."), reason="moved in the April migration"
    )
    echo = memory.remember(Draft(text="the API gateway listens on port 9090.", at=T0 + timedelta(days=30))).note.id
    assert echo != fixed.note.id
    result = memory.recall("Which port does the API gateway listen on?")
    chains = {c.heads[0].id: c for c in result.chains}
    assert fixed.note.id in chains  # the corrected chain is kept whole, history and all
    assert [h.note.id for h in chains[fixed.note.id].history] == [old]
    assert all(o.entry.note_id != fixed.note.id for o in result.omitted)
    assert echo in chains or any(o.reason == "duplicate" and o.entry.note_id == echo for o in result.omitted)


def test_budgets_can_be_counted_in_another_unit(db: str, embedder: SentenceTransformerEmbedder) -> None:
    words = Memory(
        db,
        embedder,
        settings=RetrievalSettings(count_tokens=lambda t: len(t.split()), note_overhead=0, chain_overhead=0),
    )
    words.remember(Draft(text="the service listens on port 9090", at=T0))
    result = words.recall("which port does the service listen on?", budget_tokens=6)
    assert result.used_tokens == 6 and result.chains[0].tokens == 6
    assert words.recall("which port does the service listen on?", budget_tokens=5).chains == []


def test_a_note_is_delivered_once_even_when_it_is_both_an_entry_and_a_prerequisite(memory: Memory) -> None:
    base = memory.remember(Draft(text="The CI test suite needs Postgres 16.", at=T0)).note.id
    top = memory.remember(
        Draft(text="The CI test suite runs on the db runner, which has Postgres 16.", at=T0), depends_on=[base]
    )
    result = memory.recall("What does the CI test suite need?")
    trace_ids = [h.id for c in result.chains for h in c.heads] + [p.id for c in result.chains for p in c.prerequisites]
    assert sorted(trace_ids) == sorted({base, top.note.id})
    assert result.used_tokens == sum(c.tokens for c in result.chains)


def test_equal_scores_share_a_rank_so_recall_does_not_change_between_calls(memory: Memory) -> None:
    twins = [
        memory.remember(Draft(text="Sprint recap: the backlog was groomed.", at=T0 + timedelta(minutes=i)))
        for i in range(2)
    ]
    memory.remember(Draft(text="Sprint recap: two bugs moved to the next sprint.", at=T0 + timedelta(minutes=3)))
    query = "what happened to the backlog in the sprint recap?"
    trace = memory.trace(query)
    first, second = (trace.candidates[t.note.id] for t in twins)
    assert (first.dense_rank, first.text_rank, first.score) == (second.dense_rank, second.text_rank, second.score)
    runs = {memory.recall(query).model_dump_json() for _ in range(3)}
    assert len(runs) == 1


def test_a_prerequisite_that_ranks_first_brings_its_dependant_up_with_it(memory: Memory) -> None:
    base = memory.remember(
        Draft(text="Dana is assigned access bundle B7 for the production backup system.", at=T0)
    ).note.id
    mid = memory.remember(Draft(text="Bundle B7 maps to the restore-operator role.", at=T0), depends_on=[base]).note.id
    top = memory.remember(Draft(text="The restore-operator role may start a restore.", at=T0), depends_on=[mid]).note.id
    query = "Can Dana start a restore of the production backup system?"
    trace = memory.trace(query)
    assert max(trace.candidates.values(), key=lambda c: c.score).note.id == base  # the query names the base best
    result = memory.recall(query)
    first = result.chains[0]
    assert first.heads[0].id == top and first.entry is not None and first.entry.lifted_by == base
    assert [p.id for p in first.prerequisites] == [mid, base]
    delivered_ids = [h.id for c in result.chains for h in c.heads] + [
        p.id for c in result.chains for p in c.prerequisites
    ]
    assert sorted(delivered_ids) == sorted([base, mid, top])
    why = memory.why_excluded(top, query=query)
    assert "moved up to arrive with " + base in why.reasons[-1].detail


def test_a_chain_scores_its_best_entry_and_a_tenth_of_each_other(memory: Memory) -> None:
    old = memory.remember(Draft(text="The nightly build runs on runner-3 in the basement rack.", at=T0)).note.id
    new = memory.correct(old, Draft(text="The nightly build runs on runner-7 now."), reason="runner-3 retired").note.id
    query = "Which runner does the nightly build run on?"
    trace = memory.trace(query)
    best, other = sorted((trace.candidates[old], trace.candidates[new]), key=lambda c: -c.score)
    assert best.qualified and other.qualified
    chain = next(c for c in trace.chains if c.heads[0].id == new)
    assert chain.entry is not None and chain.entry.note_id == best.note.id
    assert chain.entry.chain_score == pytest.approx(best.score + 0.1 * other.score)


def test_a_conclusion_whose_premise_also_matches_outranks_a_look_alike_that_matches_better_alone(
    memory: Memory,
) -> None:
    def note(text: str, minutes: int, depends_on: tuple[str, ...] = ()) -> str:
        at = T0 + timedelta(minutes=minutes)
        return memory.remember(Draft(text=text, at=at), depends_on=list(depends_on)).note.id

    premise = note("Alice is assigned access bundle quartz-42 for the production backup system.", 0)
    mapping = note("Access bundle quartz-42 maps to clearance code alpha-29.", 1, (premise,))
    rule = note("Clearance code alpha-29 may review production backups but may not delete them.", 2, (mapping,))
    look_alike = note("Production backup staff can delete old snapshots during cleanup.", 3)
    query = "Can Alice delete the production backup?"
    trace = memory.trace(query)
    scores = {i: trace.candidates[i].score for i in (premise, rule, look_alike)}
    assert scores[look_alike] > max(scores[rule], scores[premise])  # it matches better than either alone
    assert trace.chains[0].heads[0].id == rule
    assert trace.chains[0].entry is not None
    assert trace.chains[0].entry.chain_score == pytest.approx(scores[rule] + 0.1 * scores[premise])

    whole = next(c for c in memory.recall(query, budget_tokens=4000).chains if c.heads[0].id == rule)
    tight = memory.recall(query, budget_tokens=whole.tokens)  # room for the reasoning chain, nothing else
    assert delivered(tight) == {rule, mapping, premise}
    assert look_alike in {o.entry.note_id for o in tight.omitted if o.reason == "budget"}


OLD_PORT = (
    "We spent the morning on the quarterly planning review with the platform team. The payments gateway "
    "listens on port 8080 behind the internal balancer. Afterwards we discussed hiring, the offsite in "
    "Lisbon and the new on-call rota for the holidays."
)
PORT_QUERY = "Which port does the payments gateway listen on?"


def test_history_that_does_not_fit_whole_arrives_clipped_marked_counted_and_explained(memory: Memory) -> None:
    from corrigenda.server import render
    from corrigenda.store.tokens import estimate_tokens

    old = memory.remember(Draft(text=OLD_PORT, at=T0)).note.id
    new = memory.correct(old, Draft(text="The payments gateway listens on port 9090 now."), reason="April move")
    whole = memory.recall(PORT_QUERY, budget_tokens=4000).chains[0]
    assert whole.history[0].clipped is None and whole.history[0].note.text == OLD_PORT

    budget = whole.tokens - 20
    result = memory.recall(PORT_QUERY, budget_tokens=budget)
    (chain,) = result.chains
    assert [h.id for h in chain.heads] == [new.note.id]
    (entry,) = chain.history
    assert entry.note.id == old and chain.trimmed_history == 0
    assert entry.clipped is not None
    text = entry.note.text
    assert text.startswith("…") and text.endswith("…") and "port 8080" in text
    assert text.strip("…") in OLD_PORT
    assert (entry.clipped.kept_tokens, entry.clipped.whole_tokens) == (estimate_tokens(text), estimate_tokens(OLD_PORT))
    assert entry.clipped.kept_tokens < entry.clipped.whole_tokens
    # counted: the chain's text, the rendering's overheads and the clip's mark, inside the budget
    head_cost = estimate_tokens(chain.heads[0].text) + 18
    history_cost = estimate_tokens(text) + estimate_tokens("April move") + 18 + 18 + 8
    assert chain.tokens == 16 + head_cost + history_cost
    assert result.used_tokens == chain.tokens <= budget

    shown = render.recall(result)
    assert f"[clipped: {entry.clipped.kept_tokens} of {entry.clipped.whole_tokens} tokens]" in shown
    assert estimate_tokens("\n".join(render.chain(chain, 1))) <= chain.tokens

    why = memory.why_excluded(old, query=PORT_QUERY, budget_tokens=budget)
    assert why.verdict == "history"
    assert [r.stage for r in why.reasons][-2:] == ["budget", "delivered"]
    assert f"clipped to fit budget_tokens={budget}" in why.reasons[-2].detail
    assert f"{entry.clipped.kept_tokens} of its {entry.clipped.whole_tokens} tokens" in why.reasons[-2].detail


def test_history_with_too_little_room_for_a_clause_is_left_out_and_counted(memory: Memory) -> None:
    old = memory.remember(Draft(text=OLD_PORT, at=T0)).note.id
    memory.correct(old, Draft(text="The payments gateway listens on port 9090 now."), reason="April move")
    heads_only = memory.recall(PORT_QUERY, include_history=False).chains[0].tokens
    # the entry's fixed costs (reason, two overheads, the mark) leave less than MIN_CLIP_TOKENS of text
    result = memory.recall(PORT_QUERY, budget_tokens=heads_only + 60)
    (chain,) = result.chains
    assert chain.history == [] and chain.trimmed_history == 1
    why = memory.why_excluded(old, query=PORT_QUERY, budget_tokens=heads_only + 60)
    assert why.verdict == "excluded" and why.reasons[-1].stage == "budget"
    assert "trimmed" in why.reasons[-1].detail


def test_recall_marks_the_older_of_two_unlinked_notes_of_one_subject_and_keeps_the_order(memory: Memory) -> None:
    """The mark annotates and never moves a chain: the older note matches the question better and stays
    first, marked, with the newer one after it (a guess reordering chains put a right, current note
    below a wrong one: issue 49)."""
    old = memory.remember(
        Draft(text="The payments gateway's connect timeout is 5 seconds.", subject="payments.timeout", at=T0)
    ).note
    memory.remember(Draft(text="My stamp album holds 40 stamps from Portugal.", at=T0 + timedelta(days=1)))
    new = memory.remember(Draft(text="Gateway: now 9 s.", subject="payments.timeout", at=T0 + timedelta(days=2))).note
    result = memory.recall("What is the payments gateway's connect timeout?", budget_tokens=400)
    chains = {c.heads[0].id: c for c in result.chains}
    assert [c.heads[0].id for c in result.chains][:2] == [old.id, new.id]
    assert chains[old.id].possibly_outdated_by == new.id
    assert chains[old.id].outdated_reason == "same subject 'payments.timeout'; 5 → 9"
    assert chains[new.id].possibly_outdated_by is None
    # both kept, nothing stored
    assert memory.history(old.id).events == [] and memory.history(new.id).events == []
    assert [h.id for h in memory.history(old.id).chain.heads] == [old.id]


def test_notes_without_a_subject_are_never_marked_even_when_their_words_frame_another_value(memory: Memory) -> None:
    """The statement rule still proposes an update to the writer, but recall does not mark on it: on a day
    of ordinary notes it marked different facts said in the same words (bench/false_marks.py)."""
    staging = memory.remember(Draft(text="Staging runs 3 replicas of the payments service.", at=T0)).note
    production = memory.remember(
        Draft(text="Production runs 6 replicas of the payments service.", at=T0 + timedelta(days=1))
    )
    assert [p.note.id for p in production.likely_updates] == [staging.id]  # proposed to the writer
    result = memory.recall("How many replicas of the payments service run?")
    assert {c.heads[0].id for c in result.chains} >= {staging.id, production.note.id}
    assert all(c.possibly_outdated_by is None for c in result.chains)


def test_a_value_that_ends_its_sentence_is_an_update_when_the_same_words_lead_to_it(memory: Memory) -> None:
    """ "listens on port 8080." → "listens on port 9090.": nothing follows either value, which counts as a
    word in common on that side; a value in another sentence's words is not an update."""
    old = memory.remember(Draft(text="The payments API listens on port 8080.", at=T0)).note
    memory.remember(Draft(text="The payments team meets on floor 4.", at=T0 + timedelta(hours=1)))
    new = memory.remember(Draft(text="The payments API listens on port 9090.", at=T0 + timedelta(days=1)))
    assert [p.note.id for p in new.likely_updates] == [old.id]
    assert "8080 → 9090" in new.likely_updates[0].reason


def test_notes_linked_by_a_correction_are_not_marked_possibly_outdated(memory: Memory) -> None:
    old = memory.remember(Draft(text="I have added 17 new postcards to my collection so far.", at=T0)).note
    new = memory.correct(old.id, Draft(text="I have added 25 new postcards to my collection so far."), reason="more")
    result = memory.recall("How many new postcards have I added to my collection?", budget_tokens=400)
    assert [c.heads[0].id for c in result.chains][:1] == [new.note.id]
    assert all(c.possibly_outdated_by is None for c in result.chains)


def test_recall_marks_exactly_the_conflicts_of_notes_filed_under_one_subject() -> None:
    """On seed 000's notes with a few subjects mixed in, unlinked_conflicts finds what comparing every
    pair of same-subject notes with `conflict` finds, and nothing of the pairs that only say the same
    words around another value (which `conflict` alone would take for updates)."""
    data = Path(__file__).resolve().parents[2] / "bench" / "data" / "seed000" / "notes.json"
    texts = [e["text"] for e in json.loads(data.read_text())["timeline"] if e.get("text")][:117]
    texts += ["The API listens on port 8080.", "She ran 5 miles on it.", "The API listens on port 9090."]
    texts += ["She ran 7 miles on it."]
    subjects = {0: "db.pool", 7: "DB pool ", 30: "db_pool", 117: "api.port", 119: "api.port"}
    start = datetime(2026, 1, 1, tzinfo=UTC)
    heads = [
        NoteView(id=f"n{i:03}", scope="s", text=text, subject=subjects.get(i), recorded_at=start + timedelta(minutes=i),
                 state=NoteState.ACTIVE)
        for i, text in enumerate(texts)
    ]  # fmt: skip
    chains = [Chain(chain_id=h.id, status=ChainStatus.CURRENT, heads=[h], history=[], prerequisites=[]) for h in heads]
    expected: dict[str, str] = {}  # older note → the newest note of its subject that conflicts with it
    for older in heads:
        for newer in heads:  # in time order, so the last found is the newest
            same = subject_key(older.subject) and subject_key(older.subject) == subject_key(newer.subject)
            if same and newer.recorded_at > older.recorded_at and conflict(older, newer) is not None:
                expected[older.id] = newer.id
    found = {chain_id: o.by for chain_id, o in unlinked_conflicts(chains).items()}
    assert found == expected and "n117" in found  # the port, filed under one subject
    assert conflict(heads[118], heads[120]) is not None and "n118" not in found  # the miles, said alike


def test_an_outdated_chain_names_the_newest_conflicting_note_and_on_a_tie_the_chain_listed_first() -> None:
    """Many notes of one subject (recall may keep 30 of one office's opening hours), some recorded at the
    same minute, some chains with two heads: each older chain is named outdated by the newest note that
    conflicts with one of its heads, of the chain listed first among equally new ones, as comparing every
    pair says."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    heads = [
        NoteView(id=f"n{i:02}", scope="s", text=f"The Zurich office opens at {6 + i % 5}:00.", subject="opens:zurich",
                 recorded_at=start + timedelta(minutes=i // 3), state=NoteState.ACTIVE)
        for i in range(24)
    ]  # fmt: skip
    grouped = [heads[i : i + 2] if i % 7 == 0 else heads[i : i + 1] for i in range(24) if i % 7 != 1]
    chains = [
        Chain(chain_id=f"c{n:02}", status=ChainStatus.CURRENT, heads=group, history=[], prerequisites=[])
        for n, group in enumerate(grouped)
    ]
    expected: dict[str, str] = {}
    for c, chain in enumerate(chains):
        best: tuple[datetime, int, int] | None = None  # the newest; then the chain, the head listed first
        for d, other in enumerate(chains):
            for y, newer in enumerate(other.heads):
                for older in chain.heads:
                    if d == c or newer.recorded_at <= older.recorded_at or conflict(older, newer) is None:
                        continue
                    key = (newer.recorded_at, -d, -y)
                    if best is None or key > best:
                        best = key
                        expected[chain.chain_id] = newer.id
    found = {chain_id: o.by for chain_id, o in unlinked_conflicts(chains).items()}
    assert found == expected
    assert len(found) >= 15 and len({o.by for o in unlinked_conflicts(chains).values()}) >= 2


def test_a_likely_update_pairs_each_old_value_with_the_new_one_of_its_unit(memory: Memory) -> None:
    """Two values changed in one statement: each old value is paired with the new one of the same unit (the
    word after it), whatever the order, not listed as two sorted sets ("2, 5432 → 5433, 7")."""
    memory.remember(Draft(text="The staging database runs on host db-2, port 5432", at=T0))
    new = memory.remember(Draft(text="The staging database moved to host db-7, port 5433", at=T0 + timedelta(days=1)))
    assert new.likely_updates[0].reason.startswith("2 → 7, 5432 → 5433 in the same statement")
    same = memory.remember(Draft(text="cache: 30 s, 2 shards", subject="cache", at=T0 + timedelta(days=2)))
    assert same.likely_updates == []
    newer = memory.remember(Draft(text="cache: 45 s, 4 shards", subject="cache", at=T0 + timedelta(days=3)))
    assert newer.likely_updates[0].reason == "same subject 'cache'; 30 → 45, 2 → 4"
    memory.remember(Draft(text="The build box has 8 cores and 16 GB", subject="box", at=T0 + timedelta(days=4)))
    box = memory.remember(Draft(text="The build box has 32 GB and 4 cores", subject="box", at=T0 + timedelta(days=5)))
    assert box.likely_updates[0].reason == "same subject 'box'; 8 → 4, 16 → 32"


def test_a_note_whose_stored_vector_cannot_be_read_is_named_and_does_not_take_its_scope_down(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """Rows written before imports checked vectors (nulls, a JSON writer's NaN; NaN itself): recall,
    remember and why_excluded still work for the scope, the notes are still found by their words, a
    warning names each of them (once), and an export leaves their vectors out for the import to embed."""
    good = memory.remember(Draft(text="The service listens on port 9090"), scope="ops").note
    nulls = Note(
        id=new_note_id(), text="The service listened on port 8080 before the move", scope="ops", recorded_at=T0
    )
    nans = Note(id=new_note_id(), text="The service port was 7070 in the first draft", scope="ops", recorded_at=T0)
    unreadable: list[tuple[Note, list[float | None], bool]] = [
        (nulls, [None] * 384, True),
        (nans, [math.nan] * 384, True),
    ]
    memory.tables.add_notes(unreadable, embedder.name)  # type: ignore[arg-type]  # as an older import wrote them
    caplog.set_level(logging.WARNING, logger="corrigenda.store")

    found = memory.recall("which port does the service listen on?", scope="ops")
    assert {good.id, nulls.id, nans.id} <= delivered(found)  # the two by full text
    assert all(c.entry is None or c.entry.similarity is None or math.isfinite(c.entry.similarity) for c in found.chains)
    assert found.unreadable == sorted([nulls.id, nans.id])  # the result names them
    written = memory.remember(Draft(text="The service port is set in service.toml"), scope="ops")
    assert written.changed and set(written.unreadable) <= {nulls.id, nans.id} and written.unreadable
    why = memory.why_excluded(nulls.id, query="which port does the service listen on?", scope="ops")
    assert why.note_id == nulls.id
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [sum(n.id in w for w in warnings) for n in (nulls, nans)] == [1, 1], warnings

    exported = [json.loads(line) for line in memory.export("ops", vectors=True)]
    assert [r["vector"] for r in exported if r.get("id") in (nulls.id, nans.id)] == [None, None]
    copy = Memory(str(tmp_path / "copy"), embedder)
    copy.import_lines(memory.export("ops", vectors=True))
    assert copy.tables.search.vectors([nulls.id, nans.id]).keys() == {nulls.id, nans.id}


TOPICS = ["gardening tomatoes", "a trip to Lisbon", "the new bicycle", "baking sourdough", "a jazz concert",
          "learning Portuguese", "painting the fence", "the dentist appointment"]  # fmt: skip


def test_min_entries_brings_the_best_candidates_in_below_the_similarity_floor(memory: Memory) -> None:
    """On a chat history a question shares little with, nothing reaches the floor; a caller who wants k
    candidates asks for them, and gets the k best by fused score, more when more qualify."""
    chat = [f"On day {i} we talked about {TOPICS[i % len(TOPICS)]} with friend {i}" for i in range(30)]
    memory.import_notes([Draft(text=t) for t in chat], scope="chat")
    query = "What colour is my car?"
    assert memory.recall(query, scope="chat", budget_tokens=100_000).chains == []
    trace = memory.trace(query, scope="chat")
    best = [c.note.id for c in trace.candidates.values()][:3]
    three = memory.recall(query, scope="chat", budget_tokens=100_000, min_entries=3)
    assert [c.entry.note_id for c in three.chains if c.entry] == best
    # beyond the searches' usual depth (per_retriever, 20): they look deeper
    assert len(memory.recall(query, scope="chat", budget_tokens=100_000, min_entries=25).chains) == 25
    # notes that qualify come in whatever k is
    concert = memory.recall("which friend came to the jazz concert?", scope="chat", budget_tokens=100_000)
    assert len(memory.recall("which friend came to the jazz concert?", scope="chat", budget_tokens=100_000,
                             min_entries=1).chains) == len(concert.chains) > 1  # fmt: skip
    for wrong in (-1, retrieval.MAX_ENTRIES + 1):
        with pytest.raises(InvalidArgument) as refused:
            memory.recall(query, scope="chat", min_entries=wrong)
        assert refused.value.field == "min_entries"
