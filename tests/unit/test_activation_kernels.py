"""The activation layer's sigmoid (also the recurrent cells' default gate): accurate in both tails, no overflow."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from plugrt.core.errors import NetworkError
from plugrt.ops.activation import activation_kernel


def test_sigmoid_is_within_four_ulp_of_float64_everywhere() -> None:
    x = np.linspace(-100, 100, 400001, dtype=np.float32)
    out = np.empty_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exp never overflows
        activation_kernel("SIGMOID")(np, x, out, 0.0, 0.0)
    exact = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    normal = exact > np.finfo(np.float32).tiny
    ulps = np.abs(out - exact)[normal] / np.spacing(exact.astype(np.float32))[normal]
    assert ulps.max() <= 4
    assert out[0] >= 0 and out[-1] == 1.0


def test_sigmoid_in_place_and_into_half() -> None:
    x = np.linspace(-20, 20, 101, dtype=np.float32)
    exact = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    half = np.empty(x.shape, np.float16)
    activation_kernel("SIGMOID")(np, x, half, 0.0, 0.0)  # computed in FLOAT, rounded once
    np.testing.assert_array_equal(half, exact.astype(np.float32).astype(np.float16))
    activation_kernel("SIGMOID")(np, x, x, 0.0, 0.0)
    np.testing.assert_allclose(x, exact, rtol=4e-7)


def test_an_unknown_activation_kernel_names_the_valid_ones() -> None:
    with pytest.raises(NetworkError, match=r"unknown type 'SWISH'; valid: RELU, SIGMOID"):
        activation_kernel("SWISH")
