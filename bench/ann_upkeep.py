"""ANN under upkeep: does the vector search still find every note of a store grown by imports?

Issue 35 item 16. While upkeep ran on a store grown by imports to 30,000 notes, Lance warned dozens of
times "partition index is 106 but the number of partitions is 105, skip loading it". This bench grows
one store as a server would see it: `Memory.import_notes` of `--batch` notes at a time (bench/scale.py's
corpus and importer, the real model), with the store's own upkeep running as it does in service (each
write counts towards `compact_if_due` on a thread of its own: index builds, compactions, the vector
index's segments merged, trained again, or its partitions split by Lance). At each size of `--sizes`
it measures twice: right after the last import batch (upkeep may still be running beside the
measurement) and after upkeep has settled (`compact()` until `upkeep_due()` is false):

- recall@20 of the store's vector search (`Tables.vector_search`, through whatever index upkeep left)
  against exact search (`bypass_vector_index()`), for `--queries` questions about the corpus;
- unreachable notes: a sample of `--sample` notes, each searched with its own stored vector (the
  model's vector of its own text) through the store's vector search; a note missing from its own top
  20 is counted, and again if exact search does return it (so only the index can be at fault);
- the index itself: its segments, the partitions of each, and the rows its partitions hold against
  the table's rows; the sampled notes whose vector is nearest the centroid of a partition a warning
  named. (Nearest, not in: a split reassigns only the split partition's rows, so after splits many
  rows sit in a partition other than the nearest; `assignment_matches` is the share of partitions
  whose size the nearest-centroid assignment gets right.)
- Lance's warnings: the Rust log lines on stderr (fd 2 is read through a pipe for the whole run),
  counted by phase, with the partition numbers they name.

Run from the repository root (the real model embeds every note: about 12 minutes for 100k on 2 cores;
`--cache` keeps the vectors for a re-run):

    .venv/bin/python bench/ann_upkeep.py [--sizes 30k,100k] [--batch 2000] [--queries 200] [--sample 2000]
        [--cache PATH] [--keep DIR] [--json PATH]

Results go to bench/results/ann_upkeep.json (`--json` elsewhere); `TABLES` are printed at the end.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import harness
import numpy as np
from corrigenda.store import Memory, SentenceTransformerEmbedder
from corrigenda.store.storage import limits
from embedding_cache import CachedEmbedder
from scale import NOW, PLAIN_TOP, Corpus, MeteredEmbedder, import_corpus, make_corpus, nearest_ids, scope_seed

SCOPE = "s0000"
SETTLE_ROUNDS = 10  # compactions tried before upkeep counts as settled whatever `upkeep_due` says
SKIPPED = re.compile(r"partition index is (\d+) but the number of partitions is (\d+), skip loading it")
SHOWN_WARNINGS = 5  # lines of each kind passed through to the terminal; the rest only counted


class LanceLog:
    """Fd 2 read through a pipe while the bench runs: Lance's Rust log lines are counted (by the phase
    the bench was in) and passed on to the terminal, as is everything else written there."""

    def __init__(self) -> None:
        self.phase = "start"
        self.skipped: Counter[str] = Counter()  # phase -> "skip loading" warnings
        self.named: set[int] = set()  # the partition numbers those warnings named
        self.other: Counter[str] = Counter()  # other WARN/ERROR lines from Lance, by their text
        self.examples: list[str] = []
        self._terminal = os.dup(2)
        read, write = os.pipe()
        sys.stderr.flush()
        os.dup2(write, 2)
        os.close(write)
        self._reader = threading.Thread(target=self._read, args=(read,), name="lance-log", daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode("utf-8", "replace")
                if self._counted(line.rstrip("\n")):
                    os.write(self._terminal, raw)

    def _counted(self, line: str) -> bool:
        """Count a line; whether to show it."""
        found = SKIPPED.search(line)
        if found:
            self.skipped[self.phase] += 1
            self.named.add(int(found[1]))
            if len(self.examples) < SHOWN_WARNINGS:
                self.examples.append(line)
                return True
            return False
        if " WARN " in line or " ERROR " in line:
            text = re.sub(r"^\[[^]]*\]\s*", "", line)
            self.other[text[:200]] += 1
            return self.other[text[:200]] <= 1
        return True

    def close(self) -> None:
        sys.stderr.flush()
        os.dup2(self._terminal, 2)  # the pipe's last writer closes: the reader sees its end
        self._reader.join(10)


# -- the index as Lance reports it ------------------------------------------------------------


def index_state(table: Any, vectors: np.ndarray, addresses: np.ndarray) -> dict[str, Any]:
    """The vector index's segments (partitions, rows each holds), and each note's (segment,
    partition): the partition whose centroid is nearest its vector by cosine, which is where Lance
    puts a row when it assigns it, but not after a split of another partition moved the centroids;
    `assignment_matches`: the share of partitions whose size that assignment reproduces."""
    view = table.to_lance()
    rows = view.count_rows()
    found = [i for i in view.describe_indices() if i.name == limits.VECTOR_INDEX]
    if not found:
        return {"rows": rows, "indexed": False}
    stats = view.stats.index_stats(limits.VECTOR_INDEX)
    segments = []
    fragment_segment: dict[int, int] = {}
    by_uuid = {s.uuid: s for s in found[0].segments}
    for n, segment in enumerate(stats["segments"]):
        for fragment in by_uuid[segment["uuid"]].fragment_ids:
            fragment_segment[fragment] = n
        segments.append(
            {
                "partitions": segment["num_partitions"],
                "rows_in_partitions": sum(p["size"] for p in segment["partitions"]),
                "centroids": np.asarray(segment["centroids"], np.float32),
                "sizes": np.asarray([p["size"] for p in segment["partitions"]]),
            }
        )
    fragments = addresses >> 32
    segment_of = np.asarray([fragment_segment.get(int(f), -1) for f in fragments])
    partition_of = np.full(len(vectors), -1)
    matches = []
    for n, segment in enumerate(segments):
        mine = np.flatnonzero(segment_of == n)
        centroids = segment["centroids"] / np.linalg.norm(segment["centroids"], axis=1, keepdims=True)
        for start in range(0, len(mine), 20_000):
            chunk = mine[start : start + 20_000]
            partition_of[chunk] = np.argmax(vectors[chunk] @ centroids.T, axis=1)
        counted = np.bincount(partition_of[mine], minlength=segment["partitions"])
        matches.append(float(np.mean(counted == segment["sizes"])))
    return {
        "rows": rows,
        "indexed": True,
        "segments": [{"partitions": s["partitions"], "rows_in_partitions": s["rows_in_partitions"]} for s in segments],
        "rows_in_partitions": sum(s["rows_in_partitions"] for s in segments),
        "indexed_rows": stats["num_indexed_rows"],
        "unindexed_rows": stats["num_unindexed_rows"],
        "assignment_matches": min(matches),
        "segment_of": segment_of,
        "partition_of": partition_of,
    }


# -- measuring --------------------------------------------------------------------------------


def table_vectors(table: Any) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every note's id, stored vector and row address, read from the table's latest version."""
    found = table.to_lance().to_table(columns=["id", "vector"], with_row_address=True)
    vectors = found["vector"].combine_chunks().flatten().to_numpy().astype(np.float32).reshape(found.num_rows, -1)
    return found["id"].to_pylist(), vectors, found["_rowaddr"].to_numpy()


def measure(
    memory: Memory, when: str, queries: Sequence[Sequence[float]], sample: int, seed: int, log: LanceLog
) -> dict[str, Any]:
    started = time.perf_counter()
    table = memory.tables.handles.notes_table()
    assert table is not None
    table.checkout_latest()
    ids, vectors, addresses = table_vectors(table)
    state = index_state(table, vectors, addresses)

    recalls = []
    for vector in queries:
        found = {h.id for h in memory.tables.search.vector_search(vector, SCOPE, None, PLAIN_TOP)}
        exact = set(nearest_ids(table, vector, SCOPE, exact=True))
        recalls.append(len(found & exact) / max(1, len(exact)))

    picked = random.Random(f"{seed}:{len(ids)}:{when}").sample(range(len(ids)), min(sample, len(ids)))
    named = log.named
    partition_of = state.get("partition_of")
    in_named = [i for i in picked if partition_of is not None and int(partition_of[i]) in named]
    missed, unreachable = [], []
    for i in picked:
        if ids[i] in {h.id for h in memory.tables.search.vector_search(vectors[i], SCOPE, None, PLAIN_TOP)}:
            continue
        missed.append(i)
        if ids[i] in nearest_ids(table, vectors[i], SCOPE, exact=True):
            unreachable.append(i)
    shown = {k: v for k, v in state.items() if k not in ("segment_of", "partition_of")}
    result = {
        "size": len(ids),
        "when": when,
        "recall_at_20": statistics.fmean(recalls),
        "recall_at_20_min": min(recalls),
        "queries_below_1": sum(r < 1 for r in recalls),
        "queries": len(recalls),
        "sampled": len(picked),
        "missed_own_vector": len(missed),
        "unreachable": len(unreachable),
        "sampled_in_named_partitions": len(in_named),
        "unreachable_in_named_partitions": sum(1 for i in unreachable if i in set(in_named)),
        "unreachable_ids": [ids[i] for i in unreachable],
        "skip_warnings_so_far": sum(log.skipped.values()),
        "partitions_named_so_far": len(named),
        "index": shown,
        "seconds": time.perf_counter() - started,
    }
    print(
        f"  {len(ids):,} notes, {when}: recall@20 {result['recall_at_20']:.4f}, unreachable "
        f"{len(unreachable)}/{len(picked)} (missed {len(missed)}), index {shown.get('segments')}, "
        f"warnings so far {result['skip_warnings_so_far']}",
        file=sys.stderr,
    )
    return result


def settle(memory: Memory) -> int:
    """Compact until upkeep is no longer due (the first call waits for a compaction under way)."""
    rounds = 0
    while rounds < SETTLE_ROUNDS:
        memory.upkeep.compact()
        rounds += 1
        if not memory.upkeep.upkeep_due():
            break
    return rounds


def grow(
    memory: Memory, embedder: MeteredEmbedder, corpus: Corpus, sizes: Sequence[int], args: argparse.Namespace,
    queries: Sequence[Sequence[float]], log: LanceLog,
) -> list[dict[str, Any]]:  # fmt: skip
    measured = []
    done = 0
    for size in sizes:
        log.phase = f"import to {size:,}"
        started = time.perf_counter()
        part = Corpus(corpus.notes[done:size], [], [], [])
        _, imported = import_corpus(memory, embedder, part, SCOPE, args.batch)
        done = size
        print(f"  imported to {size:,} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        log.phase = f"{size:,} after the last import"
        row = measure(memory, "after the last import", queries, args.sample, args.seed, log)
        row["import_seconds"] = imported.seconds
        row["warnings_in_import"] = log.skipped[f"import to {size:,}"]
        measured.append(row)
        log.phase = f"{size:,} settling"
        t = time.perf_counter()
        rounds = settle(memory)
        log.phase = f"{size:,} settled"
        row = measure(memory, "upkeep settled", queries, args.sample, args.seed, log)
        row["settle_compactions"] = rounds
        row["settle_seconds"] = time.perf_counter() - t
        row["warnings_while_settling"] = log.skipped[f"{size:,} settling"]
        measured.append(row)
    return measured


# -- reporting --------------------------------------------------------------------------------


def _main_table(results: dict[str, Any]) -> str:
    rows = []
    for r in results["measured"]:
        index = r["index"]
        rows.append(
            (
                r["size"],
                r["when"],
                r["recall_at_20"],
                f"{r['unreachable']} of {r['sampled']:,}",
                f"{r['unreachable_in_named_partitions']} of {r['sampled_in_named_partitions']:,}",
                r["skip_warnings_so_far"],
                " + ".join(str(s["partitions"]) for s in index.get("segments", [])),
                f"{index['rows_in_partitions'] + index['unindexed_rows']:,} of {index['rows']:,}"
                if index["indexed"]
                else "no index: searched exactly",
            )
        )
    header = (
        "notes", "measured", "recall@20", "unreachable notes (sample)", "of them nearest a warned partition",
        "'skip loading' warnings so far", "index partitions (per segment)", "rows indexed + unindexed",
    )  # fmt: skip
    return harness.markdown_table(header, rows)


def _warnings_table(results: dict[str, Any]) -> str:
    return harness.markdown_table(("phase", "'skip loading' warnings"), list(results["warnings"]["by_phase"].items()))


TABLES: dict[str, Callable[[dict[str, Any]], str]] = {"main": _main_table, "warnings": _warnings_table}


def _size(text: str) -> int:
    """30k, 100k, 12000: a number of notes."""
    text = text.strip().lower()
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="30k,100k", help="sizes to measure at, growing one store (default 30k,100k)")
    parser.add_argument("--batch", type=int, default=2000, help="notes per import_notes call (default 2000)")
    parser.add_argument("--queries", type=int, default=200, help="questions for recall@20 (default 200)")
    parser.add_argument("--sample", type=int, default=2000, help="notes searched by their own vector (default 2000)")
    parser.add_argument("--seed", type=int, default=8, help="corpus seed (default 8, as bench/scale.py)")
    parser.add_argument("--cache", type=Path, help="keep the notes' vectors here (embedding_cache.py) for a re-run")
    parser.add_argument("--keep", type=Path, help="build the store here and keep it (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=harness.RESULTS / "ann_upkeep.json", help="results file")
    args = parser.parse_args(argv)
    sizes = sorted({_size(s) for s in args.sizes.split(",") if s.strip()})

    # `index_state` reads the centroids from Lance's index statistics, which Lance means to leave out
    # by default in a later release (and warns about meanwhile)
    os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "true")
    log = LanceLog()
    started = time.perf_counter()
    try:
        real = SentenceTransformerEmbedder()
        corpus = make_corpus(sizes[-1], scope_seed(args.seed, 0), queries=args.queries)
        queries = real.embed([q.text for q in corpus.queries])
        inner = CachedEmbedder(real, args.cache) if args.cache else real
        embedder = MeteredEmbedder(inner)  # type: ignore[arg-type]
        with tempfile.TemporaryDirectory(prefix="corrigenda-ann-") as temp:
            root = args.keep or Path(temp)
            memory = Memory(str(root / "store"), embedder, clock=lambda: NOW)
            memory.warm(then=gc.freeze).join()
            try:
                measured = grow(memory, embedder, corpus, sizes, args, queries, log)
            finally:
                memory.finish_upkeep(limits.ERASE_WAIT)
                if isinstance(inner, CachedEmbedder):
                    inner.save()
    finally:
        log.close()
    payload = {
        "sizes": sizes,
        "batch": args.batch,
        "queries": args.queries,
        "sample": args.sample,
        "seed": args.seed,
        "model": real.name,
        "embed_seconds": embedder.seconds,
        "seconds": time.perf_counter() - started,
        "measured": measured,
        "warnings": {
            "skip_loading": sum(log.skipped.values()),
            "by_phase": dict(log.skipped),
            "partitions_named": sorted(log.named),
            "examples": log.examples,
            "other_lance_warnings": dict(log.other),
        },
    }
    harness.write_results(args.json, payload)
    results = harness.read_results(args.json)
    for name, table in TABLES.items():
        print(f"\n{name}\n\n{table(results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
