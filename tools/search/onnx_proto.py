"""The few ONNX protobuf messages onnx_forward.py writes, encoded directly (protobuf's wire format:
varint keys and lengths). The `onnx` package would do it too, but importing it costs ~0.6 s (its
ml_dtypes extension) on every start that loads the embedding model, and 34 MB installed; the graph
needs only these messages, and ONNX Runtime checks what it reads. Field numbers: onnx/onnx.proto3."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

FLOAT, INT64 = 1, 7  # TensorProto.DataType
_ELEM = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 values take ten bytes, as protobuf writes them
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _int(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def _float(field: int, x: float) -> bytes:
    return _varint(field << 3 | 5) + struct.pack("<f", x)


def attribute(name: str, value: float | int | Sequence[int]) -> bytes:
    """An AttributeProto: a float, an int or a list of ints."""
    if isinstance(value, float):
        body = _float(2, value) + _int(20, _ATTR_FLOAT)
    elif isinstance(value, int):
        body = _int(3, value) + _int(20, _ATTR_INT)
    else:
        body = b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)
    return _str(1, name) + body


def node(
    op: str, inputs: Iterable[str], outputs: Iterable[str], **attrs: float | int | Sequence[int]
) -> bytes:
    """A NodeProto of the default domain."""
    body = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs) + _str(4, op)
    return body + b"".join(_bytes(5, attribute(k, v)) for k, v in attrs.items())


def tensor(name: str, array: npt.NDArray[np.generic], external: bool = False) -> bytes:
    """A TensorProto: its bytes inline, or (`external`) only its shape and type, the data handed to the
    session as memory (SessionOptions.add_external_initializers)."""
    body = b"".join(_int(1, d) for d in array.shape) + _int(2, _ELEM[array.dtype]) + _str(8, name)
    if not external:
        return body + _bytes(9, np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes())
    where = _str(1, "location") + _str(2, "memory")  # never read from a file: the session is given it
    return body + _bytes(13, where) + _int(14, 1)


def value_info(name: str, elem: int, dims: Sequence[int | str]) -> bytes:
    """A ValueInfoProto of a tensor; a str dimension is symbolic (batch, tokens)."""
    shape = b"".join(_bytes(1, _str(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    return _str(1, name) + _bytes(2, _bytes(1, _int(1, elem) + _bytes(2, shape)))


def model(
    nodes: Sequence[bytes],
    initializers: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    opset: int,
    ir_version: int = 8,
) -> bytes:
    """A ModelProto holding one graph, on the default operator set `opset`."""
    graph = (
        b"".join(_bytes(1, n) for n in nodes)
        + _str(2, "graph")
        + b"".join(_bytes(5, t) for t in initializers)
        + b"".join(_bytes(11, v) for v in inputs)
        + b"".join(_bytes(12, v) for v in outputs)
    )
    opset_id = _str(1, "") + _int(2, opset)
    return _int(1, ir_version) + _str(2, "flexsql") + _bytes(7, graph) + _bytes(8, opset_id)


__all__ = ["FLOAT", "INT64", "attribute", "model", "node", "tensor", "value_info"]
