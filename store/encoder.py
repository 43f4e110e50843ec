"""A sentence-transformers model of the common shape (a BERT encoder, mean pooling, unit length) run
on torch alone.

Importing sentence-transformers imports transformers, scikit-learn and SciPy, and transformers'
modelling code imports much of torch's compiler and distributed packages: seconds of a process's
start, and memory, that the model itself does not need (it loads in a tenth of a second;
bench/startup.py measures a server's start). So a model directory of that shape (the default
all-MiniLM-L6-v2 is one) is run here from its own files: the tokenizer from `tokenizer.json` (the
`tokenizers` package, which transformers uses for it too) and the weights from `model.safetensors`,
through the same arithmetic as transformers' `BertModel` and sentence-transformers' `Pooling` and
`Normalize`, in the same order: tests/store/test_embedder.py checks that the vectors are sentence-transformers'
own, bit for bit. A model of another shape is left to sentence-transformers (`fits`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_MODULES = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]
BATCH = 32  # texts encoded at once: sentence-transformers' default batch size
_MEAN_ONLY = {
    "pooling_mode_cls_token": False,
    "pooling_mode_mean_tokens": True,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}


def fits(path: str) -> bool:
    """Whether the model directory at `path` is of the shape this module runs: a BERT encoder with absolute
    positions and GELU, then mean pooling, then unit length, its weights in safetensors and its tokenizer
    in one file."""
    root = Path(path)
    try:
        modules = json.loads((root / "modules.json").read_text())
        config = json.loads((root / "config.json").read_text())
        pooling_path = next((m["path"] for m in modules if m["type"].endswith(".Pooling")), "1_Pooling")
        pooling = json.loads((root / pooling_path / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (
        [m.get("type") for m in modules] == _MODULES
        and modules[0].get("path", "") == ""
        and config.get("model_type") == "bert"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and config.get("hidden_act") == "gelu"
        and all(pooling.get(k, False) == v for k, v in _MEAN_ONLY.items())
        and (root / "model.safetensors").is_file()
        and (root / "tokenizer.json").is_file()
    )


class MeanPooledBert:
    """The model at `path` (see `fits`): `encode` gives unit-length vectors; `token_ids` a whole text's
    tokens (`SentenceTransformerEmbedder.readable`)."""

    runs_on = "torch"

    def __init__(self, path: str) -> None:
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        root = Path(path)
        config = json.loads((root / "config.json").read_text())
        settings = json.loads((root / "sentence_bert_config.json").read_text())
        self.dimension = int(config["hidden_size"])
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._weights = load_file(str(root / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        # sentence-transformers cuts each text at the model's max_seq_length and pads a batch to its longest
        self._batches = Tokenizer.from_file(str(root / "tokenizer.json"))
        self._batches.enable_truncation(max_length=int(settings["max_seq_length"]))
        pad_id = int(config.get("pad_token_id", 0))
        self._batches.enable_padding(pad_id=pad_id, pad_token=self.tokenizer.id_to_token(pad_id) or "[PAD]")
        self.unk_token_id = self.tokenizer.token_to_id("[UNK]")

    def token_ids(self, text: str) -> list[int]:
        """The model's tokens of the whole of `text`, without special tokens, neither cut nor padded."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors of `texts`, in batches of BATCH texts of like length, longest first, made as
        sentence-transformers makes them (the same sort), so that each text is padded as it would be there."""
        import numpy as np

        order = [int(i) for i in np.argsort([-len(t) for t in texts])]
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            for i, vector in zip(chunk, self._encode([texts[i] for i in chunk]), strict=True):
                vectors[i] = vector
        return vectors

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        import torch

        encoded = self._batches.encode_batch([t.strip() for t in texts])  # as sentence-transformers strips them
        ids = torch.tensor([e.ids for e in encoded], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encoded], dtype=torch.long)
        with torch.inference_mode():
            hidden = self._forward(ids, mask)
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            unit = torch.nn.functional.normalize(pooled, p=2, dim=1)  # the model's Normalize module
            unit = torch.nn.functional.normalize(unit, p=2, dim=1)  # and encode(normalize_embeddings=True) again
        return [[float(x) for x in row] for row in unit.tolist()]

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """transformers' BertModel, in eval mode: its last hidden state."""
        import torch
        from torch.nn import functional as F

        w = self._weights
        width = self.dimension
        positions = torch.arange(ids.shape[1])
        # in transformers' order (float sums depend on it): words, then segment (type 0 throughout), then positions
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
        x = x + w["embeddings.position_embeddings.weight"][positions]
        x = F.layer_norm(x, (width,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)
        # every query may look at every token but the padding; no mask at all when nothing is padded (as in
        # transformers, whose choice of attention kernel the last digits of each vector follow)
        batch, length = ids.shape
        attend = None if bool(mask.all()) else mask.bool()[:, None, None, :].expand(batch, 1, length, length)
        head = width // self._heads

        def linear(x: torch.Tensor, name: str) -> torch.Tensor:
            return F.linear(x, w[f"{name}.weight"], w[f"{name}.bias"])

        def heads(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, length, self._heads, head).transpose(1, 2)

        for n in range(self._layers):
            p = f"encoder.layer.{n}."
            q, k, v = (heads(linear(x, f"{p}attention.self.{part}")) for part in ("query", "key", "value"))
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=attend, scale=1 / math.sqrt(head))
            context = context.transpose(1, 2).reshape(batch, length, width)
            x = self._norm(linear(context, f"{p}attention.output.dense") + x, f"{p}attention.output.LayerNorm")
            inner = F.gelu(linear(x, f"{p}intermediate.dense"))
            x = self._norm(linear(inner, f"{p}output.dense") + x, f"{p}output.LayerNorm")
        return x

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        from torch.nn import functional as F

        return F.layer_norm(
            x, (self.dimension,), self._weights[f"{name}.weight"], self._weights[f"{name}.bias"], self._eps
        )
