"""Recall's near-duplicate pass, across chains only: a chain whose every head says what a head of a better
chain says, and that brings nothing else, is dropped (recall.py's module docstring, stage 4)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .views import Chain, NoteView


@dataclass(frozen=True)
class Duplicate:
    """A chain the near-duplicate pass dropped: its head `note_id` repeats `like` of chain `of_chain`."""

    of_chain: str
    note_id: str
    like: str
    similarity: float


_NUMBER = re.compile(r"\w*\d\w*")


def drop_duplicates(
    chains: Sequence[Chain], vectors: Mapping[str, np.ndarray], threshold: float
) -> tuple[list[Chain], dict[str, Duplicate]]:
    """Drop each chain that only repeats a better one (see the module docstring, stage 4)."""
    heads = _Heads(vectors, [h.id for c in chains for h in c.heads], threshold)
    kept: list[Chain] = []
    holding: dict[str, list[int]] = defaultdict(list)  # head id → positions in `kept` of the chains it heads
    dropped: dict[str, Duplicate] = {}
    for chain in chains:
        repeat = None
        if chain.heads and not chain.history:
            # a chain it repeats has a head close to its first head: only those are compared in full
            near = sorted({i for other in heads.close(chain.heads[0].id) for i in holding.get(other, ())})
            repeat = next((d for i in near if (d := _repeats(chain, kept[i], heads, threshold))), None)
        if repeat is None:
            for head in chain.heads:
                holding[head.id].append(len(kept))
            kept.append(chain)
        else:
            dropped[chain.chain_id] = repeat
    return kept, dropped


class _Heads:
    """The cosines between the heads compared, in one product, and their numbers, each worked out once."""

    def __init__(self, vectors: Mapping[str, np.ndarray], ids: Sequence[str], threshold: float) -> None:
        comparable = [i for i in dict.fromkeys(ids) if i in vectors]
        self._index = {note_id: row for row, note_id in enumerate(comparable)}
        self._ids = comparable
        rows = [np.asarray(vectors[i], dtype=np.float64) for i in comparable]
        units = np.stack(rows) if rows else np.zeros((0, 1))
        norms = np.linalg.norm(units, axis=1, keepdims=True)
        units = np.divide(units, norms, out=np.zeros_like(units), where=norms > 0)
        self._cosines = units @ units.T
        self._close = self._cosines >= threshold
        self._numbers: dict[str, set[str]] = {}

    def comparable(self, note: NoteView) -> bool:
        return note.id in self._index

    def close(self, note_id: str) -> list[str]:
        """The other heads at least `threshold` alike to this one."""
        row = self._index.get(note_id)
        if row is None:
            return []
        return [self._ids[j] for j in np.flatnonzero(self._close[row]) if j != row]

    def numbers(self, note: NoteView) -> set[str]:
        if note.id not in self._numbers:
            self._numbers[note.id] = set(_NUMBER.findall(note.text))
        return self._numbers[note.id]

    def cosine(self, a: str, b: str) -> float:
        return float(self._cosines[self._index[a], self._index[b]])


def _repeats(chain: Chain, better: Chain, heads: _Heads, threshold: float) -> Duplicate | None:
    core = {h.id for h in better.heads} | {p.id for p in better.prerequisites}
    if any(p.id not in core for p in chain.prerequisites) or any(h.id in core for h in chain.heads):
        return None  # it brings something of its own, or it is part of the better chain's reasoning
    weakest: Duplicate | None = None
    for head in chain.heads:
        match = None
        for other in better.heads:
            if not heads.comparable(head) or not heads.comparable(other):
                continue
            if heads.numbers(head) != heads.numbers(other):
                continue  # "listens on 8080" and "listens on 9090" disagree; they do not repeat
            similarity = heads.cosine(head.id, other.id)
            if similarity >= threshold and (match is None or similarity > match.similarity):
                match = Duplicate(better.chain_id, head.id, other.id, similarity)
        if match is None:
            return None
        if weakest is None or match.similarity < weakest.similarity:
            weakest = match
    return weakest
