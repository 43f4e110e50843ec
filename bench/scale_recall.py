"""bench/scale.py's recall figures: `recall_chains` against a plain LanceDB hybrid search on the same
texts and vectors, query by query; ANN recall@20 of the store's vector search and of the plain table's
index against the exact search; and the per-scope graph cache, kept and defeated.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from corrigenda.store import Memory
from corrigenda.store.storage import limits
from harness import ms_summary
from scale_build import ACTOR, MeteredEmbedder
from scale_corpus import NOW, Corpus
from scale_measure import QueryRecord, SizeResult

PLAIN_ANN_FROM = 10_000  # rows; under this LanceDB cannot train an ANN index and searches exactly
PLAIN_PQ_FROM = 500_000  # rows; IVF_PQ from here, as an HNSW graph over 1M vectors takes too long on 2 cores
PLAIN_TOP = 20


# -- the plain LanceDB baseline -----------------------------------------------------------------


class PlainHybrid:
    """A plain LanceDB table of the store's ids, texts, scopes and vectors, indexed the usual way."""

    COLUMNS = ("id", "text", "scope", "vector")

    def __init__(self, uri: str, source: Any) -> None:
        import lancedb
        from lancedb.index import FTS, Bitmap, IvfHnswSq, IvfPq

        self.uri = uri  # a directory or an object store's URI (s3://…)
        db = lancedb.connect(uri)
        started = time.perf_counter()
        rows = source.search().select(list(self.COLUMNS)).limit(None).to_batches()
        self.table = db.create_table("plain", data=rows)
        self.copy_seconds = time.perf_counter() - started
        self.rows = int(self.table.count_rows())
        self.index_seconds: dict[str, float] = {}
        with _timed(self.index_seconds, "text FTS (icu)"):
            self.table.create_index("text", config=FTS(**limits.FULL_TEXT))  # the store's settings
        with _timed(self.index_seconds, "scope bitmap"):
            self.table.create_index("scope", config=Bitmap())
        self.ann = self.rows >= PLAIN_ANN_FROM
        if self.ann and self.rows < PLAIN_PQ_FROM:
            with _timed(self.index_seconds, "vector IVF_HNSW_SQ (cosine)"):
                self.table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        elif self.ann:
            with _timed(self.index_seconds, "vector IVF_PQ (cosine)"):
                self.table.create_index("vector", config=IvfPq(distance_type="cosine"))

    def hybrid(self, text: str, vector: Sequence[float], scope: str) -> list[str]:
        from corrigenda.store.where import scope_is

        query: Any = self.table.search(query_type="hybrid")
        query = query.vector(list(vector)).text(text).where(scope_is(scope), prefilter=True)
        result = query.select(["id", "text"]).limit(PLAIN_TOP).to_arrow()
        ids: list[str] = result["id"].to_pylist()
        return ids

    def nearest(self, vector: Sequence[float], scope: str, exact: bool) -> list[str]:
        return nearest_ids(self.table, vector, scope, exact)


def nearest_ids(table: Any, vector: Sequence[float], scope: str, exact: bool, limit: int = PLAIN_TOP) -> list[str]:
    """Top `limit` ids by cosine in a scope: through the table's vector index, or exactly."""
    from corrigenda.store.where import scope_is

    query: Any = table.search(list(vector), vector_column_name="vector").distance_type("cosine")
    query = query.where(scope_is(scope), prefilter=True).select(["id", "_distance"]).limit(limit)
    if exact:
        query = query.bypass_vector_index()
    ids: list[str] = query.to_arrow()["id"].to_pylist()
    return ids


@contextmanager
def _timed(into: dict[str, float], key: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    into[key] = time.perf_counter() - started


# -- measuring ----------------------------------------------------------------------------------


def interleaved(
    memory: Memory, plain: PlainHybrid, corpus: Corpus, vectors: Sequence[Sequence[float]], scope: str
) -> tuple[list[float], list[float], list[Any]]:
    """Each query through recall and through the plain hybrid search, query by query, alternating which
    goes first: the seconds of each, and what recall delivered. The embedder must know the vectors."""
    recall_s, plain_s, delivered = [], [], []
    for i, (q, v) in enumerate(zip(corpus.queries, vectors, strict=True)):
        order: list[Callable[[], Any]] = [
            partial(memory.recall, q.text, scope=scope),
            partial(plain.hybrid, q.text, v, scope),
        ]
        times: list[float] = []
        outputs: list[Any] = []
        for call in order if i % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            outputs.append(call())
            times.append(time.perf_counter() - started)
        if i % 2:
            times, outputs = times[::-1], outputs[::-1]
        recall_s.append(times[0])
        plain_s.append(times[1])
        delivered.append(outputs[0])
    return recall_s, plain_s, delivered


def measure_recalls(
    memory: Memory, embedder: MeteredEmbedder, plain: PlainHybrid, corpus: Corpus, scope: str, result: SizeResult
) -> list[list[float]]:
    """The recall and plain figures; the queries' vectors (the real model's), for what follows."""
    real = embedder.inner
    vectors: list[list[float]] = []
    embed_s: list[float] = []
    for q in corpus.queries:  # the model alone, one query at a time
        started = time.perf_counter()
        vectors.append(real.embed([q.text])[0])
        embed_s.append(time.perf_counter() - started)
    embedder.known = {q.text: v for q, v in zip(corpus.queries, vectors, strict=True)}
    for q, v in list(zip(corpus.queries, vectors, strict=True))[:5]:  # warm-up
        memory.recall(q.text, scope=scope)
        plain.hybrid(q.text, v, scope)

    recall_s, plain_s, delivered = interleaved(memory, plain, corpus, vectors, scope)

    embedder.known = {}
    with_model_s = []
    for q in corpus.queries:
        started = time.perf_counter()
        memory.recall(q.text, scope=scope)
        with_model_s.append(time.perf_counter() - started)

    table = memory.tables.handles.notes_table()
    assert table is not None
    table.checkout_latest()  # the exact neighbours of every row: appends go through the store's views, not this table
    for q, v, rec, ps, wm, es, res in zip(
        corpus.queries, vectors, recall_s, plain_s, with_model_s, embed_s, delivered, strict=True
    ):
        store_ids = {h.id for h in memory.tables.search.vector_search(v, scope, None, PLAIN_TOP)}
        exact = set(nearest_ids(table, v, scope, exact=True))
        plain_recall = None
        if plain.ann:
            plain_exact = set(plain.nearest(v, scope, exact=True))
            plain_recall = len(set(plain.nearest(v, scope, exact=False)) & plain_exact) / max(1, len(plain_exact))
        notes = sum(len(c.heads) + len(c.history) + len(c.prerequisites) for c in res.chains)
        result.queries.append(
            QueryRecord(
                query=q.text, in_chain=q.in_chain, recall_ms=rec * 1000, plain_ms=ps * 1000,
                recall_with_model_ms=wm * 1000, embed_ms=es * 1000, chains=len(res.chains), notes_delivered=notes,
                store_ann_recall=len(store_ids & exact) / max(1, len(exact)), plain_ann_recall=plain_recall,
            )
        )  # fmt: skip

    result.recall = ms_summary(recall_s)
    result.recall_with_model = ms_summary(with_model_s)
    result.query_embed = ms_summary(embed_s)
    result.plain_hybrid = ms_summary(plain_s)
    result.ratio_p50 = result.recall["p50_ms"] / result.plain_hybrid["p50_ms"]
    result.ratio_per_query_median = statistics.median(r / p for r, p in zip(recall_s, plain_s, strict=True))
    result.store_ann_recall = statistics.fmean(r.store_ann_recall for r in result.queries)
    if plain.ann:
        result.plain_ann_recall = statistics.fmean(r.plain_ann_recall or 0.0 for r in result.queries)
    return vectors


def measure_graph_cache(
    memory: Memory, embedder: MeteredEmbedder, corpus: Corpus, vectors: Sequence[Sequence[float]], scope: str
) -> dict[str, Any]:
    """What the per-scope graph cache (store/graph.py, with the notes and vectors it keeps) saves: each
    query's recall with the cache as it is and with it defeated (`memory.graphs.drop_all()` just before
    the call, outside its time: the call then reads the scope's events and scans its notes again, as
    a process's first call of a scope does), query by
    query, alternating which goes first; then `graphs.get(scope)` alone, both ways; then each query
    right after a second `Memory` on the same store (another server process, as two clients run) wrote
    a `depends_on` edge between two of the scope's notes, outside the call's time: the call's graph is
    one version behind. Query vectors precomputed, as in the main recall loop."""
    embedder.known = {q.text: list(v) for q, v in zip(corpus.queries, vectors, strict=True)}
    cached_s: list[float] = []
    defeated_s: list[float] = []

    def timed(defeat: bool, text: str) -> float:
        if defeat:
            memory.graphs.drop_all()
        started = time.perf_counter()
        memory.recall(text, scope=scope)
        return time.perf_counter() - started

    memory.recall(corpus.queries[0].text, scope=scope)  # the graph is up to date before the first cached call
    for i, q in enumerate(corpus.queries):
        if i % 2 == 0:
            cached_s.append(timed(False, q.text))
            defeated_s.append(timed(True, q.text))
        else:
            defeated_s.append(timed(True, q.text))
            cached_s.append(timed(False, q.text))

    get_cached_s: list[float] = []
    get_read_s: list[float] = []
    memory.graphs.get(scope)
    for _ in range(len(corpus.queries)):
        started = time.perf_counter()
        memory.graphs.get(scope)
        get_cached_s.append(time.perf_counter() - started)
        memory.graphs.drop_all()
        started = time.perf_counter()
        memory.graphs.get(scope)
        get_read_s.append(time.perf_counter() - started)
    cached, defeated = ms_summary(cached_s), ms_summary(defeated_s)
    get_cached, get_read = ms_summary(get_cached_s), ms_summary(get_read_s)

    peer = Memory(memory.uri, embedder, clock=lambda: NOW, storage_options=None)  # as run_size's
    notes = [note.id for note, _ in peer.tables.search.scope_notes(scope)]
    rng = random.Random(f"{scope}:peer")
    after_peer_s: list[float] = []
    for q in corpus.queries:
        src, dst = rng.sample(notes, 2)
        peer.link(src, dst, "depends_on", actor=ACTOR)
        started = time.perf_counter()
        memory.recall(q.text, scope=scope)
        after_peer_s.append(time.perf_counter() - started)
    embedder.known = {}
    return {
        "recall_cached": cached,
        "recall_cache_defeated": defeated,
        "p50_ratio": defeated["p50_ms"] / cached["p50_ms"],
        "p50_saved_ms": defeated["p50_ms"] - cached["p50_ms"],
        # the same query's two calls, paired (they ran back to back): less exposed to the machine's load
        "per_query_median_saved_ms": 1000 * statistics.median(d - c for d, c in zip(defeated_s, cached_s, strict=True)),
        "per_query_median_ratio": statistics.median(d / c for d, c in zip(defeated_s, cached_s, strict=True)),
        "graph_get_cached": get_cached,
        "graph_get_read": get_read,
        "defeated_by": "memory.graphs.drop_all() before each timed call (outside its time)",
        "recall_after_peer_write": ms_summary(after_peer_s),
    }
