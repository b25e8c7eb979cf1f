"""Pooling, normalizations, LRN and PRelu imported from ONNX, against the reference evaluator and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from cnn_harness import check, node_model, onnxruntime, plugrt_run, random

from plugrt.onnx.compile import compile as compile_model
from plugrt.onnx.importers.base import OnnxImportError

POOLS = {
    "pads_strides": ((1, 3, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "ceil": ((1, 3, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    "ceil_no_pads": ((1, 2, 9, 10), {"kernel_shape": [3, 2], "strides": [2, 3], "ceil_mode": 1}),
    "same_upper": ((1, 2, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 2, 8, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "valid_1d": ((2, 2, 11), {"kernel_shape": [4], "strides": [3], "auto_pad": "VALID"}),
    "3d": ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 1]}),
}


@pytest.mark.parametrize("name", sorted(POOLS))
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pooling_matches_onnxruntime(op: str, name: str) -> None:
    shape, attrs = POOLS[name]
    extra = {"count_include_pad": 1} if op == "AveragePool" and name == "pads_strides" else {}
    model, feeds = node_model(op, {"x": random(shape)}, **attrs, **extra)
    check(model, feeds, oracle=onnxruntime)


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_ceil_mode_divisors(count_include_pad: int) -> None:
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}
    model, feeds = node_model(
        "AveragePool", {"x": random((1, 2, 10, 10))}, count_include_pad=count_include_pad, **attrs
    )
    check(model, feeds)


@pytest.mark.parametrize("dtype", [np.float16, np.uint8, np.int8])
def test_max_pool_other_types(dtype: type) -> None:
    x = random((1, 2, 6, 7), dtype, -100, 100) if dtype != np.uint8 else random((1, 2, 6, 7), dtype, 0, 255)
    model, feeds = node_model("MaxPool", {"x": x}, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    check(model, feeds)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(storage_order: int) -> None:
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "storage_order": storage_order}
    x = random((2, 3, 7, 8))
    model, feeds = node_model("MaxPool", {"x": x}, ("y", "i"), output_types=[np.float32, np.int64], **attrs)
    check(model, feeds, oracle=onnxruntime)


def test_max_pool_dilations_and_average_pool_dilations() -> None:
    attrs = {"kernel_shape": [3, 3], "strides": [1, 2], "dilations": [2, 2], "pads": [1, 0, 2, 1]}
    model, feeds = node_model("MaxPool", {"x": random((2, 3, 9, 10))}, **attrs)
    check(model, feeds)
    model, feeds = node_model("AveragePool", {"x": random((1, 3, 10, 11))}, **attrs)
    check(model, feeds)


def test_pooling_float16_average_and_lp() -> None:
    shape, attrs = POOLS["pads_strides"]
    for op in ("AveragePool", "LpPool"):
        model, feeds = node_model(op, {"x": random(shape, np.float16)}, **attrs)
        check(model, feeds, oracle=onnxruntime, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", ["GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"])
def test_global_pooling(op: str, dtype: type) -> None:
    model, feeds = node_model(op, {"x": random((2, 3, 4, 5), dtype)})
    check(model, feeds, oracle=onnxruntime)


def test_pooling_dynamic_spatial_dims() -> None:
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}
    model, _ = node_model("MaxPool", {"x": random((1, 2, 8, 8))}, dynamic={"x": [1, 2, "h", "w"]}, **attrs)
    compiled = compile_model(model, shapes={"x": ((1, 2, 3, 3), (1, 2, 8, 8), (1, 2, 16, 16))})
    for shape in [(1, 2, 8, 8), (1, 2, 3, 4), (1, 2, 15, 16)]:
        feeds = {"x": random(shape)}
        np.testing.assert_array_equal(compiled(feeds)["y"], onnxruntime(model, feeds)[0])


# --- normalization ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("constant", [True, False])
def test_batch_normalization_inference(constant: bool, dtype: type) -> None:
    inputs = {
        "x": random((2, 4, 3, 5), dtype),
        "scale": random((4,), dtype),
        "bias": random((4,), dtype),
        "mean": random((4,), dtype),
        "var": random((4,), dtype, 0.5, 2.0),
    }
    model, feeds = node_model(
        "BatchNormalization", inputs, initializers=("scale", "bias", "mean", "var") if constant else (), epsilon=1e-3
    )
    check(model, feeds, oracle=onnxruntime)


def test_batch_normalization_training_mode() -> None:
    inputs = {
        "x": random((3, 4, 2, 5)),
        "scale": random((4,)),
        "bias": random((4,)),
        "mean": random((4,)),
        "var": random((4,), np.float32, 0.5, 2.0),
    }
    model, feeds = node_model(
        "BatchNormalization", inputs, ("y", "m", "v"), initializers=("scale", "bias"), training_mode=1, momentum=0.8
    )
    check(model, feeds)


def test_batch_normalization_folds_into_the_convolution_before_it() -> None:
    from onnx import helper, numpy_helper

    w, b = random((4, 3, 3, 3)), random((4,))
    stats = [random((4,)), random((4,)), random((4,)), random((4,), np.float32, 0.5, 2.0)]
    names = ["s", "bb", "m", "v"]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", *names], ["y"]),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in zip([w, b, *stats], ["w", "b", *names])]
    graph = helper.make_graph(
        nodes,
        "conv_bn",
        [helper.make_tensor_value_info("x", 1, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", 1, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    compiled = compile_model(model)
    feeds = {"x": random((1, 3, 6, 6))}
    np.testing.assert_allclose(compiled(feeds)["y"], onnxruntime(model, feeds)[0], rtol=1e-4, atol=1e-5)
    kinds = [layer.kind for layer in compiled.engine.plan.layers]
    assert "batch_normalization" not in kinds and kinds.count("convolution") == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_instance_normalization(dtype: type) -> None:
    inputs = {"x": random((2, 3, 4, 5), dtype), "s": random((3,), dtype), "b": random((3,), dtype)}
    model, feeds = node_model("InstanceNormalization", inputs, initializers=("s",), epsilon=1e-3)
    check(model, feeds, oracle=onnxruntime)


@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
def test_layer_normalization_with_stashed_statistics(axis: int) -> None:
    x = random((2, 3, 4, 5))
    normalized = x.shape[axis:]
    inputs = {"x": x, "s": random(normalized), "b": random(normalized)}
    model, feeds = node_model(
        "LayerNormalization", inputs, ("y", "mean", "inv"), initializers=("s",), axis=axis, epsilon=1e-3, opset=17
    )
    check(model, feeds)


def test_layer_normalization_broadcast_scale_no_bias_float16() -> None:
    inputs = {"x": random((2, 3, 8), np.float16), "s": random((8,), np.float16)}
    model, feeds = node_model("LayerNormalization", inputs, initializers=("s",), opset=17)
    check(model, feeds, oracle=onnxruntime, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_per_group_then_per_channel_affine(opset: int) -> None:
    groups, channels = 3, 6
    size = groups if opset < 21 else channels
    inputs = {"x": random((2, channels, 4, 3)), "s": random((size,)), "b": random((size,))}
    model, feeds = node_model("GroupNormalization", inputs, num_groups=groups, epsilon=1e-3, opset=opset)
    check(model, feeds)


# --- LRN and PRelu ------------------------------------------------------------------------------
@pytest.mark.parametrize("size, beta", [(5, 0.75), (3, 0.5), (1, 0.75), (7, 0.9)])
def test_lrn_matches_onnxruntime(size: int, beta: float) -> None:
    # ONNX's reference evaluator sums the wrong axis in LRN; onnxruntime follows the spec.
    model, feeds = node_model("LRN", {"x": random((2, 8, 5, 4))}, size=size, alpha=1e-2, beta=beta, bias=2.0)
    check(model, feeds, oracle=onnxruntime)


def test_lrn_float16() -> None:
    model, feeds = node_model("LRN", {"x": random((1, 6, 3, 3), np.float16)}, size=3)
    check(model, feeds, oracle=onnxruntime, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("x_shape, slope_shape", [((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4, 5), (5,)), ((3, 4), (1,))])
def test_prelu_broadcasting(x_shape: tuple, slope_shape: tuple, constant: bool) -> None:
    inputs = {"x": random(x_shape), "slope": random(slope_shape)}
    model, feeds = node_model("PRelu", inputs, initializers=("slope",) if constant else ())
    check(model, feeds)


def test_prelu_float16_and_int() -> None:
    model, feeds = node_model("PRelu", {"x": random((2, 3), np.float16), "slope": random((3,), np.float16)})
    check(model, feeds, rtol=1e-3, atol=1e-3)
    model, feeds = node_model("PRelu", {"x": random((2, 3), np.int32, -9, 9), "slope": random((3,), np.int32, -3, 3)})
    check(model, feeds)


# --- misuse ---------------------------------------------------------------------------------------
def test_pooling_needs_kernel_shape() -> None:
    model, feeds = node_model("MaxPool", {"x": random((1, 2, 4, 4))})
    with pytest.raises(OnnxImportError, match=r"required attribute 'kernel_shape' is missing"):
        plugrt_run(model, feeds)


def test_pooling_rejects_wrong_rank_and_type() -> None:
    model, feeds = node_model("MaxPool", {"x": random((2, 4))}, kernel_shape=[2])
    with pytest.raises(OnnxImportError, match=r"pooling takes \[N, C, spatial...\], got rank 2"):
        plugrt_run(model, feeds)
    model, feeds = node_model("AveragePool", {"x": random((1, 1, 4, 4), np.int32)}, kernel_shape=[2, 2])
    with pytest.raises(OnnxImportError, match=r"AVERAGE pooling takes FLOAT, HALF, got INT32"):
        plugrt_run(model, feeds)


def test_group_normalization_groups_must_divide_channels() -> None:
    inputs = {"x": random((1, 5, 2, 2)), "s": random((2,)), "b": random((2,))}
    model, feeds = node_model("GroupNormalization", inputs, initializers=("s", "b"), num_groups=2, opset=18)
    with pytest.raises(OnnxImportError, match=r"5 channels do not split into 2 groups"):
        plugrt_run(model, feeds)
