"""init_libnvinfer_plugins, the registry entries, namespaces, and the shared NMS helpers."""

from __future__ import annotations

import numpy as np
import pytest
from library_helpers import LOGGER, OnePluginEngine, creator, fc

import plugrt as trt
from plugrt.plugins import LIBRARY, init_libnvinfer_plugins, library_creators
from plugrt.plugins._nms import OverlapRule, corners, greedy_nms, top_k_desc
from plugrt.plugins._workspace import WorkspaceLayout

EXPECTED = {
    ("BatchedNMS_TRT", "1"),
    ("BatchedNMSDynamic_TRT", "1"),
    ("EfficientNMS_TRT", "1"),
    ("LayerNorm", "1"),
    ("InstanceNormalization_TRT", "1"),
    ("InstanceNormalization_TRT", "2"),
    ("GroupNormalizationPlugin", "1"),
    ("ROIAlign_TRT", "1"),
    ("ScatterND", "1"),
}


def _registered(namespace: str) -> dict[tuple[str, str], object]:
    return {
        (c.name, c.plugin_version): c for c in trt.get_plugin_registry().all_creators if c.plugin_namespace == namespace
    }


def test_registers_every_plugin_once_per_namespace() -> None:
    assert init_libnvinfer_plugins(LOGGER, "") is True
    first = _registered("")
    assert EXPECTED <= set(first)
    assert init_libnvinfer_plugins(LOGGER, "") is True  # idempotent: no DuplicateCreatorError
    assert all(_registered("")[key] is first[key] for key in EXPECTED)
    assert len(library_creators()) == len(LIBRARY) == len(EXPECTED)


def test_namespaces_get_their_own_creators_and_plans_remember_them() -> None:
    init_libnvinfer_plugins(LOGGER, "")
    init_libnvinfer_plugins(None, "my_ns")
    default, mine = _registered(""), _registered("my_ns")
    for key in EXPECTED:
        assert mine[key] is not default[key] and mine[key].plugin_namespace == "my_ns"
    plugin = creator("LayerNorm", namespace="my_ns").create_plugin(
        "ln", fc(gamma=np.ones(2, np.float32), beta=np.zeros(2, np.float32))
    )
    assert plugin.plugin_namespace == "my_ns"
    engine = OnePluginEngine(plugin, [("x", trt.float32, (3, 2))], ["y"])
    info = engine.engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    assert "my_ns" in info
    np.testing.assert_allclose(
        engine(x=np.array([[1, 3], [0, 2], [5, 5]], np.float32))["y"], [[-1, 1], [-1, 1], [0, 0]], atol=1e-2
    )


def test_namespace_must_be_a_string() -> None:
    with pytest.raises(trt.TypeMismatchError, match="namespace must be a str, got int"):
        init_libnvinfer_plugins(LOGGER, 3)  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(trt, "init_libnvinfer_plugins"), reason="not exported from plugrt yet")
def test_exported_from_plugrt() -> None:
    assert trt.init_libnvinfer_plugins is init_libnvinfer_plugins


def test_field_names_describe_types_and_defaults() -> None:
    fields = {f.name: f for f in creator("BatchedNMSDynamic_TRT").field_names}
    assert list(fields) == [
        "shareLocation",
        "backgroundLabelId",
        "numClasses",
        "topK",
        "keepTopK",
        "scoreThreshold",
        "iouThreshold",
        "isNormalized",
        "clipBoxes",
        "scoreBits",
        "caffeSemantics",
    ]
    assert fields["scoreThreshold"].type == trt.PluginFieldType.FLOAT32
    assert fields["topK"].type == trt.PluginFieldType.INT32 and fields["topK"].size == 0  # required: no default
    assert fields["scoreBits"].data.tolist() == [16]
    effnms = {f.name: f.data.tolist() for f in creator("EfficientNMS_TRT").field_names}
    assert (
        effnms["iou_threshold"] == [0.5] and effnms["max_output_boxes"] == [100] and effnms["background_class"] == [-1]
    )


@pytest.mark.parametrize("missing", [0.3, 0.9])  # dense and sparse rows take different paths
def test_top_k_desc_breaks_ties_by_column(missing: float) -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, (50, 300)).astype(np.float32)
    valid = rng.random(scores.shape) >= missing
    for k in (1, 7, 60, 300, 400):
        index, found, value = top_k_desc(scores, k, valid)
        masked = np.where(valid, scores, -np.inf)
        want = np.array([sorted(range(300), key=lambda j, r=r: (-r[j], j))[: min(k, 300)] for r in masked])
        want_found = np.take_along_axis(masked, want, axis=1) > -np.inf
        np.testing.assert_array_equal(found, want_found)
        np.testing.assert_array_equal(np.where(found, index, -1), np.where(want_found, want, -1))
        np.testing.assert_array_equal(value[found], np.take_along_axis(masked, want, axis=1)[want_found])
    # leading dimensions and transposed views rank along the last axis
    cube = rng.random((3, 40, 5)).astype(np.float32)
    index, found, _ = top_k_desc(cube.transpose(0, 2, 1), 4, cube.transpose(0, 2, 1) > 0.5)
    for b in range(3):
        for c in range(5):
            column = cube[b, :, c]
            want = [n for n in np.argsort(-column, kind="stable") if column[n] > 0.5][:4]
            assert index[b, c][found[b, c]].tolist() == want


def _greedy_loop(boxes: np.ndarray, valid: np.ndarray, rule: OverlapRule, labels: np.ndarray | None) -> np.ndarray:
    keep = np.zeros(valid.shape, bool)
    areas = rule.areas(boxes)
    for r in range(valid.shape[0]):
        for i in range(valid.shape[1]):
            if not valid[r, i]:
                continue
            hits = rule.suppresses(boxes[r, :i], areas[r, :i], boxes[r, i], areas[r, i]) & keep[r, :i]
            if labels is not None:
                hits &= labels[r, :i] == labels[r, i]
            keep[r, i] = not hits.any()
    return keep


@pytest.mark.parametrize("block", [1, 5, 128])
@pytest.mark.parametrize("with_labels", [False, True])
def test_greedy_nms_blocks_agree_with_the_sequential_definition(block: int, with_labels: bool) -> None:
    rng = np.random.default_rng(block)
    xy = rng.random((20, 70, 2)) * 0.6
    boxes = corners(np.concatenate([xy, xy + rng.random((20, 70, 2)) * 0.4 + 0.05], -1))
    valid = np.sort(rng.random((20, 70)) < 0.8, axis=1)[:, ::-1]  # invalid ones trail
    labels = rng.integers(0, 3, (20, 70)) if with_labels else None
    for rule in (
        OverlapRule(0.3),
        OverlapRule(0.5, inclusive=True),
        OverlapRule(0.4, area_offset=1.0, caffe_offset=1.0),
    ):
        want = _greedy_loop(boxes, valid, rule, labels)
        np.testing.assert_array_equal(greedy_nms(boxes, valid, rule, labels, block=block, budget=5000), want)


def test_workspace_layout_binds_aligned_views() -> None:
    layout = WorkspaceLayout().add("a", (3,), np.float32).add("b", (2, 2), np.int64)
    raw = np.zeros(layout.nbytes + 256, np.uint8)
    base = raw.ctypes.data + (-raw.ctypes.data) % 256
    views = layout.bind(base, available=layout.nbytes)
    views["b"][...] = 7
    assert views["b"].ctypes.data - base == 256 and (raw[base - raw.ctypes.data + 256 :][:32].view(np.int64) == 7).all()
    with pytest.raises(trt.ExecutionError, match="smaller than the"):
        layout.bind(base, available=10)
