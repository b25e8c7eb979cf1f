"""Every built-in plugin through ONNX import: a node with the plugin's op name and attributes."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import plugin_references as ref
import pytest
from library_helpers import clustered_boxes
from onnx import TensorProto, helper

import plugrt as trt


@pytest.fixture(autouse=True)
def _library() -> None:
    trt.init_libnvinfer_plugins(trt.Logger(trt.Logger.ERROR), "")


def _model(op: str, inputs: dict[str, np.ndarray], outputs: list[tuple[str, int]], **attrs: Any) -> onnx.ModelProto:
    node = helper.make_node(op, list(inputs), [name for name, _ in outputs], name=op.lower(), **attrs)
    graph = helper.make_graph(
        [node], "plugin",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(name, dtype, None) for name, dtype in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(op: str, inputs: dict[str, np.ndarray], outputs: list[tuple[str, int]], **attrs: Any) -> dict[str, np.ndarray]:
    return trt.compile(_model(op, inputs, outputs, **attrs), device="cpu")(inputs)


NMS_OUT = [("num", TensorProto.INT32), ("boxes", TensorProto.FLOAT), ("scores", TensorProto.FLOAT),
           ("classes", TensorProto.FLOAT)]


@pytest.mark.parametrize("op", ["BatchedNMSDynamic_TRT", "BatchedNMS_TRT"])
def test_batched_nms(op: str) -> None:
    rng = np.random.default_rng(3)
    boxes = clustered_boxes(rng, (2, 40, 1, 4)).astype(np.float32)
    scores = rng.random((2, 40, 4), dtype=np.float32)
    p = {"shareLocation": 1, "backgroundLabelId": 0, "numClasses": 4, "topK": 20, "keepTopK": 10,
         "scoreThreshold": 0.3, "iouThreshold": 0.5, "isNormalized": 1, "clipBoxes": 1}
    got = _run(op, {"b": boxes, "s": scores}, NMS_OUT, **p)
    want = ref.batched_nms(boxes, scores, dict(p, scoreBits=16, caffeSemantics=1))
    np.testing.assert_array_equal(got["num"], want["num"])
    np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-6)
    np.testing.assert_allclose(got["boxes"], want["boxes"], rtol=1e-6)
    np.testing.assert_array_equal(got["classes"], want["classes"])


def test_efficient_nms() -> None:
    rng = np.random.default_rng(4)
    boxes = clustered_boxes(rng, (2, 30, 4)).astype(np.float32)
    scores = rng.random((2, 30, 3), dtype=np.float32)
    p = {"score_threshold": 0.25, "iou_threshold": 0.5, "max_output_boxes": 12, "background_class": -1,
         "score_activation": 0, "class_agnostic": 0, "box_coding": 0}
    outs = [("num", TensorProto.INT32), ("boxes", TensorProto.FLOAT), ("scores", TensorProto.FLOAT),
            ("classes", TensorProto.INT32)]
    got = _run("EfficientNMS_TRT", {"b": boxes, "s": scores}, outs, **p)
    want = ref.efficient_nms(boxes, scores, None, p)
    for key in ("num", "classes"):
        np.testing.assert_array_equal(got[key], want[key])
    np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-6)
    np.testing.assert_allclose(got["boxes"], want["boxes"], rtol=1e-6)


def test_layer_norm_instance_norm_and_group_norm() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 3, 5)).astype(np.float32)
    gamma, beta = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    got = _run("LayerNorm", {"x": x}, [("y", TensorProto.FLOAT)], gamma=gamma.tolist(), beta=beta.tolist(),
               epsilon=1e-5, axis=-1)["y"]
    np.testing.assert_allclose(got, ref.layer_norm(x, gamma, beta, 1e-5, -1), rtol=1e-4, atol=1e-5)
    scales, bias = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    got = _run("InstanceNormalization_TRT", {"x": x}, [("y", TensorProto.FLOAT)], epsilon=1e-5,
               scales=scales.tolist(), bias=bias.tolist(), relu=0, alpha=0.0)["y"]
    np.testing.assert_allclose(got, ref.instance_norm(x, scales, bias, 1e-5, 0, 0.0), rtol=1e-4, atol=1e-5)
    g_scale, g_bias = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    got = _run("GroupNormalizationPlugin", {"x": x, "scale": g_scale, "bias": g_bias}, [("y", TensorProto.FLOAT)],
               eps=1e-5, num_groups=2)["y"]
    np.testing.assert_allclose(got, ref.group_norm(x, g_scale, g_bias, 1e-5, 2), rtol=1e-4, atol=1e-5)


def test_roi_align_and_scatter_nd() -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    rois = np.array([[0.5, 1.0, 6.0, 7.0], [2.0, 2.0, 5.5, 4.0], [0, 0, 7, 7]], np.float32)
    batch = np.array([0, 1, 1], np.int32)
    p = {"coordinate_transformation_mode": 1, "mode": 1, "output_height": 3, "output_width": 2,
         "sampling_ratio": 2, "spatial_scale": 1.0}
    got = _run("ROIAlign_TRT", {"x": x, "rois": rois, "batch_indices": batch}, [("y", TensorProto.FLOAT)], **p)["y"]
    np.testing.assert_allclose(got, ref.roi_align(x, rois, batch, p), rtol=1e-4, atol=1e-5)
    data = rng.standard_normal((4, 5)).astype(np.float32)
    indices = np.array([[1], [3]], np.int32)
    updates = rng.standard_normal((2, 5)).astype(np.float32)
    # ScatterND is also a standard ONNX op: the plugin_namespace attribute asks for the plugin
    model = _model("ScatterND", {"data": data, "indices": indices, "updates": updates}, [("y", TensorProto.FLOAT)],
                   plugin_namespace="", plugin_version="1")
    compiled = trt.compile(model, device="cpu")
    got = compiled({"data": data, "indices": indices, "updates": updates})["y"]
    np.testing.assert_array_equal(got, ref.scatter_nd(data, indices, updates))
    kinds = compiled.engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    assert '"name": "ScatterND"' in kinds and '"kind": "plugin"' in kinds
