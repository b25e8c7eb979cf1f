"""The library plugins in CUDA engines: same results as the CPU engines (NumPy kernels run on the host
there, LayerNorm uses the CUDA kernel where it applies), device weights freed with the engine."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from library_helpers import LOGGER, clustered_boxes, creator, fc

import plugrt as trt

from gpu_helpers import same_on_both
from testing_plugins import build

pytestmark = pytest.mark.gpu


def _plan(plugin: object, inputs: list[tuple[str, trt.DataType, tuple[int, ...]]], outputs: list[str]) -> bytes:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    layer = network.add_plugin_v2([network.add_input(n, t, s) for n, t, s in inputs], plugin)
    for i, name in enumerate(outputs):
        layer.get_output(i).name = name
        network.mark_output(layer.get_output(i))
    return build(network, builder)


def test_nms_plugins_on_a_cuda_engine() -> None:
    rng = np.random.default_rng(0)
    boxes, scores = clustered_boxes(rng, (3, 60, 1, 4)), rng.random((3, 60, 5)).astype(np.float32)
    params = dict(
        shareLocation=True,
        backgroundLabelId=0,
        numClasses=5,
        topK=30,
        keepTopK=20,
        scoreThreshold=0.2,
        iouThreshold=0.4,
    )
    plan = _plan(
        creator("BatchedNMSDynamic_TRT").create_plugin("n", fc(**params)),
        [("boxes", trt.float32, boxes.shape), ("scores", trt.float32, scores.shape)],
        ["num", "b", "s", "c"],
    )
    assert same_on_both(plan, {"boxes": boxes, "scores": scores})["num"].min() > 0
    plan = _plan(
        creator("EfficientNMS_TRT").create_plugin("n", fc(score_threshold=0.3, max_output_boxes=25)),
        [("boxes", trt.float32, (3, 60, 4)), ("scores", trt.float32, scores.shape)],
        ["num", "b", "s", "c"],
    )
    same_on_both(plan, {"boxes": boxes[:, :, 0], "scores": scores})


@pytest.mark.parametrize("cols", [6, 256])  # 6: host fallback; 256: the CUDA LayerNorm kernel
def test_layer_norm_on_a_cuda_engine(cols: int) -> None:
    rng = np.random.default_rng(cols)
    gamma, beta = rng.normal(1, 0.1, cols).astype(np.float32), rng.normal(0, 0.1, cols).astype(np.float32)
    plan = _plan(
        creator("LayerNorm").create_plugin("ln", fc(gamma=gamma, beta=beta)), [("x", trt.float32, (4, cols))], ["y"]
    )
    same_on_both(plan, {"x": rng.normal(0, 2, (4, cols)).astype(np.float32)}, atol=1e-4)
    gc.collect()
    before = {id(b) for b in trt.live_allocations()}
    engine = trt.Runtime(LOGGER, device="cuda").deserialize_cuda_engine(plan)
    mine = [b for b in trt.live_allocations() if id(b) not in before]
    assert len(mine) == 2 and all(b.device == "cuda" for b in mine)
    del engine
    gc.collect()
    assert not [b for b in trt.live_allocations() if id(b) not in before]


def test_other_plugins_on_a_cuda_engine() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (2, 4, 5, 6)).astype(np.float32)
    fields = fc(scales=np.ones(4, np.float32), bias=np.zeros(4, np.float32), relu=1, alpha=0.2)
    plan = _plan(
        creator("InstanceNormalization_TRT", "2").create_plugin("in", fields), [("x", trt.float32, x.shape)], ["y"]
    )
    same_on_both(plan, {"x": x}, atol=1e-5)
    plan = _plan(
        creator("GroupNormalizationPlugin").create_plugin("gn", fc(num_groups=2)),
        [("x", trt.float32, x.shape), ("s", trt.float32, (4,)), ("b", trt.float32, (4,))],
        ["y"],
    )
    same_on_both(plan, {"x": x, "s": np.full(4, 2, np.float32), "b": np.ones(4, np.float32)}, atol=1e-5)
    rois = np.array([[0, 0, 4, 3], [1, 1, 5, 4]], np.float32)
    plan = _plan(
        creator("ROIAlign_TRT").create_plugin("r", fc(output_height=2, output_width=2)),
        [("x", trt.float32, x.shape), ("rois", trt.float32, (2, 4)), ("i", trt.int32, (2,))],
        ["y"],
    )
    same_on_both(plan, {"x": x, "rois": rois, "i": np.array([0, 1], np.int32)}, atol=1e-5)
    plan = _plan(
        creator("ScatterND").create_plugin("s", trt.PluginFieldCollection()),
        [("d", trt.float32, (4, 3)), ("i", trt.int32, (2, 1)), ("u", trt.float32, (2, 3))],
        ["y"],
    )
    out = same_on_both(
        plan, {"d": np.zeros((4, 3), np.float32), "i": np.array([[3], [0]], np.int32), "u": np.ones((2, 3), np.float32)}
    )
    assert out["y"][[0, 3]].all() and not out["y"][[1, 2]].any()
