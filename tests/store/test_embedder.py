"""The default model run on torch alone (store/encoder.py) gives sentence-transformers' own vectors, bit for bit,
starts
without importing it, and says which texts it cannot read whatever ran before."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corrigenda.store import SentenceTransformerEmbedder
from corrigenda.store import encoder as encoder_module
from corrigenda.store.embedder import default_model_path
from corrigenda.store.encoder import MeanPooledBert, fits

TEXTS = [
    "The gateway listens on port 9090.",
    "   Alice prefers dark mode in her editor   ",
    "模型请求超时为三十秒",
    "Héllo wörld — naïve café, 70-200mm at $400",
    "",
    "deploy " * 400,  # past the model's 256 tokens: cut where sentence-transformers cuts it
    "The port changed from 8080 to 9090.\nIt moved on Tuesday.",
]


def _sentences(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = Path(__file__).with_name("test_store.py").read_text().split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 120))) for _ in range(count)]


@pytest.mark.slow  # a model loaded afresh, in this process or another
def test_the_default_model_run_on_torch_alone_gives_sentence_transformers_vectors() -> None:
    from sentence_transformers import SentenceTransformer

    path = default_model_path()
    assert fits(path)
    texts = TEXTS + _sentences(70)  # more than a batch, of every length
    ours = np.array(MeanPooledBert(path).encode(texts))
    theirs = SentenceTransformer(path, device="cpu").encode(texts, normalize_embeddings=True)
    assert ours.shape == theirs.shape == (len(texts), 384)
    assert np.array_equal(ours, theirs)  # the same arithmetic in the same order: the same floats
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    one_by_one = np.array([MeanPooledBert(path).encode([t])[0] for t in TEXTS])
    assert np.abs(one_by_one - ours[: len(TEXTS)]).max() < 1e-5  # a text's vector does not depend on its batch


@pytest.mark.slow  # a model loaded afresh, in this process or another
def test_a_process_embeds_with_the_default_model_without_importing_sentence_transformers() -> None:
    script = (
        "import sys\n"
        "from corrigenda.store import SentenceTransformerEmbedder\n"
        "vector = SentenceTransformerEmbedder().embed(['the gateway listens on 9090'])[0]\n"
        "print(len(vector), 'sentence_transformers' in sys.modules, 'transformers' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.split() == ["384", "False", "False"]


@pytest.mark.parametrize("torch_alone", [True, False], ids=["torch alone", "sentence-transformers"])
def test_a_new_embedder_reads_chinese_as_unreadable_before_and_after_it_embeds(
    torch_alone: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tokenizer as its file sets it up pads every text to 128 tokens: counted with the padding, a short
    Chinese text looked readable until the first embedding changed the setting."""
    if not torch_alone:
        monkeypatch.setattr(encoder_module, "fits", lambda path: False)
    embedder = SentenceTransformerEmbedder()
    assert embedder.runs_on == ("torch" if torch_alone else "sentence-transformers")
    assert not embedder.readable("模型请求超时为三十秒")
    assert embedder.readable("the request timeout is thirty seconds")
    embedder.embed(["the gateway listens on 9090", "deploy " * 400])
    assert not embedder.readable("模型请求超时为三十秒")
    assert embedder.readable("deploy " * 400)


@pytest.mark.slow  # a model loaded afresh, in this process or another
def test_a_model_of_another_shape_is_left_to_sentence_transformers(tmp_path: Path) -> None:
    source = Path(default_model_path())

    def variant(name: str, edit: str, change: dict[str, object]) -> str:
        copy = tmp_path / name
        shutil.copytree(source, copy)
        config = copy / edit
        config.write_text(json.dumps({**json.loads(config.read_text()), **change}))
        return str(copy)

    assert not fits(
        variant("cls", "1_Pooling/config.json", {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    assert not fits(variant("roberta", "config.json", {"model_type": "roberta"}))
    assert not fits(variant("tanh", "config.json", {"hidden_act": "gelu_new"}))
    assert not fits(str(tmp_path / "absent"))
    other = SentenceTransformerEmbedder(
        variant(
            "cls-loaded", "1_Pooling/config.json", {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}
        )
    )
    assert other.runs_on == "sentence-transformers"
    assert len(other.embed(["a note"])[0]) == 384
