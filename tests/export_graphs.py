"""ONNX graphs in the exporters' patterns (torch 2.13's dynamo exporter, opset 18), shared by the tests.

``bert_attention_reshape``: heads split and merged with sizes taken from ``Shape(x)``;
``conv_length_chain``: integer arithmetic on shape values feeding Range, Slice, Reshape and Expand;
``masked_attention``: BERT's attention with its additive mask of ``finfo(float32).min``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def onnx_model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str],
    initializers: dict[str, np.ndarray],
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "pattern",
        inputs,
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def bert_attention_reshape() -> onnx.ModelProto:
    """x [B, S, 768] + a position table sliced to S, split into heads of 64 (-1) and merged back (-1).

    Both reshapes take B and S from ``Shape(x)`` while the tensor's second dimension is the
    broadcast of S and the clamped slice end: the merged size is
    ``(B * S * ((M * 768) // (S * 64)) * 64) // (B * S)`` for that spelling M of S.
    """
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one_scalar"], ["seq"], axis=0),
        helper.make_node("Unsqueeze", ["seq", "zero"], ["seq_1d"]),
        helper.make_node("Slice", ["table", "zero", "seq_1d", "one"], ["positions"]),
        helper.make_node("Add", ["x", "positions"], ["embedded"]),
        helper.make_node("Slice", ["shape", "zero", "two"], ["batch_seq"]),
        helper.make_node("Concat", ["batch_seq", "heads"], ["split_shape"], axis=0),
        helper.make_node("Reshape", ["embedded", "split_shape"], ["split"]),
        helper.make_node("Transpose", ["split"], ["per_head"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["per_head"], ["back"], perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["batch_seq", "minus_one"], ["merge_shape"], axis=0),
        helper.make_node("Reshape", ["back", "merge_shape"], ["y"]),
    ]
    inits = {
        "table": np.random.default_rng(0).standard_normal((1, 512, 768)).astype(np.float32),
        "zero": np.array([0], np.int64),
        "one": np.array([1], np.int64),
        "two": np.array([2], np.int64),
        "one_scalar": np.array(1, np.int64),
        "heads": np.array([-1, 64], np.int64),
        "minus_one": np.array([-1], np.int64),
    }
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 768])
    return onnx_model(nodes, [x], ["y"], inits)


def conv_length_chain() -> onnx.ModelProto:
    """wav2vec2's feature length: ``Shape -> Squeeze -> Div -> Add`` (floor((L - 10) / 5) + 1, exported as L // 5 - 1)
    feeding Range (the attention mask) and Reshape; Mod, Min, Max, Mul, Sub and Where of shape values too."""
    nodes = [
        helper.make_node("Shape", ["audio"], ["length_1d"], start=1, end=2),
        helper.make_node("Squeeze", ["length_1d"], ["length"]),
        helper.make_node("Div", ["length", "five"], ["frames_down"]),
        helper.make_node("Add", ["frames_down", "minus_one"], ["frames"]),
        helper.make_node("Range", ["zero", "frames", "one"], ["positions"]),
        helper.make_node("Mul", ["frames", "five"], ["used"]),
        helper.make_node("Unsqueeze", ["used", "axis0"], ["used_1d"]),
        helper.make_node("Slice", ["audio", "zero_1d", "used_1d", "axis1"], ["trimmed"]),
        helper.make_node("Mod", ["length", "five"], ["leftover"]),
        helper.make_node("Sub", ["frames", "leftover"], ["fewer"]),
        helper.make_node("Max", ["fewer", "one"], ["at_least_one"]),
        helper.make_node("Min", ["at_least_one", "frames"], ["rows"]),
        helper.make_node("Greater", ["rows", "zero"], ["positive"]),
        helper.make_node("Where", ["positive", "rows", "one"], ["rows_safe"]),
        helper.make_node("Unsqueeze", ["frames", "axis0"], ["frames_1d"]),
        helper.make_node("Concat", ["batch_1d", "frames_1d", "five_1d"], ["frame_shape"], axis=0),
        helper.make_node("Reshape", ["trimmed", "frame_shape"], ["framed"]),
        helper.make_node("Unsqueeze", ["rows_safe", "axis0"], ["rows_1d"]),
        helper.make_node("Expand", ["one_f", "rows_1d"], ["ones"]),
    ]
    inits = {
        "five": np.array(5, np.int64),
        "minus_one": np.array(-1, np.int64),
        "zero": np.array(0, np.int64),
        "one": np.array(1, np.int64),
        "axis0": np.array([0], np.int64),
        "axis1": np.array([1], np.int64),
        "zero_1d": np.array([0], np.int64),
        "batch_1d": np.array([-1], np.int64),
        "five_1d": np.array([5], np.int64),
        "one_f": np.array([1.0], np.float32),
    }
    audio = helper.make_tensor_value_info("audio", TensorProto.FLOAT, [2, "samples"])
    return onnx_model(nodes, [audio], ["positions", "framed", "ones"], inits)


def masked_attention(mask_value: float = float(np.finfo(np.float32).min)) -> object:
    """BERT's attention as exported: scores = q k^T / 8 + (1 - mask) * finfo(float32).min, softmax, @ v,
    then LayerNormalization; q = k = v = x @ w."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["q"]),
        helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["raw"]),
        helper.make_node("Div", ["raw", "eight"], ["scores"]),
        helper.make_node("Cast", ["mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["one", "mask_f"], ["inverted"]),
        helper.make_node("Mul", ["inverted", "minimum"], ["bias"]),
        helper.make_node("Unsqueeze", ["bias", "axis1"], ["bias3"]),
        helper.make_node("Add", ["scores", "bias3"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "q"], ["context"]),
        helper.make_node("LayerNormalization", ["context", "gamma", "beta"], ["y"], axis=-1),
    ]
    inits = {
        "w": (rng.standard_normal((64, 64)) * 0.3).astype(np.float32),
        "eight": np.array(8.0, np.float32),
        "one": np.array(1.0, np.float32),
        "minimum": np.array(mask_value, np.float32),
        "axis1": np.array([1], np.int64),
        "gamma": np.ones(64, np.float32),
        "beta": np.zeros(64, np.float32),
    }
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 16, 64])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", 16])
    model = onnx_model(nodes, [x, mask], ["y"], inits)
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    return model
