"""Evidence recall at 5 and 10 on LongMemEval S (knowledge updates): corrigenda's recall beside a plain LanceDB hybrid top-k.

The figure memory servers publish for LongMemEval: the share of questions whose evidence is among
the top k retrieved, by session and by turn. The data and its loading are bench/longmemeval_ku.py's
(its `load`, imported): the 72 knowledge-update questions that have evidence (the 6 abstention
questions have none and are left out, as LongMemEval's retrieval evaluation leaves them out), each
with its S history, every user turn one note, dated as longmemeval_ku.py dates them. A question's
evidence turns are its `has_answer` turns; its evidence sessions are their sessions.

The notes. Each question gets a fresh LanceDB store in a temporary directory (full-text statistics
from that one user's notes) and every user turn, in time order, goes through `remember` into the
question's scope: no edges, so every chain is one note. A turn whose text is exactly that of a current
note is not stored twice (`remember` answers with that note): the note then stands for both turns.

The systems, over the same notes and the same vectors (all-MiniLM-L6-v2, through one cache), each
seeing the notes recorded by the question's `asked_at` (longmemeval_ku.py's):
- corrigenda: `recall(question, as_of=asked_at, budget_tokens=UNBOUNDED)`, its ranked list being the
  notes delivered in order (each chain's heads, prerequisites, then history, chain by chain). Why an
  unbounded budget and no `max_chains`: recall orders its chains before `pack` cuts them, so the first
  k notes of one unbounded recall are exactly what `max_chains=k` delivers (the bench checks this at
  k = 5 for every question), and a top-k counts notes, not tokens: a token budget would hand plain an
  advantage on long turns and corrigenda one on short turns. What recall delivers at its default budget
  (2,000 tokens) is a third row, "corrigenda @ 2000 tokens", for what an agent gets without asking.
- plain: a LanceDB table in the same directory holding the store's notes (id, text, scope,
  recorded_at_us, vector: the very vectors the store holds), a full-text index on text with the
  store's tokenizer (ICU), queried `search(query_type="hybrid")` with the question's vector and text,
  cosine, the store's own scope-and-time filter as a prefilter, LanceDB's default RRF reranker,
  `limit(k)`.

Recall@k (LongMemEval's src/retrieval/eval_utils.py, `evaluate_retrieval` and
`evaluate_retrieval_turn2session`):
- by turn: the turns of the first k notes of the list (plain: of `limit(k)`);
- by session: the first k distinct sessions of the list, in the order the notes name them (a note
  standing for two turns names both their sessions); plain: the distinct sessions of `limit(L)` for the
  least L >= k that reaches k sessions (or all the notes), as LongMemEval widens its cut;
- any: some evidence turn (session) is among them, the figure servers publish; all: every one is.

Run from the repository root, after the cache is built (longmemeval_ku.py builds the same one):

    OMP_NUM_THREADS=1 .venv/bin/python bench/longmemeval_recall.py --embedding-cache /tmp/lme-cache.npz
        [--json bench/results/longmemeval_recall.json] [--limit N] [--questions ID ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from corrigenda.store.storage import limits
from corrigenda.store.where import in_scope
from embedding_cache import CachedEmbedder
from harness import markdown_table, write_results
from longmemeval_ku import ACTOR, DATA, Question, Turn, load

KS = (5, 10)
LEVELS = ("session", "turn")
SYSTEMS = ("corrigenda", "plain", "corrigenda @ 2000 tokens")
DEFAULT_BUDGET = 2000  # recall's default budget_tokens
UNBOUNDED = 10**9  # tokens: no budget cuts the ranking
KIND_ORDER = ("current", "historical", "current_and_historical", "direction_of_change")


# -- recall@k ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Retrieved:
    """One retrieved note, as the turns it stands for and their sessions (in time order)."""

    note_id: str
    turns: tuple[str, ...]
    sessions: tuple[str, ...]


def first_sessions(ranking: Sequence[Retrieved], k: int) -> list[str]:
    """The first k distinct sessions the ranking names, in order."""
    seen: dict[str, None] = {}
    for item in ranking:
        for session in item.sessions:
            seen.setdefault(session, None)
    return list(seen)[:k]


def recall_at(found: Iterable[str], evidence: Iterable[str]) -> dict[str, bool]:
    """any: some evidence item was found; all: every one was."""
    found, wanted = set(found), set(evidence)
    if not wanted:
        raise ValueError("recall@k needs at least one evidence item")
    return {"any": bool(found & wanted), "all": wanted <= found}


def turn_recall(ranking: Sequence[Retrieved], evidence: Iterable[str], k: int) -> dict[str, bool]:
    return recall_at((t for item in ranking[:k] for t in item.turns), evidence)


def session_recall(ranking: Sequence[Retrieved], evidence: Iterable[str], k: int) -> dict[str, bool]:
    return recall_at(first_sessions(ranking, k), evidence)


# -- the notes and the two systems ---------------------------------------------------------------


@dataclass
class Stored:
    """What `remember` made of a question's turns: each note with the turns it stands for."""

    scope: str
    turns: dict[str, list[Turn]]  # note id → its turns, in time order

    def retrieved(self, note_ids: Iterable[str]) -> list[Retrieved]:
        out = []
        for note_id in note_ids:
            turns = self.turns[note_id]
            sessions = tuple(dict.fromkeys(t.session_id for t in turns))
            out.append(Retrieved(note_id, tuple(t.key for t in turns), sessions))
        return out


def store_turns(memory: Memory, q: Question) -> Stored:
    stored = Stored(f"lme-recall.{q.id}", {})
    for turn in q.haystacks["s"]:
        draft = Draft(text=turn.text, at=turn.at, valid_from=turn.valid_from)
        note = memory.remember(draft, scope=stored.scope, actor=ACTOR).note
        stored.turns.setdefault(note.id, []).append(turn)
    return stored


def delivered_notes(memory: Memory, q: Question, scope: str, budget: int, max_chains: int | None = None) -> list[str]:
    """corrigenda's ranked list: the notes one recall delivers, in order, chain by chain."""
    result = memory.recall(q.question, scope=scope, budget_tokens=budget, max_chains=max_chains, as_of=q.asked_at)
    return [
        note_id
        for chain in result.chains
        for note_id in [
            *(h.id for h in chain.heads),
            *(p.id for p in chain.prerequisites),
            *(h.note.id for h in chain.history),
        ]
    ]


class PlainHybrid:
    """A plain LanceDB table of a store's notes and vectors, full-text indexed, queried hybrid top-k."""

    def __init__(self, directory: str, memory: Memory, scope: str) -> None:
        import lancedb
        import pyarrow as pa
        from lancedb.index import FTS

        notes = memory.tables.search.scope_notes(scope, with_vectors=True)  # as the store reads them, once each
        rows = pa.table(
            {
                "id": [n.id for n, _ in notes],
                "text": [n.text for n, _ in notes],
                "scope": [n.scope for n, _ in notes],
                "recorded_at_us": pa.array([n.recorded_at for n, _ in notes], pa.timestamp("us", "UTC")).cast(
                    pa.int64()
                ),
                "vector": pa.array([v for _, v in notes], pa.list_(pa.float32(), len(notes[0][1] or ()))),
            }
        )
        self.table = lancedb.connect(directory).create_table("plain", data=rows)
        self.table.create_index("text", config=FTS(**limits.FULL_TEXT))  # the store's tokenizer and settings

    def top(self, q: Question, vector: Sequence[float], scope: str, k: int) -> list[str]:
        query: Any = self.table.search(query_type="hybrid").vector(list(vector)).text(q.question)
        query = query.distance_type("cosine").where(in_scope(scope, q.asked_at), prefilter=True)
        ids: list[str] = query.limit(k).to_arrow()["id"].to_pylist()  # no select: it warns on hybrid
        return ids


def plain_sessions(top: Callable[[int], list[str]], stored: Stored, k: int) -> list[Retrieved]:
    """plain's ranking widened until it names k sessions (or holds every note it can find)."""
    limit = k
    while True:
        ranking = stored.retrieved(top(limit))
        if len(first_sessions(ranking, k)) >= k or len(ranking) < limit:
            return ranking
        limit += 1


# -- one question --------------------------------------------------------------------------------


def run_question(q: Question, embedder: CachedEmbedder) -> dict[str, Any]:
    evidence_turns = [t.key for t in q.evidence]
    evidence_sessions = list(dict.fromkeys(t.session_id for t in q.evidence))
    record: dict[str, Any] = {
        "id": q.id, "kind": q.kind, "question": q.question, "evidence_turns": evidence_turns,
        "evidence_sessions": evidence_sessions, "recall": {}, "ranks": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="lme-recall-") as directory:
        memory = Memory(directory, embedder)
        stored = store_turns(memory, q)
        record["notes"] = len(stored.turns)
        full = stored.retrieved(delivered_notes(memory, q, stored.scope, UNBOUNDED))
        capped = delivered_notes(memory, q, stored.scope, UNBOUNDED, max_chains=KS[0])
        record["max_chains_is_prefix"] = capped == [r.note_id for r in full[: KS[0]]]
        at_default = stored.retrieved(delivered_notes(memory, q, stored.scope, DEFAULT_BUDGET))
        record["delivered"] = {"corrigenda": len(full), "corrigenda @ 2000 tokens": len(at_default)}

        plain = PlainHybrid(directory, memory, stored.scope)
        if plain.table.count_rows() != len(stored.turns):
            raise RuntimeError(f"{q.id}: the plain table holds {plain.table.count_rows()} of {len(stored.turns)} notes")
        vector = embedder.embed([q.question])[0]

        def top(k: int) -> list[str]:
            return plain.top(q, vector, stored.scope, k)

        rankings: dict[str, dict[tuple[str, int], list[Retrieved]]] = {
            "corrigenda": {(level, k): full for level in LEVELS for k in KS},
            "corrigenda @ 2000 tokens": {(level, k): at_default for level in LEVELS for k in KS},
            "plain": {
                **{("turn", k): stored.retrieved(top(k)) for k in KS},
                **{("session", k): plain_sessions(top, stored, k) for k in KS},
            },
        }
        for system, by_cut in rankings.items():
            for (level, k), ranking in by_cut.items():
                measure = session_recall if level == "session" else turn_recall
                wanted = evidence_sessions if level == "session" else evidence_turns
                record["recall"][f"{system}|{level}|{k}"] = measure(ranking, wanted, k)
            longest = by_cut["turn", KS[-1]]
            record["ranks"][system] = {
                "turn": _first_rank([r.turns for r in longest], evidence_turns),
                "session": _first_rank([(s,) for s in first_sessions(longest, UNBOUNDED)], evidence_sessions),
            }
            record.setdefault("top", {})[system] = [r.turns[0] for r in longest[: KS[-1]]]
    return record


def _first_rank(items: Sequence[Sequence[str]], evidence: Sequence[str]) -> int | None:
    """The 1-based position of the first item naming some evidence, None if none does."""
    wanted = set(evidence)
    return next((i for i, names in enumerate(items, 1) if wanted & set(names)), None)


# -- tables --------------------------------------------------------------------------------------


def tally(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """`group|system|level|k` → any/all → [questions found, questions], group `all` or a kind."""
    out: dict[str, dict[str, list[int]]] = {}
    for group in ("all", *KIND_ORDER):
        members = [r for r in records if group in ("all", r["kind"])]
        if not members:
            continue
        for system in SYSTEMS:
            for level in LEVELS:
                for k in KS:
                    found = [r["recall"][f"{system}|{level}|{k}"] for r in members]
                    out[f"{group}|{system}|{level}|{k}"] = {
                        m: [sum(f[m] for f in found), len(found)] for m in ("any", "all")
                    }
    return out


def _rate(k_n: Sequence[int]) -> str:
    return f"{k_n[0] / k_n[1]:.3f} ({k_n[0]}/{k_n[1]})"


def recall_table(payload: dict[str, Any]) -> str:
    """Recall@5 and @10 by session and by turn, any evidence item, then every one, per system."""
    figures = payload["recall"]
    rows = []
    for level in LEVELS:
        for system in SYSTEMS:
            cells = [_rate(figures[f"all|{system}|{level}|{k}"][m]) for m in ("any", "all") for k in KS]
            rows.append([level, system, *cells])
    headers = ["level", "system", *(f"{m} evidence @{k}" for m in ("any", "all") for k in KS)]
    return markdown_table(headers, rows)


def kinds_table(payload: dict[str, Any]) -> str:
    """Recall@5 and @10 (any evidence item), per kind of question, corrigenda beside plain."""
    figures = payload["recall"]
    rows = []
    for group in KIND_ORDER:
        for level in LEVELS:
            if f"{group}|plain|{level}|{KS[0]}" not in figures:
                continue
            found = [figures[f"{group}|{s}|{level}|{k}"]["any"] for k in KS for s in ("corrigenda", "plain")]
            rows.append([group, level, *(f"{k}/{n}" for k, n in found)])
    headers = ["kind", "level", *(f"{s} @{k}" for k in KS for s in ("corrigenda", "plain"))]
    return markdown_table(headers, rows)


def ranks_table(payload: dict[str, Any]) -> str:
    """Where the first evidence item comes in the first 10 notes (plain: `limit(10)`): at rank 1, and
    the mean reciprocal rank (0 when none comes): what recall@5 no longer separates."""
    records = payload["questions"]
    rows = []
    for level in LEVELS:
        for system in SYSTEMS:
            ranks = [r["ranks"][system][level] for r in records]
            mrr = statistics.mean(1 / rank if rank else 0.0 for rank in ranks)
            rows.append([level, system, _rate([sum(rank == 1 for rank in ranks), len(ranks)]), f"{mrr:.3f}"])
    return markdown_table(["level", "system", "first evidence at rank 1", "MRR@10"], rows)


TABLES = {"main": recall_table, "kinds": kinds_table, "ranks": ranks_table}


def shortfalls(records: Sequence[dict[str, Any]]) -> list[str]:
    """Each cell where corrigenda found the evidence of fewer questions than plain, and the questions."""
    lines = []
    for level in LEVELS:
        for k in KS:
            for m in ("any", "all"):
                key = f"|{level}|{k}"
                lost = [
                    r["id"] for r in records if r["recall"]["plain" + key][m] and not r["recall"]["corrigenda" + key][m]
                ]
                won = [
                    r["id"] for r in records if r["recall"]["corrigenda" + key][m] and not r["recall"]["plain" + key][m]
                ]
                if lost or won:
                    lines.append(
                        f"- {level} {m} @{k}: plain only {', '.join(lost) or '—'}; corrigenda only {', '.join(won) or '—'}"
                    )
    return lines


# -- main ----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write every figure and per-question record here")
    parser.add_argument("--limit", type=int, help="only the first N questions with evidence")
    parser.add_argument("--questions", nargs="+", help="only these question ids")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedding-cache", type=Path, help="keep the model's vectors here between runs")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    questions = [q for q in load(args.data) if q.evidence]
    if args.questions:
        unknown = set(args.questions) - {q.id for q in questions}
        if unknown:
            parser.error(f"unknown question ids (or without evidence): {', '.join(sorted(unknown))}")
        questions = [q for q in questions if q.id in set(args.questions)]
    if args.limit is not None:
        questions = questions[: args.limit]

    embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.embedding_cache)
    distinct = embedder.prime([q.question for q in questions] + [t.text for q in questions for t in q.haystacks["s"]])
    if distinct:  # a shared cache is rewritten only when it gained vectors
        embedder.save()
    print(f"- embedded {distinct} distinct texts in {embedder.seconds:.0f} s", file=sys.stderr)

    records = []
    for number, q in enumerate(questions, 1):
        t0 = time.perf_counter()
        records.append(run_question(q, embedder))
        print(f"[{number}/{len(questions)}] {q.id} {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    payload: dict[str, Any] = {
        "questions_measured": len(records),
        "notes_per_question": statistics.mean(r["notes"] for r in records),
        "delivered_median": {s: statistics.median(r["delivered"][s] for r in records) for s in records[0]["delivered"]},
        "max_chains_is_prefix": sum(r["max_chains_is_prefix"] for r in records),
        "recall": tally(records),
    }
    print(f"\n### Evidence recall, LongMemEval S knowledge updates ({len(records)} questions with evidence)")
    print(recall_table(payload))
    print("\n### Per kind (any evidence item)")
    print(kinds_table(payload))
    print("\n### Rank of the first evidence item")
    print(ranks_table({"questions": records}))
    print("\n### Where the two differ (questions)")
    print("\n".join(shortfalls(records)) or "- nowhere")
    print(
        f"\nnotes per question {payload['notes_per_question']:.0f}; notes corrigenda delivered, median: "
        + ", ".join(f"{s} {v:g}" for s, v in payload["delivered_median"].items())
        + f"; max_chains={KS[0]} delivered the first {KS[0]} notes of the unbounded list for "
        f"{payload['max_chains_is_prefix']}/{len(records)} questions"
    )
    total = time.perf_counter() - started
    print(f"Runtime: {total:.0f} s; embedding {embedder.seconds:.0f} s ({distinct} texts)")
    if args.json:
        payload["runtime_seconds"] = {"total": total, "embedding": embedder.seconds}
        write_results(args.json, {**payload, "questions": records})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
