"""Requests: how many requests one writer makes to a bucket, and which part of the store makes them.

On object storage every read, write, listing and delete is a request, and on the three-server bench
(bench/faults.py --local-s3) the writes wait for the S3 server's one process, so requests per write
is what latency there follows. This bench counts them exactly, with no clock in the result: one
writer through `Memory` on a bucket of a local S3 API in this process (bench/local_s3.py), a mix of
remember (about 70 %), correct (20 %) and forget (10 %), each write followed by a recall as another
server's read would be. Upkeep and erasure run in line, right after the write that set them off
(not on their threads), so each request is counted against what made it:

- write: the write calls themselves;
- read: the recall after each write;
- upkeep: the looks at whether compaction is due, and the compactions;
- erasure: the erasure passes of the forgets;
- other: with `--other-writer`, a second `Memory` on the same store (another server) that remembers
  a note before each write and each recall, so every call of the counted writer first meets a
  version it did not make, as on the three-server bench.

    .venv/bin/python bench/s3_requests.py [--writes 150] [--seed 1] [--forgets 0.1] [--compact-at 16]
                                       [--two-pass-cleanup] [--other-writer] [--json PATH]

e.g. `--json bench/results/s3_requests.json`, and with `--other-writer`
`--json bench/results/s3_requests_other_writer.json`.

`--compact-at` and `--two-pass-cleanup` put back what upkeep on a bucket did before cc91a6b (8, and
a cleanup in two passes: versions older than 10 s, then those beyond the newest 20), to compare.
It prints requests per write by phase and kind, compactions and erasure passes (about 2 minutes for
150 writes with the real model).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import harness
from corrigenda.store import Draft, Memory
from corrigenda.store.storage import limits
from corrigenda.store.storage.compaction import Compaction
from corrigenda.store.storage.erasure import Erasure
from corrigenda.store.storage.upkeep import Upkeep
from corrigenda.store.tables import Parts
from local_s3 import KINDS, LocalS3, kind

PHASES = ("write", "read", "upkeep", "erasure", "other")
COUNTED = PHASES[:-1]  # the counted writer's phases: all but the other writer's
BUCKET = "corrigenda-requests"


class Counting:
    """WSGI middleware between the gate and moto: each request counted against the current phase."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.phase = "write"
        self.counts: dict[str, Counter[str]] = {phase: Counter() for phase in PHASES}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        found = kind(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""))
        self.counts[self.phase][found] += 1
        return self.app(environ, start_response)


def two_pass_clean(self: Any, dataset: Any, keep_versions_for: timedelta) -> None:
    """The cleanup on a bucket before cc91a6b: each pass reads every manifest."""
    dataset.cleanup_old_versions(older_than=keep_versions_for, error_if_tagged_old_versions=False)
    if keep_versions_for > timedelta(0):
        dataset.cleanup_old_versions(retain_versions=limits.KEEP_VERSIONS, error_if_tagged_old_versions=False)


def run(
    writes: int, seed: int, forgets: float, compact_at: int | None, two_pass: bool, other_writer: bool
) -> dict[str, Any]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    s3 = LocalS3(port, [BUCKET]).start()
    counting = Counting(s3.gate.app)
    s3.gate.app = counting
    os.environ.update(s3.env)
    if compact_at is not None:
        limits.COMPACT_AT_FRAGMENTS_REMOTE = compact_at
    done: Counter[str] = Counter()

    class InLine(Upkeep):
        """The upkeep after a write, with the compaction in this thread."""

        writes_since_check = 0

        def after_write(self) -> None:
            self.writes_since_check += 1
            if self.writes_since_check >= limits.UPKEEP_CHECK_EVERY_REMOTE:  # on a bucket: remote
                self.writes_since_check = 0
                before, counting.phase = counting.phase, "upkeep" if counting.phase != "other" else "other"
                done["compactions"] += self.compact_if_due()
                counting.phase = before

    class Counted(Erasure):
        def erase_forgotten(self, wait: float = limits.ERASE_WAIT, events: Collection[str] = ()) -> list[str]:
            before, counting.phase = counting.phase, "erasure"
            try:
                return super().erase_forgotten(wait, events)
            finally:
                counting.phase = before
                done["erasure passes"] += 1

    class TwoPass(Compaction):
        def clean_versions(self, dataset: Any, keep_versions_for: timedelta) -> None:
            two_pass_clean(self, dataset, keep_versions_for)

    parts = Parts(upkeep=InLine, erasure=Counted, compaction=TwoPass if two_pass else Compaction)
    try:
        memory = Memory(f"s3://{BUCKET}/store", parts=parts)
        memory.tables.erasure.erase_later = False  # the pass in line, in the forget
        other = Memory(memory.uri, memory.embedder, parts=parts) if other_writer else None
        rng = random.Random(seed)
        ids: list[str] = []

        def elsewhere(i: int, then: str) -> None:
            if other is not None:
                counting.phase = "other"
                other.remember(Draft(text=f"another server's fact {i} ({then})"))
            counting.phase = then

        for i in range(writes):
            elsewhere(i, "write")
            roll = rng.random()
            topic = f"topic {i % 7}"
            if ids and roll < forgets:
                memory.forget(ids.pop(rng.randrange(len(ids))), reason="bench")
            elif ids and roll < forgets + 0.2:
                old = ids.pop(rng.randrange(len(ids)))
                text = f"correction {i} of a fact about {topic}: {rng.random():.4f}"
                ids.append(memory.correct(old, Draft(text=text), reason="bench").note.id)
            else:
                ids.append(memory.remember(Draft(text=f"fact {i} about {topic}: value {rng.random():.4f}")).note.id)
            elsewhere(i, "read")
            memory.recall(topic)
            counting.phase = "write"
    finally:
        s3.stop()
    return {
        "writes": writes, "seed": seed, "forgets": forgets,
        "compact_at": limits.COMPACT_AT_FRAGMENTS_REMOTE, "cleanup": "two passes" if two_pass else "one pass",
        "other_writer": other_writer,
        "compactions": done["compactions"], "erasure_passes": done["erasure passes"],
        "requests": {phase: dict(counting.counts[phase]) for phase in PHASES},
    }  # fmt: skip


def per_write(result: dict[str, Any], *phases: str, request_kind: str | None = None) -> float:
    """Requests (of one kind, or all) per counted write, over the phases named."""
    counts: Counter[str] = Counter()
    for phase in phases:
        counts.update(result["requests"][phase])
    found = sum(counts.values()) if request_kind is None else counts.get(request_kind, 0)
    return round(found / result["writes"], 1)


def table(result: dict[str, Any]) -> str:
    """Requests per write by phase, with the settings of the run, the compactions and the erasure passes."""
    other = per_write(result, "other") if result["other_writer"] else "–"
    erasure = per_write(result, "erasure") if result["erasure_passes"] else "–"
    row = [
        "yes" if result["other_writer"] else "no", f"{result['forgets']:.0%}", result["compact_at"], result["cleanup"],
        per_write(result, "write"), per_write(result, "read"), per_write(result, "upkeep"), erasure,
        per_write(result, *COUNTED), other, result["compactions"], result["erasure_passes"],
    ]  # fmt: skip
    header = [
        "other writer", "forgets", "compaction at (fragments)", "cleanup", "write", "its recall", "upkeep", "erasure",
        "all (the other writer left out)", "the other writer (two remembers a write)", "compactions",
        "erasure passes",
    ]  # fmt: skip
    return harness.markdown_table(header, [row])


def kinds(result: dict[str, Any]) -> str:
    """Requests per write by phase and by kind of request (KINDS)."""
    phases = [*COUNTED, *(["other"] if result["other_writer"] else [])]
    rows: list[list[object]] = [
        [phase, *(per_write(result, phase, request_kind=k) for k in KINDS), per_write(result, phase)]
        for phase in phases
    ]
    label = "all (the other writer left out)" if result["other_writer"] else "all"
    rows.append([label, *(per_write(result, *COUNTED, request_kind=k) for k in KINDS), per_write(result, *COUNTED)])
    return harness.markdown_table(["per write", *KINDS, "all"], rows)


TABLES = {"main": table, "kinds": kinds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--forgets", type=float, default=0.1, help="the share of writes that are forgets")
    parser.add_argument("--compact-at", type=int, help="compact a bucket's table at this many small fragments")
    parser.add_argument("--two-pass-cleanup", action="store_true", help="the cleanup on a bucket before cc91a6b")
    parser.add_argument(
        "--other-writer",
        action="store_true",
        help="another Memory on the store writes before each call (another server)",
    )
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    if not 0 <= args.forgets <= 0.8:
        parser.error("--forgets is a share between 0 and 0.8")
    result = run(args.writes, args.seed, args.forgets, args.compact_at, args.two_pass_cleanup, args.other_writer)
    if args.json:
        harness.write_results(args.json, result)
    print(table(result), kinds(result), sep="\n\n")


if __name__ == "__main__":
    main()
