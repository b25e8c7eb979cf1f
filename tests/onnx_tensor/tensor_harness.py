"""Build and run small ONNX models through OnnxParser → Builder → Runtime, and their oracles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import plugrt as trt

LOGGER = trt.Logger(trt.Logger.ERROR)
Shapes = dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]


def parser_class() -> Any:
    """TensorRT's OnnxParser class as plugrt exports it."""
    parser = getattr(trt, "OnnxParser", None)
    if parser is None:
        from plugrt.onnx.parser import OnnxParser as parser
    return parser


class _Allocator(trt.IOutputAllocator):
    """Places every output in a buffer (host, or device with ``xp`` = CuPy) it grows on demand."""

    def __init__(self, xp: Any) -> None:
        super().__init__()
        self.xp = xp
        self.buffer = xp.zeros(0, np.uint8)
        self.shape: tuple[int, ...] = ()

    def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
        if self.buffer.nbytes < max(size, 1):
            self.buffer = self.xp.zeros(max(size, 1), np.uint8)
        return int(self.buffer.ctypes.data if self.xp is np else self.buffer.data.ptr)

    def host_bytes(self) -> np.ndarray:
        return self.buffer if self.xp is np else self.buffer.get()

    def notify_shape(self, tensor_name: str, shape: trt.Dims) -> None:
        self.shape = tuple(shape)


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, tuple[int, Sequence[int | str | None]]],
    outputs: Sequence[str],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 18,
    output_type: int = onnx.TensorProto.UNDEFINED,
) -> onnx.ModelProto:
    """A model of ``nodes``; ``inputs`` maps names to (ONNX element type, shape with names for dynamic dims)."""
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info(n, t, list(s)) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, output_type, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


class Compiled:
    """An engine built from a model, callable with a dict of host arrays (``device="cuda"`` runs on the GPU)."""

    def __init__(self, model: onnx.ModelProto, profile: Shapes | None = None, device: str = "cpu") -> None:
        if device == "cuda":
            import cupy

            self.xp: Any = cupy
        else:
            self.xp = np
        builder = trt.Builder(LOGGER)
        network = builder.create_network(0)
        parser = parser_class()(network, LOGGER)
        if not parser.parse(model.SerializeToString()):
            raise AssertionError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
        config = builder.create_builder_config()
        if profile:
            opt = builder.create_optimization_profile()
            for name, (lo, mid, hi) in profile.items():
                opt.set_shape(name, lo, mid, hi)
            config.add_optimization_profile(opt)
        plan = builder.build_serialized_network(network, config)
        self.engine = trt.Runtime(LOGGER, device).deserialize_cuda_engine(plan)
        self.context = self.engine.create_execution_context()
        self.outputs = [o.name for o in model.graph.output]

    def __call__(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        context = self.context
        xp = self.xp
        arrays = {
            n: xp.ascontiguousarray(xp.asarray(a, dtype=trt.nptype(self.engine.get_tensor_dtype(n))))
            for n, a in feeds.items()
        }
        for name, array in arrays.items():
            context.set_input_shape(name, array.shape)
            context.set_tensor_address(name, int(array.ctypes.data if xp is np else array.data.ptr))
        allocators = {}
        for name in self.outputs:
            allocators[name] = _Allocator(xp)
            context.set_output_allocator(name, allocators[name])
        context.execute_async_v3(0)
        results = []
        for name in self.outputs:
            alloc = allocators[name]
            dtype = np.dtype(trt.nptype(self.engine.get_tensor_dtype(name)))
            count = int(np.prod(alloc.shape, dtype=np.int64))
            results.append(alloc.host_bytes()[: count * dtype.itemsize].view(dtype).reshape(alloc.shape).copy())
        return results


def check_shapes(model: onnx.ModelProto, profile: Shapes, feeds: Sequence[dict[str, np.ndarray]], **tol: Any) -> None:
    """Build once with ``profile``, then compare every output with the reference for each feed."""
    compiled = Compiled(model, profile)
    for feed in feeds:
        for name, g, r in zip(compiled.outputs, compiled(feed), reference(model, feed)):
            assert g.shape == r.shape, (
                f"{name}: shape {g.shape} != {r.shape} for inputs {[a.shape for a in feed.values()]}"
            )
            np.testing.assert_allclose(g, r.astype(g.dtype), err_msg=name, **tol)


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The ONNX reference evaluator's outputs."""
    return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]


def check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], profile: Shapes | None = None, **tol: Any) -> None:
    """Run ``model`` in plugrt and in the reference evaluator; compare every output."""
    got = Compiled(model, profile)(feeds)
    for name, g, r in zip(model.graph.output, got, reference(model, feeds)):
        assert g.shape == r.shape, f"{name.name}: shape {g.shape} != {r.shape}"
        np.testing.assert_allclose(g, r.astype(g.dtype) if r.dtype != g.dtype else r, err_msg=name.name, **tol)


def node_model(op: str, inputs: dict[str, np.ndarray], outputs: Sequence[str], opset: int = 18, **attrs: Any):
    """A single-node model whose inputs are graph inputs with the arrays' static shapes; returns (model, feeds)."""
    node = helper.make_node(op, list(inputs), list(outputs), **attrs)
    spec = {n: (helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()}
    return make_model([node], spec, outputs, opset=opset), dict(inputs)
