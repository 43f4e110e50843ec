"""Seed 000's experiment: does relevance ranking separate a superseded note from its successor?

The store (`bench/data/seed000/notes.json`, written for this project; see its README) holds 300
English engineering-memory notes: 70 topics with a lifecycle (40 corrected once, 10 corrected
twice, 14 revoked with no replacement, 6 corrected and then the correction revoked, so the
original is current again), 55 topical near-neighbours of those topics in no lifecycle relation,
and 109 unrelated notes. Corrections are often terse after verbose originals. The benchmark
replays the timeline into a fresh LanceDB store through `Memory.remember` / `correct` / `revoke`
with the frozen timestamps (`at=`), compacts it once (so that every note is in the full-text
index and entry ranks do not depend on when background upkeep ran), checks the engine's folded
state of every note against the frozen expectation, then asks the 134 frozen queries (85 about
lifecycle topics, 22 about near-neighbours, 27 about unrelated notes) of every policy below, all in
one process over the same notes and the same encoder (all-MiniLM-L6-v2 through
`SentenceTransformerEmbedder`, whose unit vectors the baselines use as they are; corrigenda embeds
with the same object).

Policies
- top-k, k = 5 and 10: the k notes of highest cosine similarity to the query, over ALL notes
  whatever their state (ties by data key).
- top-k + MMR (Carbonell & Goldstein 1998): candidates are the plain top 20; select k greedily by
  argmax  λ·cos(q, d) - (1 - λ)·max_{s ∈ selected} cos(d, s), λ = 0.5 and 0.7 (the first pick is the
  top-1; Sim2 is the cosine between note embeddings).
- corrigenda @ top-k budget: `Memory.recall(query, budget_tokens=B)` (hybrid entry points, closure
  over lifecycle edges, chains packed into the budget), where B is, per query, what the plain
  top-k list of that query costs: Σ over its notes of `estimate_tokens(text)` + the per-note
  overhead corrigenda counts (`RetrievalSettings().note_overhead`, 18). Corrigenda pays its own
  per-chain header (16) and history framing inside that same budget. A third, supplementary row
  keeps the top-10 budget but passes max_chains=5, so that history fits (see CORRIGENDA below).

A note's expected state (active / superseded / revoked at recall time) and each topic's current
head come from the data file, not from the engine; the engine's fold is checked against them.

Metrics (per policy; every rate is printed with its count)
(a) Separation failure. A delivered note is *stale* if its expected state is superseded or revoked.
    A stale note is *closed* when
    - superseded: every current head of its chain is delivered too; for corrigenda it must sit in
      the history (role superseded) of a chain whose delivered heads are exactly those heads;
    - revoked: the revocation is shown with it. A ranked list of notes cannot show an event, so a
      revoked note in a baseline list is never closed: that is why superseded and revoked are
      printed apart. For corrigenda it must sit in history with role revoked and a reason.
    A stale note that corrigenda delivers as a head is an engine error and is not closed.
    A query *fails* if any stale note it delivered is not closed. Columns:
    - fail | stale: failing queries / queries that delivered at least one stale note;
    - fail | all: failing queries / all 134 queries;
    - superseded w/o head: queries with an unclosed superseded note / queries that delivered at
      least one superseded note (the seed's first number);
    - revoked w/o revocation: the same for revoked notes (100% for a list, by construction);
    - on-topic sup. w/o head: among lifecycle queries that delivered a superseded note of the topic
      they ask about, those that lacked its head (the other failures come from stale notes of
      other topics that ranking pulled in).
(b) Diversity drop. A *pair* is (p, s): p a superseded note, s a current head of p's chain, both
    in the plain top-k of the query (same k). *succ. dropped*: pairs where the policy delivered p
    but not s (the reranking removed the correction and kept what it corrects) / pairs. *pred.
    dropped*: the reverse (s delivered, p not), for comparison. For corrigenda "delivered" means
    anywhere in the result (head or history); its own near-duplicate pass is also checked directly:
    every delivered chain must carry exactly the expected current heads of its claim, or it is
    listed as a problem. (For corrigenda, pred. dropped is history left out for the budget.)
(c) Tokens, means per query. *tok/q*: a list costs Σ (estimate_tokens(text) + 18) over its notes;
    corrigenda costs `used_tokens` (checked to equal the sum of its chains' tokens and to stay
    within its budget, *budget/q*). *closure ovh/q* (corrigenda) = used_tokens - what the entry note
    of each delivered chain would cost alone as a plain list item (estimate_tokens + 18): chain
    headers, successor heads, history notes and their reasons, beyond the notes relevance chose (it
    can be negative for a chain entered through a verbose stale note whose terse head replaces it).
    *stale tok/q*: tokens spent on superseded or revoked notes, unmarked in a list, marked as history
    in corrigenda. *hist. trimmed/q*: history entries corrigenda left out for the budget. Printed
    below the table for corrigenda: estimate_tokens of the text `recall_chains` hands the agent
    (`server/render.py`), which also lists every omitted chain and is not counted in used_tokens.
(d) Current truth. For a query whose target exists (the current head of its lifecycle topic, or the
    near-neighbour or unrelated note it asks about; the 15 queries about revoked topics have none):
    whether every target note was delivered (for corrigenda: as a head). *truth: lifecycle* over
    the 70 lifecycle queries with a current head, *truth: other* over the 49 others. *retraction
    told*, over the 15 queries about revoked topics: whether the revoked note was delivered with
    its revocation (never possible for a list).

Run from the repository root:

    .venv/bin/python bench/seed000_closure.py [--json PATH]

It prints two tables, then every corrigenda failure and engine problem with details, and the
queries whose current truth corrigenda did not deliver; --json also writes all figures and the
per-query records of every policy. Exit status 1 if the engine disagreed with the expected states,
left a stale note unclosed, dropped a successor or broke its own token accounting. About 2-4 minutes
on 2 cores, most of it writing the store. The lists are exactly reproducible; corrigenda's rows can
differ by a chain in a query or two between runs, because LanceDB returns notes of equal BM25 score
at the full-text retriever's cut-off (`per_retriever`) in no fixed order.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from corrigenda.server import render
from corrigenda.store import Draft, Memory, RetrievalSettings, SentenceTransformerEmbedder
from corrigenda.store.tokens import estimate_tokens
from corrigenda.store.views import RecallResult
from harness import markdown_table, write_results

DATA = Path(__file__).resolve().parent / "data" / "seed000" / "notes.json"
KS = (5, 10)
LAMBDAS = (0.5, 0.7)
MMR_CANDIDATES = 20
SETTINGS = RetrievalSettings()
NOTE_OVERHEAD = SETTINGS.note_overhead
CHAIN_OVERHEAD = SETTINGS.chain_overhead
STALE = ("superseded", "revoked")
# (row, the k whose plain list sets the budget, max_chains). The last row is a supplement: the same
# budget as top-10 but at most 5 chains, so that history fits and the closure check on superseded
# notes in history (and its cost) is exercised; at the two plain budgets heads of lower chains come
# before any history (the engine packs every chain's heads first).
CORRIGENDA: list[tuple[str, int, int | None]] = [
    *((f"corrigenda @ top-{k} budget", k, None) for k in KS),
    ("corrigenda @ top-10 budget, <=5 chains", 10, 5),
]

Vector = npt.NDArray[np.float64]


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- the data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    scope: str
    recall_at: datetime
    timeline: list[dict[str, Any]]
    expected: dict[str, dict[str, Any]]  # key → {state, topic, current}
    queries: list[dict[str, Any]]
    texts: dict[str, str]  # key → text, in timeline order

    @classmethod
    def load(cls, path: Path) -> Dataset:
        raw = json.loads(path.read_text())
        texts = {op["key"]: op["text"] for op in raw["timeline"] if op["op"] != "revoke"}
        return cls(raw["scope"], parse_time(raw["recall_at"]), raw["timeline"], raw["expected"], raw["queries"], texts)

    def state(self, key: str) -> str:
        return str(self.expected[key]["state"])

    def current(self, key: str) -> list[str]:
        """The current head(s) of the claim `key` belongs to (itself, for a note with no lifecycle)."""
        return list(self.expected[key]["current"])

    def cost(self, key: str) -> int:
        return estimate_tokens(self.texts[key]) + NOTE_OVERHEAD


def build_store(memory: Memory, data: Dataset) -> dict[str, str]:
    """Replay the timeline; return data key → note id."""
    ids: dict[str, str] = {}
    for op in data.timeline:
        at = parse_time(op["at"])
        if op["op"] == "remember":
            ids[op["key"]] = memory.remember(Draft(text=op["text"], kind=op["kind"], at=at), scope=data.scope).note.id
        elif op["op"] == "correct":
            ids[op["key"]] = memory.correct(ids[op["of"]], Draft(text=op["text"], at=at), reason=op["reason"]).note.id
        elif op["op"] == "revoke":
            if not memory.revoke(ids[op["of"]], reason=op["reason"], at=at).changed:
                raise RuntimeError(f"revoking {op['of']} changed nothing")
        else:
            raise ValueError(f"unknown op {op['op']!r}")
    return ids


def check_states(memory: Memory, data: Dataset, ids: dict[str, str]) -> list[str]:
    """Where the engine's fold disagrees with the frozen expected states and heads."""
    problems = []
    key_of = {v: k for k, v in ids.items()}
    for key, note_id in ids.items():
        history = memory.history(note_id, as_of=data.recall_at)
        if history.note.state.value != data.state(key):
            problems.append(f"{key}: engine state {history.note.state.value}, expected {data.state(key)}")
        heads = sorted(key_of[h.id] for h in history.chain.heads)
        if heads != sorted(data.current(key)):
            problems.append(f"{key}: engine heads {heads}, expected {sorted(data.current(key))}")
    return problems


# -- what a policy delivered ----------------------------------------------------------------------

As = Literal["note", "head", "history", "prerequisite"]


@dataclass
class Item:
    key: str
    delivered_as: As
    chain: int | None = None  # index of its chain in a corrigenda result
    role: str | None = None  # the history role the engine gave it
    reason: str | None = None


@dataclass
class Answer:
    items: list[Item]
    tokens: int
    budget: int | None = None
    chain_heads: list[list[str]] = field(default_factory=list)  # corrigenda: delivered heads per chain
    chain_entries: list[str] = field(default_factory=list)  # corrigenda: entry note per chain
    history_tokens: int = 0
    trimmed_history: int = 0  # corrigenda: history entries left out for the budget
    omitted: dict[str, int] = field(default_factory=dict)  # corrigenda: chains left out, by reason
    rendered_tokens: int | None = None  # corrigenda: estimate_tokens of the text recall_chains returns
    problems: list[str] = field(default_factory=list)  # corrigenda: broken accounting or shape

    def keys(self) -> list[str]:
        return [i.key for i in self.items]


def list_answer(data: Dataset, keys: Sequence[str]) -> Answer:
    return Answer([Item(k, "note") for k in keys], sum(data.cost(k) for k in keys))


def top_k(sims: Vector, keys: Sequence[str], k: int) -> list[int]:
    """Indices of the k most similar notes, ties by key."""
    return sorted(range(len(keys)), key=lambda i: (-sims[i], keys[i]))[:k]


def mmr(sims: Vector, gram: npt.NDArray[np.float64], candidates: Sequence[int], k: int, lam: float) -> list[int]:
    selected: list[int] = []
    rest = list(candidates)  # best first, so max() breaks ties by similarity rank
    while rest and len(selected) < k:

        def marginal(i: int) -> float:
            redundancy = max((gram[i, j] for j in selected), default=0.0)
            return float(lam * sims[i] - (1 - lam) * redundancy)

        best = max(rest, key=marginal)
        selected.append(best)
        rest.remove(best)
    return selected


def corrigenda_answer(data: Dataset, result: RecallResult, key_of: dict[str, str], budget: int) -> Answer:
    items: list[Item] = []
    heads: list[list[str]] = []
    entries: list[str] = []
    problems: list[str] = []
    history_tokens = 0
    for c, chain in enumerate(result.chains):
        heads.append([key_of[h.id] for h in chain.heads])
        items += [Item(key_of[h.id], "head", c) for h in chain.heads]
        items += [Item(key_of[h.note.id], "history", c, h.role.value, h.reason) for h in chain.history]
        items += [Item(key_of[p.id], "prerequisite", c) for p in chain.prerequisites]
        assert chain.entry is not None
        entries.append(key_of[chain.entry.note_id])
        framing = CHAIN_OVERHEAD + sum(data.cost(k) for k in heads[-1])
        framing += sum(data.cost(key_of[p.id]) for p in chain.prerequisites)
        history_tokens += chain.tokens - framing
        if chain.history and not chain.heads and data.current(key_of[chain.history[0].note.id]):
            problems.append(f"chain {chain.chain_id} delivers history without its current head")
    if sum(ch.tokens for ch in result.chains) != result.used_tokens:
        problems.append(f"used_tokens {result.used_tokens} != sum of chain tokens")
    if result.used_tokens > budget:
        problems.append(f"used_tokens {result.used_tokens} > budget {budget}")
    omitted: dict[str, int] = {}
    for o in result.omitted:
        omitted[o.reason] = omitted.get(o.reason, 0) + 1
    trimmed = sum(ch.trimmed_history for ch in result.chains)
    rendered = estimate_tokens(render.recall(result))
    return Answer(
        items, result.used_tokens, budget, heads, entries, history_tokens, trimmed, omitted, rendered, problems
    )


# -- scoring one answer ---------------------------------------------------------------------------


@dataclass
class Score:
    stale: list[str]
    open_superseded: list[str]
    open_revoked: list[str]
    on_topic_superseded: list[str]  # delivered superseded notes of the topic the query is about
    on_topic_open: list[str]  # ... of them without their head
    pairs: list[tuple[str, str]]
    successor_dropped: list[tuple[str, str]]  # p delivered, s not
    predecessor_dropped: list[tuple[str, str]]  # s delivered, p not
    target_delivered: bool | None  # None: the query has no current target
    retraction_told: bool | None  # None: the query is not about a revoked topic
    closure_overhead: int
    stale_tokens: int
    shape_problems: list[str]

    @property
    def failed(self) -> bool:
        return bool(self.open_superseded or self.open_revoked)


def closed(data: Dataset, answer: Answer, item: Item) -> bool:
    state = data.state(item.key)
    heads = data.current(item.key)
    if item.delivered_as == "note":
        return state == "superseded" and set(heads) <= set(answer.keys())
    if item.delivered_as != "history" or item.role != state or item.chain is None:
        return False  # a stale head, or history under the wrong role
    if state == "revoked":
        return bool(item.reason)
    return bool(heads) and sorted(answer.chain_heads[item.chain]) == sorted(heads)


def score(data: Dataset, query: dict[str, Any], answer: Answer, plain: Sequence[str]) -> Score:
    delivered = set(answer.keys())
    stale_items = [i for i in answer.items if data.state(i.key) in STALE]
    open_items = [i for i in stale_items if not closed(data, answer, i)]
    pairs = [(p, s) for p in plain if data.state(p) == "superseded" for s in data.current(p) if s in plain]
    targets: list[str] = query["target"]
    if targets:
        as_heads = {i.key for i in answer.items if i.delivered_as in ("note", "head")}
        target_delivered: bool | None = set(targets) <= as_heads
    else:
        target_delivered = None
    retraction_told = None
    topic = query["topic"]
    on_topic = {i.key for i in stale_items if topic and data.expected[i.key]["topic"] == topic}
    revoked_notes = [k for k, e in data.expected.items() if e["topic"] == topic and e["state"] == "revoked"]
    if topic and not targets and revoked_notes:
        retraction_told = any(i.key in revoked_notes and closed(data, answer, i) for i in stale_items)
    shape = list(answer.problems)
    if answer.budget is not None:
        closure_overhead = answer.tokens - sum(data.cost(k) for k in answer.chain_entries)
        stale_tokens = answer.history_tokens
        for c, heads in enumerate(answer.chain_heads):
            members = [i.key for i in answer.items if i.chain == c and i.delivered_as != "prerequisite"]
            expected = sorted(set(data.current(members[0]))) if members else []
            if sorted(heads) != expected:
                shape.append(f"chain {c} ({members}) delivers heads {sorted(heads)}, expected {expected}")
        stale_heads = [i.key for i in answer.items if i.delivered_as == "head" and data.state(i.key) != "active"]
        shape += [f"{k} delivered as a head but is {data.state(k)}" for k in stale_heads]
    else:
        closure_overhead = 0
        stale_tokens = sum(data.cost(i.key) for i in stale_items)
    return Score(
        stale=[i.key for i in stale_items],
        open_superseded=[i.key for i in open_items if data.state(i.key) == "superseded"],
        open_revoked=[i.key for i in open_items if data.state(i.key) == "revoked"],
        on_topic_superseded=sorted(k for k in on_topic if data.state(k) == "superseded"),
        on_topic_open=[i.key for i in open_items if i.key in on_topic and data.state(i.key) == "superseded"],
        pairs=pairs,
        successor_dropped=[(p, s) for p, s in pairs if p in delivered and s not in delivered],
        predecessor_dropped=[(p, s) for p, s in pairs if s in delivered and p not in delivered],
        target_delivered=target_delivered,
        retraction_told=retraction_told,
        closure_overhead=closure_overhead,
        stale_tokens=stale_tokens,
        shape_problems=shape,
    )


# -- running every policy -------------------------------------------------------------------------


@dataclass
class PolicyRun:
    name: str
    answers: list[Answer] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    seconds: float = 0.0


def run_policies(
    memory: Memory, data: Dataset, ids: dict[str, str], embedder: SentenceTransformerEmbedder
) -> list[PolicyRun]:
    keys = list(data.texts)
    notes = np.array(embedder.embed([data.texts[k] for k in keys]), dtype=np.float64)
    queries = np.array(embedder.embed([q["text"] for q in data.queries]), dtype=np.float64)
    gram = notes @ notes.T
    key_of = {v: k for k, v in ids.items()}

    runs: dict[str, PolicyRun] = {}

    def record(name: str, q: int, answer: Answer, plain: Sequence[str], seconds: float) -> None:
        run = runs.setdefault(name, PolicyRun(name))
        run.answers.append(answer)
        run.scores.append(score(data, data.queries[q], answer, plain))
        run.seconds += seconds

    for q, query in enumerate(data.queries):
        sims = notes @ queries[q]
        for k in KS:
            started = time.perf_counter()
            plain = [keys[i] for i in top_k(sims, keys, k)]
            record(f"top-{k}", q, list_answer(data, plain), plain, time.perf_counter() - started)
            candidates = top_k(sims, keys, MMR_CANDIDATES)
            for lam in LAMBDAS:
                started = time.perf_counter()
                chosen = [keys[i] for i in mmr(sims, gram, candidates, k, lam)]
                record(f"top-{k} + MMR λ={lam}", q, list_answer(data, chosen), plain, time.perf_counter() - started)
        for name, k, max_chains in CORRIGENDA:
            plain = [keys[i] for i in top_k(sims, keys, k)]
            budget = sum(data.cost(key) for key in plain)
            started = time.perf_counter()
            result = memory.recall(query["text"], scope=data.scope, budget_tokens=budget, max_chains=max_chains)
            seconds = time.perf_counter() - started
            record(name, q, corrigenda_answer(data, result, key_of, budget), plain, seconds)
    order = [f"top-{k}" for k in KS] + [f"top-{k} + MMR λ={lam}" for k in KS for lam in LAMBDAS]
    order += [name for name, _, _ in CORRIGENDA]
    return [runs[name] for name in order]


# -- figures --------------------------------------------------------------------------------------


def rate(hits: int, of: int) -> dict[str, float | int | None]:
    return {"count": hits, "of": of, "rate": hits / of if of else None}


def conditional(
    scores: Sequence[Score], has: Callable[[Score], bool], fails: Callable[[Score], bool]
) -> dict[str, Any]:
    """Failures among the queries for which `has` holds."""
    among = [x for x in scores if has(x)]
    return rate(sum(fails(x) for x in among), len(among))


def summarise(data: Dataset, run: PolicyRun) -> dict[str, Any]:
    s, n = run.scores, len(run.scores)
    sup = [[k for k in x.stale if data.state(k) == "superseded"] for x in s]
    rev = [[k for k in x.stale if data.state(k) == "revoked"] for x in s]
    pairs = sum(len(x.pairs) for x in s)
    about = [q["about"] for q in data.queries]
    lifecycle = [x for x, a in zip(s, about, strict=True) if a == "lifecycle" and x.target_delivered is not None]
    other = [x for x, a in zip(s, about, strict=True) if a != "lifecycle"]
    told = [x.retraction_told for x in s if x.retraction_told is not None]
    budgets = [a.budget for a in run.answers if a.budget is not None]
    rendered = [a.rendered_tokens for a in run.answers if a.rendered_tokens is not None]
    omitted: dict[str, int] = {}
    for a in run.answers:
        for reason, count in a.omitted.items():
            omitted[reason] = omitted.get(reason, 0) + count
    return {
        "policy": run.name,
        "queries": n,
        "separation_failure_given_stale": conditional(s, lambda x: bool(x.stale), lambda x: x.failed),
        "separation_failure_all": rate(sum(x.failed for x in s), n),
        "superseded_without_head": rate(sum(bool(x.open_superseded) for x in s), sum(bool(k) for k in sup)),
        "revoked_without_revocation": rate(sum(bool(x.open_revoked) for x in s), sum(bool(k) for k in rev)),
        "on_topic_superseded_without_head": conditional(
            s, lambda x: bool(x.on_topic_superseded), lambda x: bool(x.on_topic_open)
        ),
        "open_superseded_notes": sum(len(x.open_superseded) for x in s),
        "open_revoked_notes": sum(len(x.open_revoked) for x in s),
        "pairs_in_plain_top_k": pairs,
        "successor_dropped": rate(sum(len(x.successor_dropped) for x in s), pairs),
        "predecessor_dropped": rate(sum(len(x.predecessor_dropped) for x in s), pairs),
        "mean_budget": statistics.fmean(budgets) if budgets else None,
        "mean_tokens": statistics.fmean(a.tokens for a in run.answers),
        "mean_notes": statistics.fmean(len(a.items) for a in run.answers),
        "mean_closure_overhead": statistics.fmean(x.closure_overhead for x in s),
        "mean_stale_tokens": statistics.fmean(x.stale_tokens for x in s),
        "mean_history_trimmed": statistics.fmean(a.trimmed_history for a in run.answers),
        "mean_rendered_tokens": statistics.fmean(rendered) if rendered else None,
        "history_delivered": sum(i.delivered_as == "history" for a in run.answers for i in a.items),
        "chains_entered_through_stale_note": sum(data.state(e) in STALE for a in run.answers for e in a.chain_entries),
        "chains_omitted": omitted,
        "current_truth_lifecycle": rate(sum(bool(x.target_delivered) for x in lifecycle), len(lifecycle)),
        "current_truth_other": rate(sum(bool(x.target_delivered) for x in other), len(other)),
        "retraction_told": rate(sum(told), len(told)),
        "shape_problems": sum(len(x.shape_problems) for x in s),
        "seconds": run.seconds,
    }


def pct(r: dict[str, Any]) -> str:
    return "-" if r["rate"] is None else f"{100 * r['rate']:.0f}% ({r['count']}/{r['of']})"


Column = tuple[str, Callable[[dict[str, Any]], str]]
SEPARATION: list[Column] = [
    ("policy", lambda f: f["policy"]),
    ("fail | stale", lambda f: pct(f["separation_failure_given_stale"])),
    ("fail | all", lambda f: pct(f["separation_failure_all"])),
    ("superseded w/o head", lambda f: pct(f["superseded_without_head"])),
    ("revoked w/o revocation", lambda f: pct(f["revoked_without_revocation"])),
    ("on-topic sup. w/o head", lambda f: pct(f["on_topic_superseded_without_head"])),
    ("succ. dropped", lambda f: pct(f["successor_dropped"])),
    ("pred. dropped", lambda f: pct(f["predecessor_dropped"])),
]
COST: list[Column] = [
    ("policy", lambda f: f["policy"]),
    ("budget/q", lambda f: "-" if f["mean_budget"] is None else f"{f['mean_budget']:.0f}"),
    ("tok/q", lambda f: f"{f['mean_tokens']:.0f}"),
    ("notes/q", lambda f: f"{f['mean_notes']:.1f}"),
    ("closure ovh/q", lambda f: f"{f['mean_closure_overhead']:.0f}"),
    ("stale tok/q", lambda f: f"{f['mean_stale_tokens']:.0f}"),
    ("hist. trimmed/q", lambda f: f"{f['mean_history_trimmed']:.1f}"),
    ("truth: lifecycle", lambda f: pct(f["current_truth_lifecycle"])),
    ("truth: other", lambda f: pct(f["current_truth_other"])),
    ("retraction told", lambda f: pct(f["retraction_told"])),
]


def table(columns: Sequence[Column], figures: Sequence[dict[str, Any]]) -> str:
    return markdown_table([name for name, _ in columns], [[cell(f) for _, cell in columns] for f in figures])


TABLES = {
    "separation": lambda payload: table(SEPARATION, payload["figures"]),
    "cost": lambda payload: table(COST, payload["figures"]),
}


def corrigenda_details(data: Dataset, run: PolicyRun) -> list[str]:
    lines = []
    for query, answer, s in zip(data.queries, run.answers, run.scores, strict=True):
        for key in s.open_superseded + s.open_revoked:
            item = next(i for i in answer.items if i.key == key)
            heads = answer.chain_heads[item.chain] if item.chain is not None else []
            lines.append(
                f"{run.name}: {query['id']} {query['text']!r}: {key} ({data.state(key)}) delivered as "
                f"{item.delivered_as} role={item.role} with heads {heads}, expected heads {data.current(key)}"
            )
        lines += [f"{run.name}: {query['id']} {query['text']!r}: {p}" for p in s.shape_problems]
        lines += [
            f"{run.name}: {query['id']}: dropped successor {succ} of {pred}" for pred, succ in s.successor_dropped
        ]
    return lines


def records(data: Dataset, run: PolicyRun) -> list[dict[str, Any]]:
    out = []
    for query, answer, s in zip(data.queries, run.answers, run.scores, strict=True):
        out.append(
            {
                "query": query["id"],
                "text": query["text"],
                "delivered": [asdict(i) for i in answer.items],
                "chain_heads": answer.chain_heads or None,
                "chain_entries": answer.chain_entries or None,
                "tokens": answer.tokens,
                "budget": answer.budget,
                "trimmed_history": answer.trimmed_history,
                "rendered_tokens": answer.rendered_tokens,
                "omitted": answer.omitted,
                **asdict(s),
                "failed": s.failed,
            }
        )
    return out


def truth_misses(data: Dataset, run: PolicyRun) -> list[str]:
    """Queries whose current target corrigenda did not deliver: ranking or budget, not closure."""
    lines = []
    for query, answer, s in zip(data.queries, run.answers, run.scores, strict=True):
        if s.target_delivered is False:
            lines.append(
                f"{run.name}: {query['id']} {query['text']!r}: target {query['target']} not delivered "
                f"(chains entered through {answer.chain_entries}; omitted {answer.omitted or 'none'})"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="also write all figures and per-query records here")
    args = parser.parse_args(argv)

    data = Dataset.load(DATA)
    embedder = SentenceTransformerEmbedder()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seed000-") as db:
        memory = Memory(db, embedder, clock=lambda: data.recall_at)
        ids = build_store(memory, data)
        # Every note into the full-text index, as the engine's own upkeep eventually does: BM25 ranks
        # over unindexed rows differ from indexed ones, so without this the entry order would depend
        # on when a background compaction happened to run.
        memory.upkeep.compact()
        build_s = time.perf_counter() - started
        state_problems = check_states(memory, data, ids)
        runs = run_policies(memory, data, ids, embedder)
    total_s = time.perf_counter() - started

    figures = [summarise(data, r) for r in runs]
    corrigenda = [r for r in runs if r.answers[0].budget is not None]
    print(
        f"seed 000 closure: {len(data.texts)} notes, {len(data.queries)} queries; "
        f"model {embedder.name}; MMR over the plain top {MMR_CANDIDATES}; corrigenda's budget per query = "
        f"its plain top-k list's tokens (text + {NOTE_OVERHEAD} per note); store built in {build_s:.0f} s, "
        f"all in {total_s:.0f} s\n"
    )
    print("(a) separation and (b) diversity drop")
    print(table(SEPARATION, figures))
    print("\n(c) tokens and (d) current truth")
    print(table(COST, figures))
    for f in figures:
        if f["mean_budget"] is not None:
            print(
                f"{f['policy']}: {f['chains_entered_through_stale_note']} chains entered through a stale note, "
                f"{f['history_delivered']} history entries delivered; chains omitted {f['chains_omitted']}; "
                f"the text recall_chains returns: {f['mean_rendered_tokens']:.0f} tokens/q"
            )

    problems = [f"engine state: {p}" for p in state_problems]
    for run in corrigenda:
        problems += corrigenda_details(data, run)
    print("\ncorrigenda failures and engine problems: " + ("none" if not problems else str(len(problems))))
    for p in problems:
        print("  " + p)
    misses = [line for run in corrigenda for line in truth_misses(data, run)]
    print("corrigenda: current truth not delivered (entry ranking or budget): " + ("none" if not misses else ""))
    for line in misses:
        print("  " + line)

    if args.json:
        report = {
            "data": str(DATA.relative_to(Path(__file__).resolve().parents[1])),
            "model": embedder.name,
            "notes": len(data.texts),
            "queries": len(data.queries),
            "ks": KS,
            "mmr_lambdas": LAMBDAS,
            "mmr_candidates": MMR_CANDIDATES,
            "note_overhead": NOTE_OVERHEAD,
            "chain_overhead": CHAIN_OVERHEAD,
            "store_build_seconds": build_s,
            "total_seconds": total_s,
            "figures": figures,
            "problems": problems,
            "truth_misses": misses,
            "per_query": {r.name: records(data, r) for r in runs},
        }
        write_results(args.json, report)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
