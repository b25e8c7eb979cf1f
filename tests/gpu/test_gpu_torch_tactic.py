"""The PyTorch tactic on the GPU: cuDNN convolutions, ATen's normalization, softmax and activations on the
engine's CUDA buffers and stream, eager and captured in a CUDA graph, against the NumPy engine on the CPU.

Tolerance: FLOAT within 1e-4 of the output's largest magnitude (cuDNN may pick TF32-free algorithms of a
different summation order; measured ~1e-6), HALF (``BuilderFlag.FP16``) within 2e-2.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.engine.plan import EnginePlan
from plugrt.ops.torch_cpu import CHANNELS_LAST_TACTIC, NUMPY_TACTIC, TORCH_TACTIC

from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu
pytest.importorskip("torch")

LOGGER = trt.Logger(trt.Logger.ERROR)
RNG = np.random.default_rng(3)


def _model(nodes, x_shape, inits, opset=17):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", *x_shape[1:]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _plan(model: bytes, x_shape: tuple[int, ...], device: str, fp16: bool = False) -> bytes:
    builder = trt.Builder(LOGGER, device=device)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(model)
    config = builder.create_builder_config()
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, *x_shape[1:]), x_shape, (2 * x_shape[0], *x_shape[1:]))
    config.add_optimization_profile(profile)
    return bytes(builder.build_serialized_network(network, config))


def _cases():  # type: ignore[no-untyped-def]
    conv = {"w": RNG.standard_normal((16, 8, 3, 3)) * 0.2, "b": RNG.standard_normal(16)}
    depthwise = {"w": RNG.standard_normal((8, 1, 3, 3)) * 0.3, "b": RNG.standard_normal(8)}
    ln = {"s": RNG.standard_normal(32), "b": RNG.standard_normal(32)}
    gn = {"s": RNG.standard_normal(8), "b": RNG.standard_normal(8)}
    return {
        "conv_relu": (
            [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
            (4, 8, 20, 20), conv, 17, "convolution",
        ),
        "conv_add_relu": (  # cuDNN's fused convolution + bias + residual + ReLU (ops/conv_cudnn.py)
            [
                helper.make_node("Conv", ["x", "w8", "b8"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Add", ["c", "x"], ["r"]),
                helper.make_node("Relu", ["r"], ["y"]),
            ],
            (4, 8, 20, 20), {"w8": RNG.standard_normal((8, 8, 3, 3)) * 0.2, "b8": RNG.standard_normal(8)}, 17,
            "convolution",
        ),
        "conv_stride2_asymmetric": (
            [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[0, 0, 1, 1], strides=[2, 2])],
            (4, 8, 20, 20), conv, 17, "convolution",
        ),
        "depthwise": (
            [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=8)],
            (4, 8, 20, 20), depthwise, 17, "convolution",
        ),
        "layer_norm": (
            [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)],
            (4, 10, 32), ln, 17, "normalization",
        ),
        "group_norm": (
            [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4)],
            (4, 8, 6, 6), gn, 21, "normalization",
        ),
        "softmax": ([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], (4, 10, 32), {}, 17, "softmax"),
        "max_pool": (
            [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
            (4, 8, 21, 21), {}, 17, "pooling",
        ),
        "average_pool": (
            [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
            (4, 8, 20, 20), {}, 17, "pooling",
        ),
        "gemm": (
            [helper.make_node("Gemm", ["x", "gw", "gc"], ["y"], transB=1, alpha=0.5, beta=2.0)],
            (4, 32), {"gw": RNG.standard_normal((16, 32)) * 0.2, "gc": RNG.standard_normal(16)}, 17, "gemm",
        ),
        "global_average_pool": (
            [helper.make_node("GlobalAveragePool", ["x"], ["y"])], (4, 8, 7, 7), {}, 17, "global_pooling",
        ),
        "sigmoid": ([helper.make_node("Sigmoid", ["x"], ["y"])], (4, 10, 32), {}, 17, "activation"),
    }


CASES = _cases()
#: the cases whose HALF layer takes its channels-last kernel on a GPU (ops/torch_cpu.py TorchOperator.tactics)
NHWC_WHEN_HALF = {
    "conv_relu",
    "conv_add_relu",
    "conv_stride2_asymmetric",
    "depthwise",
    "max_pool",
    "average_pool",
    "global_average_pool",
}


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_tactic_on_gpu_matches_numpy_on_cpu(monkeypatch, name: str, fp16: bool, graph: bool) -> None:
    nodes, shape, inits, opset, kind = CASES[name]
    model = _model(nodes, shape, inits, opset)
    x = (RNG.standard_normal(shape) * 2).astype(np.float32)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    want = run_plan(_plan(model, shape, "cpu"), "cpu", {"x": x})["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    plan = _plan(model, shape, "cuda", fp16)
    tactics = {layer.kind: layer.tactic for layer in EnginePlan.from_bytes(plan).layers}
    assert tactics[kind] == (CHANNELS_LAST_TACTIC if fp16 and name in NHWC_WHEN_HALF else TORCH_TACTIC)
    got = run_plan(plan, "cuda", {"x": x}, graph=graph)["y"]
    tolerance = 2e-2 if fp16 else 1e-4
    assert got.shape == want.shape and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=tolerance * float(np.abs(want).max()))


def test_gpu_build_times_the_tactics_and_the_plan_runs_anywhere(monkeypatch) -> None:
    # timed on the GPU: whichever wins, the plan must run on the GPU and, with torch's CPU kernels, on the CPU
    nodes, _, inits, opset, _ = CASES["conv_relu"]
    shape = (8, 8, 64, 64)
    model = _model(nodes, shape, inits, opset)
    monkeypatch.setenv("PLUGRT_TORCH", "1")
    plan = _plan(model, shape, "cuda")
    conv = next(layer for layer in EnginePlan.from_bytes(plan).layers if layer.kind == "convolution")
    assert conv.tactic in (NUMPY_TACTIC, TORCH_TACTIC)
    x = RNG.standard_normal((3, 8, 64, 64)).astype(np.float32)
    gpu, cpu = run_plan(plan, "cuda", {"x": x}), run_plan(plan, "cpu", {"x": x})
    # cuDNN may run FP32 convolutions in TF32 (PyTorch's default, as TensorRT's BuilderFlag.TF32 is on by default)
    np.testing.assert_allclose(gpu["y"], cpu["y"], atol=2e-3 * float(np.abs(cpu["y"]).max()))


def test_gpu_plan_of_torch_layers_runs_with_cupy_when_torch_is_off(monkeypatch) -> None:
    nodes, shape, inits, opset, _ = CASES["layer_norm"]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    plan = _plan(_model(nodes, shape, inits, opset), shape, "cuda")
    x = RNG.standard_normal(shape).astype(np.float32)
    want = run_plan(plan, "cuda", {"x": x})["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    got = run_plan(plan, "cuda", {"x": x})["y"]
    np.testing.assert_allclose(got, want, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cudnn_fuses_convolution_bias_add_and_relu_on_this_gpu(dtype: str, nhwc: bool) -> None:
    """The probe behind ops/conv_cudnn.py: on an H200 cuDNN's fused forms give the unfused result, on NCHW and on
    channels-last tensors (if this fails, engines still run, with the unfused epilogue: a pass more per
    convolution)."""
    torch = pytest.importorskip("torch")
    from plugrt.ops.conv_cudnn import _works

    assert _works(torch, torch.device("cuda"), getattr(torch, dtype), nhwc)
