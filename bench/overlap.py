"""Overlap: a write's note embedded beside its reads, against embedded before them, call by call.

`remember` and `correct` start the model on their note on a thread of their own and read meanwhile
(docs/design.md, "How it works": the model beside the reads). This bench measures what that saves in one
process on one store, the two ways interleaved so that the machine's load falls on both alike: the
way the store does it, and the way it did before (the note embedded first, then every read), made
by replacing `Writes.embed_note` (store/writes.py) with one that embeds at once. Each round calls `remember` and
`correct` once each way, alternating which way goes first; the first `--warm` rounds are not
counted.

The store: `--notes` notes of bench/scale.py's synthetic corpus in one scope, imported with the
real model and compacted; the remembered texts are variants of corpus notes, and each correction
(with `fork`, as any note may be corrected however often) replaces a different corpus note.

    .venv/bin/python bench/overlap.py [--notes 10000] [--rounds 160] [--json bench/results/overlap.json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from corrigenda.store.writes import Writes
from scale import make_corpus, ms_summary  # bench/scale.py: sys.path[0] is bench/ when run as a script

IMPORT_BATCH = 2000


def embedded_first(self: Writes, text: str) -> Future[list[float]]:
    """The way before: the note embedded at once, before the write reads anything."""
    done: Future[list[float]] = Future()
    done.set_result(self.embedder.embed([text])[0])
    return done


def run(notes: int, rounds: int, warm: int, seed: int) -> dict[str, Any]:
    beside = Writes.embed_note
    ways = {"beside": beside, "first": embedded_first}
    rng = random.Random(seed)
    timings: dict[str, list[float]] = {f"{op} {way}": [] for op in ("remember", "correct") for way in ways}
    with tempfile.TemporaryDirectory() as scratch:
        memory = Memory(f"{scratch}/store", SentenceTransformerEmbedder())
        corpus = make_corpus(notes, f"overlap-{seed}", queries=0)
        ids: list[str] = []
        for start in range(0, notes, IMPORT_BATCH):
            drafts = [Draft(text=n.text, subject=n.subject) for n in corpus.notes[start : start + IMPORT_BATCH]]
            ids += [view.id for view in memory.import_notes(drafts, scope="s")]
        memory.upkeep.compact()
        targets = rng.sample(range(notes), 2 * rounds)
        try:
            for i in range(rounds):
                for way in list(ways) if i % 2 else list(reversed(ways)):
                    Writes.embed_note = ways[way]  # type: ignore[method-assign]
                    text = f"{corpus.notes[rng.randrange(notes)].text} (variant {i}, {way})"
                    started = time.perf_counter()
                    memory.remember(Draft(text=text), scope="s")
                    remembered = time.perf_counter() - started
                    target = targets.pop()
                    started = time.perf_counter()
                    memory.correct(ids[target], Draft(text=f"{corpus.notes[target].text} (as of round {i})"),
                                   reason="a later value (bench)", fork=True)  # fmt: skip
                    corrected = time.perf_counter() - started
                    if i >= warm:
                        timings[f"remember {way}"].append(remembered)
                        timings[f"correct {way}"].append(corrected)
        finally:
            Writes.embed_note = beside  # type: ignore[method-assign]
    summary = {name: ms_summary(seconds) for name, seconds in timings.items()}
    for op in ("remember", "correct"):
        summary[f"{op} saved"] = {
            "p50_ms": summary[f"{op} first"]["p50_ms"] - summary[f"{op} beside"]["p50_ms"],
            "median_ratio": statistics.median(
                b / f for b, f in zip(timings[f"{op} beside"], timings[f"{op} first"], strict=True)
            ),
        }
    return {"notes": notes, "rounds": rounds, "warm": warm, "seed": seed, "summary": summary}


def table(result: dict[str, Any]) -> str:
    """Each call's p50 and p99 both ways, what the store's way saves at the p50, and the median ratio per call."""
    s = result["summary"]
    rows = []
    for op in ("remember", "correct"):
        beside, first, saved = s[f"{op} beside"], s[f"{op} first"], s[f"{op} saved"]
        rows.append([
            op, beside["n"],
            round(beside["p50_ms"], 1), round(beside["p99_ms"], 1), round(first["p50_ms"], 1), round(first["p99_ms"], 1),
            round(saved["p50_ms"], 1), round(saved["median_ratio"], 2),
        ])  # fmt: skip
    header = [
        "call", "calls each way", "embedded beside the reads, p50 ms", "beside, p99 ms", "embedded first, p50 ms",
        "first, p99 ms", "saved at the p50, ms", "per call, median ratio beside / first",
    ]  # fmt: skip
    return harness.markdown_table(header, rows)


TABLES = {"main": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=160)
    parser.add_argument("--warm", type=int, default=10, help="rounds not counted (default 10)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    if args.warm >= args.rounds:
        parser.error("--warm must be less than --rounds")
    result = run(args.notes, args.rounds, args.warm, args.seed)
    if args.json:
        harness.write_results(args.json, result)
    print(f"{result['notes']:,} notes in one scope, calls interleaved, real model", table(result), sep="\n\n")


if __name__ == "__main__":
    main()
