"""Single-node ONNX models for the CNN ops, run in plugrt and in the oracles (reference evaluator, onnxruntime)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from plugrt.onnx.compile import compile as compile_model

RNG = np.random.default_rng(20261129)
DynamicShapes = dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]


def random(shape: Sequence[int], dtype: Any = np.float32, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """Uniform random values of ``dtype`` (integers for integer types)."""
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(int(low), int(high) + 1, size=tuple(shape)).astype(dtype)
    return RNG.uniform(low, high, size=tuple(shape)).astype(dtype)


def node_model(
    op: str,
    inputs: dict[str, np.ndarray | None],
    outputs: Sequence[str] = ("y",),
    *,
    initializers: Sequence[str] = (),
    opset: int = 21,
    dynamic: dict[str, Sequence[int | str]] | None = None,
    output_types: Sequence[Any] | None = None,
    **attrs: Any,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model; ``inputs`` in node order (None: omitted), those named in ``initializers``
    become initializers, the rest graph inputs (``dynamic`` overrides their declared shapes).
    Outputs are declared with ``output_types`` (NumPy types; default: the first input's type).
    Returns the model and the feeds of its graph inputs."""
    names = [name if value is not None else "" for name, value in inputs.items()]
    node = helper.make_node(op, names, list(outputs), **attrs)
    graph_inputs, inits, feeds = [], [], {}
    for name, value in inputs.items():
        if value is None:
            continue
        if name in initializers:
            inits.append(numpy_helper.from_array(np.asarray(value), name))
            continue
        shape = (dynamic or {}).get(name, value.shape)
        graph_inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), shape))
        feeds[name] = value
    first = next(v for v in inputs.values() if v is not None)
    types = list(output_types or [first.dtype] * len(outputs))
    declared = [
        helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(t)), None)
        for o, t in zip(outputs, types)
        if o
    ]
    graph = helper.make_graph([node], op.lower(), graph_inputs, declared, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return model, feeds


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of ONNX's reference evaluator."""
    return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]


def onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of onnxruntime's CPU provider."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(r) for r in session.run(None, feeds)]


def plugrt_run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], shapes: DynamicShapes | None = None
) -> list[np.ndarray]:
    """Outputs of plugrt (parser, builder, runtime) in graph output order."""
    results = compile_model(model, shapes=shapes)(feeds)
    return [results[o.name] for o in model.graph.output]


def tolerance(dtype: Any) -> dict[str, float]:
    """Comparison tolerance for results of ``dtype``."""
    if np.dtype(dtype) == np.float16:
        return {"rtol": 1e-2, "atol": 1e-2}
    return {"rtol": 1e-4, "atol": 1e-5}


def check(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    oracle: Any = reference,
    shapes: DynamicShapes | None = None,
    **tol: float,
) -> list[np.ndarray]:
    """Run ``model`` in plugrt and in ``oracle``; every output must match in shape, type and value."""
    got = plugrt_run(model, feeds, shapes)
    expected = oracle(model, feeds)
    for output, g, e in zip(model.graph.output, got, expected):
        assert g.shape == e.shape, f"{output.name}: shape {g.shape} != {e.shape}"
        assert g.dtype == e.dtype, f"{output.name}: type {g.dtype} != {e.dtype}"
        np.testing.assert_allclose(
            g.astype(np.float64), e.astype(np.float64), err_msg=output.name, **(tol or tolerance(g.dtype))
        )
    return got
