"""What every bench shares: its command line, repeated runs, percentiles, the record of a run, its
results file, and the markdown its tables become.

A bench ends with ``harness.write_results(path, payload)``: the payload gains a ``run`` entry (the
command as typed from the repository root, the date, the commit and whether the working tree had
changes, the machine's CPUs and load), and goes to ``path``, by convention ``bench/results/NAME.json``.

A bench also names the tables the docs show, as ``TABLES = {"name": function}``: each function takes
the results file's payload and returns a markdown table. ``bench/report.py`` puts them in the docs
between markers, with the command and the date; ``tests/test_docs.py`` checks that the docs hold
what the results files say, so no figure in the docs is edited by hand.

Benches that start servers share `free_port()`; those that run on a bucket, `local_s3()`: a local S3 API
(bench/local_s3.py) in its own process for the run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
LOCAL_BUCKET = "corrigenda-bench"  # the bucket of a local S3 API started for a run (`local_s3`)


T = TypeVar("T")


def parser(doc: str | None, *, runs: int | None = None, results: str | None = None) -> argparse.ArgumentParser:
    """A bench's command line: described by its docstring's first line; `--runs N` when `runs` (the
    default count) is given; `--json PATH`, by default `bench/results/RESULTS.json` when `results` is
    given, else only when asked for."""
    parsed = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    if runs is not None:
        parsed.add_argument("--runs", type=_at_least_one, default=runs, help=f"number of runs (default {runs})")
    if results is not None:
        parsed.add_argument("--json", type=Path, default=RESULTS / f"{results}.json", help="the results file")
    else:
        parsed.add_argument("--json", type=Path, help="also write every figure here")
    return parsed


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def repeat(one_run: Callable[[], T], runs: int, describe: Callable[[T], str] = str) -> list[T]:
    """`one_run()` `runs` times; each run's figures on stderr as it ends (`describe`)."""
    done = []
    for i in range(runs):
        done.append(one_run())
        print(f"run {i + 1}/{runs}: {describe(done[-1])}", file=sys.stderr)
    return done


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear between order statistics (numpy's default): p99 of 60 values
    lies near the worst."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def run_record(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """What was run, when, on what code and on what machine."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    shown = [str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else argv[0], *argv[1:]]
    return {
        "command": ".venv/bin/python " + shlex.join(_relative(a) for a in shown),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 1),
    }


def write_results(path: Path | str, payload: dict[str, Any], argv: Sequence[str] | None = None) -> None:
    """Write the payload with its run record (taken when the bench started, so a commit made while it
    ran is not credited to it), whole or not at all (a temp file renamed into place)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    run = _AT_START if argv is None else run_record(argv)
    record = {"run": run, **{k: v for k, v in payload.items() if k != "run"}}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    partial.replace(path)


def read_results(path: Path | str) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table; numbers right-aligned, everything else left."""
    if not rows:
        raise ValueError("a table needs at least one row")
    numeric = [all(isinstance(row[i], int | float) or row[i] in ("", "–") for row in rows) for i in range(len(header))]
    lines = [
        "| " + " | ".join(_cell(name) for name in header) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):  # the same decimals for the same magnitude, so a column lines up
        decimals = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2 if abs(value) >= 1 else 3
        return f"{value:,.{decimals}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def _relative(arg: str) -> str:
    path = Path(arg)
    if path.is_absolute() and path.is_relative_to(ROOT):
        return str(path.relative_to(ROOT))
    return arg


def commit() -> str:
    """HEAD's short hash, marked when store/, server/ or bench/ (results aside) differ from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "store", "server", "bench", ":!bench/results")
    return f"{commit} + uncommitted changes" if changed else commit


_AT_START = run_record()  # benches import this module first thing: the code and the load they start on


def ms_summary(seconds: Sequence[float]) -> dict[str, float]:
    """Timings in seconds as milliseconds: p50, p99, mean (statistics.fmean's exact sum) and how many."""
    ms = [s * 1000 for s in seconds]
    return {
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "mean_ms": math.fsum(ms) / len(ms),
        "n": len(ms),
    }


def free_port() -> int:
    """A loopback TCP port that nothing listens on now (the OS's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_s3(wanted: bool, dispatcher: bool = False) -> Iterator[dict[str, str]]:
    """A local S3 API in its own process (bench/local_s3.py) with its AWS variables set in this one; {} if not wanted."""
    if not wanted:
        yield {}
        return
    port = free_port()
    script = Path(__file__).with_name("local_s3.py")
    cmd = [sys.executable, str(script), "--port", str(port), "--bucket", LOCAL_BUCKET, *(["--dispatcher"] * dispatcher)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        env = dict(pair.split("=", 1) for pair in proc.stdout.readline().split())
        os.environ.update(env)
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=30)
