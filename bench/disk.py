"""Disk: what a burst of single writes leaves on disk, against the live data it holds.

Every LanceDB write is a new version with files of its own; compaction merges them and deletes
versions older than `KEEP_VERSIONS_FOR`. This bench makes N single writes (remember, correct,
link) through `Memory`, one after another as an agent would, with the store's own background upkeep
and nothing else; then it measures the store directory: bytes and files, right after the last
write and once the upkeep that the writes set off has finished. The live data is what the same
store holds once every old version is gone: a copy of it, compacted with nothing kept.

    .venv/bin/python bench/disk.py --writes 2000 --json bench/results/disk.json

The issue's target: at most 3x the live data after 2,000 single writes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from corrigenda.store.storage.limits import KEEP_VERSIONS_FOR

SUBJECTS = (
    "the cache TTL",
    "the deploy branch",
    "the on-call rota",
    "the build host",
    "the log level",
    "the API quota",
)


def usage(root: str) -> tuple[int, int]:
    """Bytes and files under a directory."""
    total = files = 0
    for folder, _, names in os.walk(root):
        for name in names:
            total += os.path.getsize(os.path.join(folder, name))
            files += 1
    return total, files


def wait_for_upkeep() -> None:
    for thread in threading.enumerate():
        if thread.name == "corrigenda-compact":
            thread.join()


def live_bytes(store: str) -> tuple[int, int]:
    """What the store holds with every old version gone: measured on a copy, compacted keeping nothing."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "store")
        shutil.copytree(store, copy)
        Memory(copy, SentenceTransformerEmbedder()).upkeep.compact(keep_versions_for=timedelta(0))
        return usage(copy)


def run(writes: int, seed: int, checkpoints: int, keep: Path | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        store = str(keep) if keep else os.path.join(scratch, "store")
        memory = Memory(store, SentenceTransformerEmbedder())
        ids: list[str] = []
        counts = {"remember": 0, "correct": 0, "link": 0}
        started = time.perf_counter()
        every = max(1, writes // checkpoints)
        for i in range(1, writes + 1):
            subject = rng.choice(SUBJECTS)
            text = f"Note {i}: {subject} is {rng.randint(1, 10_000)} as of build {rng.getrandbits(32):08x}"
            roll = rng.random()
            if ids and roll < 0.2:
                target = rng.choice(ids)  # perhaps replaced already: fork, as the write's cost is what counts
                ids.append(memory.correct(target, Draft(text=text), reason="changed", fork=True).note.id)
                counts["correct"] += 1
            elif len(ids) > 1 and roll < 0.3:
                src, dst = rng.sample(ids, 2)
                try:
                    memory.link(src, dst, "depends_on", reason="uses it")
                except Exception:  # a refused link (e.g. it already exists) is still a call, not a write
                    continue
                counts["link"] += 1
            else:
                ids.append(memory.remember(Draft(text=text)).note.id)
                counts["remember"] += 1
            if i % every == 0 or i == writes:
                size, files = usage(store)
                seconds = round(time.perf_counter() - started, 1)
                paused = time.perf_counter()
                rows.append(
                    {"writes": i, "seconds": seconds, "bytes": size, "files": files, "live": live_bytes(store)[0]}
                )
                started += time.perf_counter() - paused  # measuring the live data is not the writes' time
                print(f"  {i} writes: {size / 2**20:.1f} MiB in {files} files", file=sys.stderr, flush=True)
        at_end = usage(store)
        wait_for_upkeep()
        settled = usage(store)
        live = live_bytes(store)
    return {
        "writes": writes,
        "seed": seed,
        "mix": counts,
        "keep_versions_for_s": KEEP_VERSIONS_FOR.total_seconds(),
        "checkpoints": rows,
        "after_last_write": {"bytes": at_end[0], "files": at_end[1]},
        "after_upkeep": {"bytes": settled[0], "files": settled[1]},
        "live": {"bytes": live[0], "files": live[1]},
        "ratio_after_last_write": round(at_end[0] / live[0], 2),
        "ratio_after_upkeep": round(settled[0] / live[0], 2),
    }


def table(result: dict[str, Any]) -> str:
    """Disk and files along the writes, once the upkeep is done, and the live data, in MiB and as a multiple of the live data."""
    rows: list[list[object]] = [
        [f"{row['writes']:,} writes ({row['seconds']} s)", round(row["bytes"] / 2**20, 1), row["files"],
         round(row["bytes"] / row["live"], 2)]
        for row in result["checkpoints"]
    ]  # fmt: skip
    settled, live = result["after_upkeep"], result["live"]
    rows.append(["upkeep finished", round(settled["bytes"] / 2**20, 1), settled["files"], result["ratio_after_upkeep"]])
    rows.append([f"live data, {result['writes']:,} writes", round(live["bytes"] / 2**20, 1), live["files"], 1.0])
    return harness.markdown_table(["after", "disk MiB", "files", "× the live data then"], rows)


def mix(result: dict[str, Any]) -> str:
    """What the writes were, and how long old versions are kept."""
    counts = result["mix"]
    return harness.markdown_table(
        ["single writes", *counts, "versions kept (s)"],
        [[result["writes"], *counts.values(), result["keep_versions_for_s"]]],
    )


TABLES = {"main": table, "mix": mix}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--checkpoints", type=int, default=4, help="how many times to measure along the way")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--keep", type=Path, help="make the store here and leave it (default: a temp dir)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = run(args.writes, args.seed, args.checkpoints, args.keep)
    if args.json:
        harness.write_results(args.json, result)
    print(mix(result), table(result), sep="\n\n")


if __name__ == "__main__":
    main()
