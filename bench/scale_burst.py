"""bench/scale.py --burst (issue 36): a burst of corrections and links, then the queries at once, then
again once upkeep has settled."""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from corrigenda.store import Memory
from harness import ms_summary
from scale_build import MeteredEmbedder
from scale_corpus import Corpus, scope_seed
from scale_measure import profiled
from scale_recall import PlainHybrid, interleaved
from scale_writes import current_notes, new_pairs, timed_corrections, timed_links


def upkeep_state(memory: Memory) -> dict[str, Any]:
    """What upkeep has left to do: each table's fragments, and its rows outside the `id` index; and the
    vector index's shape, (partitions, segments)."""
    state: dict[str, Any] = {"fragments": memory.tables.compaction.fragments()}
    for name, table in (
        ("notes", memory.tables.handles.notes_table()),
        ("events", memory.tables.handles.events_table()),
    ):
        stats = table.index_stats("id_idx") if table is not None else None
        state[f"{name}_unindexed_rows"] = stats.num_unindexed_rows if stats is not None else None
    notes = memory.tables.handles.notes_table()
    state["vector_index_shape"] = memory.tables.indexes.vector_index_shape(notes) if notes is not None else None
    return state


def measure_burst(
    memory: Memory,
    embedder: MeteredEmbedder,
    plain: PlainHybrid,
    corpus: Corpus,
    ids: Sequence[str],
    vectors: Sequence[Sequence[float]],
    scope: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Issue 36: `--burst C,L` corrections then links, back to back (their seconds are the writes
    counted), then at once the queries, recall and plain interleaved as in `measure_recalls` (no
    warm-up: the first queries after the writes are the case); then, once `tables.upkeep.compact()` has
    settled upkeep (waiting for one under way), the same queries again. The plain table is the
    settled one throughout: the burst's writes are the store's alone."""
    corrections, links = args.burst
    rng = random.Random(scope_seed(args.seed, 0) + ":burst")
    current = current_notes(corpus, ids)  # at 1k fewer than the corrections asked: each corrected once
    targets = rng.sample(current, min(len(current), corrections))
    pairs = new_pairs(corpus, ids, links, rng)
    load = os.getloadavg()[0]
    gc.collect()
    correct_s = timed_corrections(memory, corpus, ids, targets, rng)
    link_s = timed_links(memory, ids, pairs)
    embedder.known = {q.text: list(v) for q, v in zip(corpus.queries, vectors, strict=True)}
    recall_s, plain_s, _ = interleaved(memory, plain, corpus, vectors, scope)
    after: dict[str, Any] = {"upkeep_state": upkeep_state(memory)}
    if args.profile:
        after["profile"] = profiled(partial(memory.recall, corpus.queries[0].text, scope=scope), args.profile)
    started = time.perf_counter()
    memory.upkeep.compact()
    settle_s = time.perf_counter() - started
    settled_state = upkeep_state(memory)
    settled_recall_s, settled_plain_s, _ = interleaved(memory, plain, corpus, vectors, scope)
    embedder.known = {}

    def recalls(recall: Sequence[float], plain_: Sequence[float]) -> dict[str, Any]:
        summary, plain_summary = ms_summary(recall), ms_summary(plain_)
        return {
            "recall": summary,
            "plain_hybrid": plain_summary,
            "ratio_p50": summary["p50_ms"] / plain_summary["p50_ms"],
            "ratio_per_query_median": statistics.median(r / p for r, p in zip(recall, plain_, strict=True)),
            "recall_ms": [round(1000 * r, 2) for r in recall],  # in order: when the first queries paid
        }

    return {
        "corrections": corrections,
        "links": links,
        "writes": ms_summary([*correct_s, *link_s]),
        "correct": ms_summary(correct_s),
        "link": ms_summary(link_s),
        "writes_seconds": sum(correct_s) + sum(link_s),
        "after": recalls(recall_s, plain_s) | after,
        "settle_seconds": settle_s,
        "settled": recalls(settled_recall_s, settled_plain_s) | {"upkeep_state": settled_state},
        "load_average": [load, os.getloadavg()[0]],
    }
