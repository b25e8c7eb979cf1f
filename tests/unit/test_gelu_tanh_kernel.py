"""The tanh-form GELU activation kernel (what ONNX Gelu with approximate='tanh' and GPT-2's spelled-out
GELU run): x / (1 + exp(-2u)) in blocks, held to float64 and to the direct formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plugrt.ops.activation import activation_kernel


def _reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("size", [1, 1000, 65536 * 3 + 17])
def test_gelu_tanh_within_2e7_relative_and_without_overflow(size: int) -> None:
    x = np.concatenate([np.linspace(-40, 40, size, dtype=np.float32), [np.float32(1e4), np.float32(-1e4)]])
    out = np.empty_like(x)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        activation_kernel("GELU_TANH")(np, x, out, 0.0, 0.0)
    reference = _reference(x)
    error = np.abs(out - reference) / np.maximum(np.abs(reference), 1.0)
    assert error.max() < 2e-7  # the direct float32 formula: 1.5e-7
    assert out[-2] == x[-2] and abs(out[-1]) < 1e-30


def test_gelu_tanh_in_place_and_in_half() -> None:
    x = np.random.default_rng(0).normal(0, 3, (7, 9000)).astype(np.float32)
    out = np.empty_like(x)
    kernel = activation_kernel("GELU_TANH")
    kernel(np, x, out, 0.0, 0.0)
    same = x.copy()
    kernel(np, same, same, 0.0, 0.0)
    np.testing.assert_array_equal(same, out)
    half = np.empty(x.shape, np.float16)
    kernel(np, x, half, 0.0, 0.0)  # the layer computes HALF inputs in FLOAT and rounds once
    np.testing.assert_allclose(half.astype(np.float64), _reference(x), rtol=1e-3, atol=1e-3)


def test_the_torch_tactics_gelu_tanh_within_2e7_in_place_and_at_the_extremes() -> None:
    """The PyTorch tactic's CPU kernel (``x * sigmoid(2u)``): as accurate as the NumPy kernel, no NaN or overflow
    at +-3e19 (where ``x^2`` is infinite), the same bits in place as into another tensor."""
    torch = pytest.importorskip("torch")
    from plugrt.ops.torch_cpu_kernels import ACTIVATIONS

    x = np.concatenate([np.linspace(-40, 40, 65536 * 3 + 17, dtype=np.float32), np.float32([1e4, -1e4, 3e19, -3e19])])
    out = np.empty_like(x)
    ACTIVATIONS["GELU_TANH"](torch, torch.from_numpy(x), torch.from_numpy(out), 0.0, 0.0)
    reference = _reference(x)
    with np.errstate(invalid="ignore"):
        error = np.abs(out - reference) / np.maximum(np.abs(reference), 1.0)
    assert not np.isnan(out).any()
    assert error[:-2].max() < 2e-7  # (torch's fused kernel: 1.5e-7)
    assert out[-4] == x[-4] and out[-2] == x[-2] and abs(out[-3]) < 1e-30 and out[-1] == 0.0
    same = torch.from_numpy(x.copy())
    ACTIVATIONS["GELU_TANH"](torch, same, same, 0.0, 0.0)
    np.testing.assert_array_equal(same.numpy(), out)


def test_the_torch_tactics_in_place_gelu_tanh_keeps_one_scratch_and_the_same_bits() -> None:
    pytest.importorskip("torch")
    from plugrt.ops.torch_cpu_kernels import activation

    x = np.random.default_rng(3).normal(0, 3, (64, 300)).astype(np.float32)
    out = np.empty_like(x)
    apart = activation("GELU_TANH", 0.0, 0.0, x, out)
    assert apart is not None
    apart()
    same = x.copy()
    in_place = activation("GELU_TANH", 0.0, 0.0, same, same)
    assert in_place is not None and in_place.__name__ == "run_in_place"
    in_place()
    np.testing.assert_array_equal(same, out)
    np.testing.assert_allclose(out, _reference(x), rtol=0, atol=2e-6 * float(np.abs(out).max()))
