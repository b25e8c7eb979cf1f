"""EfficientNMS_TRT through the registry, built into engines, against a loop reference."""

from __future__ import annotations

import numpy as np
import plugin_references as ref
import pytest
from library_helpers import OnePluginEngine, clustered_boxes, creator, fc

import plugrt as trt

OUTPUTS = ["num_detections", "detection_boxes", "detection_scores", "detection_classes"]
BASE = dict(
    score_threshold=0.4,
    iou_threshold=0.5,
    max_output_boxes=12,
    background_class=-1,
    score_activation=False,
    class_agnostic=False,
    box_coding=0,
)


def _engine(
    p: dict, box_shape: tuple, n: int, classes: int, anchors: tuple | None = None, dtype: trt.DataType = trt.float32
) -> OnePluginEngine:
    plugin = creator("EfficientNMS_TRT").create_plugin("nms", fc(**p))
    inputs = [("boxes", dtype, (-1, *box_shape)), ("scores", dtype, (-1, n, classes))]
    profile = {
        "boxes": ((1, *box_shape), (2, *box_shape), (4, *box_shape)),
        "scores": ((1, n, classes), (2, n, classes), (4, n, classes)),
    }
    if anchors is not None:
        inputs.append(("anchors", dtype, anchors))
    return OnePluginEngine(plugin, inputs, OUTPUTS, profile)


def _check(
    got: dict, boxes: np.ndarray, scores: np.ndarray, anchors: np.ndarray | None, p: dict, atol: float = 1e-5
) -> None:
    want = ref.efficient_nms(
        boxes.astype(np.float32), scores.astype(np.float32), None if anchors is None else anchors.astype(np.float32), p
    )
    np.testing.assert_array_equal(got["num_detections"], want["num"])
    np.testing.assert_array_equal(got["detection_classes"], want["classes"])
    np.testing.assert_allclose(got["detection_scores"].astype(np.float32), want["scores"], atol=atol, rtol=1e-5)
    np.testing.assert_allclose(got["detection_boxes"].astype(np.float32), want["boxes"], atol=atol, rtol=1e-5)


CASES = [
    ({}, "shared3"),
    ({"background_class": 0, "iou_threshold": 0.3}, "shared3"),
    ({"class_agnostic": True}, "shared4"),
    ({"score_activation": True, "score_threshold": 0.6}, "per_class"),
    ({"score_threshold": 0.0, "max_output_boxes": 200}, "shared3"),
    ({"score_threshold": 0.95, "iou_threshold": 0.1}, "per_class"),
    ({"iou_threshold": 0.0}, "shared3"),  # IoU >= 0 always holds: one box per class survives
]


@pytest.mark.parametrize(("overrides", "layout"), CASES)
def test_standard_mode_matches_reference(overrides: dict, layout: str) -> None:
    p = {**BASE, **overrides}
    n, classes = 50, 5
    box_shape = {"shared3": (n, 4), "shared4": (n, 1, 4), "per_class": (n, classes, 4)}[layout]
    engine = _engine(p, box_shape, n, classes)
    rng = np.random.default_rng(len(str(overrides)))
    for batch in (1, 2, 4):
        boxes = clustered_boxes(rng, (batch, *box_shape))
        scores = rng.random((batch, n, classes)).astype(np.float32)
        if p["score_activation"]:
            scores = (scores - 0.5) * 8  # logits
        _check(engine(boxes=boxes, scores=scores), boxes, scores, None, p)


@pytest.mark.parametrize("coding", [0, 1])
@pytest.mark.parametrize("shared_anchors", [True, False])
def test_fused_box_decoder(coding: int, shared_anchors: bool) -> None:
    p = {**BASE, "box_coding": coding, "iou_threshold": 0.4}
    n, classes, batch = 40, 3, 2
    rng = np.random.default_rng(coding * 2 + shared_anchors)
    if coding == 0:
        anchors = clustered_boxes(rng, (1 if shared_anchors else batch, n, 4))
        deltas = rng.normal(0, 0.02, (batch, n, 4)).astype(np.float32)
    else:
        anchors = np.concatenate(
            [
                rng.random((1 if shared_anchors else batch, n, 2)) * 0.6 + 0.2,
                rng.random((1 if shared_anchors else batch, n, 2)) * 0.3 + 0.05,
            ],
            -1,
        ).astype(np.float32)
        deltas = rng.normal(0, 0.3, (batch, n, 4)).astype(np.float32)
    engine = _engine(p, (n, 4), n, classes, anchors=anchors.shape)
    scores = rng.random((batch, n, classes)).astype(np.float32)
    _check(engine(boxes=deltas, scores=scores, anchors=anchors), deltas, scores, anchors, p)


def test_fp16_with_ties() -> None:
    p = {**BASE, "score_threshold": 0.2}
    n, classes = 64, 4
    engine = _engine(p, (n, 4), n, classes, dtype=trt.float16)
    assert engine.engine.get_tensor_dtype("detection_classes") == trt.int32
    rng = np.random.default_rng(5)
    for batch in (1, 3):
        boxes = clustered_boxes(rng, (batch, n, 4)).astype(np.float16)
        scores = (np.round(rng.random((batch, n, classes)) * 20) / 20).astype(np.float16)  # many equal scores
        got = engine(boxes=boxes, scores=scores)
        assert got["detection_scores"].dtype == np.float16
        _check(got, boxes, scores, None, p, atol=2e-3)


def test_padding_is_zero() -> None:
    p = {**BASE, "score_threshold": 0.9, "max_output_boxes": 30}
    engine = _engine(p, (10, 4), 10, 2)
    rng = np.random.default_rng(1)
    boxes, scores = clustered_boxes(rng, (2, 10, 4)), rng.random((2, 10, 2)).astype(np.float32)
    got = engine(boxes=boxes, scores=scores)
    count = int(got["num_detections"][0, 0])
    assert 0 < count < 30
    assert (got["detection_boxes"][0, count:] == 0).all() and (got["detection_classes"][0, count:] == 0).all()
    assert (got["detection_scores"][0, count:] == 0).all()


def test_serialize_round_trip() -> None:
    plugin = creator("EfficientNMS_TRT").create_plugin("x", fc(**{**BASE, "box_coding": 1}))
    data = plugin.serialize()
    again = creator("EfficientNMS_TRT").deserialize_plugin("x", data)
    assert again.params == plugin.params and again.serialize() == data
    with pytest.raises(trt.SerializationError):
        creator("EfficientNMS_TRT").deserialize_plugin("x", data[:-2])


def test_defaults_are_tensorrts() -> None:
    plugin = creator("EfficientNMS_TRT").create_plugin("x", trt.PluginFieldCollection())
    assert plugin.params == BASE | {"score_threshold": 0.5, "max_output_boxes": 100}


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"box_coding": 2}, trt.FieldError, r"'box_coding' must be one of \[0, 1\], got 2"),
        ({"max_output_boxes": 0}, trt.FieldError, r"'max_output_boxes' must be a value >= 1, got 0"),
        ({"iou_threshold": -0.1}, trt.FieldError, r"'iou_threshold' must be a value in \[0.0, 1.0\]"),
        ({"score_threshold": 1}, trt.TypeMismatchError, r"'score_threshold' must be PluginFieldType.FLOAT32"),
        ({"background_class": 1.0}, trt.TypeMismatchError, r"'background_class' must be PluginFieldType.INT32"),
    ],
)
def test_bad_fields(overrides: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=f"EfficientNMS_TRT: .*{message}"):
        creator("EfficientNMS_TRT").create_plugin("bad", fc(**{**BASE, **overrides}))


def test_mismatched_box_count_is_a_build_error() -> None:
    plugin = creator("EfficientNMS_TRT").create_plugin("nms", fc(**BASE))
    with pytest.raises(trt.PlugrtError, match=r"scores dim 1 \(number of boxes\) must be 9, got 8"):
        OnePluginEngine(plugin, [("boxes", trt.float32, (1, 9, 4)), ("scores", trt.float32, (1, 8, 3))], OUTPUTS)
