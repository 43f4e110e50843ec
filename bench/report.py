"""Put the benches' tables into the docs, from the results files the benches wrote.

A block in a markdown file under ``docs/`` (or the README) reads

    <!-- results: scale -->
    (generated: the command, the date, the table)
    <!-- end results -->

``scale`` names the results file ``bench/results/scale.json``, whose run record names the bench that
wrote it (``bench/scale.py``); ``scale/writes`` names the table ``writes`` of that bench's ``TABLES``
(``main`` when no name is given). One bench may write several results files (e.g. ``faults.json`` and
``faults_servers.json``, from two commands).

    .venv/bin/python bench/report.py            # rewrite the blocks
    .venv/bin/python bench/report.py --check    # exit 1 naming each block that is out of date
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from harness import RESULTS, ROOT, read_results

BLOCK = re.compile(r"(<!-- results: ([\w-]+)(?:/([\w-]+))? -->\n)(.*?)(<!-- end results -->)", re.S)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def render(name: str, table: str = "main") -> str:
    """The block's text for one table of one results file."""
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"a results block names {name!r}, but there is no {path.relative_to(ROOT)}")
    results = read_results(path)
    run = results["run"]
    bench = Path(shlex.split(run["command"])[1]).stem
    tables: dict[str, Callable[[dict[str, Any]], str]] = _module(bench).TABLES
    if table not in tables:
        raise SystemExit(f"bench/{bench}.py has no table {table!r} (it has {', '.join(tables)})")
    header = f"`{run['command']}` · {run['date']} · commit {run['commit']} · {run['cpus']} CPUs, load {run['load_1m']}"
    return f"{header}\n\n{tables[table](results).rstrip()}\n"


def blocks(text: str) -> Iterator[re.Match[str]]:
    return BLOCK.finditer(text)


def refreshed(text: str) -> str:
    return BLOCK.sub(lambda m: m[1] + render(m[2], m[3] or "main") + m[5], text)


@cache
def _module(bench: str) -> ModuleType:
    path = ROOT / "bench" / f"{bench}.py"
    if not path.is_file():
        raise SystemExit(f"a results block names {bench!r}, but there is no bench/{bench}.py")
    spec = importlib.util.spec_from_file_location(f"bench_{bench}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        new = refreshed(text)
        if new != text:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    verb = "out of date" if args.check else "rewritten"
    for name in stale:
        print(f"{name}: {verb}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
