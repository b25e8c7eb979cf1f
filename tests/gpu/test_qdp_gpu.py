"""Decorator-API plugins on the GPU: torch/Triton JIT impls and AOT Triton kernels, against NumPy references.

The plugins are TensorRT's quickly-deployable-plugin samples (namespace ``gpu_sample``): an
elementwise add (+1) with a Triton kernel, the same with autotune over FP32|FP16, a non-zero
with a size tensor (torch), a circular pad with two tactics (torch, device-generic because the
build times tactics on the host) and the circular pad as an AOT Triton kernel (inetdef and ONNX,
with engine save/load, eager and CUDA-graph runs).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
import plugrt.plugin as trtp

from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)
RNG = np.random.default_rng(21)


# --- Triton kernels (made on first use: triton is imported only on the GPU machine) -------------
@functools.cache
def _kernels() -> dict[str, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):  # type: ignore[no-untyped-def]
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)

    @triton.jit
    def add_kernel_aot(x_ptr, n_elements, y_ptr, BLOCK_SIZE: tl.constexpr):  # type: ignore[no-untyped-def]
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)

    @triton.jit
    def circ_pad_kernel(  # type: ignore[no-untyped-def]
        X, pad_h, pad_w, dims_0, dims_1, dims_2, dims_3, y_2, y_3, y_len, Y, BLOCK_SIZE: tl.constexpr
    ):
        i = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = i < y_len
        i3 = i % y_3
        i2 = (i // y_3) % y_2
        i01 = i // y_3 // y_2  # the first two dimensions are not padded
        j2 = (i2 - pad_h + dims_2) % dims_2
        j3 = (i3 - pad_w + dims_3) % dims_3
        tl.store(Y + i, tl.load(X + (i01 * dims_2 + j2) * dims_3 + j3, mask=mask), mask=mask)

    return {"add": add_kernel, "add_aot": add_kernel_aot, "circ_pad": circ_pad_kernel}


def _compile(fn: Any, signature: dict[str, str], constexprs: dict[str, int]) -> Any:
    """``triton.compile`` of ``fn``; the ASTSource keywords changed across Triton versions."""
    import triton

    attempts = [
        {"signature": signature, "constexprs": constexprs},
        {"signature": {**signature, **{k: "constexpr" for k in constexprs}}, "constexprs": constexprs},
        {"signature": signature, "constants": constexprs},
    ]
    failure: Exception | None = None
    for keywords in attempts:
        try:
            return triton.compile(triton.compiler.ASTSource(fn=fn, **keywords))
        except Exception as exc:  # try the next spelling, report the first failure
            failure = failure or exc
    assert failure is not None
    raise failure


def _torch(t: trtp.Tensor) -> Any:
    """A zero-copy torch tensor on the Tensor's own device (the build times tactics on the host)."""
    import torch

    if hasattr(t, "__cuda_array_interface__"):
        return torch.as_tensor(t, device="cuda")
    return torch.from_dlpack(t)


# --- elementwise add: Triton JIT impl ---------------------------------------------------------
@trtp.register("gpu_sample::elemwise_add_plugin")
def add_desc(inp0: trtp.TensorDesc, block_size: int) -> trtp.TensorDesc:
    return inp0.like()


@trtp.impl("gpu_sample::elemwise_add_plugin")
def add_impl(inp0: trtp.Tensor, block_size: int, outputs: tuple[trtp.Tensor], stream: int) -> None:
    import torch
    import triton

    n = inp0.numel()
    with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
        x, y = torch.as_tensor(inp0, device="cuda"), torch.as_tensor(outputs[0], device="cuda")
        _kernels()["add"][(triton.cdiv(n, block_size),)](x, y, n, BLOCK_SIZE=block_size)


@trtp.register("gpu_sample::elemwise_add_plugin_tuned")
def tuned_add_desc(inp0: trtp.TensorDesc, block_size: int) -> trtp.TensorDesc:
    return inp0.like()


@trtp.autotune("gpu_sample::elemwise_add_plugin_tuned")
def tuned_add_autotune(inp0: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc]) -> list[trtp.AutoTuneCombination]:
    return [trtp.AutoTuneCombination("FP32|FP16, FP32|FP16")]


@trtp.impl("gpu_sample::elemwise_add_plugin_tuned")
def tuned_add_impl(inp0: trtp.Tensor, block_size: int, outputs: tuple[trtp.Tensor], stream: int) -> None:
    add_impl(inp0, block_size, outputs, stream)


# --- elementwise add: AOT Triton kernel --------------------------------------------------------
@trtp.register("gpu_sample::elemwise_add_aot")
def add_aot_desc(inp0: trtp.TensorDesc, block_size: int) -> trtp.TensorDesc:
    return inp0.like()


@trtp.aot_impl("gpu_sample::elemwise_add_aot")
def add_aot_impl(
    inp0: trtp.TensorDesc, block_size: int, outputs: tuple[trtp.TensorDesc], tactic: int
) -> tuple[str | bytes, str | bytes, trtp.KernelLaunchParams, trtp.SymExprs]:
    type_str = "fp32" if inp0.dtype == trt.float32 else "fp16"
    compiled = _compile(
        _kernels()["add_aot"],
        {"x_ptr": f"*{type_str}", "n_elements": "i32", "y_ptr": f"*{type_str}"},
        {"BLOCK_SIZE": block_size},
    )
    n = inp0.shape_expr.numel()
    launch = trtp.KernelLaunchParams()
    launch.grid_x = trtp.cdiv(n, block_size)
    launch.block_x = compiled.metadata.num_warps * 32
    launch.shared_mem = compiled.metadata.shared
    extra = trtp.SymIntExprs(1)
    extra[0] = trtp.SymInt32(n)
    return compiled.metadata.name, compiled.asm["ptx"], launch, extra


# --- in-place add: the output is the input's buffer (torch) ----------------------------------
@trtp.register("gpu_sample::elemwise_add_plugin_")
def inplace_add_desc(inp0: trtp.TensorDesc, delta: int) -> trtp.TensorDesc:
    return inp0.aliased()


@trtp.autotune("gpu_sample::elemwise_add_plugin_")
def inplace_add_autotune(inp0, outputs) -> list[trtp.AutoTuneCombination]:  # type: ignore[no-untyped-def]
    return [
        trtp.AutoTuneCombination("FP32, FP32", "LINEAR*HWC"),
        trtp.AutoTuneCombination("FP32|FP16, FP32|FP16", "LINEAR"),
    ]


@trtp.impl("gpu_sample::elemwise_add_plugin_")
def inplace_add_impl(inp0, delta: int, outputs, stream) -> None:  # type: ignore[no-untyped-def]
    import torch

    with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
        torch.as_tensor(inp0, device="cuda").add_(delta)


# --- non-zero: torch, a size tensor ------------------------------------------------------------
@trtp.register("gpu_sample::non_zero_plugin")
def non_zero_desc(inp0: trtp.TensorDesc) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
    upper_bound = inp0.shape_expr[0] * inp0.shape_expr[1]
    st = trtp.size_tensor(upper_bound // 2, upper_bound)
    st.dtype = trt.int64
    return trtp.from_shape_expr((st.expr(), 2), dtype=trt.int32), st


@trtp.impl("gpu_sample::non_zero_plugin")
def non_zero_impl(inp0: trtp.Tensor, outputs: tuple[trtp.Tensor], stream: int) -> None:
    import torch

    with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
        found = torch.nonzero(torch.as_tensor(inp0, device="cuda")).to(torch.int32)
        torch.as_tensor(outputs[0].aliased(tuple(found.shape)), device="cuda").copy_(found)
        torch.as_tensor(outputs[1], device="cuda").reshape(-1).fill_(found.shape[0])


# --- circular pad: two torch tactics (JIT) and an AOT Triton kernel ------------------------------
def _circ_pad_desc(inp0: trtp.TensorDesc, pads: npt.NDArray[np.int32]) -> trtp.TensorDesc:
    out = inp0.like()
    for i in range(np.size(pads) // 2):
        out.shape_expr[inp0.ndim - i - 1] += int(pads[i * 2] + pads[i * 2 + 1])
    return out


@trtp.register("gpu_sample::circ_pad_plugin")
def circ_pad_desc(inp0: trtp.TensorDesc, pads: npt.NDArray[np.int32]) -> trtp.TensorDesc:
    return _circ_pad_desc(inp0, pads)


@trtp.autotune("gpu_sample::circ_pad_plugin")
def circ_pad_autotune(inp0: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc]) -> list[trtp.AutoTuneCombination]:
    c = trtp.AutoTuneCombination()
    c.pos([0, 1], "FP32|FP16")
    c.tactics([1, 2])
    return [c]


@trtp.impl("gpu_sample::circ_pad_plugin")
def circ_pad_impl(
    inp0: trtp.Tensor, pads: npt.NDArray[np.int32], outputs: tuple[trtp.Tensor], stream: int, tactic: int
) -> None:
    import torch

    x, y = _torch(inp0), _torch(outputs[0])
    context = torch.cuda.stream(torch.cuda.ExternalStream(stream)) if x.is_cuda else _Nothing()
    with context:
        if tactic == 1:
            y.copy_(torch.nn.functional.pad(x, pads.tolist(), mode="circular"))
        else:
            index = [slice(None)] * x.ndim
            for i in range(len(pads) // 2):
                axis = x.ndim - i - 1
                before = int(pads[2 * i])
                rows = (torch.arange(y.shape[axis], device=x.device) - before) % x.shape[axis]
                index[axis] = rows
            gathered = x
            for axis, rows in enumerate(index):
                if not isinstance(rows, slice):
                    gathered = gathered.index_select(axis, rows)
            y.copy_(gathered)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@trtp.register("gpu_sample::circ_pad_aot")
def circ_pad_aot_desc(inp0: trtp.TensorDesc, pads: npt.NDArray[np.int32]) -> trtp.TensorDesc:
    return _circ_pad_desc(inp0, pads)


@trtp.aot_impl("gpu_sample::circ_pad_aot")
def circ_pad_aot_impl(
    inp0: trtp.TensorDesc, pads: npt.NDArray[np.int32], outputs: tuple[trtp.TensorDesc], tactic: int
) -> tuple[str | bytes, str | bytes, trtp.KernelLaunchParams, trtp.SymExprs]:
    return _circ_pad_kernel(inp0, pads, outputs, block=256)


def _circ_pad_kernel(inp0: trtp.TensorDesc, pads: np.ndarray, outputs: tuple[trtp.TensorDesc], block: int) -> Any:
    # 4-D input padded on the last two dimensions: pads = (w_before, w_after, h_before, h_after)
    ins, outs = inp0.shape_expr, outputs[0].shape_expr
    type_str = "fp32" if inp0.dtype == trt.float32 else "fp16"
    names = ["pad_h", "pad_w", "dims_0", "dims_1", "dims_2", "dims_3", "y_2", "y_3", "y_len"]
    signature = {"X": f"*{type_str}", **{n: "i32" for n in names}, "Y": f"*{type_str}"}
    compiled = _compile(_kernels()["circ_pad"], signature, {"BLOCK_SIZE": block})
    extra = trtp.SymIntExprs.from_tuple(
        [
            trtp.SymInt32(e)
            for e in [int(pads[2]), int(pads[0]), ins[0], ins[1], ins[2], ins[3], outs[2], outs[3], outs.numel()]
        ]
    )
    launch = trtp.KernelLaunchParams()
    launch.grid_x = trtp.cdiv(outs.numel(), block)
    launch.block_x = compiled.metadata.num_warps * 32
    launch.shared_mem = compiled.metadata.shared
    return compiled.metadata.name.encode(), compiled.asm["ptx"].encode(), launch, extra


@trtp.register("gpu_sample::circ_pad_aot_tactics")
def circ_pad_aot_tactics_desc(inp0: trtp.TensorDesc, pads: npt.NDArray[np.int32]) -> trtp.TensorDesc:
    return _circ_pad_desc(inp0, pads)


@trtp.autotune("gpu_sample::circ_pad_aot_tactics")
def circ_pad_aot_tactics_autotune(
    inp0: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc]
) -> list[trtp.AutoTuneCombination]:
    c = trtp.AutoTuneCombination()
    c.pos([0, 1], "FP32|FP16")
    c.tactics([1, 2])  # BLOCK_SIZE 256 and 1024
    return [c]


@trtp.aot_impl("gpu_sample::circ_pad_aot_tactics")
def circ_pad_aot_tactics_impl(
    inp0: trtp.TensorDesc, pads: npt.NDArray[np.int32], outputs: tuple[trtp.TensorDesc], tactic: int
) -> tuple[str | bytes, str | bytes, trtp.KernelLaunchParams, trtp.SymExprs]:
    return _circ_pad_kernel(inp0, pads, outputs, block={1: 256, 2: 1024}[tactic])


@trtp.impl("gpu_sample::circ_pad_aot")
def circ_pad_aot_fallback(
    inp0: trtp.Tensor, pads: npt.NDArray[np.int32], outputs: tuple[trtp.Tensor], stream: int
) -> None:
    """The JIT impl a CPU engine runs for the AOT plan (NumPy)."""
    np.asarray(outputs[0])[...] = _reference_pad(np.asarray(inp0), pads)


def _reference_pad(x: np.ndarray, pads: np.ndarray) -> np.ndarray:
    widths = [(0, 0)] * x.ndim
    for i in range(len(pads) // 2):
        widths[x.ndim - i - 1] = (int(pads[2 * i]), int(pads[2 * i + 1]))
    return np.pad(x, widths, mode="wrap")


# --- helpers ----------------------------------------------------------------------------------
def _plan(
    plugin: Any, shape: tuple[int, ...], profile: Any = None, flags: Any = (), device: str = "cpu", **kw: Any
) -> bytes:
    builder = trt.Builder(LOGGER, device=device)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, shape)
    layer = network.add_plugin(plugin(x), **kw)
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    config = builder.create_builder_config()
    for flag in flags:
        config.set_flag(flag)
    if profile is not None:
        p = builder.create_optimization_profile()
        p.set_shape("x", *profile)
        config.add_optimization_profile(p)
    return bytes(builder.build_serialized_network(network, config))


# --- tests ------------------------------------------------------------------------------------
def test_elementwise_add_triton_jit() -> None:
    pytest.importorskip("triton")
    plan = _plan(
        lambda x: trtp.op.gpu_sample.elemwise_add_plugin(x, block_size=256),
        (-1, 3, 32, 32),
        ((1, 3, 32, 32), (10, 3, 32, 32), (10, 3, 32, 32)),
    )
    x = RNG.integers(0, 10, (10, 3, 32, 32)).astype(np.float32)
    np.testing.assert_array_equal(run_plan(plan, "cuda", {"x": x})["y"], x + 1)


def test_elementwise_add_autotune_fp16() -> None:
    pytest.importorskip("triton")
    plan = _plan(
        lambda x: trtp.op.gpu_sample.elemwise_add_plugin_tuned(x, block_size=128),
        (4, 3, 16, 16),
        flags=[trt.BuilderFlag.FP16],
    )
    x = RNG.integers(0, 10, (4, 3, 16, 16)).astype(np.float32)
    np.testing.assert_array_equal(run_plan(plan, "cuda", {"x": x})["y"], x + 1)


def test_elementwise_add_aot_triton_kernel_eager_and_graph() -> None:
    pytest.importorskip("triton")
    plan = _plan(
        lambda x: trtp.op.gpu_sample.elemwise_add_aot(x, block_size=256),
        (-1, 3, 32, 32),
        ((1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32)),
    )
    for batch in (1, 8, 3):
        x = RNG.integers(0, 10, (batch, 3, 32, 32)).astype(np.float32)
        np.testing.assert_array_equal(run_plan(plan, "cuda", {"x": x})["y"], x + 1)
    x = RNG.integers(0, 10, (5, 3, 32, 32)).astype(np.float32)
    np.testing.assert_array_equal(run_plan(plan, "cuda", {"x": x}, graph=True)["y"], x + 1)
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(plan)
    with pytest.raises(trt.PluginError, match="'gpu_sample::elemwise_add_aot' was built with its AOT implementation"):
        engine.create_execution_context()


def test_in_place_add_with_torch() -> None:
    pytest.importorskip("torch")
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (10, 3, 32, 32))
    out0 = network.add_plugin(trtp.op.gpu_sample.elemwise_add_plugin_(x, delta=2))
    out1 = network.add_plugin(trtp.op.gpu_sample.elemwise_add_plugin_(out0.get_output(0), delta=4))
    out1.get_output(0).name = "y"
    network.mark_output(out1.get_output(0))
    config = builder.create_builder_config()
    config.set_preview_feature(trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03, True)
    plan = bytes(builder.build_serialized_network(network, config))
    host = np.ones((10, 3, 32, 32), np.float32)
    np.testing.assert_allclose(run_plan(plan, "cuda", {"x": host})["y"], host + 6, atol=1e-2)


def test_non_zero_with_torch() -> None:
    pytest.importorskip("torch")
    import cupy as cp

    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x_in = network.add_input("X", trt.float32, (128, 128))
    layer = network.add_plugin(trtp.op.gpu_sample.non_zero_plugin(x_in))
    layer.get_output(0).name = "Y"
    network.mark_output(layer.get_output(0))
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    context = trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(plan).create_execution_context()

    class DeviceAllocator(trt.IOutputAllocator):
        def __init__(self) -> None:
            super().__init__()
            self.buffer = cp.zeros(0, cp.uint8)
            self.shape: tuple[int, ...] = ()

        def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
            if self.buffer.nbytes < size:
                self.buffer = cp.zeros(size, cp.uint8)
            return int(self.buffer.data.ptr)

        def notify_shape(self, tensor_name: str, shape: trt.Dims) -> None:
            self.shape = tuple(shape)

    allocator = DeviceAllocator()
    context.set_output_allocator("Y", allocator)
    x = RNG.normal(size=(128, 128)).astype(np.float32)
    x[RNG.random((128, 128)) < 0.5] = 0
    xd = cp.asarray(x)
    context.set_tensor_address("X", xd.data.ptr)
    stream = cp.cuda.Stream(non_blocking=True)
    context.execute_async_v3(stream.ptr)
    stream.synchronize()
    count = allocator.shape[0]
    y = cp.asnumpy(allocator.buffer[: count * 2 * 4].view(cp.int32).reshape(count, 2))
    y = y[np.lexsort(np.fliplr(y).T)]
    np.testing.assert_array_equal(y, np.transpose(np.nonzero(x)))


def test_circular_pad_two_torch_tactics() -> None:
    pytest.importorskip("torch")
    pads = np.array((1, 1, 1, 1), dtype=np.int32)
    x = RNG.normal(size=(10, 3, 32, 32)).astype(np.float32)
    for device in ("cpu", "cuda"):  # tactics timed on host Tensors, then on CUDA Tensors
        plan = _plan(lambda t: trtp.op.gpu_sample.circ_pad_plugin(t, pads=pads), (10, 3, 32, 32), device=device)
        np.testing.assert_allclose(run_plan(plan, "cuda", {"x": x})["y"], _reference_pad(x, pads), atol=1e-2)


def _circ_pad_onnx(pads: np.ndarray, shape: tuple[int, ...]) -> bytes:
    node = helper.make_node(
        "circ_pad_aot",
        ["x"],
        ["y"],
        name="circ_pad_plugin 0",
        pads=numpy_helper.from_array(pads),
        plugin_namespace="gpu_sample",
        aot=1,
    )
    graph = helper.make_graph(
        [node],
        "circ_pad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()


def test_circular_pad_aot_two_tactics_timed_on_the_gpu() -> None:
    pytest.importorskip("triton")
    from plugrt.engine.plan import EnginePlan

    pads = np.array((1, 1, 1, 1), dtype=np.int32)
    shape = (10, 3, 32, 32)
    x = RNG.normal(size=shape).astype(np.float32)
    for device in ("cpu", "cuda"):  # host buffers copied to the GPU, then the build's device buffers
        plan = _plan(lambda t: trtp.op.gpu_sample.circ_pad_aot_tactics(t, pads=pads), shape, device=device)
        assert next(layer.tactic for layer in EnginePlan.from_bytes(plan).layers if layer.is_plugin) in (1, 2)
        np.testing.assert_array_equal(run_plan(plan, "cuda", {"x": x})["y"], _reference_pad(x, pads))


def test_circular_pad_aot_inetdef_and_onnx_with_engine_save_and_load(tmp_path: Any) -> None:
    pytest.importorskip("triton")
    pads = np.array((1, 2, 2, 1), dtype=np.int32)
    shape = (10, 3, 32, 32)
    x = RNG.normal(size=shape).astype(np.float32)
    expected = _reference_pad(x, pads)
    plan = _plan(lambda t: trtp.op.gpu_sample.circ_pad_aot(t, pads=pads), shape, aot=True)
    np.testing.assert_array_equal(run_plan(plan, "cuda", {"x": x})["y"], expected)
    np.testing.assert_array_equal(run_plan(plan, "cuda", {"x": x}, graph=True)["y"], expected)
    np.testing.assert_array_equal(run_plan(plan, "cpu", {"x": x})["y"], expected)  # the JIT fallback

    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, LOGGER)
    assert parser.parse(_circ_pad_onnx(pads, shape))
    assert network.get_layer(0).plugin.aot
    path = tmp_path / "circ_pad.engine"
    path.write_bytes(bytes(builder.build_serialized_network(network, builder.create_builder_config())))
    np.testing.assert_array_equal(run_plan(path.read_bytes(), "cuda", {"x": x})["y"], expected)
