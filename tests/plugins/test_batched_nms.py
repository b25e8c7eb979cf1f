"""BatchedNMS_TRT and BatchedNMSDynamic_TRT through the registry, built into engines, against a loop reference."""

from __future__ import annotations

import numpy as np
import plugin_references as ref
import pytest
from library_helpers import OnePluginEngine, clustered_boxes, creator, fc

import plugrt as trt
from plugrt.plugins.batched_nms import BatchedNMSDynamicPlugin, BatchedNMSPlugin
from plugrt.plugins.batched_nms_kernel import NMSConfig, workspace_layout

OUTPUTS = ["num_detections", "nmsed_boxes", "nmsed_scores", "nmsed_classes"]
BASE = dict(
    shareLocation=True,
    backgroundLabelId=-1,
    numClasses=4,
    topK=12,
    keepTopK=10,
    scoreThreshold=0.3,
    iouThreshold=0.45,
    isNormalized=True,
    clipBoxes=True,
    caffeSemantics=True,
)


def _inputs(
    rng: np.random.Generator, batch: int, n: int, p: dict, dtype: type = np.float32
) -> tuple[np.ndarray, np.ndarray]:
    locations = 1 if p["shareLocation"] else p["numClasses"]
    boxes = clustered_boxes(rng, (batch, n, locations, 4))
    if not p["isNormalized"]:
        boxes = np.round(boxes * 40, 1)  # pixel coordinates
    scores = rng.random((batch, n, p["numClasses"])).astype(np.float32)
    return boxes.astype(dtype), scores.astype(dtype)


def _check(got: dict[str, np.ndarray], boxes: np.ndarray, scores: np.ndarray, p: dict, atol: float = 1e-6) -> None:
    want = ref.batched_nms(boxes.astype(np.float32), scores.astype(np.float32), p)
    np.testing.assert_array_equal(got["num_detections"], want["num"])
    np.testing.assert_array_equal(got["nmsed_classes"].astype(np.float32), want["classes"])
    np.testing.assert_allclose(got["nmsed_scores"].astype(np.float32), want["scores"], atol=atol)
    np.testing.assert_allclose(got["nmsed_boxes"].astype(np.float32), want["boxes"], atol=atol)


def _dynamic_engine(p: dict, n: int, dtype: trt.DataType = trt.float32, score_rank: int = 3) -> OnePluginEngine:
    locations = 1 if p["shareLocation"] else p["numClasses"]
    classes = p["numClasses"]
    score_tail = (classes,) if score_rank == 3 else (classes, 1)
    plugin = creator("BatchedNMSDynamic_TRT").create_plugin("nms", fc(**p))
    return OnePluginEngine(
        plugin,
        [("boxes", dtype, (-1, n, locations, 4)), ("scores", dtype, (-1, n, *score_tail))],
        OUTPUTS,
        {
            "boxes": ((1, n, locations, 4), (2, n, locations, 4), (5, n, locations, 4)),
            "scores": ((1, n, *score_tail), (2, n, *score_tail), (5, n, *score_tail)),
        },
    )


CASES = [
    {},
    {"shareLocation": False},
    {"backgroundLabelId": 0, "scoreThreshold": 0.1},
    {"backgroundLabelId": 3, "iouThreshold": 0.2, "clipBoxes": False},
    {"isNormalized": False, "caffeSemantics": True, "clipBoxes": False},
    {"isNormalized": False, "caffeSemantics": False, "clipBoxes": False, "shareLocation": False},
    {"topK": 30, "keepTopK": 30, "scoreThreshold": 0.0, "iouThreshold": 0.5},
    {"scoreThreshold": 0.9, "iouThreshold": 0.3, "backgroundLabelId": 1},
    {"topK": 3, "keepTopK": 2, "iouThreshold": 0.0},
]


@pytest.mark.parametrize("overrides", CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "base")
def test_dynamic_matches_reference(overrides: dict) -> None:
    p = {**BASE, **overrides}
    engine = _dynamic_engine(p, n=40)
    rng = np.random.default_rng(len(str(overrides)))
    for batch in (1, 3, 5):
        boxes, scores = _inputs(rng, batch, 40, p)
        _check(engine(boxes=boxes, scores=scores), boxes, scores, p)


def test_dynamic_fp16_and_four_dim_scores() -> None:
    p = {**BASE, "shareLocation": False, "backgroundLabelId": 1}
    engine = _dynamic_engine(p, n=64, dtype=trt.float16, score_rank=4)
    assert engine.engine.get_tensor_dtype("scores") == trt.float16
    assert engine.engine.get_tensor_dtype("num_detections") == trt.int32
    rng = np.random.default_rng(7)
    for batch in (2, 4):
        boxes, scores = _inputs(rng, batch, 64, p, np.float16)  # fp16 scores: many exact ties
        got = engine(boxes=boxes, scores=scores[..., None])
        assert got["nmsed_scores"].dtype == np.float16
        _check(got, boxes, scores, p, atol=1e-3)


@pytest.mark.parametrize("half", [False, True])
def test_implicit_batch_variant(half: bool) -> None:
    p = {**BASE, "shareLocation": False, "backgroundLabelId": 2}
    n, classes, dtype = 30, p["numClasses"], (trt.float16 if half else trt.float32)
    plugin = creator("BatchedNMS_TRT").create_plugin("nms", fc(**p))
    engine = OnePluginEngine(
        plugin,
        [("boxes", dtype, (-1, n, classes, 4)), ("scores", dtype, (-1, n, classes))],
        OUTPUTS,
        {
            "boxes": ((1, n, classes, 4), (3, n, classes, 4), (6, n, classes, 4)),
            "scores": ((1, n, classes), (3, n, classes), (6, n, classes)),
        },
    )
    assert engine.engine.get_tensor_shape("num_detections") == (-1, 1)
    assert engine.engine.get_tensor_shape("nmsed_boxes") == (-1, p["keepTopK"], 4)
    rng = np.random.default_rng(11)
    for batch in (1, 6, 2):
        boxes, scores = _inputs(rng, batch, n, p, np.float16 if half else np.float32)
        _check(engine(boxes=boxes, scores=scores), boxes, scores, p, atol=1e-3 if half else 1e-6)


def test_padding_when_nothing_passes() -> None:
    p = {**BASE, "scoreThreshold": 0.99}
    engine = _dynamic_engine(p, n=8)
    boxes, scores = _inputs(np.random.default_rng(0), 2, 8, p)
    got = engine(boxes=boxes, scores=scores * 0.5)
    assert got["num_detections"].tolist() == [[0], [0]]
    assert (got["nmsed_classes"] == -1).all() and (got["nmsed_scores"] == 0).all() and (got["nmsed_boxes"] == 0).all()


def test_serialize_round_trip_and_clone() -> None:
    p = {**BASE, "isNormalized": False, "scoreBits": 8}
    for name, cls in (("BatchedNMSDynamic_TRT", BatchedNMSDynamicPlugin), ("BatchedNMS_TRT", BatchedNMSPlugin)):
        plugin = creator(name).create_plugin("x", fc(**p))
        data = plugin.serialize()
        assert len(data) == plugin.serialization_size
        again = creator(name).deserialize_plugin("x", data)
        assert isinstance(again, cls) and again.params == plugin.params and again.serialize() == data
        assert plugin.clone().params == plugin.params and plugin.clone() is not plugin
        with pytest.raises(trt.SerializationError, match=r"left over|bad magic"):
            creator(name).deserialize_plugin("x", data + b"\0")


def test_kernel_uses_the_workspace() -> None:
    p = dict(BASE, scoreBits=16)
    config = NMSConfig.from_params(p)
    layout = workspace_layout(2, 20, config)
    assert layout.nbytes > 2 * 4 * 20 * 4  # permuted scores, candidates, merged scores
    plugin = BatchedNMSDynamicPlugin(p)
    descs = [
        trt.PluginTensorDesc(trt.Dims((2, 20, 1, 4)), trt.float32),
        trt.PluginTensorDesc(trt.Dims((2, 20, 4)), trt.float32),
    ]
    outs = [
        trt.PluginTensorDesc(trt.Dims(s), t)
        for s, t in [((2, 1), trt.int32), ((2, 10, 4), trt.float32), ((2, 10), trt.float32), ((2, 10), trt.float32)]
    ]
    assert plugin.get_workspace_size(descs, outs) == layout.nbytes
    workspace = np.full(layout.nbytes, 0xFF, np.uint8)  # garbage: the kernel must not rely on its content
    boxes, scores = _inputs(np.random.default_rng(3), 2, 20, p)
    results = [np.zeros(tuple(d.dims), trt.nptype(d.type)) for d in outs]
    plugin.enqueue(
        descs, outs, [boxes.ctypes.data, scores.ctypes.data], [r.ctypes.data for r in results], workspace.ctypes.data, 0
    )
    assert (workspace != 0xFF).any()
    _check(dict(zip(OUTPUTS, results)), boxes, scores, p)


FIELD_ERRORS = [
    ({"keepTopK": 20, "topK": 10}, trt.FieldError, r"'keepTopK' must be <= topK \(10\), got 20"),
    ({"topK": 5000}, trt.FieldError, r"'topK' must be a value in \[1, 4096\], got 5000"),
    ({"numClasses": 0}, trt.FieldError, r"'numClasses' must be a value >= 1, got 0"),
    ({"backgroundLabelId": 4}, trt.FieldError, r"'backgroundLabelId' must be -1 or in \[0, numClasses=4\), got 4"),
    ({"backgroundLabelId": -2}, trt.FieldError, r"'backgroundLabelId' must be a value >= -1, got -2"),
    ({"iouThreshold": 1.5}, trt.FieldError, r"'iouThreshold' must be a value in \[0.0, 1.0\], got 1.5"),
    ({"topK": 10.0}, trt.TypeMismatchError, r"field 'topK' must be PluginFieldType.INT32, got PluginFieldType.FLOAT32"),
    ({"scoreThreshold": 1}, trt.TypeMismatchError, r"'scoreThreshold' must be PluginFieldType.FLOAT32, got .*INT32"),
    ({"keepTopK": [3, 4]}, trt.FieldError, r"'keepTopK' must hold exactly 1 value, got 2"),
]


@pytest.mark.parametrize(("overrides", "error", "message"), FIELD_ERRORS)
@pytest.mark.parametrize("name", ["BatchedNMS_TRT", "BatchedNMSDynamic_TRT"])
def test_bad_fields_raise_naming_the_field(name: str, overrides: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=f"{name}: .*{message}"):
        creator(name).create_plugin("bad", fc(**{**BASE, **overrides}))


def test_missing_required_field_and_warning_for_ambiguous_default() -> None:
    fields = {k: v for k, v in BASE.items() if k != "numClasses"}
    with pytest.raises(trt.FieldError, match=r"required field 'numClasses' \(PluginFieldType.INT32\) is missing"):
        creator("BatchedNMSDynamic_TRT").create_plugin("bad", fc(**fields))

    class Collect(trt.ILogger):
        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []

        def log(self, severity: trt.Severity, msg: str) -> None:
            self.lines.append(f"{severity.name}: {msg}")

    logger = Collect()
    quiet = creator("BatchedNMSDynamic_TRT")
    fresh = type(quiet)(logger)
    without = {k: v for k, v in BASE.items() if k != "isNormalized"}
    plugin = fresh.create_plugin("x", fc(**without, notAField=1))
    assert plugin.config.is_normalized is True
    assert any(line.startswith("WARNING") and "'isNormalized' not given; using True" in line for line in logger.lines)
    assert any("ignoring unknown field 'notAField'" in line for line in logger.lines)


def test_shape_mismatch_is_a_clear_build_error() -> None:
    p = {**BASE, "shareLocation": False}
    plugin = creator("BatchedNMSDynamic_TRT").create_plugin("nms", fc(**p))
    with pytest.raises(trt.PlugrtError, match=r"boxes dim 2 \(1 if shareLocation else numClasses\) must be 4, got 1"):
        OnePluginEngine(plugin, [("boxes", trt.float32, (2, 9, 1, 4)), ("scores", trt.float32, (2, 9, 4))], OUTPUTS)
