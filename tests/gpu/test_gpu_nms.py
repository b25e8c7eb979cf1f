"""The NMS GPU kernels and the NMS plugins on CUDA engines: equal to the host pipelines, exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.plugins import init_libnvinfer_plugins
from plugrt.plugins._nms import OverlapRule, corners, greedy_nms, top_k_desc

from gpu_helpers import same_on_both

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


def _boxes(rng: np.random.Generator, shape: tuple[int, ...], clusters: int = 6, scale: float = 1.0) -> np.ndarray:
    centres = rng.random((clusters, 2)) * 0.8 + 0.1
    pick = centres[rng.integers(0, clusters, size=shape[:-1])]
    half = rng.random((*shape[:-1], 2)) * 0.15 + 0.02
    jitter = rng.normal(0, 0.03, size=(*shape[:-1], 2))
    boxes = np.concatenate([pick + jitter - half, pick + jitter + half], axis=-1)
    swap = rng.random(shape[:-1]) < 0.2
    boxes[swap] = boxes[swap][:, [2, 3, 0, 1]]
    return (boxes * scale).astype(np.float32)


def _centre_size(boxes: np.ndarray) -> np.ndarray:
    c = corners(boxes)
    return np.concatenate([(c[..., :2] + c[..., 2:]) / 2, c[..., 2:] - c[..., :2]], -1).astype(np.float32)


def _fields(**values: Any) -> trt.PluginFieldCollection:
    collection = trt.PluginFieldCollection()
    for name, value in values.items():
        array = np.atleast_1d(np.asarray(value))
        kind = trt.PluginFieldType.FLOAT32 if array.dtype.kind == "f" else trt.PluginFieldType.INT32
        collection.append(
            trt.PluginField(name, array.astype(np.float32 if array.dtype.kind == "f" else np.int32), kind)
        )
    return collection


def _plugin(name: str, **fields: Any) -> Any:
    init_libnvinfer_plugins(LOGGER, "")
    return trt.get_plugin_registry().get_creator(name, "1", "").create_plugin("nms", _fields(**fields))


def _plan(plugin: Any, inputs: dict[str, np.ndarray]) -> bytes:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    types = {np.dtype(np.float32): trt.float32, np.dtype(np.float16): trt.float16}
    tensors = [network.add_input(n, types[a.dtype], a.shape) for n, a in inputs.items()]
    layer = network.add_plugin_v2(tensors, plugin)
    for i, name in enumerate(["num", "boxes_out", "scores_out", "classes_out"]):
        layer.get_output(i).name = name
        network.mark_output(layer.get_output(i))
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    assert plan is not None
    return bytes(plan)


# --- kernels against the host building blocks --------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "n", "k", "levels"),
    [(5, 50, 10, 0), (7, 300, 64, 8), (3, 1000, 1000, 5), (2, 9, 20, 3), (4, 200_000, 4096, 50), (1, 140_000, 300, 0)],
)
def test_top_k_rows_matches_the_host_ranking(rows: int, n: int, k: int, levels: int) -> None:
    import cupy as cp

    from plugrt.plugins._nms_cuda import top_k_rows

    rng = np.random.default_rng(n)
    scores = rng.random((rows, n)).astype(np.float32)
    if levels:  # many equal scores: ties must go to the lower index
        scores = (np.floor(scores * levels) / levels).astype(np.float32)
    threshold = 0.3
    index, value, found = top_k_rows(cp.asarray(scores), k, threshold)
    want_index, want_found, want_value = top_k_desc(scores, k, scores > np.float32(threshold))
    width = want_index.shape[1]
    np.testing.assert_array_equal(cp.asnumpy(found)[:, :width], want_found)
    np.testing.assert_array_equal(
        np.where(want_found, cp.asnumpy(index)[:, :width], 0), np.where(want_found, want_index, 0)
    )
    np.testing.assert_array_equal(cp.asnumpy(value)[:, :width], want_value)
    assert not cp.asnumpy(found)[:, width:].any()


def test_top_k_rows_strided_rows_skips_and_inclusive_threshold() -> None:
    import cupy as cp

    from plugrt.plugins._nms_cuda import top_k_rows

    rng = np.random.default_rng(1)
    scores = (np.floor(rng.random((3, 500, 7)) * 20) / 20).astype(np.float32)  # [B, N, C]
    by_class = scores.transpose(0, 2, 1)
    index, value, found = top_k_rows(cp.asarray(scores).transpose(0, 2, 1), 40, 0.5, inclusive=True, row_skip=2)
    passing = by_class >= np.float32(0.5)
    passing[:, 2] = False
    want_index, want_found, want_value = top_k_desc(by_class, 40, passing)
    np.testing.assert_array_equal(cp.asnumpy(found), want_found)
    np.testing.assert_array_equal(cp.asnumpy(value), want_value)
    np.testing.assert_array_equal(np.where(want_found, cp.asnumpy(index), 0), np.where(want_found, want_index, 0))
    flat = scores.reshape(3, -1)
    index, _, found = top_k_rows(cp.asarray(flat), 100, 0.5, elem_mod=7, elem_skip=0)
    passing = flat > np.float32(0.5)
    passing.reshape(3, 500, 7)[:, :, 0] = False
    want_index, want_found, _ = top_k_desc(flat, 100, passing)
    np.testing.assert_array_equal(cp.asnumpy(found), want_found)
    np.testing.assert_array_equal(np.where(want_found, cp.asnumpy(index), 0), np.where(want_found, want_index, 0))


@pytest.mark.parametrize(
    "rule",
    [
        OverlapRule(0.45),
        OverlapRule(0.5, inclusive=True),
        OverlapRule(0.3, area_offset=1.0),
        OverlapRule(0.3, area_offset=1.0, caffe_offset=1.0),
    ],
)
@pytest.mark.parametrize("labels", [False, True])
def test_nms_keep_matches_host_greedy_nms(rule: OverlapRule, labels: bool) -> None:
    import cupy as cp

    from plugrt.plugins._nms_cuda import nms_keep

    rng = np.random.default_rng(7)
    rows, k = 6, 300
    scale = 300.0 if rule.area_offset else 1.0
    boxes = corners(_boxes(rng, (rows, k, 4), scale=scale))
    if rule.area_offset:
        boxes = np.round(boxes)  # pixel boxes: many exact IoU ties with the threshold
    counts = rng.integers(0, k + 1, rows).astype(np.int32)
    counts[0] = k
    valid = np.arange(k)[None, :] < counts[:, None]
    label = rng.integers(0, 3, (rows, k)).astype(np.int32) if labels else None
    for max_keep in (None, 7):
        want = greedy_nms(boxes, valid, rule, labels=label, max_keep=max_keep)
        if max_keep is not None:  # the host may settle a few more in its last block; the kernel stops exactly
            want &= np.cumsum(want, axis=1) <= max_keep
        got = nms_keep(
            cp.asarray(boxes),
            cp.asarray(counts),
            rule.threshold,
            inclusive=rule.inclusive,
            area_offset=rule.area_offset,
            caffe_offset=rule.caffe_offset,
            labels=None if label is None else cp.asarray(label),
            max_keep=max_keep,
        )
        np.testing.assert_array_equal(cp.asnumpy(got), want)
        in_chunks = nms_keep(  # masks for two rows at a time
            cp.asarray(boxes),
            cp.asarray(counts),
            rule.threshold,
            inclusive=rule.inclusive,
            area_offset=rule.area_offset,
            caffe_offset=rule.caffe_offset,
            labels=None if label is None else cp.asarray(label),
            max_keep=max_keep,
            mask_budget=2 * k * 5 * 8,
        )
        np.testing.assert_array_equal(cp.asnumpy(in_chunks), want)


# --- the plugins on CUDA engines ---------------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"shareLocation": 0},
        {"isNormalized": 0, "caffeSemantics": 1, "scale": 300.0},
        {"clipBoxes": 0, "backgroundLabelId": -1},
        {"ties": 10},
        {"half": True},
        {"keepTopK": 120},
        {"plugin": "BatchedNMS_TRT"},
    ],
)
def test_batched_nms_gpu_equals_cpu(variant: dict[str, Any]) -> None:
    rng = np.random.default_rng(len(str(variant)))
    variant = dict(variant)
    batch, boxes_n, classes = 3, 700, 6
    share, plugin = variant.pop("shareLocation", 1), variant.pop("plugin", "BatchedNMSDynamic_TRT")
    scale, ties, half = variant.pop("scale", 1.0), variant.pop("ties", 0), variant.pop("half", False)
    boxes = _boxes(rng, (batch, boxes_n, 1 if share else classes, 4), scale=scale)
    scores = rng.random((batch, boxes_n, classes)).astype(np.float32)
    if ties:
        scores = (np.floor(scores * ties) / ties).astype(np.float32)
    params = dict(shareLocation=share, backgroundLabelId=0, numClasses=classes, topK=120, keepTopK=50)
    params |= dict(scoreThreshold=0.25, iouThreshold=0.45, isNormalized=1, clipBoxes=1) | variant
    dtype = np.float16 if half else np.float32
    inputs = {"boxes": boxes.astype(dtype), "scores": scores.astype(dtype)}
    out = same_on_both(_plan(_plugin(plugin, **params), inputs), inputs)
    assert out["num"].min() > 0


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"class_agnostic": 1},
        {"score_activation": 1, "score_threshold": 0.4},
        {"box_coding": 1},
        {"anchors": 0},
        {"anchors": 1, "box_coding": 1},
        {"background_class": 2, "ties": 8},
        {"large": True},
    ],
)
def test_efficient_nms_gpu_equals_cpu(variant: dict[str, Any]) -> None:
    rng = np.random.default_rng(len(str(variant)) + 1)
    variant = dict(variant)
    anchors, ties, large = variant.pop("anchors", None), variant.pop("ties", 0), variant.pop("large", False)
    batch, boxes_n, classes = (2, 30_000, 20) if large else (3, 500, 5)
    centre_size = variant.get("box_coding") == 1
    boxes = _centre_size(_boxes(rng, (batch, boxes_n, 4))) if centre_size else _boxes(rng, (batch, boxes_n, 4))
    scores = rng.random((batch, boxes_n, classes)).astype(np.float32)
    if ties:
        scores = (np.floor(scores * ties) / ties).astype(np.float32)
    inputs = {"boxes": boxes, "scores": scores}
    if anchors is not None:  # the boxes are small offsets from the anchors
        inputs["boxes"] = rng.normal(0, 0.05, (batch, boxes_n, 4)).astype(np.float32)
        priors = _boxes(rng, (1, boxes_n, 4))
        inputs["anchors"] = _centre_size(priors) if centre_size else priors
    params = dict(score_threshold=0.3, iou_threshold=0.5, max_output_boxes=100) | variant
    out = same_on_both(_plan(_plugin("EfficientNMS_TRT", **params), inputs), inputs, atol=1e-6)
    assert out["num"].min() > 0


def test_batched_nms_replays_in_a_cuda_graph() -> None:
    rng = np.random.default_rng(3)
    boxes = _boxes(rng, (2, 400, 1, 4))
    scores = rng.random((2, 400, 4)).astype(np.float32)
    params = dict(shareLocation=1, backgroundLabelId=0, numClasses=4, topK=100, keepTopK=40)
    params |= dict(scoreThreshold=0.2, iouThreshold=0.5)
    inputs = {"boxes": boxes, "scores": scores}
    same_on_both(_plan(_plugin("BatchedNMSDynamic_TRT", **params), inputs), inputs, graph=True)
