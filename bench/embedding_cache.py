"""An Embedder that embeds each distinct text once, for benchmarks that meet the same texts again.

Same name, same vectors as the model it wraps: the store cannot tell the difference. With `path`,
vectors persist between runs (a `.npy` of vectors and a `.json` of their texts' sha256), so a
benchmark re-run after an engine change does not pay for the model again; the file is keyed by
the model's name, and a cache made by another model is ignored.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from corrigenda.store import Embedder


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    def __init__(self, inner: Embedder, path: Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = path
        self._vectors: dict[str, list[float]] = {}
        self._readable: dict[str, bool] = {}
        self.seconds = 0.0  # spent in the model
        if path is not None and path.with_suffix(".json").exists():
            meta = json.loads(path.with_suffix(".json").read_text())
            if meta["model"] == self.name:
                vectors = np.load(path.with_suffix(".npy"))
                self._vectors = {k: row.tolist() for k, row in zip(meta["keys"], vectors, strict=True)}

    def prime(self, texts: Iterable[str]) -> int:
        """Embed, in one batch, the texts not seen before; returns how many there were."""
        missing = list(dict.fromkeys(t for t in texts if _key(t) not in self._vectors))
        if missing:
            started = time.perf_counter()
            vectors = self.inner.embed(missing)
            self._vectors.update(zip(map(_key, missing), vectors, strict=True))
            self.seconds += time.perf_counter() - started
        return len(missing)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.prime(texts)
        return [self._vectors[_key(t)] for t in texts]

    def readable(self, text: str) -> bool:
        if text not in self._readable:
            self._readable[text] = self.inner.readable(text)
        return self._readable[text]

    def save(self) -> None:
        if self.path is None or not self._vectors:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self._vectors)
        np.save(self.path.with_suffix(".npy"), np.array([self._vectors[k] for k in keys], dtype=np.float32))
        self.path.with_suffix(".json").write_text(json.dumps({"model": self.name, "keys": keys}))
