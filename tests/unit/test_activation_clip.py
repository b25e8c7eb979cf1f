"""``clip_into``: NumPy's clip ufunc for large float32 arrays, TensorRT's ``max(low, min(high, x))`` otherwise;
the activations that bound (RELU, CLIP, HARD_SIGMOID, HARD_SWISH) use it. Values must equal the two-ufunc
formula exactly (NaN and infinities included); only the sign of a zero may differ."""

from __future__ import annotations

import numpy as np
import pytest

from plugrt.ops.activation import CLIP_MIN_ELEMENTS, activation_kernel, clip_into


def _values(size: int, dtype=np.float32) -> np.ndarray:
    x = (np.random.default_rng(size).standard_normal(size) * 8).astype(dtype)
    x[:6] = [np.nan, np.inf, -np.inf, 0.0, 6.0, -0.0]
    return x


def _reference(x: np.ndarray, low: float, high: float) -> np.ndarray:
    return np.maximum(low, np.minimum(high, x)).astype(x.dtype)


@pytest.mark.parametrize("size", [CLIP_MIN_ELEMENTS - 1, CLIP_MIN_ELEMENTS, 100_000])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("low, high", [(0.0, 6.0), (0.0, np.inf), (-1.5, -1.5), (2.0, 1.0)], ids=str)
def test_clip_into_is_tensorrt_clip(size, dtype, low, high) -> None:
    x = _values(size, dtype)
    out = np.empty_like(x)
    clip_into(np, x, low, high, out)
    np.testing.assert_array_equal(out, _reference(x, low, high))  # low > high gives low, as TensorRT's CLIP
    clip_into(np, x, low, high, x)  # in place
    np.testing.assert_array_equal(x, out)


@pytest.mark.parametrize("kind, alpha, beta", [("RELU", 0, 0), ("CLIP", 0.0, 6.0), ("HARD_SIGMOID", 0.2, 0.5)])
def test_bounding_activations_keep_their_values(kind, alpha, beta) -> None:
    x = _values(50_000)
    out = np.empty_like(x)
    activation_kernel(kind)(np, x, out, alpha, beta)
    if kind == "RELU":
        want = np.maximum(x, 0)
    elif kind == "CLIP":
        want = _reference(x, alpha, beta)
    else:
        want = np.maximum(0, np.minimum(1, alpha * x + beta))
    np.testing.assert_array_equal(out, want)


def test_hard_swish_of_a_zero_dimensional_array() -> None:
    x = np.array(1.5, np.float32)
    out = np.empty((), np.float32)
    activation_kernel("HARD_SWISH")(np, x, out, 0.0, 0.0)
    assert float(out) == pytest.approx(1.5 * 4.5 / 6)
