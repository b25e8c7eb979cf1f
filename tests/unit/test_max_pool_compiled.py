"""MAX pooling between channels-last tensors as the compiled loop where numba is installed
(``torch_channels_last._compiled_max_pool``): the NumPy pooling kernel's results bit for bit, NaN kept, the
input read from its hand-over slot and the output's slot emptied; torch's kernel where it does not apply."""

from __future__ import annotations

import numpy as np
import pytest

from plugrt.core.types import TensorFormat
from plugrt.ops import depthwise_numba
from plugrt.ops.hand_over import hand_over
from plugrt.ops.pooling import PoolingOperator

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(depthwise_numba.loops() is None, reason="numba is not installed")

from plugrt.ops.torch_channels_last import window_pooling  # noqa: E402

HWC = TensorFormat.HWC
CASES = {
    "2x2/2": ({"kernel_shape": [2, 2], "strides": [2, 2]}, (1, 8, 12, 16)),
    "3x3/2 padded": ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (2, 5, 9, 11)),
    "2x1/2x1": ({"kernel_shape": [2, 1], "strides": [2, 1]}, (1, 16, 8, 7)),
    "3x3/1 dilated": ({"kernel_shape": [3, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}, (1, 3, 7, 6)),
    "3x3/2 ceil": ({"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, (1, 4, 8, 10)),
    "2x2/2 odd map": ({"kernel_shape": [2, 2], "strides": [2, 2]}, (2, 40, 9, 11)),  # tiles, the last row/column left
    "3x3/3 tiles": ({"kernel_shape": [3, 3], "strides": [3, 3]}, (1, 17, 9, 12)),
    "2x2/2 ceil": ({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (1, 5, 7, 9)),  # a window past the end
}


def _reference(op: PoolingOperator, x: np.ndarray) -> np.ndarray:
    outs, _, _ = op.window.resolve(x.shape[2:])
    want = np.empty((*x.shape[:2], *outs), np.float32)
    op.prepare([x.shape], [want.shape])
    op.run([x], [want])
    return want


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("handed", [False, True])
def test_the_compiled_max_pool_matches_the_numpy_kernel(name: str, handed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "1")
    params, shape = CASES[name]
    op = PoolingOperator({"mode": "MAX", **params})
    x = np.random.default_rng(len(name)).standard_normal(shape).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    want = _reference(op, x)
    x_hwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.full((want.shape[0], *want.shape[2:], want.shape[1]), 7.0, np.float32)
    stale = hand_over(out)
    stale.tensor = torch.zeros(1)
    slot = hand_over(x_hwc)
    if handed:  # the input as a handed-over tensor, the buffer stale
        slot.tensor = torch.from_numpy(x.copy()).contiguous(memory_format=torch.channels_last)
        x_hwc[...] = -1.0
    run = window_pooling(op, x_hwc, out, [HWC, HWC], True)
    assert run is not None and "_compiled_max_pool" in run.__qualname__
    run()
    assert stale.tensor is None
    np.testing.assert_array_equal(out.transpose(0, 3, 1, 2), want)  # NaN where NumPy's has it
    assert np.isnan(want).any()
    linear = np.full_like(want, 7.0)  # a run's last pool: LINEAR out, pooled channels-last and copied across
    run = window_pooling(op, x_hwc, linear, [HWC, TensorFormat.LINEAR], True)
    assert run is not None and "_compiled_max_pool" in run.__qualname__
    run()
    np.testing.assert_array_equal(linear, want)


def test_a_linear_input_large_pools_and_numba_off_keep_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from plugrt.ops import torch_channels_last

    op = PoolingOperator({"mode": "MAX", "kernel_shape": [2, 2], "strides": [2, 2]})
    x = np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)
    x_hwc, out = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.empty((1, 3, 3, 8), np.float32)

    def kernel(formats: list[TensorFormat]) -> str:
        run = window_pooling(op, x if formats[0] != HWC else x_hwc, out if formats[-1] == HWC else out.reshape(1, 8, 3, 3),
                          formats, True)  # fmt: skip
        assert run is not None
        run()
        return str(run.__qualname__)

    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "1")
    assert "_compiled_max_pool" in kernel([HWC, HWC])
    assert "_compiled_max_pool" in kernel([HWC, TensorFormat.LINEAR])  # written through its [N, H, W, C] view
    np.testing.assert_array_equal(out.reshape(1, 8, 3, 3), x.reshape(1, 8, 3, 2, 3, 2).max(axis=(3, 5)))
    assert "_compiled_max_pool" not in kernel([TensorFormat.LINEAR, HWC])
    monkeypatch.setattr(torch_channels_last, "NUMBA_MAX_POOL_READS", 10)
    assert "_compiled_max_pool" not in kernel([HWC, HWC])
    monkeypatch.setattr(torch_channels_last, "NUMBA_MAX_POOL_READS", 1_000_000)
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "0")
    assert "_compiled_max_pool" not in kernel([HWC, HWC])
