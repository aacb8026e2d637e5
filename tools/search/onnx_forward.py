"""The embedding model's forward pass on ONNX Runtime, when it is installed: the same BERT encoder as
embeddings.MiniLM._forward (the same weights, float32, the exact GELU), written as an ONNX graph in
memory from the loaded arrays (onnx_proto.py) — nothing is downloaded or written to disk.

Why: its fused kernels run the forward in one native call, ~1.4x faster than numpy's ~150 calls on
one core (a 64-token question: 28.5 -> 19.8 ms on a busy 2-core machine; search_schema's warm p95 on
COVID19_USA 60.7 -> 44.6 ms in the same run). Encoding in a thread beside the lexical scoring (ONNX
Runtime does not hold the GIL) was measured too and left out: on a busy machine it made the p95 worse
(54.9 ms). Vectors match the numpy forward's to ~3e-7 (tests/tools/search/test_embeddings.py). Without
`onnxruntime`, or if it fails, the numpy forward runs and nothing else changes."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from flexsql.tools.search import onnx_proto as proto

if TYPE_CHECKING:
    from flexsql.tools.search.embeddings import MiniLM

log = logging.getLogger("flexsql.search")

OPSET = 17  # LayerNormalization is an operator from 17 on


EXTERNAL_ELEMENTS = 1024  # weights this big are handed over as memory, not copied into the graph


class _Graph:
    """Nodes and initialisers of one ONNX graph, named as they are added. Weights are not written into
    the graph: ONNX Runtime reads them from the arrays themselves (`externals`), so the model's ~90 MB
    are not copied into a protobuf, its serialisation and the session on top of the arrays."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.inits: list[bytes] = []
        self.externals: dict[str, npt.NDArray[Any]] = {}
        self._n = 0

    def const(self, array: npt.NDArray[Any]) -> str:
        self._n += 1
        name = f"c{self._n}"
        array = np.ascontiguousarray(array)
        external = array.size >= EXTERNAL_ELEMENTS
        self.inits.append(proto.tensor(name, array, external=external))
        if external:
            self.externals[name] = array
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        self._n += 1
        name = f"t{self._n}"
        self.nodes.append(proto.node(kind, inputs, [name], **attrs))
        return name


def build_graph(m: MiniLM) -> tuple[bytes, dict[str, npt.NDArray[Any]]]:
    """The serialised ONNX model of `m`'s encoder, and the weights it names (by initialiser name, to
    hand over as memory): inputs ids (B, L) int64, positions (L) int64 and mask (B, L) float32; output
    (B, hidden) unit vectors, mean-pooled over the mask."""
    g = _Graph()
    h, heads = m.hidden, m.heads
    d = h // heads
    f32 = np.float32
    one, half, root2 = (
        g.const(np.array(1.0, f32)),
        g.const(np.array(0.5, f32)),
        g.const(np.array(2**0.5, f32)),
    )
    split_heads, join_heads = g.const(np.array([0, 0, heads, d])), g.const(np.array([0, 0, h]))

    def norm(x: str, weight_bias: tuple[Any, Any]) -> str:
        w, b = weight_bias
        return g.op("LayerNormalization", x, g.const(w), g.const(b), axis=-1, epsilon=m.eps)

    def dense(x: str, w: Any, b: Any) -> str:
        return g.op("Add", g.op("MatMul", x, g.const(w)), g.const(b))

    x = g.op("Gather", g.const(m.word), "ids")
    x = g.op(
        "Add", g.op("Add", x, g.op("Gather", g.const(m.position), "positions")), g.const(m.token_type[0])
    )
    x = norm(x, m.ln)
    # padding takes no attention: (1 - mask) * -1e9 on every head and query row
    bias = g.op("Mul", g.op("Sub", one, "mask"), g.const(np.array(-1e9, f32)))
    bias = g.op("Unsqueeze", bias, g.const(np.array([1, 2])))
    scale = g.const(np.array(1.0 / np.sqrt(d), f32))
    for layer in m.layers:
        q, k, v = (
            g.op(
                "Transpose",
                g.op(
                    "Reshape",
                    dense(x, layer.qkv[:, i * h : (i + 1) * h], layer.qkv_bias[i * h : (i + 1) * h]),
                    split_heads,
                ),
                perm=perm,
            )
            for i, perm in enumerate(([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]))
        )
        att = g.op("Softmax", g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias), axis=-1)
        ctx = g.op("Reshape", g.op("Transpose", g.op("MatMul", att, v), perm=[0, 2, 1, 3]), join_heads)
        x = norm(g.op("Add", x, dense(ctx, layer.out, layer.out_bias)), layer.ln1)
        inner = dense(x, layer.inter, layer.inter_bias)
        gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", g.op("Erf", g.op("Div", inner, root2)), one)), half)
        x = norm(g.op("Add", x, dense(gelu, layer.down, layer.down_bias)), layer.ln2)
    mask3 = g.op("Unsqueeze", "mask", g.const(np.array([2])))
    tokens = g.const(np.array([1]))
    summed = g.op("ReduceSum", g.op("Mul", x, mask3), tokens, keepdims=0)
    count = g.op("Max", g.op("ReduceSum", mask3, tokens, keepdims=0), g.const(np.array(1e-9, f32)))
    pooled = g.op("Div", summed, count)
    g.nodes.append(proto.node("LpNormalization", [pooled], ["vectors"], axis=-1, p=2))
    data = proto.model(
        g.nodes,
        g.inits,
        [
            proto.value_info("ids", proto.INT64, ["batch", "tokens"]),
            proto.value_info("positions", proto.INT64, ["tokens"]),
            proto.value_info("mask", proto.FLOAT, ["batch", "tokens"]),
        ],
        [proto.value_info("vectors", proto.FLOAT, ["batch", h])],
        opset=OPSET,
    )
    return data, g.externals


class OnnxForward:
    """An ONNX Runtime session of one model, on one thread (the other cores stay with the searches)."""

    def __init__(self, graph: bytes, weights: dict[str, npt.NDArray[Any]]) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        # the session reads the arrays in place: they must live as long as it does
        self._weights = weights
        options.add_external_initializers(
            list(weights), [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.values()]
        )
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # its warnings are about graph rewrites, not ours to act on
        self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def __call__(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        positions = np.arange(ids.shape[1], dtype=np.int64)
        out = self._session.run(None, {"ids": ids, "positions": positions, "mask": mask})[0]
        vectors: npt.NDArray[np.float32] = np.asarray(out, dtype=np.float32)
        return vectors


def onnx_forward(m: MiniLM) -> OnnxForward | None:
    """`m`'s forward on ONNX Runtime, or None when onnxruntime is missing or fails."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None
    try:
        return OnnxForward(*build_graph(m))
    except Exception as exc:  # a broken runtime must not take search down: the numpy forward runs
        log.warning("ONNX Runtime could not run the embedding model (%s); using the numpy forward", exc)
        return None


__all__ = ["OnnxForward", "build_graph", "onnx_forward"]
