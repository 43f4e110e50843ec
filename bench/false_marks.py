"""False POSSIBLY OUTDATED marks: how often recall labels a current note outdated where nothing was updated.

Recall compares the current heads it delivers and marks a chain `possibly_outdated_by` a newer
current note of another chain when the two look like one fact with two values and no edge relates
them (store/updates.py). Two rules can say so: the *subject* rule (two notes filed under one
subject, `subject_key`, with different values: `conflict`) and the *statement* rule (a statement of
each says the same words around a different value: `statement_change`). This bench measures both
rules on what recall delivers, whether recall marks by them or not, and what recall marked, on
text where every update was recorded with its edge or there was none, so that every mark is false:

- agent-day (bench/data/agent_day/notes.json, written for this project): 50 notes a coding agent
  would keep in one day, every change of a value recorded through `correct`, many different facts
  said with the same words around different numbers (staging and production, payments and orders);
  its 20 questions.
- seed000 (bench/data/seed000/notes.json): 300 engineering notes, their lifecycle replayed through
  `remember` / `correct` / `revoke` as seed000_closure.py does; its 134 questions.
- seed003 (bench/data/seed003/versioned_facts.json): 24 Chinese notes, each newer value written with
  its `supersedes` edge; its 24 questions.
- longmemeval: per LongMemEval knowledge-update question (bench/data/longmemeval-ku, S variant), the
  user turns of every session that holds none of its evidence (about 230 notes a question, no
  update among them that the data marks), imported as longmemeval_ku.py imports them; the question.

Each question is recalled once at `--budget` tokens (default 1024, the largest the truth benches use,
so the most heads are compared). Counted over the delivered chains that are current: their heads
(*delivered*); the heads each rule would mark (a newer head of another delivered current chain that
the rule takes for a newer value of it); the heads recall marked. A share is marks / delivered; a rule
whose share reaches 1 % on any corpus has no place in what an agent reads (issue 49), and the bench
names it. Every mark is listed in the results file with the two notes, its reason and whether recall
marked it.

Run from the repository root (about 20,000 texts to embed without a cache; with the cache that
longmemeval_ku.py keeps, a few minutes):

    .venv/bin/python bench/false_marks.py [--json PATH] [--budget N] [--embedding-cache PATH]
        [--corpora agent-day seed000 seed003 longmemeval]
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import longmemeval_ku as lme
import seed000_closure as seed000
import seed003_versioned_facts as seed003
from corrigenda.store import Draft, Embedder, Memory, SentenceTransformerEmbedder, updates
from corrigenda.store.model import ChainStatus
from corrigenda.store.views import NoteView, RecallResult
from embedding_cache import CachedEmbedder
from harness import ROOT, markdown_table, parser, write_results

AGENT_DAY = ROOT / "bench" / "data" / "agent_day" / "notes.json"
CORPORA = ("agent-day", "seed000", "seed003", "longmemeval")
RULES = ("subject", "statement")
LIMIT = 0.01  # the share of delivered current notes a rule may mark falsely (issue 49)
ACTOR = "false-marks"


@dataclass
class Tally:
    """What one corpus's recalls delivered, what each rule would mark in it, and what recall marked."""

    queries: int = 0
    delivered: int = 0  # heads of delivered current chains
    would_mark: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    marked: int = 0  # heads recall delivered marked possibly outdated
    distinct: dict[str, set[str]] = field(default_factory=lambda: {r: set() for r in (*RULES, "recall")})
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, query: str, result: RecallResult, text_of: Callable[[str], str]) -> None:
        self.queries += 1
        current = [c for c in result.chains if c.status is ChainStatus.CURRENT]
        for n, chain in enumerate(current):
            self.delivered += len(chain.heads)
            if chain.possibly_outdated_by is not None:
                self.marked += len(chain.heads)
                self.distinct["recall"].update(h.id for h in chain.heads)
            newer = [g for m, c in enumerate(current) if m != n for g in c.heads]
            for head in chain.heads:
                for rule, change in _changes(head, newer).items():
                    self.would_mark[rule] += 1
                    self.distinct[rule].add(head.id)
                    self.examples.append({
                        "query": query, "rule": rule, "marked": head.text, "by": text_of(change[0]),
                        "reason": change[1], "recall_marked": chain.possibly_outdated_by is not None,
                    })  # fmt: skip

    def figures(self) -> dict[str, Any]:
        return {
            "queries": self.queries, "delivered": self.delivered, "would_mark": self.would_mark,
            "recall_marked": self.marked, "distinct_marked": {r: len(s) for r, s in self.distinct.items()},
            "examples": self.examples,
        }  # fmt: skip


def _changes(head: NoteView, others: Sequence[NoteView]) -> dict[str, tuple[str, str]]:
    """Rule → (the newest other note it takes for a newer value of `head`, its reason)."""
    found: dict[str, tuple[str, str]] = {}
    for other in sorted(others, key=lambda o: o.recorded_at, reverse=True):
        if other.recorded_at <= head.recorded_at:
            continue
        key = updates.subject_key(head.subject)
        if "subject" not in found and key and key == updates.subject_key(other.subject):
            change = updates.conflict(head, other)
            if change is not None:
                found["subject"] = (other.id, change.reason)
        if "statement" not in found and (change := updates.statement_change(head.text, other.text)) is not None:
            found["statement"] = (other.id, change.reason)
    return found


@contextmanager
def fresh_memory(embedder: Embedder, clock: Callable[[], datetime] | None = None) -> Iterator[Memory]:
    with tempfile.TemporaryDirectory(prefix="false-marks-") as directory:
        memory = Memory(directory, embedder, clock=clock) if clock else Memory(directory, embedder)
        try:
            yield memory
        finally:
            memory.close()


def agent_day(embedder: Embedder, budget: int) -> Tally:
    data = json.loads(AGENT_DAY.read_text(encoding="utf-8"))
    start = seed000.parse_time(data["start"])
    tally = Tally()
    with fresh_memory(embedder, lambda: start + timedelta(hours=12)) as memory:
        ids: dict[str, str] = {}
        for minute, op in enumerate(data["timeline"]):
            draft = Draft(text=op["text"], subject=op.get("subject"), at=start + timedelta(minutes=10 * minute))
            if op["op"] == "correct":
                ids[op["key"]] = memory.correct(ids[op["of"]], draft, reason=op["reason"], actor=ACTOR).note.id
            else:
                ids[op["key"]] = memory.remember(draft, scope=data["scope"], actor=ACTOR).note.id
        texts = {ids[op["key"]]: op["text"] for op in data["timeline"]}
        for query in data["queries"]:
            tally.add(query, memory.recall(query, scope=data["scope"], budget_tokens=budget), texts.__getitem__)
    return tally


def seed_000(embedder: Embedder, budget: int) -> Tally:
    data = seed000.Dataset.load(seed000.DATA)
    tally = Tally()
    with fresh_memory(embedder, lambda: data.recall_at) as memory:
        ids = seed000.build_store(memory, data)
        texts = {ids[k]: t for k, t in data.texts.items()}
        for query in data.queries:
            result = memory.recall(query["text"], scope=data.scope, budget_tokens=budget)
            tally.add(query["text"], result, texts.__getitem__)
    return tally


def seed_003(embedder: Embedder, budget: int) -> Tally:
    data = seed003.load(seed003.DATA)
    now = max(m.recorded_at for m in data.memories) + timedelta(days=1)
    tally = Tally()
    with fresh_memory(embedder, lambda: now) as memory:
        ids: dict[str, str] = {}
        for m in sorted(data.memories, key=lambda m: m.recorded_at):
            supersedes = [ids[m.supersedes]] if m.supersedes else []
            reason = seed003.SUPERSEDES_REASON if supersedes else None
            draft = Draft(text=m.text, at=m.recorded_at)
            ids[m.id] = memory.remember(draft, scope=data.scope, supersedes=supersedes, reason=reason).note.id
        texts = {ids[m.id]: m.text for m in data.memories}
        for q in data.queries:
            tally.add(q.text, memory.recall(q.text, scope=data.scope, budget_tokens=budget), texts.__getitem__)
    return tally


def longmemeval(embedder: Embedder, budget: int) -> Tally:
    tally = Tally()
    for q in lme.load():
        evidence_sessions = {t.session_id for t in q.evidence}
        turns = [t for t in q.haystacks["s"] if t.session_id not in evidence_sessions]
        with fresh_memory(embedder) as memory:
            drafts = [Draft(text=t.text, at=t.at, valid_from=t.valid_from) for t in turns]
            views = memory.import_notes(drafts, scope="longmemeval", actor=ACTOR)
            texts = {v.id: t.text for v, t in zip(views, turns, strict=True)}
            result = memory.recall(q.question, scope="longmemeval", budget_tokens=budget, as_of=q.asked_at)
            tally.add(q.question, result, texts.__getitem__)
    return tally


RUNS: dict[str, Callable[[Embedder, int], Tally]] = {
    "agent-day": agent_day, "seed000": seed_000, "seed003": seed_003, "longmemeval": longmemeval,
}  # fmt: skip


def _share(marked: int, delivered: int) -> str:
    return f"{marked / delivered:.1%} ({marked}/{delivered})" if delivered else "–"


def marks_table(payload: dict[str, Any]) -> str:
    """Per corpus: current heads delivered, the share each rule would mark, the share recall marked."""
    rows = []
    for name, f in payload["corpora"].items():
        rows.append([
            name, f["queries"], f["delivered"], *(_share(f["would_mark"][r], f["delivered"]) for r in RULES),
            _share(f["recall_marked"], f["delivered"]),
        ])  # fmt: skip
    header = ["corpus", "questions", "current heads delivered", "subject rule would mark", "statement rule would mark"]
    return markdown_table([*header, "recall marked"], rows)


TABLES = {"main": marks_table}


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser(__doc__, results="false_marks")
    cli.add_argument("--budget", type=int, default=1024, help="recall's token budget (default 1024)")
    cli.add_argument("--corpora", nargs="+", choices=CORPORA, default=list(CORPORA))
    cli.add_argument(
        "--embedding-cache", type=Path, help="the vectors longmemeval_ku.py keeps (e.g. /tmp/lme-cache.npz)"
    )
    args = cli.parse_args(argv)
    embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.embedding_cache)
    started = time.perf_counter()
    corpora = {name: RUNS[name](embedder, args.budget).figures() for name in args.corpora}
    if args.embedding_cache is not None:
        embedder.save()
    over = {
        f"{name} {rule}": f["would_mark"][rule] / f["delivered"]
        for name, f in corpora.items()
        for rule in RULES
        if f["delivered"] and f["would_mark"][rule] / f["delivered"] >= LIMIT
    }
    over |= {
        f"{name} recall": f["recall_marked"] / f["delivered"]
        for name, f in corpora.items()
        if f["delivered"] and f["recall_marked"] / f["delivered"] >= LIMIT
    }
    payload = {
        "budget": args.budget, "limit": LIMIT, "corpora": corpora, "over_limit": over,
        "runtime_seconds": time.perf_counter() - started,
    }  # fmt: skip
    print(marks_table(payload))
    for name, f in corpora.items():
        for example in f["examples"][:4]:
            marked = "marked by recall" if example["recall_marked"] else "not marked by recall"
            print(f"\n{name}, {example['rule']} rule ({marked}), asked {example['query']!r}:")
            print(f"  head   {example['marked']!r}\n  newer  {example['by']!r}\n  reason {example['reason']}")
    print(f"\nat or over the {LIMIT:.0%} limit: {', '.join(over) or 'none'}")
    write_results(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
