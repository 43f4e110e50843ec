"""CLI commands: how long `corrigenda remember`, `recall` and `scopes` take from the shell to their answer.

Each is a new process, as when a person types it: it imports what it needs, opens the store and, for
`remember` and `recall`, loads the model. Each run gets a fresh temporary store, seeded (untimed) by
one `corrigenda remember`; then each command runs once, timed from spawn to exit, and must exit 0.
The commands get HF_HUB_OFFLINE=1 and run outside any work tree (the scope is "default").

Run from the repository root:

    .venv/bin/python bench/cli_start.py [--runs N] [--json PATH]

It prints median, min and max of each command's seconds over the runs as a markdown table; --json
also writes every run's figures (bench/harness.py).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
COMMANDS = {
    "remember": ["remember", "deploys run on Tuesdays after the standup"],
    "recall": ["recall", "when do deploys run?"],
    "scopes": ["scopes"],
}


def _run(args: Sequence[str], db: str) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [CORRIGENDA, *args, "--db", db], capture_output=True, text=True, timeout=300, env=env, cwd=tempfile.gettempdir()
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"corrigenda {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return seconds


def one_run() -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="corrigenda-cli-") as directory:
        db = os.path.join(directory, "store")
        _run(["remember", "the service listens on 9090"], db)
        return {name: _run(args, db) for name, args in COMMANDS.items()}


def table(results: dict[str, Any]) -> str:
    rows = []
    for name in COMMANDS:
        seconds = [run[name] for run in results["runs"]]
        rows.append(
            [f"`corrigenda {name}`", f"{statistics.median(seconds):.2f}", f"{min(seconds):.2f}", f"{max(seconds):.2f}"]
        )
    return harness.markdown_table(["command (seconds, spawn to exit)", "median", "min", "max"], rows)


TABLES = {"main": table}


def main(argv: Sequence[str] | None = None) -> int:
    args = harness.parser(__doc__, runs=5).parse_args(argv)
    runs = harness.repeat(one_run, args.runs, lambda r: ", ".join(f"{k} {v:.2f} s" for k, v in r.items()))
    payload = {"commands": {name: " ".join(a) for name, a in COMMANDS.items()}, "runs": runs}
    print(table(payload))
    if args.json:
        harness.write_results(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
