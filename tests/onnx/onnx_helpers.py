"""Helpers of the ONNX tests: small models, a collecting logger, parsing and running."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.onnx import OnnxParser


class Collect(trt.ILogger):
    """A logger that keeps every message."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[trt.Severity, str]] = []

    def log(self, severity: trt.Severity, msg: str) -> None:
        self.messages.append((severity, msg))

    def at(self, severity: trt.Severity) -> list[str]:
        return [m for s, m in self.messages if s == severity]


def tensor_info(name: str, elem: int, shape: Sequence[Any] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    extra_opsets: Sequence[tuple[str, int]] = (),
) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(list(nodes), "test", list(inputs), list(outputs), inits)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    made = helper.make_model(graph, opset_imports=opsets)
    made.ir_version = min(made.ir_version, 10)  # onnxruntime reads IR <= 10
    return _typed_outputs(made)


def _typed_outputs(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Outputs declared without a type get the one ONNX's shape inference finds (onnxruntime needs it)."""
    if all(o.type.tensor_type.elem_type for o in proto.graph.output):
        return proto
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:
        return proto
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for output in proto.graph.output:
        found = known.get(output.name)
        if not output.type.tensor_type.elem_type and found is not None and found.type.tensor_type.elem_type:
            output.type.CopyFrom(found.type)
    return proto


def single(
    op: str,
    inputs: dict[str, np.ndarray],
    attrs: dict[str, Any] | None = None,
    initializers: dict[str, np.ndarray] | None = None,
    num_outputs: int = 1,
    opset: int = 17,
    input_order: Sequence[str] | None = None,
) -> onnx.ModelProto:
    """A model of one node whose graph inputs are ``inputs`` (arrays give types and shapes)."""
    names = list(input_order) if input_order is not None else list(inputs) + list(initializers or {})
    outputs = [f"out{i}" for i in range(num_outputs)]
    node = helper.make_node(op, names, outputs, **(attrs or {}))
    infos = [tensor_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
    return model([node], infos, outs, initializers, opset)


def parse(proto: onnx.ModelProto | bytes, logger: trt.ILogger | None = None) -> tuple[bool, OnnxParser, Any]:
    logger = logger or Collect()
    network = trt.Builder(logger).create_network(0)
    parser = OnnxParser(network, logger)
    data = proto if isinstance(proto, bytes) else proto.SerializeToString()
    return parser.parse(data), parser, network


def errors(parser: OnnxParser) -> list[str]:
    return [str(parser.get_error(i)) for i in range(parser.num_errors)]


def onnxruntime_outputs(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))
