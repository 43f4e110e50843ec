"""bench/scale.py's results: the table it prints (a column per size), the burst's table, the targets of
issue 8 met or missed, the tables the docs show (`TABLES`, through bench/report.py), and the results
file."""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from corrigenda.store import SentenceTransformerEmbedder
from harness import markdown_table, write_results
from scale_corpus import QUERIES
from scale_measure import QueryRecord, SizeResult, is_remote
from scale_size import SIZES


def _ms(summary: dict[str, float]) -> str:
    return f"{summary['p50_ms']:.1f} / {summary['p99_ms']:.1f}" if summary else "-"


def _mib(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "n/a"


def _indexes(found: list[dict[str, Any]]) -> str:
    return ", ".join(f"{'+'.join(i['columns'])}:{i['type']}" for i in found) or "none"


def table(results: Sequence[SizeResult]) -> str:
    def row(label: str, cell: Callable[[SizeResult], str]) -> str:
        return f"| {label} | " + " | ".join(cell(r) for r in results) + " |"

    def size_label(r: SizeResult) -> str:
        return f"{r.size} ({r.scopes:,} scopes)" if r.scopes > 1 else f"{r.size} (1 scope)"

    def cache(r: SizeResult, key: str) -> str:
        return _ms(r.graph_cache[key]) if r.graph_cache else "-"

    remote = any(is_remote(r.store) for r in results)

    lines = [
        "| metric | " + " | ".join(size_label(r) for r in results) + " |",
        "|---|" + "---|" * len(results),
        row("store", lambda r: f"`{r.store}`"),
        row("notes / events in the store", lambda r: f"{r.notes:,} / {r.events:,}"),
        row("notes in the measured scope", lambda r: f"{r.notes // r.scopes:,}"),
        row("recall_chains p50 / p99 ms (query vector precomputed)", lambda r: _ms(r.recall)),
        row("plain LanceDB hybrid top-20 p50 / p99 ms", lambda r: _ms(r.plain_hybrid)),
        row("ratio recall / plain, p50s (median per query)",
            lambda r: f"{r.ratio_p50:.2f} ({r.ratio_per_query_median:.2f})"),
        row("recall_chains with the model in the call p50 / p99 ms", lambda r: _ms(r.recall_with_model)),
        row("model alone, one query p50 / p99 ms", lambda r: _ms(r.query_embed)),
        row("graph cache: recall p50 / p99 ms, cache kept", lambda r: cache(r, "recall_cached")),
        row("graph cache: recall p50 / p99 ms, cache defeated (forget() before each)",
            lambda r: cache(r, "recall_cache_defeated")),
        row("graph cache: defeated / kept, ratio of p50s (ms saved); per query, median ratio (ms saved)",
            lambda r: f"{r.graph_cache['p50_ratio']:.2f} ({r.graph_cache['p50_saved_ms']:.1f}); "
            f"{r.graph_cache['per_query_median_ratio']:.2f} ({r.graph_cache['per_query_median_saved_ms']:.1f})"
            if r.graph_cache else "-"),
        row("graph cache: graphs.get(scope) alone p50 / p99 ms: kept; read again",
            lambda r: f"{cache(r, 'graph_get_cached')}; {cache(r, 'graph_get_read')}"),
        row("graph cache: recall p50 / p99 ms right after another process wrote an edge",
            lambda r: cache(r, "recall_after_peer_write") if "recall_after_peer_write" in r.graph_cache else "-"),
        row("1M: recall p50 / the 1k store's p50, same queries",
            lambda r: f"{r.vs_1k_p50:.2f}" if r.vs_1k_p50 is not None else "-"),
        row("chains / notes delivered per recall (mean)",
            lambda r: f"{statistics.fmean(q.chains for q in r.queries):.1f} / "
            f"{statistics.fmean(q.notes_delivered for q in r.queries):.1f}"),
        row("ANN recall@20, store vector search vs exact", lambda r: f"{r.store_ann_recall:.3f}"),
        row("ANN recall@20, plain table's index vs exact",
            lambda r: f"{r.plain_ann_recall:.3f}" if r.plain_ann_recall is not None else "exact (no ANN)"),
        row("remember p50 / p99 ms", lambda r: _ms(r.writes["remember"])),
        row("correct p50 / p99 ms", lambda r: _ms(r.writes["correct"])),
        row("link (depends_on) p50 / p99 ms", lambda r: _ms(r.writes["link"])),
        row("model alone, one note p50 ms", lambda r: f"{r.note_embed['p50_ms']:.1f}"),
        row("bulk import, real model, notes/s",
            lambda r: f"{r.build['import_rate']:.0f} ({r.build['import_notes']:,} notes)"),
        row("  of which in the model", lambda r: f"{100 * r.build['import_embed_share']:.0f} %"),
        row("  model's bare embed rate, texts/s: mean (before, after; sample)",
            lambda r: f"{r.build['bare_embed_rate']:.0f} ({r.build['bare_embed_rate_before_after'][0]:.0f}, "
            f"{r.build['bare_embed_rate_before_after'][1]:.0f}; {r.build['bare_embed_sample']:,})"),
        row("  the model's rate inside the import, texts/s", lambda r: f"{r.build['model_rate_in_import']:.0f}"),
        row("  import / bare model rate", lambda r: f"{100 * r.build['import_vs_bare']:.0f} %"),
        row("1M: stand-in scopes written (add_notes), notes/s",
            lambda r: f"{r.build['stand_in_import_rate']:.0f} ({r.build['stand_in_import_notes']:,} notes, "
            f"{100 * r.build['stand_in_embed_share']:.0f} % in the stand-in)" if "stand_in_import_rate" in r.build else "-"),
        row("edges written (direct add_events) s", lambda r: f"{r.build['events_seconds']:.1f}"),
        row("upkeep: tables.compact() s", lambda r: f"{r.build['compact_seconds']:.1f}"),
        row("events in the scope's in-memory graph", lambda r: f"{r.graph_events:,}"),
        row("RSS after the size / peak so far MiB", lambda r: f"{r.rss_mib:.0f} / {r.peak_rss_mib:.0f}"),
        row("stored: store / plain table MiB" + (" (objects in the bucket)" if remote else " (on disk)"),
            lambda r: f"{_mib(r.disk_store_mib)} / {_mib(r.disk_plain_mib)}"),
        row("plain: copy + index build s",
            lambda r: f"{r.plain['copy_seconds']:.0f} + {sum(r.plain['index_seconds'].values()):.0f}"),
        row("wall time of the size s", lambda r: f"{r.seconds:.0f}"),
        row("machine load average (1 min) at start / end",
            lambda r: f"{r.load_average[0]:.1f} / {r.load_average[1]:.1f}"),
    ]  # fmt: skip
    return "\n".join(lines)


def burst_table(results: Sequence[SizeResult]) -> str:
    """Issue 36's case (`--burst`): the writes, and the queries right after them and once upkeep settled."""
    burst = [r for r in results if r.after_burst]
    if not burst:
        return "(no --burst in this run)"

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(cell(r.after_burst) for r in burst) + " |"

    def state(b: dict[str, Any]) -> str:
        return (f"{b['fragments']['notes']} / {b['fragments']['events']} fragments; "
                f"{b['notes_unindexed_rows']:,} / {b['events_unindexed_rows']:,} rows")  # fmt: skip

    lines = [
        "| after a burst of writes | " + " | ".join(f"{r.size} (1 scope)" for r in burst) + " |",
        "|---|" + "---|" * len(burst),
        row("writes: corrections, then links (depends_on)", lambda b: f"{b['corrections']:,}, {b['links']:,}"),
        row("writes p50 / p99 ms (all)", lambda b: _ms(b["writes"])),
        row("  correct; link p50 / p99 ms", lambda b: f"{_ms(b['correct'])}; {_ms(b['link'])}"),
        row("right after: recall p50 / p99 ms", lambda b: _ms(b["after"]["recall"])),
        row("right after: plain hybrid p50 / p99 ms", lambda b: _ms(b["after"]["plain_hybrid"])),
        row("right after: ratio of p50s (median per query)",
            lambda b: f"{b['after']['ratio_p50']:.2f} ({b['after']['ratio_per_query_median']:.2f})"),
        row("right after: notes / events table, fragments; rows outside the id index",
            lambda b: state(b["after"]["upkeep_state"])),
        row("upkeep settled (tables.compact()) s", lambda b: f"{b['settle_seconds']:.1f}"),
        row("settled: recall / plain p50 ms", lambda b: f"{b['settled']['recall']['p50_ms']:.1f} / "
            f"{b['settled']['plain_hybrid']['p50_ms']:.1f}"),
        row("settled: ratio of p50s (median per query)",
            lambda b: f"{b['settled']['ratio_p50']:.2f} ({b['settled']['ratio_per_query_median']:.2f})"),
        row("machine load average (1 min) at the burst's start / end",
            lambda b: f"{b['load_average'][0]:.1f} / {b['load_average'][1]:.1f}"),
    ]  # fmt: skip
    return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    label: str
    size: str
    value: Callable[[SizeResult], float | None]
    limit: float
    at_least: bool = False
    unit: str = ""


def _write_p50(kind: str) -> Callable[[SizeResult], float | None]:
    return lambda r: r.writes[kind]["p50_ms"]


TARGETS = (
    Target("recall_chains p50 <= 25 ms at 100k", "100k", lambda r: r.recall["p50_ms"], 25, unit=" ms"),
    Target("recall_chains p99 <= 80 ms at 100k", "100k", lambda r: r.recall["p99_ms"], 80, unit=" ms"),
    *(Target(f"recall p50 <= 1.3x plain hybrid p50 at {s}", s, lambda r: r.ratio_p50, 1.3, unit="x") for s in SIZES),
    Target("1M/1,000 scopes: recall p50 <= 1.5x the 1k store's", "1M", lambda r: r.vs_1k_p50, 1.5, unit="x"),
    *(Target(f"{w} p50 <= 40 ms at 100k", "100k", _write_p50(w), 40, unit=" ms") for w in ("remember", "correct", "link")),
    *(Target(f"ANN recall@20 >= 0.95 at {s}", s, lambda r: r.store_ann_recall, 0.95, at_least=True) for s in SIZES),
    Target("recall p50 <= 1.3x plain right after a burst of writes at 100k", "100k",
           lambda r: r.after_burst["after"]["ratio_p50"] if r.after_burst else None, 1.3, unit="x"),
    Target("burst writes (correct, link) p50 <= 40 ms at 100k", "100k",
           lambda r: r.after_burst["writes"]["p50_ms"] if r.after_burst else None, 40, unit=" ms"),
)  # fmt: skip


def targets(results: Sequence[SizeResult]) -> list[list[object]]:
    """Each target met or missed: its label, the figure measured, and the verdict."""
    by_size = {r.size: r for r in results}
    rows: list[list[object]] = []
    for t in TARGETS:
        r = by_size.get(t.size)
        if r is None:
            continue
        value = t.value(r)
        if value is None:
            continue
        met = value >= t.limit if t.at_least else value <= t.limit
        rows.append([t.label, f"{value:.3g}{t.unit}", "met" if met else "MISSED"])
    for r in results:
        if r.size not in by_size or r.stand_in is not None:
            continue
        rate, share = r.build["import_rate"], r.build["import_vs_bare"]
        met = rate >= 500 or share >= 0.9
        rows.append(
            [
                f"bulk import >= 500 notes/s or >= 90 % of the model's rate at {r.size}",
                f"{rate:.0f} notes/s, {100 * share:.0f} % of the bare {r.build['bare_embed_rate']:.0f} texts/s",
                "met" if met else "MISSED",
            ]
        )
    return rows


def targets_table(results: Sequence[SizeResult]) -> str:
    return markdown_table(["target", "measured", "verdict"], targets(results))


def sizes(payload: dict[str, Any]) -> list[SizeResult]:
    """The results file's sizes as the run held them."""
    return [
        SizeResult(
            **{
                **d,
                "queries": [QueryRecord(**q) for q in d["queries"]],
                "load_average": tuple(d["load_average"]),
            }
        )
        for d in payload["sizes"]
    ]


TABLES = {
    "main": lambda payload: table(sizes(payload)),
    "targets": lambda payload: targets_table(sizes(payload)),
    "burst": lambda payload: burst_table(sizes(payload)),
}


def report(results: Sequence[SizeResult], args: argparse.Namespace, seconds: float) -> str:
    out = [
        f"corrigenda at scale: seed {args.seed}, {QUERIES} queries per size, {args.writes} timed calls of each write, "
        f"import batches of {args.batch}; torch threads {args.threads} "
        f"({'set by --torch-threads' if args.torch_threads else 'torch default'}), {os.cpu_count()} CPUs; "
        f"whole run {seconds:.0f} s; {args.engine}",
        f"store: {args.store_label}",
        "Recall and the plain hybrid search get the same precomputed query vector (model excluded from both); "
        "the writes include the model. Edges of the corpus written with Tables.add_events; measured writes "
        "through Memory.",
        "",
        table(results),
        "",
    ]
    for r in results:
        out.append(
            f"{r.size}: notes indexes {_indexes(r.indexes['notes'])}; events indexes {_indexes(r.indexes['events'])}; "
            f"plain indexes {_indexes(r.plain['indexes'])}"
        )
        if r.stand_in:
            out.append(f"{r.size}: {r.stand_in}")
    if any(r.after_burst for r in results):
        out += ["", "A burst of writes (--burst), then the same queries:", "", burst_table(results)]
    out += ["", "Targets:", targets_table(results)]
    for r in results:
        for call, text in r.profile.items():
            out += ["", f"cProfile of one {call} at {r.size}:", text]
        burst_profile = r.after_burst.get("after", {}).get("profile")
        if burst_profile:
            out += ["", f"cProfile of one recall right after the burst at {r.size}:", burst_profile]
    return "\n".join(out)


def write_json(path: Path, results: Sequence[SizeResult], args: argparse.Namespace, seconds: float) -> None:
    payload = {
        "seed": args.seed,
        "queries_per_size": QUERIES,
        "writes_per_kind": args.writes,
        "batch": args.batch,
        "torch_threads": args.threads,
        "torch_threads_set": bool(args.torch_threads),
        "cpus": os.cpu_count(),
        "model": SentenceTransformerEmbedder().name,
        "runtime_s": round(seconds, 1),
        "db": args.store_label,
        "targets": targets(results),
        "sizes": [asdict(r) for r in results],
    }
    write_results(path, payload)
