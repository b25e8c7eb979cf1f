"""The GPU convolution's one-kernel epilogue (bias, residual, activation, scalar affine map), alone against
PyTorch and in engines against the CPU engine."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

ACTIVATIONS = {
    None: lambda torch, v: v,
    "HARD_SWISH": lambda torch, v: torch.nn.functional.hardswish(v),
    "SIGMOID": lambda torch, v: torch.sigmoid(v),
    "LEAKY_RELU": lambda torch, v: torch.nn.functional.leaky_relu(v, 0.1),
    "CLIP": lambda torch, v: v.clamp(0.0, 6.0),
}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("residual", [False, True])
def test_the_epilogue_matches_torch(activation: str | None, channels_last: bool, half: bool, residual: bool) -> None:
    import torch

    from plugrt.ops.conv_epilogue_cuda import conv_epilogue

    dtype = torch.float16 if half else torch.float32
    layout = torch.channels_last if channels_last else torch.contiguous_format
    gen = torch.Generator(device="cuda").manual_seed(3)
    result = torch.randn(3, 24, 9, 11, device="cuda", generator=gen).to(dtype).contiguous(memory_format=layout)
    bias = torch.randn(24, device="cuda", generator=gen).to(dtype)
    r = torch.randn(3, 24, 9, 11, device="cuda", generator=gen).to(dtype).contiguous(memory_format=layout)
    out = torch.empty_like(result)
    alpha, beta = (0.1, 0.0) if activation == "LEAKY_RELU" else (0.0, 6.0)
    apply = conv_epilogue(out, bias, r if residual else None, activation, alpha, beta, (0.5, 0.25))
    assert apply is not None
    assert apply(result)
    v = result.float() + bias.float().reshape(1, -1, 1, 1) + (r.float() if residual else 0.0)
    want = 0.25 + 0.5 * ACTIVATIONS[activation](torch, v)
    tol = dict(rtol=1e-5, atol=1e-5) if not half else dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(out.float(), want, **tol)


@pytest.mark.parametrize("out_channels_last", [False, True])
def test_a_result_in_the_other_layout_is_read_through_its_strides(out_channels_last: bool) -> None:
    """cuDNN may give a depthwise convolution's result in the other layout than the output's."""
    import torch

    from plugrt.ops.conv_epilogue_cuda import conv_epilogue

    layouts = (torch.contiguous_format, torch.channels_last)
    out = torch.zeros(2, 8, 5, 7, device="cuda").contiguous(memory_format=layouts[out_channels_last])
    bias = torch.arange(8, device="cuda", dtype=torch.float32)
    result = torch.randn(2, 8, 5, 7, device="cuda").contiguous(memory_format=layouts[not out_channels_last])
    apply = conv_epilogue(out, bias, None, "RELU", 0.0, 0.0)
    assert apply is not None and apply(result)
    torch.testing.assert_close(out, torch.relu(result + bias.reshape(1, -1, 1, 1)))


def test_a_result_it_cannot_read_is_left_to_the_caller() -> None:
    import torch

    from plugrt.ops.conv_epilogue_cuda import conv_epilogue

    out = torch.zeros(2, 8, 9, device="cuda")
    apply = conv_epilogue(out, torch.ones(8, device="cuda"), None, None, 0.0, 0.0)
    assert apply is not None
    assert not apply(torch.ones(2, 9, 8, device="cuda").transpose(1, 2))  # 3-D, laid out otherwise
    assert not out.any()


def test_what_the_kernel_does_not_take() -> None:
    import torch

    from plugrt.ops.conv_epilogue_cuda import conv_epilogue

    out = torch.zeros(2, 8, 5, 5, device="cuda")
    bias = torch.ones(8, device="cuda")
    assert conv_epilogue(out, None, None, None, 0.0, 0.0) is None  # no bias: nothing to fuse
    assert conv_epilogue(out, bias.half(), None, None, 0.0, 0.0) is None  # the bias in another type
    assert conv_epilogue(out, bias, None, "NOT_AN_ACTIVATION", 0.0, 0.0) is None
    assert conv_epilogue(out, bias, torch.zeros(2, 8, 5, 4, device="cuda"), None, 0.0, 0.0) is None
    assert conv_epilogue(out.to(torch.int32), bias, None, None, 0.0, 0.0) is None


def _conv_model(activation: str | None, dtype: type, residual: bool) -> object:
    from onnx import TensorProto, helper, numpy_helper

    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    rng = np.random.default_rng(8)
    consts = {"w": rng.normal(0, 0.3, (16, 8, 3, 3)), "b": rng.normal(0, 1, 16)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])]
    last = "c"
    if residual:
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
        last = "s"
    if activation is not None:
        nodes.append(helper.make_node(activation, [last], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    inputs = [helper.make_tensor_value_info("x", elem, [4, 8, 14, 14])]
    if residual:
        inputs.append(helper.make_tensor_value_info("r", elem, [4, 16, 14, 14]))
    graph = helper.make_graph(
        nodes,
        "conv_epilogue",
        inputs,
        [helper.make_tensor_value_info("y", elem, None)],
        [numpy_helper.from_array(np.asarray(v, dtype), k) for k, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("activation", [None, "HardSwish", "Sigmoid", "Relu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("residual", [False, True])
def test_engines_with_fused_epilogues_match_the_cpu(
    activation: str | None, dtype: type, residual: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyTorch's convolution taken (``PLUGRT_TORCH=always``), eager then replayed, against the CPU engine."""
    import plugrt

    model = _conv_model(activation, dtype, residual)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.normal(0, 1, (4, 8, 14, 14)).astype(dtype)}
    if residual:
        feeds["r"] = rng.normal(0, 1, (4, 16, 14, 14)).astype(dtype)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    want = np.asarray(plugrt.compile(model)(feeds)["y"], np.float32)
    monkeypatch.setenv("PLUGRT_TORCH", "always")  # (read when the GPU engine is built and bound)
    gpu = plugrt.compile(model, device="cuda")
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-2, atol=1e-2)
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(gpu(feeds)["y"], np.float32), want, **tol)
