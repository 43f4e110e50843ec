"""Recall's first stage, its candidates: the dense and full-text hits for a query in one scope, fused by
reciprocal rank, and which of them are entry points (recall.py's module docstring, stage 1). Also the
pool the searches run on, which recall uses for its other reads beside the work it does meanwhile."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import numpy as np

from .embedder import Embedder
from .model import Note
from .reader import ScopeReader
from .recall_settings import RetrievalSettings
from .tables import Hit

RRF_K = 60  # the usual reciprocal-rank-fusion constant (Cormack et al., 2009)


@dataclass
class Candidate:
    note: Note
    similarity: float | None = None
    dense_rank: int | None = None
    dense_readable: bool = True
    text_score: float | None = None
    text_rank: int | None = None
    score: float = 0.0
    qualified: bool = False
    vector: np.ndarray | None = None  # the stored embedding, where the searches read it along


SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="corrigenda-search")


def find_candidates(
    reader: ScopeReader,
    embedder: Embedder,
    query: str,
    as_of: datetime | None,
    settings: RetrievalSettings,
    vector: Callable[[], Sequence[float]] | None = None,
    min_entries: int = 0,
) -> tuple[dict[str, Candidate], bool]:
    """Dense and full-text hits in the reader's scope fused by reciprocal rank, best first; and whether
    dense applied. The first `min_entries` qualify whatever their similarity (module docstring, stage 1).

    The searches find ids; the reader reads the notes of both at once (or has them). `vector` gives the
    query's embedding when the dense search needs it (a remember's note is being embedded while its
    text is searched); without it the model embeds the query then."""
    reader.check_model(embedder.name)
    depth = max(settings.per_retriever, min_entries)
    # the full-text search runs while the query is embedded and searched by vector
    searching_text = SEARCHES.submit(reader.text_search, query, as_of, depth)
    readable = embedder.readable(query)
    dense: list[Hit] = []
    if readable:
        embedded = vector() if vector is not None else embedder.embed([query])[0]
        dense = reader.vector_search(embedded, as_of, depth)
    text_hits = searching_text.result()
    found = reader.found(list(dict.fromkeys(h.id for h in [*text_hits, *dense])))
    candidates: dict[str, Candidate] = {}
    for rank, hit in _ranked([h for h in dense if h.id in found], lambda h: (h.score, h.id)):
        candidates[hit.id] = Candidate(found[hit.id], hit.score, rank, hit.dense_ok, vector=hit.vector)
    for rank, text_hit in _ranked([h for h in text_hits if h.id in found], lambda h: (h.score, h.id)):
        cand = candidates.setdefault(text_hit.id, Candidate(found[text_hit.id], vector=text_hit.vector))
        cand.text_score, cand.text_rank = text_hit.score, rank
    for cand in candidates.values():
        cand.score = sum(1.0 / (RRF_K + r) for r in (cand.dense_rank, cand.text_rank) if r is not None)
        dense_match = (
            readable
            and cand.dense_readable
            and cand.similarity is not None
            and cand.similarity >= settings.min_similarity
        )
        cand.qualified = dense_match or cand.text_rank is not None
    ordered = sorted(candidates.values(), key=lambda c: (-c.score, c.note.id))
    for cand in ordered[:min_entries]:
        cand.qualified = True
    return {c.note.id: c for c in ordered}, readable


H = TypeVar("H")


def _ranked(hits: Sequence[H], key: Callable[[H], tuple[float, str]]) -> list[tuple[int, H]]:
    """Hits best first with competition ranks (1, 2, 2, 4): equal scores share a rank.

    LanceDB returns equal scores (the same text stored twice) in no fixed order; without shared
    ranks the fused score, and so the recall, would change from one call to the next.
    """
    ordered = sorted(hits, key=lambda h: (-round(key(h)[0], 6), key(h)[1]))
    ranked: list[tuple[int, H]] = []
    for position, hit in enumerate(ordered, 1):
        tied = ranked and round(key(ranked[-1][1])[0], 6) == round(key(hit)[0], 6)
        ranked.append((ranked[-1][0] if tied else position, hit))
    return ranked
