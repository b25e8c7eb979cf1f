"""The library plugins in CUDA engines: same results as the CPU engines, computed on the device (the
NMS plugins with their GPU kernels, LayerNorm with its kernel where it applies, everything else with
the same array code as on the CPU, on CuPy arrays), replayable as CUDA graphs; device weights freed
with the engine."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from library_helpers import LOGGER, clustered_boxes, creator, fc

import plugrt as trt

from gpu_helpers import run_plan, same_on_both
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


@pytest.mark.parametrize("cols", [6, 256])  # 6: the array fallback; 256: the CUDA LayerNorm kernel
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


# --- every plugin computed on the device: FP32 and FP16 against the CPU engine ----------------------

FLOATS = [pytest.param(np.float32, 1e-5, id="fp32"), pytest.param(np.float16, 5e-3, id="fp16")]
TRT_TYPES = {np.float32: trt.float32, np.float16: trt.float16, np.int32: trt.int32}


def _instance_norm(version: str, dtype: type, shape: tuple[int, ...], relu: int) -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(len(shape) + relu)
    channels = shape[1]
    fields = fc(
        epsilon=1e-4,
        scales=rng.normal(1, 0.3, channels).astype(np.float32),
        bias=rng.normal(0, 0.5, channels).astype(np.float32),
        relu=relu,
        alpha=0.2,
    )
    plugin = creator("InstanceNormalization_TRT", version).create_plugin("in", fields)
    return _plan(plugin, [("x", TRT_TYPES[dtype], shape)], ["y"]), {"x": rng.normal(1, 2, shape).astype(dtype)}


def _group_norm(dtype: type, groups: int) -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(groups)
    shape = (2, 8, 5, 7)
    plan = _plan(
        creator("GroupNormalizationPlugin").create_plugin("gn", fc(num_groups=groups, eps=1e-3)),
        [("x", TRT_TYPES[dtype], shape), ("s", TRT_TYPES[dtype], (8,)), ("b", TRT_TYPES[dtype], (8,))],
        ["y"],
    )
    inputs = {
        "x": rng.normal(-1, 3, shape).astype(dtype),
        "s": rng.normal(1, 0.2, 8).astype(dtype),
        "b": rng.normal(0, 0.2, 8).astype(dtype),
    }
    return plan, inputs


def _layer_norm(dtype: type, shape: tuple[int, ...], axis: int) -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(sum(shape))
    cols = int(np.prod(shape[axis % len(shape) :]))
    gamma, beta = rng.normal(1, 0.1, cols).astype(np.float32), rng.normal(0, 0.1, cols).astype(np.float32)
    plugin = creator("LayerNorm").create_plugin("ln", fc(gamma=gamma, beta=beta, axis=axis))
    return _plan(plugin, [("x", TRT_TYPES[dtype], shape)], ["y"]), {"x": rng.normal(0, 2, shape).astype(dtype)}


ROIS = np.array(
    [
        [0.5, 0.5, 6, 4],
        [-3, -2, 9, 12],  # partly outside the image
        [2, 3, 2.5, 3.2],  # smaller than a pixel
        [7, 1, 3, 5],  # x2 < x1
        [-150, -120, 200, 160],  # far larger than the image: more samples per bin than a device window holds
        [1, -40, 11, 2],
        [4, 4, 11.5, 9.5],
    ],
    np.float32,
)


def _roi_align(dtype: type, ctm: int, mode: int, ratio: int) -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(ctm + 2 * mode + 4 * ratio)
    x = rng.normal(0, 1, (2, 3, 10, 12)).astype(dtype)
    x[0, 1] = -np.abs(x[0, 1])  # all negative: maximum mode then sees the 0 of samples outside the image
    params = dict(coordinate_transformation_mode=ctm, mode=mode, output_height=3, output_width=2, sampling_ratio=ratio)
    plan = _plan(
        creator("ROIAlign_TRT").create_plugin("r", fc(**params, spatial_scale=0.5)),
        [("x", TRT_TYPES[dtype], x.shape), ("rois", TRT_TYPES[dtype], ROIS.shape), ("i", trt.int32, (len(ROIS),))],
        ["y"],
    )
    inputs = {"x": x, "rois": (ROIS * 2).astype(dtype), "i": np.array([0, 1, 1, 0, 1, 0, 1], np.int32)}
    return plan, inputs


def _scatter_nd(dtype: type, depth: int) -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(depth)
    data_shape = (4, 5, 3)
    index_shape = (3, 4, depth)
    update_shape = index_shape[:-1] + data_shape[depth:]
    extent = np.array(data_shape[:depth])
    indices = rng.integers(0, 1 << 20, index_shape) % extent  # many repeats: the last one lands
    indices[::2] -= extent  # the same targets counted from the end
    plan = _plan(
        creator("ScatterND").create_plugin("s", trt.PluginFieldCollection()),
        [("d", TRT_TYPES[dtype], data_shape), ("i", trt.int32, index_shape), ("u", TRT_TYPES[dtype], update_shape)],
        ["y"],
    )
    inputs = {
        "d": (rng.normal(0, 5, data_shape)).astype(dtype),
        "i": indices.astype(np.int32),
        "u": (rng.normal(0, 5, update_shape)).astype(dtype),
    }
    return plan, inputs


@pytest.mark.parametrize(("dtype", "atol"), FLOATS)
@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize(("shape", "relu"), [((2, 4, 5, 6), 1), ((3, 2, 9), 0), ((1, 3, 2, 3, 4), 1)])
def test_instance_norm_on_the_device(dtype: type, atol: float, version: str, shape: tuple, relu: int) -> None:
    same_on_both(*_instance_norm(version, dtype, shape, relu), atol=atol)


@pytest.mark.parametrize(("dtype", "atol"), FLOATS)
@pytest.mark.parametrize("groups", [1, 2, 8])
def test_group_norm_on_the_device(dtype: type, atol: float, groups: int) -> None:
    same_on_both(*_group_norm(dtype, groups), atol=atol * 2)


@pytest.mark.parametrize(("dtype", "atol"), FLOATS)
@pytest.mark.parametrize(("shape", "axis"), [((4, 6), -1), ((3, 1000), -1), ((2, 3, 2, 5), 1), ((5, 7, 3), -2)])
def test_layer_norm_fallback_on_the_device(dtype: type, atol: float, shape: tuple, axis: int) -> None:
    from plugrt.ops.layer_norm_cuda import supports

    assert not supports(dtype, int(np.prod(shape[axis % len(shape) :])))  # rows the CUDA kernel does not take
    same_on_both(*_layer_norm(dtype, shape, axis), atol=atol * 10)


@pytest.mark.parametrize(("dtype", "atol"), FLOATS)
@pytest.mark.parametrize("ctm", [0, 1], ids=["output_half_pixel", "half_pixel"])
@pytest.mark.parametrize("mode", [0, 1], ids=["max", "avg"])
@pytest.mark.parametrize("ratio", [0, 2], ids=["adaptive", "ratio2"])
def test_roi_align_on_the_device(dtype: type, atol: float, ctm: int, mode: int, ratio: int) -> None:
    out = same_on_both(*_roi_align(dtype, ctm, mode, ratio), atol=atol)
    assert np.abs(out["y"]).max() > 0.1


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_scatter_nd_on_the_device(dtype: type, depth: int) -> None:
    plan, inputs = _scatter_nd(dtype, depth)
    out = same_on_both(plan, inputs)  # exact, repeated indices included
    assert not np.array_equal(out["y"], inputs["d"])


GRAPH_CASES = {
    "instance_norm": lambda: _instance_norm("2", np.float16, (2, 4, 5, 6), 1),
    "group_norm": lambda: _group_norm(np.float32, 2),
    "layer_norm_fallback": lambda: _layer_norm(np.float32, (3, 1000), -1),
    "roi_align_avg": lambda: _roi_align(np.float32, 1, 1, 0),
    "roi_align_max": lambda: _roi_align(np.float16, 0, 0, 0),
    "scatter_nd": lambda: _scatter_nd(np.float32, 2),
}


@pytest.mark.parametrize("case", list(GRAPH_CASES))
def test_library_plugins_replay_in_a_cuda_graph(case: str) -> None:
    if case == "roi_align_avg":
        pytest.importorskip("torch")  # without PyTorch, CuPy's matrix products cannot be captured
    plan, inputs = GRAPH_CASES[case]()
    half = any(a.dtype == np.float16 for a in inputs.values())
    same_on_both(plan, inputs, atol=5e-3 if half else 1e-5, graph=True)


def test_scatter_nd_drops_out_of_range_indices_on_the_device() -> None:
    plan, inputs = _scatter_nd(np.float32, 2)
    wild = inputs["i"].copy()
    wild[0, 0] = [4, 0]  # dim 0 has 4 entries
    wild[1, 2] = [0, -6]  # dim 1 has 5
    got = run_plan(plan, "cuda", {**inputs, "i": wild})["y"]
    kept = np.ones(wild.shape[:-1], bool)
    kept[0, 0] = kept[1, 2] = False
    want = inputs["d"].copy()
    for index, update in zip(wild[kept], inputs["u"][kept]):  # in order: the last one lands
        want[tuple(index)] = update
    np.testing.assert_array_equal(got, want)


def test_roi_align_batch_index_out_of_range_gives_zeros_on_the_device() -> None:
    plan, inputs = _roi_align(np.float32, 1, 1, 2)
    want = run_plan(plan, "cpu", inputs)["y"]
    bad = inputs["i"].copy()
    bad[[1, 4]] = [2, -1]
    got = run_plan(plan, "cuda", {**inputs, "i": bad})["y"]
    assert not got[[1, 4]].any()
    np.testing.assert_allclose(np.delete(got, [1, 4], 0), np.delete(want, [1, 4], 0), atol=1e-5)
