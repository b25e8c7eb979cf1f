"""2-D pooling as oneDNN's primitive called directly (``ops/onednn_pooling.py``).

Oracle: the operator's own NumPy kernel (``op.run`` on NCHW arrays), within 1e-6 (MAX: exact). Buffers are HWC
(channels-last ``[N, H, W, C]``) or LINEAR (NCHW); outputs are filled with NaN first so a position the kernel does not
write fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from onednn_support import ONEDNN_TESTS
from plugrt.core.types import DataType, TensorFormat
from plugrt.ops import onednn
from plugrt.ops.hand_over import hand_over
from plugrt.ops.onednn_pooling import end_padding, pooling_onednn
from plugrt.ops.pooling import PoolingOperator

pytestmark = ONEDNN_TESTS

HWC, LINEAR = TensorFormat.HWC, TensorFormat.LINEAR


def _stored(a: np.ndarray, fmt: TensorFormat) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if fmt == HWC else a.copy()


def _empty(shape: tuple[int, ...], fmt: TensorFormat) -> np.ndarray:
    n, c, h, w = shape
    return np.full((n, h, w, c) if fmt == HWC else shape, np.nan, np.float32)


def _logical(buffer: np.ndarray, fmt: TensorFormat) -> np.ndarray:
    return buffer.transpose(0, 3, 1, 2) if fmt == HWC else buffer


def _numpy(op: PoolingOperator, x: np.ndarray) -> np.ndarray:
    sizes, _, _ = op.window.resolve(x.shape[2:])
    out = np.empty((*x.shape[:2], *sizes), np.float32)
    op.prepare([x.shape], [out.shape])
    op.run([x], [out])
    return out


#: name -> (pooling params, x shape NCHW, (input format, output format))
CASES = {
    "max_3x3_s2_hwc": ({"mode": "MAX", "kernel_shape": [3, 3], "strides": [2, 2]}, (1, 16, 15, 13), (HWC, HWC)),
    "max_same_upper_asymmetric": (
        {"mode": "MAX", "kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1]},
        (2, 8, 14, 12),
        (HWC, HWC),
    ),
    "max_ceil_linear": (
        {"mode": "MAX", "kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": True},
        (1, 5, 12, 11),
        (LINEAR, LINEAR),
    ),
    "average_including_padded": (
        {"mode": "AVERAGE", "kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": True},
        (1, 24, 9, 10),
        (LINEAR, HWC),
    ),
    "average_excluding_asymmetric": (
        {"mode": "AVERAGE", "kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1]},
        (3, 7, 10, 9),
        (HWC, LINEAR),
    ),
    "average_excluding_ceil": (
        {"mode": "AVERAGE", "kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": True},
        (1, 32, 10, 10),
        (HWC, HWC),
    ),
    "average_one_channel": (
        {"mode": "AVERAGE", "kernel_shape": [2, 2], "strides": [2, 2]},
        (2, 1, 8, 6),
        (LINEAR, LINEAR),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pooling_matches_the_numpy_kernel(name: str) -> None:
    """Each case (MAX and AVERAGE, both paddings counted or not, asymmetric pads, ceil mode, formats) as NumPy's."""
    params, shape, (x_format, out_format) = CASES[name]
    op = PoolingOperator(params)
    x = np.random.default_rng(len(name)).standard_normal(shape).astype(np.float32)
    want = _numpy(op, x)
    out = _empty(want.shape, out_format)
    run = pooling_onednn(op, _stored(x, x_format), out, [x_format, out_format])
    assert run is not None
    run()
    got = _logical(out, out_format)
    if op.mode == "MAX":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_handed_over_input_is_read_and_the_output_slot_emptied() -> None:
    """An HWC input whose slot holds a PyTorch tensor is pooled from the tensor; the output's slot is emptied."""
    torch = pytest.importorskip("torch")
    op = PoolingOperator({"mode": "MAX", "kernel_shape": [2, 2], "strides": [2, 2]})
    x = np.random.default_rng(3).standard_normal((1, 8, 6, 6)).astype(np.float32)
    buffer, out = np.zeros((1, 6, 6, 8), np.float32), _empty((1, 8, 3, 3), HWC)
    run = pooling_onednn(op, buffer, out, [HWC, HWC])
    assert run is not None
    hand_over(buffer).tensor = torch.from_numpy(x.copy()).contiguous(memory_format=torch.channels_last)
    hand_over(out).tensor = torch.zeros(1)
    run()
    np.testing.assert_array_equal(_logical(out, HWC), _numpy(op, x))
    assert hand_over(out).tensor is None
    hand_over(buffer).tensor = None


def test_end_padding_counts_no_tap_past_the_end_padding() -> None:
    """Ceil mode's extra end padding is given to oneDNN, except for AVERAGE counting its padding (ONNX counts no
    tap past the layer's end padding there): that layer is declined."""
    params = {"mode": "AVERAGE", "kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": True}
    assert end_padding(PoolingOperator(params), (10, 10)) == [1, 1]
    including = PoolingOperator({**params, "count_include_pad": True})
    assert end_padding(including, (10, 10)) is None
    assert (
        pooling_onednn(including, np.zeros((1, 10, 10, 4), np.float32), _empty((1, 4, 5, 5), HWC), [HWC, HWC]) is None
    )
    assert end_padding(PoolingOperator({**params, "ceil_mode": False}), (10, 10)) == [0, 0]


@pytest.mark.parametrize(
    ("params", "x_shape", "out_shape"),
    [
        ({"mode": "MAX", "kernel_shape": [2, 2], "with_indices": True}, (1, 4, 6, 6), (1, 4, 5, 5)),
        ({"mode": "LP", "kernel_shape": [2, 2], "p": 2}, (1, 4, 6, 6), (1, 4, 5, 5)),
        ({"mode": "AVERAGE", "kernel_shape": [2, 2], "dilations": [2, 2]}, (1, 4, 6, 6), (1, 4, 4, 4)),
        ({"mode": "MAX", "kernel_shape": [2, 2, 2]}, (1, 4, 3, 3, 3), (1, 4, 2, 2, 2)),
        ({"mode": "MAX", "kernel_shape": [2, 3], "strides": [2, 2], "dilations": [2, 1]}, (1, 5, 12, 11), (1, 5, 5, 5)),
    ],
    ids=["indices", "lp", "dilated_average", "three_d", "dilated_max"],
)
def test_declines_what_it_does_not_compute(params: dict, x_shape: tuple, out_shape: tuple) -> None:
    """Indices, LP pooling, a dilated average, other ranks, and a dilated MAX pool (oneDNN 3.2 has only its
    reference kernel for it) are left to the other kernels."""
    op = PoolingOperator(params)
    x, out = np.zeros(x_shape, np.float32), np.zeros(out_shape, np.float32)
    formats = [LINEAR, LINEAR]
    assert pooling_onednn(op, x, out, formats) is None


def test_declines_without_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the switch off, or float64 buffers, the other kernels run."""
    op = PoolingOperator({"mode": "MAX", "kernel_shape": [2, 2], "strides": [2, 2]})
    x, out = np.zeros((1, 4, 4, 8), np.float32), np.zeros((1, 2, 2, 8), np.float32)
    assert pooling_onednn(op, x.astype(np.float64), out.astype(np.float64), [HWC, HWC]) is None
    monkeypatch.setenv(onednn.ENV_SWITCH, "0")
    assert pooling_onednn(op, x, out, [HWC, HWC]) is None


def test_asymmetric_padding_keeps_a_channels_last_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inception's stride-2 MAX pool padded at the ends only joins the channels-last run (PyTorch's pooling takes no
    such padding) and the engine matches onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((8, 8, 3, 3)) * 0.3).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("Conv", ["p", "w2"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 14, 14])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 7, 7])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    monkeypatch.setenv("PLUGRT_TORCH", "nhwc")
    engine = plugrt.compile(model, device="cpu")
    pool = next(layer for layer in engine.engine.plan.layers if layer.kind == "pooling")
    assert pool.tactic == 2
    x = rng.standard_normal((1, 3, 14, 14)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(engine(x=x)["y"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_channels_last_support_follows_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asymmetric padding is offered the channels-last tactic with oneDNN, not without (PyTorch's pooling)."""
    op = PoolingOperator({"mode": "MAX", "kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1]})
    monkeypatch.setenv("PLUGRT_TORCH", "1")  # (the tactic's switch turns its direct kernels off too)
    assert op.channels_last_supports([DataType.FLOAT], [(1, 4, 14, 14)], [False])
    monkeypatch.setenv(onednn.ENV_SWITCH, "0")
    assert not op.channels_last_supports([DataType.FLOAT], [(1, 4, 14, 14)], [False])


def test_a_nan_in_a_max_window_is_oneDNNs_choice() -> None:
    """oneDNN's MAX pooling gives a window holding a NaN its largest number (NumPy's and PyTorch's kernels give NaN;
    onnxruntime's depends on the NaN's place): pinned so a change of the library's behaviour is seen
    (docs/compatibility.md; PLUGRT_ONEDNN=0 keeps NaN)."""
    op = PoolingOperator({"mode": "MAX", "kernel_shape": [2, 2], "strides": [2, 2]})
    x = np.arange(1 * 4 * 4 * 16, dtype=np.float32).reshape(1, 4, 4, 16)
    x[0, 0, 0, :] = np.nan  # the first pixel of the first window, every channel
    out = np.zeros((1, 2, 2, 16), np.float32)
    run = pooling_onednn(op, x, out, [HWC, HWC])
    assert run is not None
    run()
    np.testing.assert_array_equal(out[0, 0, 0], x[0, 1, 1])  # the window's largest number
    assert np.isnan(_numpy(op, _logical(x, HWC).copy())[0, :, 0, 0]).all()  # NumPy's kernel keeps the NaN
