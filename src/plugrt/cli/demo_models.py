"""The demo's models, generated with ``onnx.helper`` (nothing is downloaded).

* A small detector: two conv heads give boxes ``[B, 256, 1, 4]`` and class scores
  ``[B, 256, C]``; the head is a ``BatchedNMSDynamic_TRT`` node, which the ONNX
  parser maps to the built-in plugin.
* A transformer encoder block whose two normalisations are ``LayerNorm`` plugin
  nodes (gamma/beta as attributes, moved to backend memory in ``initialize``).

Each builder also returns a reference model computing the same thing with
standard ONNX ops only (for ONNX's reference evaluator).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["NMS_FIELDS", "NUM_CLASSES", "detector", "transformer_block"]

NUM_CLASSES = 5
NMS_FIELDS: dict[str, Any] = {
    "shareLocation": 1,
    "backgroundLabelId": 0,
    "numClasses": NUM_CLASSES,
    "topK": 64,
    "keepTopK": 16,
    "scoreThreshold": 0.3,
    "iouThreshold": 0.5,
    "isNormalized": 1,
    "clipBoxes": 1,
}


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str],
    weights: dict[str, np.ndarray],
    name: str,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        inputs,
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="plugrt demo")


def detector(seed: int = 0) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(model with the NMS plugin head, reference model ending at boxes and scores)."""
    rng = np.random.default_rng(seed)
    w = {
        "w1": rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.4,
        "b1": np.zeros(16, np.float32),
        "w_box": rng.standard_normal((4, 16, 1, 1)).astype(np.float32) * 0.5,
        "w_cls": rng.standard_normal((NUM_CLASSES, 16, 1, 1)).astype(np.float32),
        "flat4": np.array([0, 4, -1], np.int64),
        "flatc": np.array([0, NUM_CLASSES, -1], np.int64),
        "s0": np.array([0], np.int64),
        "s2": np.array([2], np.int64),
        "s4": np.array([4], np.int64),
        "half": np.array(0.5, np.float32),
        "min_size": np.array(0.05, np.float32),
        "ax2": np.array([2], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Conv", ["image", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["f"]),
        n("Conv", ["f", "w_box"], ["bh"]),
        n("Reshape", ["bh", "flat4"], ["bf"]),
        n("Transpose", ["bf"], ["bt"], perm=[0, 2, 1]),
        n("Sigmoid", ["bt"], ["bs"]),
        n("Slice", ["bs", "s0", "s2", "ax2"], ["lo_raw"]),
        n("Slice", ["bs", "s2", "s4", "ax2"], ["size_raw"]),
        n("Mul", ["lo_raw", "half"], ["lo"]),
        n("Mul", ["size_raw", "half"], ["size_half"]),
        n("Add", ["size_half", "min_size"], ["size"]),
        n("Add", ["lo", "size"], ["hi"]),
        n("Concat", ["lo", "hi"], ["boxes3"], axis=2),
        n("Unsqueeze", ["boxes3", "ax2"], ["boxes"]),
        n("Conv", ["f", "w_cls"], ["ch"]),
        n("Reshape", ["ch", "flatc"], ["cf"]),
        n("Transpose", ["cf"], ["ct"], perm=[0, 2, 1]),
        n("Softmax", ["ct"], ["scores"], axis=-1),
    ]
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])
    nms = n(
        "BatchedNMSDynamic_TRT",
        ["boxes", "scores"],
        ["num_detections", "nmsed_boxes", "nmsed_scores", "nmsed_classes"],
        name="nms",
        **NMS_FIELDS,
    )
    full = _model(
        [*nodes, nms], [image], ["num_detections", "nmsed_boxes", "nmsed_scores", "nmsed_classes"], w, "detector"
    )
    reference = _model(nodes, [image], ["boxes", "scores"], w, "detector_reference")
    return full, reference


def transformer_block(dim: int = 64, heads: int = 4, seed: int = 1) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(block with LayerNorm plugin nodes, the same block with ONNX LayerNormalization)."""
    rng = np.random.default_rng(seed)
    head = dim // heads

    def dense(name: str, fan_in: int, fan_out: int) -> dict[str, np.ndarray]:
        return {
            f"{name}_w": (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32),
            f"{name}_b": (rng.standard_normal(fan_out) * 0.1).astype(np.float32),
        }

    w: dict[str, np.ndarray] = {}
    for name, fan_in, fan_out in (
        ("q", dim, dim),
        ("k", dim, dim),
        ("v", dim, dim),
        ("o", dim, dim),
        ("up", dim, 4 * dim),
        ("down", 4 * dim, dim),
    ):
        w.update(dense(name, fan_in, fan_out))
    gammas = [(1 + 0.1 * rng.standard_normal(dim)).astype(np.float32) for _ in range(2)]
    betas = [(0.1 * rng.standard_normal(dim)).astype(np.float32) for _ in range(2)]
    w.update(
        {
            "split": np.array([0, 0, heads, head], np.int64),
            "merge": np.array([0, 0, dim], np.int64),
            "scale": np.array(1 / np.sqrt(head), np.float32),
        }
    )
    n = helper.make_node

    def linear(x: str, name: str) -> list[onnx.NodeProto]:
        return [n("MatMul", [x, f"{name}_w"], [f"{name}_mm"]), n("Add", [f"{name}_mm", f"{name}_b"], [name])]

    def attention_and_mlp(norm1: onnx.NodeProto, norm2: onnx.NodeProto) -> list[onnx.NodeProto]:
        nodes = [norm1, *linear("ln1", "q"), *linear("ln1", "k"), *linear("ln1", "v")]
        for t in ("q", "k", "v"):
            nodes += [n("Reshape", [t, "split"], [f"{t}4"]), n("Transpose", [f"{t}4"], [f"{t}h"], perm=[0, 2, 1, 3])]
        nodes += [
            n("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2]),
            n("MatMul", ["qh", "kt"], ["att_raw"]),
            n("Mul", ["att_raw", "scale"], ["att_scaled"]),
            n("Softmax", ["att_scaled"], ["att"], axis=-1),
            n("MatMul", ["att", "vh"], ["ctx_h"]),
            n("Transpose", ["ctx_h"], ["ctx4"], perm=[0, 2, 1, 3]),
            n("Reshape", ["ctx4", "merge"], ["ctx"]),
            *linear("ctx", "o"),
            n("Add", ["x", "o"], ["h"]),
            norm2,
            *linear("ln2", "up"),
            n("Relu", ["up"], ["up_act"]),
            *linear("up_act", "down"),
            n("Add", ["h", "down"], ["y"]),
        ]
        return nodes

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", dim])
    plugin_norms = [
        n("LayerNorm", [src], [dst], name=dst, gamma=g.tolist(), beta=b.tolist(), epsilon=1e-5, axis=-1)
        for src, dst, g, b in (("x", "ln1", gammas[0], betas[0]), ("h", "ln2", gammas[1], betas[1]))
    ]
    ref_w = dict(w, g1=gammas[0], b1=betas[0], g2=gammas[1], b2=betas[1])
    ref_norms = [
        n("LayerNormalization", [src, g, b], [dst], axis=-1, epsilon=1e-5)
        for src, dst, g, b in (("x", "ln1", "g1", "b1"), ("h", "ln2", "g2", "b2"))
    ]
    full = _model(attention_and_mlp(*plugin_norms), [x], ["y"], w, "transformer_block")
    reference = _model(attention_and_mlp(*ref_norms), [x], ["y"], ref_w, "transformer_block_reference")
    return full, reference
