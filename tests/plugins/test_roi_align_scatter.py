"""ROIAlign_TRT and ScatterND through the registry and engines, against loop references."""

from __future__ import annotations

import numpy as np
import plugin_references as ref
import pytest
from library_helpers import OnePluginEngine, creator, fc

import plugrt as trt

ROI_BASE = dict(
    coordinate_transformation_mode=1, mode=1, output_height=3, output_width=4, sampling_ratio=2, spatial_scale=0.5
)


def _rois(rng: np.random.Generator, count: int, size: float) -> np.ndarray:
    start = rng.random((count, 2)) * size * 0.8 - 2  # some start outside the image
    extent = rng.random((count, 2)) * size * 0.7 + 0.5
    return np.concatenate([start, start + extent], axis=1).astype(np.float32)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"mode": 0},
        {"sampling_ratio": 0},
        {"coordinate_transformation_mode": 0, "mode": 0, "sampling_ratio": 0, "spatial_scale": 0.25},
        {"coordinate_transformation_mode": 0, "output_height": 2, "output_width": 2, "spatial_scale": 1.0},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "base",
)
def test_roi_align_matches_reference(overrides: dict) -> None:
    p = {**ROI_BASE, **overrides}
    plugin = creator("ROIAlign_TRT").create_plugin("roi", fc(**p))
    engine = OnePluginEngine(
        plugin,
        [("X", trt.float32, (2, 3, 7, 9)), ("rois", trt.float32, (-1, 4)), ("batch_indices", trt.int32, (-1,))],
        ["Y"],
        {"rois": ((1, 4), (4, 4), (8, 4)), "batch_indices": ((1,), (4,), (8,))},
    )
    assert engine.engine.get_tensor_shape("Y") == (-1, 3, p["output_height"], p["output_width"])
    rng = np.random.default_rng(len(str(overrides)))
    x = rng.normal(0, 1, (2, 3, 7, 9)).astype(np.float32)
    for count in (1, 5, 8):
        rois = _rois(rng, count, 9 / p["spatial_scale"])
        batch_indices = rng.integers(0, 2, count).astype(np.int32)
        got = engine(X=x, rois=rois, batch_indices=batch_indices)["Y"]
        np.testing.assert_allclose(got, ref.roi_align(x, rois, batch_indices, p), atol=1e-5, rtol=1e-5)


def test_roi_align_fp16_and_bad_batch_index() -> None:
    plugin = creator("ROIAlign_TRT").create_plugin("roi", fc(**ROI_BASE))
    engine = OnePluginEngine(
        plugin,
        [("X", trt.float16, (1, 2, 6, 6)), ("rois", trt.float16, (3, 4)), ("batch_indices", trt.int32, (3,))],
        ["Y"],
    )
    rng = np.random.default_rng(0)
    x, rois = rng.normal(0, 1, (1, 2, 6, 6)).astype(np.float16), _rois(rng, 3, 12).astype(np.float16)
    got = engine(X=x, rois=rois, batch_indices=np.zeros(3, np.int32))["Y"]
    assert got.dtype == np.float16
    want = ref.roi_align(x.astype(np.float32), rois.astype(np.float32), np.zeros(3, np.int32), ROI_BASE)
    np.testing.assert_allclose(got.astype(np.float32), want, atol=1e-2)
    with pytest.raises(trt.ExecutionError, match=r"batch_indices \[1\] outside \[0, 1\)"):
        engine(X=x, rois=rois, batch_indices=np.array([0, 1, 0], np.int32))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": 2}, r"'mode' must be one of \[0, 1\], got 2"),
        ({"spatial_scale": 0.0}, "'spatial_scale' must be a positive value, got 0.0"),
        ({"output_width": 0}, "'output_width' must be a value >= 1, got 0"),
        ({"coordinate_transformation_mode": 5}, r"'coordinate_transformation_mode' must be one of \[0, 1\]"),
    ],
)
def test_roi_align_bad_fields(overrides: dict, message: str) -> None:
    with pytest.raises(trt.FieldError, match=f"ROIAlign_TRT: .*{message}"):
        creator("ROIAlign_TRT").create_plugin("bad", fc(**{**ROI_BASE, **overrides}))


def test_roi_align_wrong_field_type() -> None:
    with pytest.raises(
        trt.TypeMismatchError, match=r"ROIAlign_TRT: field 'spatial_scale' must be PluginFieldType\.FLOAT32"
    ):
        creator("ROIAlign_TRT").create_plugin("bad", fc(**{**ROI_BASE, "spatial_scale": 2}))


def test_roi_align_defaults_and_round_trip() -> None:
    plugin = creator("ROIAlign_TRT").create_plugin("roi", trt.PluginFieldCollection())
    assert plugin.params == dict(ROI_BASE, output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0)
    again = creator("ROIAlign_TRT").deserialize_plugin("roi", plugin.serialize())
    assert again.params == plugin.params


@pytest.mark.parametrize(
    ("data_shape", "index_shape", "dtype"),
    [
        ((6,), (3, 1), np.float32),
        ((4, 5, 2), (2, 2), np.float32),
        ((3, 4), (2, 2, 2), np.int32),
        ((5, 3), (4, 1), np.float16),
    ],
)
def test_scatter_nd_matches_reference(data_shape: tuple, index_shape: tuple, dtype: type) -> None:
    rng = np.random.default_rng(len(data_shape) + len(index_shape))
    depth = index_shape[-1]
    update_shape = index_shape[:-1] + data_shape[depth:]
    plugin = creator("ScatterND").create_plugin("sc", trt.PluginFieldCollection())
    trt_type = trt.from_nptype(dtype)
    engine = OnePluginEngine(
        plugin,
        [("data", trt_type, data_shape), ("indices", trt.int32, index_shape), ("updates", trt_type, update_shape)],
        ["out"],
    )
    data = (rng.normal(0, 5, data_shape)).astype(dtype)
    count = int(np.prod(index_shape[:-1]))
    flat = rng.choice(int(np.prod(data_shape[:depth])), size=count, replace=False)  # distinct targets
    indices = np.stack(np.unravel_index(flat, data_shape[:depth]), axis=-1).reshape(index_shape).astype(np.int32)
    updates = (rng.normal(0, 5, update_shape)).astype(dtype)
    got = engine(data=data, indices=indices, updates=updates)["out"]
    np.testing.assert_array_equal(got, ref.scatter_nd(data, indices, updates))
    negative = indices - np.asarray(data_shape[:depth], np.int32)  # the same targets, counted from the end
    np.testing.assert_array_equal(engine(data=data, indices=negative, updates=updates)["out"], got)
    with pytest.raises(trt.ExecutionError, match=r"ScatterND: index .* is outside data dims"):
        engine(data=data, indices=indices + np.int32(data_shape[0]), updates=updates)


def test_scatter_nd_shape_error() -> None:
    plugin = creator("ScatterND").create_plugin("sc", trt.PluginFieldCollection())
    with pytest.raises(trt.PlugrtError, match=r"updates must have shape \[2, 3\]"):
        OnePluginEngine(
            plugin, [("d", trt.float32, (4, 3)), ("i", trt.int32, (2, 1)), ("u", trt.float32, (2, 4))], ["o"]
        )
