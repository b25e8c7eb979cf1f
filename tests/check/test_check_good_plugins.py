"""Well-written plugins pass cleanly: the examples, the V2Ext test plugin and the built-in library."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3, nonzero_v3
from plugrt.testing import check_plugin

from testing_plugins import ScaleV2ExtCreator, ensure_registered

#: What may be skipped for a clean plugin: the GPU variant, and checks the family has no hook for.
ALWAYS_SKIPPED = {"stream-gpu"}
V3_SKIPPED = {"serialization-size", "serialization-rejects-damage"}
RANGE = [((1, 3, 1), (2, 3, 4), (5, 3, 9))]


def _assert_clean(report: Any, allowed_skips: set[str]) -> None:
    assert report.ok, str(report)
    assert {r.id for r in report.skipped} <= allowed_skips, str(report)


def _pad(x: np.ndarray, pads: list[int]) -> np.ndarray:
    widths = [(0, 0)] * (x.ndim - len(pads) // 2)
    widths += [(pads[2 * i], pads[2 * i + 1]) for i in reversed(range(len(pads) // 2))]
    return np.pad(x, widths, mode="wrap")


def test_circ_pad_v2_dynamic_ext() -> None:
    report = check_plugin(circ_pad_v2.register(), {"pads": [1, 2]}, RANGE, reference=lambda x: _pad(x, [1, 2]))
    _assert_clean(report, ALWAYS_SKIPPED)
    assert report.family == "IPluginV2DynamicExt"
    assert report.plugin == "CircPadPlugin v1"


def test_circ_pad_v3() -> None:
    pads = [0, 1, 2, 0]
    report = check_plugin(circ_pad_v3.register(), {"pads": pads}, RANGE, reference=lambda x: _pad(x, pads))
    _assert_clean(report, ALWAYS_SKIPPED | V3_SKIPPED)
    assert report.family == "IPluginV3"


def test_nonzero_v3_data_dependent_shapes() -> None:
    def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.argwhere(x).astype(np.int32), np.int32(np.count_nonzero(x))

    def sparse(shapes: list, dtypes: list, rng: np.random.Generator) -> list[np.ndarray]:
        return [(rng.random(shapes[0]) > 0.6).astype(dtypes[0])]

    report = check_plugin(
        nonzero_v3.register(), {}, [((1, 1), (4, 4), (16, 16))], reference=reference, make_inputs=sparse
    )
    _assert_clean(report, ALWAYS_SKIPPED | V3_SKIPPED)
    assert "rtol 0" in report["reference"].message  # integer outputs compare exactly


def test_v2ext_implicit_batch() -> None:
    creator = ensure_registered(ScaleV2ExtCreator())
    report = check_plugin(
        creator, {"scale": "-1.5"}, [((1, 2, 3), (2, 2, 3), (6, 2, 3))], reference=lambda x: x * np.float32(-1.5)
    )
    _assert_clean(report, ALWAYS_SKIPPED | {"format-no-lookahead"})
    assert report.family == "IPluginV2Ext"
    assert "sees one type and format at a time" in report["format-no-lookahead"].message


def test_a_plugin_instance_is_checked_through_its_registered_creator() -> None:
    creator = circ_pad_v2.register()
    plugin = creator.create_plugin(
        "p", trt.PluginFieldCollection([trt.PluginField("pads", np.array([2, 0], np.int32))])
    )
    report = check_plugin(plugin, None, [(2, 3, 4)], reference=lambda x: _pad(x, [2, 0]))
    _assert_clean(report, ALWAYS_SKIPPED | {"fields-roundtrip"})
    assert "pass fields to check its creator" in report["fields-roundtrip"].message
    assert report.shape_sets == ["min 2x3x4"]
    assert "nothing to reconfigure" in report["reconfigure"].message


def test_fp16_inputs() -> None:
    report = check_plugin(
        circ_pad_v2.register(), {"pads": [1, 1]}, RANGE, dtypes="float16", reference=lambda x: _pad(x, [1, 1])
    )
    _assert_clean(report, ALWAYS_SKIPPED)
    assert "HALF/LINEAR" in report["format-accepts-something"].message
    assert "rtol 0.01" in report["reference"].message


# --- the built-in plugin library -------------------------------------------------------------

library = pytest.importorskip("plugrt.plugins")


def _boxes(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    corner = rng.random((*shape[:-1], 2)) * 0.7
    return np.concatenate([corner, corner + rng.random((*shape[:-1], 2)) * 0.3 + 0.01], axis=-1)


def _nms_inputs(shapes: list, dtypes: list, rng: np.random.Generator) -> list[np.ndarray]:
    return [_boxes(rng, shapes[0]).astype(dtypes[0]), rng.random(shapes[1]).astype(dtypes[1])]


def _roi_inputs(shapes: list, dtypes: list, rng: np.random.Generator) -> list[np.ndarray]:
    x = rng.standard_normal(shapes[0]).astype(dtypes[0])
    rois = (_boxes(rng, shapes[1]) * 6).astype(dtypes[1])
    return [x, rois, rng.integers(0, shapes[0][0], shapes[2]).astype(dtypes[2])]


def _scatter_inputs(shapes: list, dtypes: list, rng: np.random.Generator) -> list[np.ndarray]:
    rows = rng.permutation(shapes[0][0])[: shapes[1][0]].reshape(shapes[1])
    return [
        rng.standard_normal(shapes[0]).astype(dtypes[0]),
        rows.astype(dtypes[1]),
        rng.standard_normal(shapes[2]).astype(dtypes[2]),
    ]


_NMS = dict(
    shareLocation=1,
    backgroundLabelId=-1,
    numClasses=4,
    topK=12,
    keepTopK=10,
    scoreThreshold=0.3,
    iouThreshold=0.45,
    isNormalized=1,
    clipBoxes=1,
)
_NMS_SHAPES = [((1, 9, 1, 4), (2, 9, 1, 4), (4, 9, 1, 4)), ((1, 9, 4), (2, 9, 4), (4, 9, 4))]

#: Fields, input shapes and options per library plugin.
LIBRARY_SETUPS: dict[str, tuple[dict, list, dict]] = {
    "BatchedNMS_TRT": (_NMS, _NMS_SHAPES, {"make_inputs": _nms_inputs}),
    "BatchedNMSDynamic_TRT": (_NMS, _NMS_SHAPES, {"make_inputs": _nms_inputs}),
    "EfficientNMS_TRT": (
        dict(score_threshold=0.4, iou_threshold=0.5, max_output_boxes=12, background_class=-1, box_coding=0),
        [((1, 9, 4), (2, 9, 4), (4, 9, 4)), ((1, 9, 3), (2, 9, 3), (4, 9, 3))],
        {"make_inputs": _nms_inputs},
    ),
    "LayerNorm": (dict(gamma=[1.0, 2.0, 0.5, 1.5], beta=[0.0, 0.1, 0.2, 0.3]), [((1, 4), (3, 4), (8, 4))], {}),
    "InstanceNormalization_TRT": (
        dict(epsilon=1e-4, scales=[1.0, 2.0], bias=[0.5, -0.5]),
        [((1, 2, 3, 3), (2, 2, 3, 3), (3, 2, 3, 3))],
        {},
    ),
    "GroupNormalizationPlugin": (
        dict(eps=1e-5, num_groups=2),
        [((1, 6, 4, 3), (2, 6, 4, 3), (3, 6, 4, 3)), (6,), (6,)],
        {},
    ),
    "ROIAlign_TRT": (
        dict(output_height=2, output_width=2, sampling_ratio=2, spatial_scale=1.0),
        [(2, 3, 7, 9), ((1, 4), (4, 4), (8, 4)), ((1,), (4,), (8,))],
        {"make_inputs": _roi_inputs, "dtypes": ["float32", "float32", "int32"]},
    ),
    "ScatterND": (
        {},
        [(6, 3), (4, 1), (4, 3)],
        {"make_inputs": _scatter_inputs, "dtypes": ["float32", "int32", "float32"]},
    ),
}


@pytest.mark.parametrize("creator", library.library_creators(), ids=lambda c: f"{c.name}v{c.plugin_version}")
def test_library_plugin_passes(creator: Any) -> None:
    assert creator.name in LIBRARY_SETUPS, f"add fields and shapes for the new library plugin {creator.name}"
    fields, shapes, options = LIBRARY_SETUPS[creator.name]
    report = check_plugin(creator, fields, shapes, **options)
    skips = ALWAYS_SKIPPED | {"reference"} | ({"format-no-lookahead"} if report.family == "IPluginV2Ext" else set())
    _assert_clean(report, skips)
