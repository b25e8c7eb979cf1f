"""Squeeze-and-excitation blocks and channel concatenations as oneDNN's primitives called directly
(``ops/onednn_squeeze.py``, ``ops/onednn_concat.py``): the NumPy kernels' results in both layouts and across a
channels-last run's ends, and the cases they decline. Skips without the library."""

from __future__ import annotations

import numpy as np
import pytest

from onednn_support import ONEDNN_TESTS
from plugrt.core.types import DataType, TensorFormat
from plugrt.ops.onednn_squeeze import squeeze_excitation_onednn
from plugrt.ops.squeeze_excitation import SqueezeExcitationOperator

pytestmark = ONEDNN_TESTS

RNG = np.random.default_rng(31)
LINEAR, HWC = TensorFormat.LINEAR, TensorFormat.HWC



def _block(channels: int, squeezed: int, acts: tuple[str, str], biases: bool) -> SqueezeExcitationOperator:
    params = {"activation1": acts[0], "activation2": acts[1], "activation2_alpha": 0.2, "activation2_beta": 0.5}
    weights = {
        "kernel1": RNG.standard_normal((squeezed, channels)).astype(np.float32),
        "kernel2": RNG.standard_normal((channels, squeezed)).astype(np.float32),
    }
    if biases:
        weights["bias1"] = RNG.standard_normal(squeezed).astype(np.float32)
        weights["bias2"] = RNG.standard_normal(channels).astype(np.float32)
    return SqueezeExcitationOperator(params, weights)


def _weights(op: SqueezeExcitationOperator) -> tuple:  # type: ignore[type-arg]
    return op._w1, op._b1, op._w2, op._b2


@pytest.mark.parametrize("fmt", [LINEAR, HWC, (HWC, LINEAR), (LINEAR, HWC)])
@pytest.mark.parametrize(
    "acts, biases", [(("RELU", "HARD_SIGMOID"), True), (("", ""), False), (("RELU", "SIGMOID"), True)]
)
def test_the_block_computes_what_the_numpy_kernel_does(fmt: object, acts: tuple[str, str], biases: bool) -> None:
    op = _block(40, 10, acts, biases)
    x = RNG.standard_normal((2, 40, 7, 9)).astype(np.float32)
    want = np.empty_like(x)
    op.run([x], [want], np)
    formats = list(fmt) if isinstance(fmt, tuple) else [fmt, fmt]  # (the ends of a channels-last run: mixed)
    stored = x if formats[0] == LINEAR else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.full(x.shape if formats[1] == LINEAR else x.transpose(0, 2, 3, 1).shape, np.nan, np.float32)
    kernel = squeeze_excitation_onednn(op._acts, _weights(op), stored, out, formats)
    assert kernel is not None
    kernel()
    got = out if formats[1] == LINEAR else out.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_what_it_declines() -> None:
    op = _block(8, 2, ("RELU", "HARD_SIGMOID"), True)
    x = np.zeros((1, 8, 3, 3), np.float32)
    assert squeeze_excitation_onednn([("SELU", 0.0, 0.0), op._acts[1]], _weights(op), x, x.copy(), [LINEAR] * 2) is None
    assert squeeze_excitation_onednn(op._acts, _weights(op), x[0], x[0].copy(), [LINEAR] * 2) is None  # rank 3
    assert squeeze_excitation_onednn(op._acts, _weights(op), x.astype(np.float64), x.copy(), [LINEAR] * 2) is None
    wrong = np.zeros((1, 6, 3, 3), np.float32)  # another channel count than the weights'
    assert squeeze_excitation_onednn(op._acts, _weights(op), wrong, wrong.copy(), [LINEAR] * 2) is None
    selu = _block(8, 2, ("SELU", "HARD_SIGMOID"), True)
    assert not selu.direct_supports([DataType.FLOAT], [(1, 8, 3, 3)], [False])
    assert op.direct_supports([DataType.FLOAT], [(1, 8, 3, 3)], [False])


@pytest.mark.parametrize(
    "formats",
    [(HWC, HWC, HWC), (LINEAR, LINEAR, LINEAR), (LINEAR, HWC, HWC), (HWC, LINEAR, LINEAR), (HWC, HWC, LINEAR)],
)
@pytest.mark.parametrize("size", [(5, 7), (1, 40)])
def test_concatenation_along_the_channels_in_any_layouts(formats: tuple, size: tuple) -> None:  # type: ignore[type-arg]
    """oneDNN's concat (``ops/onednn_concat.py``), the LINEAR buffers staged channels-last where the layouts differ;
    1-high maps (PP-OCR's recogniser) too."""
    from plugrt.ops.onednn_concat import concatenation_onednn

    parts = [RNG.standard_normal((2, c, *size)).astype(np.float32) for c in (3, 5)]
    want = np.concatenate(parts, axis=1)
    stored = [p if f == LINEAR else np.ascontiguousarray(p.transpose(0, 2, 3, 1)) for p, f in zip(parts, formats)]
    out = np.full(want.shape if formats[-1] == LINEAR else want.transpose(0, 2, 3, 1).shape, np.nan, np.float32)
    kernel = concatenation_onednn(stored, out, list(formats))
    assert kernel is not None
    kernel()
    np.testing.assert_array_equal(out if formats[-1] == LINEAR else out.transpose(0, 3, 1, 2), want)
    wrong = np.zeros((2, 9, *size), np.float32)  # 3 + 5 channels do not make 9
    assert concatenation_onednn(parts, wrong, [LINEAR] * 3) is None
    assert concatenation_onednn([p.astype(np.float64) for p in parts], want, [LINEAR] * 3) is None
