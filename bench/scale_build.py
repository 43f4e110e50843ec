"""bench/scale.py's store at a size: the embedders (the real model, timed; the 1M build's stand-in),
the corpus imported through `Memory.import_notes`, its edges written as the store's own events, the
indexes found; and the model's bare rate, which the import rate is compared with.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
from corrigenda.store import Draft, Event, EventKind, Memory, Note, SentenceTransformerEmbedder
from corrigenda.store.ids import new_event_id, new_note_id
from harness import ms_summary
from scale_corpus import REASONS, Corpus, _fill, make_corpus, scope_seed

EVENTS_PER_WRITE = 10_000
ACTOR = "bench-scale"


# -- embedders ----------------------------------------------------------------------------------


class MeteredEmbedder:
    """The real model, timed; vectors of texts embedded beforehand (the queries) are handed back
    without the model."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.known: dict[str, list[float]] = {}
        self.seconds = 0.0  # in the model
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.known and all(t in self.known for t in texts):
            return [self.known[t] for t in texts]
        started = time.perf_counter()
        vectors = self.inner.embed(texts)
        self.seconds += time.perf_counter() - started
        self.texts += len(texts)
        return vectors

    def readable(self, text: str) -> bool:
        return self.inner.readable(text)


_WORD = re.compile(r"[a-z0-9'-]+")


class WordSumEmbedder:
    """Stand-in for the 1M build: the normalised sum of the real model's vectors of a text's words
    (each word embedded once; a word outside the vocabulary gets a fixed random vector). Fast, the
    same dimension, and clustered like the real vectors; it reads everything."""

    def __init__(self, real: SentenceTransformerEmbedder, vocabulary_texts: Sequence[str], seed: int) -> None:
        self.name = real.name
        words = sorted({w for t in vocabulary_texts for w in _WORD.findall(t.lower())})
        self._index = {w: i for i, w in enumerate(words)}
        self._vectors = np.asarray(real.embed(words), dtype=np.float32)
        self._rng = np.random.default_rng(seed)
        self._unknown: dict[str, np.ndarray] = {}

    @property
    def vocabulary(self) -> int:
        return len(self._index)

    def _word(self, word: str) -> np.ndarray:
        i = self._index.get(word)
        if i is not None:
            return self._vectors[i]
        vector = self._unknown.get(word)
        if vector is None:
            vector = self._rng.standard_normal(size=(self._vectors.shape[1],)).astype(np.float32) * 0.05
            self._unknown[word] = vector
        return vector

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = np.zeros((len(texts), self._vectors.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[row] += self._word(word)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        result: list[list[float]] = out.tolist()
        return result

    def readable(self, text: str) -> bool:
        return True


# -- building a store ---------------------------------------------------------------------------


@dataclass
class Import:
    notes: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0


def import_corpus(memory: Memory, embedder: MeteredEmbedder, corpus: Corpus, scope: str, batch: int) -> tuple[list[str], Import]:  # fmt: skip
    """Every note of the corpus through `Memory.import_notes`, `batch` at a time; their ids in order."""
    ids: list[str] = []
    stats = Import()
    for start in range(0, len(corpus.notes), batch):
        drafts = [
            Draft(text=n.text, subject=n.subject, tags=[n.entity_kind], at=n.at)
            for n in corpus.notes[start : start + batch]
        ]
        in_model = embedder.seconds
        started = time.perf_counter()
        views = memory.import_notes(drafts, scope=scope, actor=ACTOR)
        stats.seconds += time.perf_counter() - started
        stats.embed_seconds += embedder.seconds - in_model
        stats.notes += len(views)
        ids.extend(v.id for v in views)
    return ids, stats


def corpus_events(corpus: Corpus, ids: Sequence[str], scope: str, rng: random.Random) -> list[Event]:
    """The chains' `supersedes` edges and the `depends_on` edges, as the store's own events."""
    events = []
    for chain in corpus.chains:
        for older, newer in pairwise(chain):
            reason = _fill(rng.choice(REASONS), rng)
            events.append(Event(id=new_event_id(), kind=EventKind.SUPERSEDES, src=ids[newer], dst=ids[older],
                                scope=scope, reason=reason, actor=ACTOR, recorded_at=corpus.notes[newer].at))  # fmt: skip
    for src, dst in corpus.depends:
        events.append(Event(id=new_event_id(), kind=EventKind.DEPENDS_ON, src=ids[src], dst=ids[dst],
                            scope=scope, actor=ACTOR, recorded_at=corpus.notes[src].at))  # fmt: skip
    return events


def write_stand_in_scopes(
    memory: Memory, stand_in: WordSumEmbedder, args: argparse.Namespace, per_scope: int, scopes: int,
    rng: random.Random, started: float,
) -> tuple[Import, list[Event]]:  # fmt: skip
    """Scopes 1.. of the 1M store: stand-in vectors, written with the store's `Tables.add_notes` in
    writes of `--bulk-rows` notes across scopes (one `import_notes` per scope is one write per
    1,000 notes, and each compaction then rewrites the small fragments: far too slow for this build)."""
    stats = Import()
    events: list[Event] = []
    pending: list[tuple[Note, Sequence[float], bool]] = []

    def flush() -> None:
        t = time.perf_counter()
        memory.tables.add_notes(pending, stand_in.name)
        stats.seconds += time.perf_counter() - t
        pending.clear()

    for s in range(1, scopes):
        scope = f"s{s:04d}"
        corpus = make_corpus(per_scope, scope_seed(args.seed, s), queries=0)
        notes = [
            Note(id=new_note_id(), text=c.text, scope=scope, subject=c.subject, tags=[c.entity_kind], actor=ACTOR,
                 recorded_at=c.at)
            for c in corpus.notes
        ]  # fmt: skip
        t = time.perf_counter()
        vectors = stand_in.embed([note.text for note in notes])
        stats.embed_seconds += time.perf_counter() - t
        stats.seconds += time.perf_counter() - t
        stats.notes += len(notes)
        pending.extend((note, vector, True) for note, vector in zip(notes, vectors, strict=True))
        events += corpus_events(corpus, [note.id for note in notes], scope, rng)
        if len(pending) >= args.bulk_rows:
            flush()
        if s % 100 == 0:
            print(f"  1M build: {s} scopes, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if pending:
        flush()
    return stats, events


def write_events(memory: Memory, events: Sequence[Event]) -> None:
    for start in range(0, len(events), EVENTS_PER_WRITE):
        memory.tables.add_events(events[start : start + EVENTS_PER_WRITE])


def describe_indexes(table: Any) -> list[dict[str, Any]]:
    found = []
    for index in table.list_indices():
        found.append(
            {
                "name": index.name,
                "type": str(index.index_type),
                "columns": list(index.columns),
                "indexed_rows": getattr(index, "num_indexed_rows", None),
                "unindexed_rows": getattr(index, "num_unindexed_rows", None),
                "segments": getattr(index, "num_segments", None),  # each searched apart
            }
        )
    return found


# -- the model's own rate -------------------------------------------------------------------------


def bare_rate(real: SentenceTransformerEmbedder, texts: Sequence[str]) -> float:
    """Texts per second of the model's own `embed`, in one call (as one import batch is)."""
    started = time.perf_counter()
    real.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def note_embed_times(real: SentenceTransformerEmbedder, corpus: Corpus, count: int) -> dict[str, float]:
    """The model alone on one note's text: what `remember` and `correct` pay for it."""
    seconds = []
    for note in corpus.notes[:count]:
        started = time.perf_counter()
        real.embed([note.text])
        seconds.append(time.perf_counter() - started)
    return ms_summary(seconds)
