"""Put the benches' tables into the docs, from the results files the benches wrote.

A block in a markdown file under ``docs/`` (or the README) reads

    <!-- results: scale -->
    (generated: the command, the date, the table)
    <!-- end results -->

``scale`` names the results file ``bench/results/scale.json``, whose run record names the bench that
wrote it (``bench/scale.py``); ``scale/writes`` names the table ``writes`` of that bench's ``TABLES``
(``main`` when no name is given). One bench may write several results files (e.g. ``faults.json`` and
``faults_servers.json``, from two commands). ``headline`` is the README's table, a row from each
truth benchmark's results file and one from the scale bench's.

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

from harness import RESULTS, ROOT, markdown_table, read_results

BLOCK = re.compile(r"(<!-- results: ([\w-]+)(?:/([\w-]+))? -->\n)(.*?)(<!-- end results -->)", re.S)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def render(name: str, table: str = "main") -> str:
    """The block's text for one table of one results file."""
    if name == "headline":
        return headline()
    results = _results(name)
    run = results["run"]
    bench = Path(shlex.split(run["command"])[1]).stem
    tables: dict[str, Callable[[dict[str, Any]], str]] = _module(bench).TABLES
    if table not in tables:
        raise SystemExit(f"bench/{bench}.py has no table {table!r} (it has {', '.join(tables)})")
    header = f"`{run['command']}` · {run['date']} · commit {run['commit']} · {run['cpus']} CPUs, load {run['load_1m']}"
    return f"{header}\n\n{tables[table](results).rstrip()}\n"


def _results(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"a results block names {name!r}, but there is no {path.relative_to(ROOT)}")
    results = read_results(path)
    if "run" not in results:
        raise SystemExit(f"{path.relative_to(ROOT)} has no run record: run its bench again")
    return results


def headline() -> str:
    """One row per truth benchmark and one for speed, each naming the run it comes from."""
    seed003, seed000, dsgc, lme, scale = (
        _results(n) for n in ("seed003", "seed000", "dsgc", "longmemeval_ku", "scale")
    )
    lexical, ours = (seed003["policies"][k]["measured"] for k in ("lexical", "corrigenda"))
    figures = {f["policy"]: f for f in seed000["figures"]}

    def separated(policy: str) -> str:
        r = figures[policy]["separation_failure_all"]
        return f"{100 * r['rate']:.0f} % ({r['count']}/{r['of']})"

    def dsgc_cell(policy: str) -> str:
        cell = next(
            c for c in dsgc["cells"]
            if (c["encoder"], c["blocks"], c["multiplier"], c["group"], c["policy"]) == ("lexical", 50, 2.0, "target", policy)
        )  # fmt: skip
        return f"{cell['full_chain']:.2f}"

    s512 = {system: lme["recall"]["s"][f"all|{system}|512"] for system in ("edges", "dense")}

    def rate(k_n: list[int]) -> str:
        return f"{k_n[0] / k_n[1]:.2f} ({k_n[0]}/{k_n[1]})"

    size = next(r for r in scale["sizes"] if r["size"] == "100k")
    rows = [
        [
            "Versioned facts in Chinese, 24 queries: right / stale answers",
            f"lexical overlap: {lexical['right']} / {lexical['stale']}",
            f"**{ours['right']}** / **{ours['stale']}**",
            "[seed 003](docs/benchmarks.md#versioned-facts-in-chinese-seed-003)",
        ],
        [
            "Stale note delivered without its successor",
            f"top-10: {separated('top-10')}",
            f"**{separated('corrigenda @ top-10 budget')}** at the top-10 budget",
            "[seed 000](docs/benchmarks.md#closure-top-k-and-mmr-against-chains-seed-000)",
        ],
        [
            "Full prerequisite chain kept, lexical encoder, 50 blocks, M = 2",
            f"similarity-only {dsgc_cell('similarity')}, DSGC λ=1 {dsgc_cell('dsgc_1')}",
            f"**{dsgc_cell('corrigenda')}**",
            "[DSGC](docs/benchmarks.md#prerequisite-chains-under-a-budget-seed-002-dsgc)",
        ],
        [
            "LongMemEval knowledge updates (S, 512 tokens): stale head",
            f"dense top-k: {rate(s512['dense']['stale head'])}",
            f"**{rate(s512['edges']['stale head'])}**; current@1 **{rate(s512['edges']['current@1'])}**",
            "[LongMemEval](docs/benchmarks.md#longmemeval-knowledge-updates)",
        ],
        [
            "recall_chains p50 at 100k notes, the query vector made beforehand",
            f"plain LanceDB hybrid top-20: {size['plain_hybrid']['p50_ms']:.1f} ms",
            f"{size['recall']['p50_ms']:.1f} ms ({size['ratio_p50']:.2f}×)",
            "[scale](docs/scale.md#scale-benchscalepy)",
        ],
    ]
    faults, servers = _results("faults"), _results("faults_servers")
    kills = [p for p in faults["phases"] if p["phase"].startswith("kill")]
    rows.append(
        [
            f"`kill -9` during writes, compaction and forget: {sum(p['trials'] for p in kills)} trials, "
            f"{sum(p['acknowledged'] for p in kills):,} acknowledged writes",
            "",
            ", ".join(
                f"{sum(p[k] for p in kills)} {k.replace('_', ' ')}"
                for k in ("lost", "duplicated", "corrupt", "leaked_bytes")
            ),
            "[faults](docs/faults.md)",
        ]
    )
    (phase,) = [p for p in servers["phases"] if "write_latency_ms" in p]
    every = phase["write_latency_ms"]["all writes"]
    rows.append(
        [
            f"{servers['settings']['servers']} servers writing at once to one S3 bucket (moto's, on loopback)",
            "",
            f"write p50 {every['p50']:.0f} ms, p99 {every['p99'] / 1000:.2f} s; {phase['lost']} lost",
            "[object storage](docs/object-storage.md#latency)",
        ]
    )
    named = [("seed003", seed003), ("seed000", seed000), ("dsgc", dsgc), ("longmemeval_ku", lme), ("scale", scale)]
    named += [("faults", faults), ("faults_servers", servers)]
    runs = ", ".join(f"{name} {r['run']['date']} ({r['run']['commit']})" for name, r in named)
    table = markdown_table(["what", "baseline", "corrigenda", "where"], rows)
    return f"From `bench/results/` ({runs}); `.venv/bin/python bench/report.py` rewrites it.\n\n{table}\n"


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
    sys.modules[spec.name] = module  # dataclasses look their module up there
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
