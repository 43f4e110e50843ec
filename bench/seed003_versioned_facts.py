"""Seed 003 reconstructed: stale versions under a lexical baseline, with `supersedes` resolved, and in corrigenda.

Seed 003 is a Chinese blog post about agent memories that answer from a replaced fact. Its author froze
24 memories (12 current values and the 12 they superseded, each pair linked by `supersedes`) and 24
queries over ports, models, branches, storage paths and timeouts, and compared a lexical proxy with
and without resolving the `supersedes` edges first: 7 right / 17 stale / 0 other-wrong, then
20 / 0 / 4 (the 4 were distinct active facts sharing most words, e.g. 模型请求超时 vs 工具执行超时).
The seed's data was never published; `bench/data/seed003/` is a reconstruction written for this
project (see its README.md). This script runs three policies over it, in one process:

1. lexical: the seed's baseline. A text's features are its set of CJK characters, its set of CJK
   character bigrams (adjacent characters inside a run of CJK), and its set of lower-cased ASCII
   letter/digit tokens (`[a-z0-9]+`, so "gpt-4o" gives "gpt" and "4o"). The score of a memory is
   the number of shared characters + shared bigrams + shared tokens with the query. The top score
   wins; a tie goes to the older memory.
2. lexical, superseded removed: every note that is the target of a `supersedes` edge leaves the
   candidate set first; the same scorer then picks among the rest.
3. corrigenda: the 24 memories go into a fresh temporary LanceDB store through `Memory.remember`
   (each with its own `recorded_at`; a newer note names the note it replaces in `supersedes`),
   with the real default embedder (all-MiniLM-L6-v2, which cannot read Chinese, so entry points
   come from LanceDB full-text search). The answer to a query is the first head of the first chain
   that `recall` returns, at the default budget.

Outcomes: right = the query's current note; stale = a superseded note (for corrigenda: any head of
the first chain is a superseded note); other-wrong = anything else, including no answer. For
corrigenda the script also says where each query's stale note was delivered, if at all: as history
of the chain whose head is the right answer, as a head, in another chain, or not at all; and
whether recall reached the right chain through its current note or its stale one. For the lexical
policies it says how many wrong picks the tie rule decided. Nothing in any policy reads the answer
key (`current`, `stale`) or the facts.

Run from the repository root (the model loads offline; about 15 s on 2 cores):

    .venv/bin/python bench/seed003_versioned_facts.py [--json PATH] [--data PATH]

It prints the outcome table with the seed's figures beside the measured ones, the mean length of
old and new notes, and every wrong answer; --json also writes all figures and per-query predictions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from harness import markdown_table, write_results

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "seed003" / "versioned_facts.json"
SUPERSEDES_REASON = "a later value of the same fact (seed 003 data)"

Outcome = Literal["right", "stale", "other-wrong"]
OUTCOMES: tuple[Outcome, ...] = ("right", "stale", "other-wrong")
# Where corrigenda delivered a query's stale note.
StalePlace = Literal["history of the right chain", "head of a chain", "in another chain", "not delivered"]
STALE_PLACES: tuple[StalePlace, ...] = (
    "history of the right chain", "head of a chain", "in another chain", "not delivered",
)  # fmt: skip


class DataError(ValueError):
    """The frozen data does not have the shape the experiment needs."""


# -- the frozen data ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedMemory:
    id: str
    fact: str
    text: str
    recorded_at: datetime
    supersedes: str | None


@dataclass(frozen=True)
class SeedQuery:
    id: str
    fact: str
    text: str
    current: str  # the answer key: the note that holds the fact's current value
    stale: str  # the note that value replaced; returning it is the failure the seed counts


@dataclass(frozen=True)
class Dataset:
    scope: str
    memories: tuple[SeedMemory, ...]
    queries: tuple[SeedQuery, ...]
    near_miss: dict[str, str | None]  # fact → the fact worded most like it (for reporting only)

    @property
    def superseded(self) -> frozenset[str]:
        """Ids of the notes that a `supersedes` edge points at."""
        return frozenset(m.supersedes for m in self.memories if m.supersedes)

    def memory(self, memory_id: str) -> SeedMemory:
        return next(m for m in self.memories if m.id == memory_id)


def load(path: Path) -> Dataset:
    raw = json.loads(path.read_text(encoding="utf-8"))
    memories = tuple(
        SeedMemory(m["id"], m["fact"], m["text"], datetime.fromisoformat(m["recorded_at"]), m["supersedes"])
        for m in raw["memories"]
    )
    queries = tuple(SeedQuery(q["id"], q["fact"], q["text"], q["current"], q["stale"]) for q in raw["queries"])
    data = Dataset(raw["scope"], memories, queries, {f["id"]: f["near_miss"] for f in raw["facts"]})
    check(data)
    return data


def check(data: Dataset) -> None:
    """Every fact is one old note and one newer note that supersedes it; the answer key agrees."""
    by_id = {m.id: m for m in data.memories}
    if len(by_id) != len(data.memories):
        raise DataError("memory ids are not unique")
    if len({m.recorded_at for m in data.memories}) != len(data.memories):
        raise DataError("two memories share a timestamp: 'ties go to the older' would be undefined")
    for m in data.memories:
        if m.supersedes is None:
            continue
        old = by_id.get(m.supersedes)
        if old is None or old.fact != m.fact or old.recorded_at >= m.recorded_at:
            raise DataError(f"{m.id} must supersede an older note of its own fact, not {m.supersedes}")
    for fact in data.near_miss:
        members = [m for m in data.memories if m.fact == fact]
        if len(members) != 2 or sum(m.supersedes is not None for m in members) != 1:
            raise DataError(f"fact {fact} needs exactly one old and one superseding note")
    for q in data.queries:
        current, stale = by_id.get(q.current), by_id.get(q.stale)
        if current is None or stale is None or current.supersedes != stale.id or current.fact != q.fact:
            raise DataError(f"query {q.id}: its answer key does not match the data")


# -- outcomes -----------------------------------------------------------------------------------


@dataclass
class Prediction:
    query: str
    picked: str | None  # a memory id of the data, or None for no answer
    outcome: Outcome
    detail: dict[str, Any] = field(default_factory=dict)


def outcome(query: SeedQuery, picked: str | None, superseded: frozenset[str]) -> Outcome:
    if picked == query.current:
        return "right"
    if picked in superseded:
        return "stale"
    return "other-wrong"


def tally(predictions: Sequence[Prediction]) -> dict[Outcome, int]:
    counts = Counter(p.outcome for p in predictions)
    return {o: counts[o] for o in OUTCOMES}


# -- policies 1 and 2: the seed's lexical proxy -------------------------------------------------

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Features:
    chars: frozenset[str]
    bigrams: frozenset[str]
    tokens: frozenset[str]


def features(text: str) -> Features:
    runs = _CJK_RUN.findall(text)
    return Features(
        chars=frozenset(c for run in runs for c in run),
        bigrams=frozenset(run[i : i + 2] for run in runs for i in range(len(run) - 1)),
        tokens=frozenset(_ASCII_TOKEN.findall(text.lower())),
    )


def overlap(query: Features, memory: Features) -> int:
    return len(query.chars & memory.chars) + len(query.bigrams & memory.bigrams) + len(query.tokens & memory.tokens)


def lexical(
    data: Dataset, candidates: Callable[[Dataset], Sequence[SeedMemory]] = lambda d: d.memories
) -> list[Prediction]:
    """Top-1 by overlap among `candidates`; the older memory wins a tie."""
    pool = candidates(data)
    memory_features = {m.id: features(m.text) for m in pool}
    predictions = []
    for q in data.queries:
        query_features = features(q.text)
        scores = {m.id: overlap(query_features, memory_features[m.id]) for m in pool}
        best = min(pool, key=lambda m: (-scores[m.id], m.recorded_at))
        top = scores[best.id]
        tied = sorted(m.id for m in pool if scores[m.id] == top)
        detail = {"score": top, "tied_at_top": tied, "current_score": scores.get(q.current)}
        predictions.append(Prediction(q.id, best.id, outcome(q, best.id, data.superseded), detail))
    return predictions


def without_superseded(data: Dataset) -> list[SeedMemory]:
    return [m for m in data.memories if m.id not in data.superseded]


# -- policy 3: corrigenda -----------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveredChain:
    """A chain of a recall result, in the data's memory ids."""

    heads: list[str]
    history: list[str]
    prerequisites: list[str]
    entry: str | None  # the note through which the query reached the chain


@dataclass
class CorrigendaRun:
    predictions: list[Prediction]
    model: str
    budget_tokens: int


def corrigenda(data: Dataset, budget_tokens: int = 2000) -> CorrigendaRun:
    from corrigenda.store import Draft, Memory

    # A fixed "now" after the last note, so the run does not depend on the machine's date.
    now = max(m.recorded_at for m in data.memories) + timedelta(days=1)
    with tempfile.TemporaryDirectory(prefix="corrigenda-seed003-") as tmp:
        memory = Memory(str(Path(tmp) / "store"), clock=lambda: now)
        note_ids: dict[str, str] = {}  # data id → note id
        for m in sorted(data.memories, key=lambda m: m.recorded_at):
            supersedes = [note_ids[m.supersedes]] if m.supersedes else []
            remembered = memory.remember(
                Draft(text=m.text, at=m.recorded_at),
                scope=data.scope,
                supersedes=supersedes,
                reason=SUPERSEDES_REASON if supersedes else None,
            )
            note_ids[m.id] = remembered.note.id
        data_ids = {note: memory_id for memory_id, note in note_ids.items()}

        predictions = []
        for q in data.queries:
            result = memory.recall(q.text, scope=data.scope, budget_tokens=budget_tokens)
            chains = [
                DeliveredChain(
                    heads=[data_ids[h.id] for h in c.heads],
                    history=[data_ids[h.note.id] for h in c.history],
                    prerequisites=[data_ids[p.id] for p in c.prerequisites],
                    entry=data_ids[c.entry.note_id] if c.entry else None,
                )
                for c in result.chains
            ]
            first_heads = chains[0].heads if chains else []
            picked = first_heads[0] if first_heads else None
            verdict = outcome(q, picked, data.superseded)
            if any(h in data.superseded for h in first_heads):
                verdict = "stale"
            right_rank = next((i for i, c in enumerate(chains, 1) if q.current in c.heads), None)
            detail = {
                "chains": [asdict(c) for c in chains],
                "right_chain_rank": right_rank,
                "right_chain_entry": entry_role(q, chains[right_rank - 1].entry) if right_rank else None,
                "stale_note": stale_place(q, chains),
                "omitted": len(result.omitted),
                "used_tokens": result.used_tokens,
            }
            predictions.append(Prediction(q.id, picked, verdict, detail))
        return CorrigendaRun(predictions, memory.embedder.name, budget_tokens)


def entry_role(query: SeedQuery, entry: str | None) -> Literal["current", "stale", "other"]:
    """Which note of the right chain full-text and dense search reached first."""
    return "current" if entry == query.current else "stale" if entry == query.stale else "other"


def stale_place(query: SeedQuery, chains: Sequence[DeliveredChain]) -> StalePlace:
    if any(query.stale in c.heads for c in chains):
        return "head of a chain"
    for c in chains:
        if query.stale in c.history or query.stale in c.prerequisites:
            right = query.current in c.heads and query.stale in c.history
            return "history of the right chain" if right else "in another chain"
    return "not delivered"


# -- reporting ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    key: str
    label: str
    seed: dict[Outcome, int] | None  # the seed's published figures, where it had this policy


POLICIES = (
    Policy("lexical", "1 lexical overlap, tie -> older", {"right": 7, "stale": 17, "other-wrong": 0}),
    Policy("lexical_resolved", "2 lexical, superseded removed", {"right": 20, "stale": 0, "other-wrong": 4}),
    Policy("corrigenda", "3 corrigenda recall, 1st head", None),
)


def lengths(data: Dataset) -> dict[str, Any]:
    old = [m for m in data.memories if m.id in data.superseded]
    pairs = [(data.memory(m.supersedes), m) for m in data.memories if m.supersedes]
    return {
        "old_mean_chars": statistics.mean(len(m.text) for m in old),
        "new_mean_chars": statistics.mean(len(m.text) for m in data.memories if m.supersedes),
        "pairs_old_longer": sum(len(o.text) > len(n.text) for o, n in pairs),
        "pairs_new_longer": sum(len(o.text) < len(n.text) for o, n in pairs),
        "pairs_equal": sum(len(o.text) == len(n.text) for o, n in pairs),
        "largest_pair_difference": max(abs(len(o.text) - len(n.text)) for o, n in pairs),
    }


def _figures(counts: dict[Outcome, int] | None) -> str:
    return "/".join(str(counts[o]) for o in OUTCOMES) if counts else "-"


def table(payload: dict[str, Any]) -> str:
    """Right, stale and other-wrong answers per policy, beside the seed's published figures."""
    rows = []
    for policy in POLICIES:
        measured = payload["policies"][policy.key]["measured"]
        rows.append([policy.label, *(measured[o] for o in OUTCOMES), _figures(policy.seed)])
    return markdown_table(["policy", "right", "stale", "other wrong", "the seed's right / stale / other"], rows)


def stale_places(payload: dict[str, Any]) -> str:
    """Where corrigenda put each query's stale note, and how the lexical policies went wrong."""
    facts = payload["breakdown"]
    rows: list[list[object]] = [
        [f"corrigenda, where the stale note went: {p}", n] for p, n in facts["corrigenda"]["stale_note"].items()
    ]
    rows += [
        [f"corrigenda: chain with the right head {k}", n] for k, n in facts["corrigenda"]["right_chain_rank"].items()
    ]
    rows += [
        [f"corrigenda: right chain entered through the {k} note", n]
        for k, n in facts["corrigenda"]["right_chain_entry"].items()
    ]
    for key in ("lexical", "lexical_resolved"):
        rows += [[f"{key}: wrong picks decided by the tie rule", facts[key]["wrong_by_tie"]]]
        rows += [[f"{key}: wrong picks decided by a higher score", facts[key]["wrong_by_score"]]]
    return markdown_table(["what", "queries"], rows)


TABLES = {"main": table, "breakdown": stale_places}


def _near_miss_note(data: Dataset, query: SeedQuery, picked: str | None) -> str:
    if picked is None:
        return "no answer"
    fact = data.memory(picked).fact
    if fact == query.fact:
        return "same fact"
    return "near-miss fact" if data.near_miss.get(query.fact) == fact else "unrelated fact"


def failures(data: Dataset, key: str, predictions: Sequence[Prediction]) -> list[str]:
    queries = {q.id: q for q in data.queries}
    lines = []
    for p in predictions:
        if p.outcome == "right":
            continue
        q = queries[p.query]
        picked = f"{p.picked} {data.memory(p.picked).text}" if p.picked else "(none)"
        extra = ""
        if key.startswith("lexical"):
            extra = f"; score {p.detail['score']} (current {p.detail['current_score']}), tied {p.detail['tied_at_top']}"
        elif key == "corrigenda":
            extra = f"; right chain at rank {p.detail['right_chain_rank']}"
        lines.append(
            f"  {q.id} [{p.outcome}, {_near_miss_note(data, q, p.picked)}{extra}] {q.text}\n"
            f"      picked:   {picked}\n"
            f"      expected: {q.current} {data.memory(q.current).text}"
        )
    return lines


def breakdown(results: dict[str, list[Prediction]]) -> dict[str, Any]:
    """How the lexical policies went wrong (tie rule or score) and where corrigenda put the stale notes."""
    facts: dict[str, Any] = {}
    for key in ("lexical", "lexical_resolved"):
        wrong = [p for p in results[key] if p.outcome != "right"]
        by_tie = sum(len(p.detail["tied_at_top"]) > 1 for p in wrong)
        facts[key] = {"wrong_by_tie": by_tie, "wrong_by_score": len(wrong) - by_tie}
    preds = results["corrigenda"]
    places = Counter(p.detail["stale_note"] for p in preds)
    ranks = [p.detail["right_chain_rank"] for p in preds]
    entries = Counter(p.detail["right_chain_entry"] for p in preds)
    facts["corrigenda"] = {
        "stale_note": {place: places[place] for place in STALE_PLACES},
        "right_chain_rank": {
            "first": ranks.count(1),
            "lower": sum(r is not None and r > 1 for r in ranks),
            "absent": ranks.count(None),
        },
        "right_chain_entry": {role: entries[role] for role in ("current", "stale", "other")},
    }
    return facts


def _shown(path: Path) -> str:
    """The path relative to the repository when it is inside it."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def report(
    data: Dataset, data_path: Path, results: dict[str, list[Prediction]], run: CorrigendaRun, seconds: float
) -> str:
    size = lengths(data)
    n_old = len(data.superseded)
    out = [
        f"seed 003 reconstructed ({_shown(data_path)}): {len(data.memories)} memories "
        f"({len(data.memories) - n_old} current, {n_old} superseded), {len(data.queries)} queries",
        f"mean note length in characters: old {size['old_mean_chars']:.2f}, new {size['new_mean_chars']:.2f} "
        f"(pairs: old longer {size['pairs_old_longer']}, new longer {size['pairs_new_longer']}, "
        f"equal {size['pairs_equal']}; largest difference {size['largest_pair_difference']})",
        f"corrigenda: model {run.model}, budget {run.budget_tokens} tokens; whole run {seconds:.1f} s",
    ]
    facts = breakdown(results)
    for key in ("lexical", "lexical_resolved"):
        ties = facts[key]
        out.append(
            f"{key}: wrong picks decided by the tie rule {ties['wrong_by_tie']}, "
            f"by a strictly higher score {ties['wrong_by_score']}"
        )
    entered = facts["corrigenda"]["right_chain_entry"]
    out.append(
        "corrigenda, each query's stale note: "
        + ", ".join(f"{place} {facts['corrigenda']['stale_note'][place]}" for place in STALE_PLACES)
    )
    ranks = facts["corrigenda"]["right_chain_rank"]
    out.append(
        f"corrigenda, chain with the right head: first {ranks['first']}, lower {ranks['lower']}, "
        f"absent {ranks['absent']}; entered through the current note {entered['current']}, "
        f"the stale note {entered['stale']}"
    )
    for policy in POLICIES:
        wrong = failures(data, policy.key, results[policy.key])
        out.append("")
        out.append(f"wrong answers, {policy.label.strip()}: {len(wrong)}")
        out.extend(wrong)
    return "\n".join(out)


def payload(
    data: Dataset, data_path: Path, results: dict[str, list[Prediction]], run: CorrigendaRun, seconds: float
) -> dict[str, Any]:
    by_query: dict[str, dict[str, Any]] = {q.id: {**asdict(q)} for q in data.queries}
    for key, predictions in results.items():
        for p in predictions:
            by_query[p.query][key] = {"picked": p.picked, "outcome": p.outcome, **p.detail}
    return {
        "data": _shown(data_path),
        "data_sha256": hashlib.sha256(data_path.read_bytes()).hexdigest(),
        "lengths": lengths(data),
        "corrigenda": {"model": run.model, "budget_tokens": run.budget_tokens},
        "policies": {p.key: {"label": p.label, "measured": tally(results[p.key]), "seed": p.seed} for p in POLICIES},
        "breakdown": breakdown(results),
        "predictions": list(by_query.values()),
        "runtime_s": round(seconds, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="also write all figures and per-query predictions here")
    parser.add_argument("--data", type=Path, default=DATA, help=f"the frozen data (default {DATA.name})")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    data = load(args.data)
    run = corrigenda(data)
    results = {
        "lexical": lexical(data),
        "lexical_resolved": lexical(data, without_superseded),
        "corrigenda": run.predictions,
    }
    seconds = time.perf_counter() - started
    print(report(data, args.data, results, run, seconds))
    figures = payload(data, args.data, results, run, seconds)
    print("\n" + "\n\n".join(render(figures) for render in TABLES.values()))
    if args.json:
        write_results(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
