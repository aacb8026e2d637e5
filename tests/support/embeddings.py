"""A tiny BERT in the files of all-MiniLM-L6-v2 (model.safetensors, tokenizer.json, config.json), for
testing the loader, the tokenizer and the forward pass without the real model (random weights: its
vectors mean nothing, but they are deterministic, and every path the real model takes is taken)."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import numpy as np

WORDS = (
    "singer singers concert stadium pupil student teacher course name country age id year song "
    "price cost order orders customer client city town table column how many from the of in"
).split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",", ".", ":", "(", ")", "?", "##s", "##er", "##ing"]


def vocab() -> dict[str, int]:
    tokens = VOCAB + [w for w in dict.fromkeys(WORDS) if w not in VOCAB]
    return {t: i for i, t in enumerate(tokens)}


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[array.dtype]
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def tiny_model_files(hidden: int = 8, heads: int = 2, layers: int = 2, seed: int = 0) -> dict[str, bytes]:
    rng = np.random.default_rng(seed)
    v = vocab()
    inter = hidden * 4

    def r(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, shape).astype(np.float32)

    tensors: dict[str, np.ndarray] = {
        "embeddings.position_ids": np.arange(64, dtype=np.int64)[None],
        "embeddings.word_embeddings.weight": r(len(v), hidden),
        "embeddings.position_embeddings.weight": r(64, hidden),
        "embeddings.token_type_embeddings.weight": r(2, hidden),
        "embeddings.LayerNorm.weight": np.ones(hidden, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(hidden, np.float32),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for part in ("query", "key", "value"):
            tensors[f"{p}attention.self.{part}.weight"] = r(hidden, hidden)
            tensors[f"{p}attention.self.{part}.bias"] = r(hidden)
        tensors[f"{p}attention.output.dense.weight"] = r(hidden, hidden)
        tensors[f"{p}attention.output.dense.bias"] = r(hidden)
        tensors[f"{p}attention.output.LayerNorm.weight"] = np.ones(hidden, np.float32)
        tensors[f"{p}attention.output.LayerNorm.bias"] = np.zeros(hidden, np.float32)
        tensors[f"{p}intermediate.dense.weight"] = r(inter, hidden)
        tensors[f"{p}intermediate.dense.bias"] = r(inter)
        tensors[f"{p}output.dense.weight"] = r(hidden, inter)
        tensors[f"{p}output.dense.bias"] = r(hidden)
        tensors[f"{p}output.LayerNorm.weight"] = np.ones(hidden, np.float32)
        tensors[f"{p}output.LayerNorm.bias"] = np.zeros(hidden, np.float32)
    config = {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "intermediate_size": inter,
        "layer_norm_eps": 1e-12,
        "vocab_size": len(v),
    }
    tokenizer = {
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "max_input_chars_per_word": 100, "vocab": v}
    }
    return {
        "model.safetensors": safetensors_bytes(tensors),
        "config.json": json.dumps(config).encode(),
        "tokenizer.json": json.dumps(tokenizer).encode(),
    }


def write_tiny_model(target: Path, as_zip: bool = True, **kwargs: int) -> Path:
    """The tiny model as a zip (like the package's model.zip, files one folder down) or a folder."""
    files = tiny_model_files(**kwargs)
    if as_zip:
        with zipfile.ZipFile(target, "w") as zf:
            for name, data in files.items():
                zf.writestr(f"model/{name}", data)
        return target
    target.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (target / name).write_bytes(data)
    return target
