"""Resize, Upsample and Pad imported from ONNX, against the reference evaluator and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from cnn_harness import check, node_model, onnxruntime, plugrt_run, random, reference

from ort_support import ORT_IS_OLD
from plugrt.onnx.compile import compile as compile_model
from plugrt.onnx.importers.base import OnnxImportError

NO_ROI = np.zeros(0, np.float32)
COORDINATES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
SCALES = [[1, 1, 2.0, 1.5], [1, 1, 0.6, 0.5], [1, 1, 1.7, 3.0]]


def _resize(x: np.ndarray, scales=None, sizes=None, roi=None, opset: int = 19, **attrs):
    inputs = {
        "x": x,
        "roi": NO_ROI if roi is None else np.asarray(roi, np.float32),
        "scales": None if scales is None else np.asarray(scales, np.float32),
        "sizes": None if sizes is None else np.asarray(sizes, np.int64),
    }
    return node_model("Resize", inputs, initializers=("roi", "scales", "sizes"), opset=opset, **attrs)


@pytest.mark.parametrize("scales", SCALES, ids=["up", "down", "mixed"])
@pytest.mark.parametrize("coordinates", COORDINATES)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_scales(mode: str, coordinates: str, scales: list[float]) -> None:
    model, feeds = _resize(random((1, 2, 5, 6)), scales, mode=mode, coordinate_transformation_mode=coordinates)
    check(model, feeds)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest_modes_with_sizes(nearest_mode: str) -> None:
    model, feeds = _resize(random((1, 2, 5, 6)), sizes=[1, 2, 9, 4], mode="nearest", nearest_mode=nearest_mode)
    check(model, feeds)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize_with_extrapolation(mode: str) -> None:
    model, feeds = _resize(
        random((1, 2, 5, 6)),
        sizes=[1, 2, 7, 5],
        roi=[0, 0, 0.4, -0.2, 1, 1, 1.3, 0.8],
        mode=mode,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=10.0,
    )
    check(model, feeds)


@pytest.mark.parametrize("a", [-0.5, -0.75])
def test_resize_cubic_exclude_outside(a: float) -> None:
    model, feeds = _resize(random((1, 1, 6, 7)), [1, 1, 0.8, 1.6], mode="cubic", cubic_coeff_a=a, exclude_outside=1)
    check(model, feeds)


@pytest.mark.parametrize("scales", [[1, 1, 0.6, 0.4], [1, 1, 0.3, 2.0]])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias(mode: str, scales: list[float]) -> None:
    model, feeds = _resize(random((1, 2, 10, 9)), scales, mode=mode, antialias=1)
    check(model, feeds)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_axes_and_keep_aspect_ratio(policy: str) -> None:
    model, feeds = _resize(
        random((1, 2, 6, 8)), sizes=[5, 3], mode="linear", axes=[3, 2], keep_aspect_ratio_policy=policy
    )
    check(model, feeds)


@pytest.mark.parametrize("dtype", [np.float16, np.uint8])
def test_resize_other_types(dtype: type) -> None:
    x = random((1, 2, 4, 5), dtype, 0, 200)
    for mode in ("nearest", "linear"):
        model, feeds = _resize(x, [1, 1, 2.0, 1.5], mode=mode)
        check(model, feeds, oracle=onnxruntime, rtol=1e-2, atol=1.0 if dtype == np.uint8 else 1e-2)


def test_resize_sizes_from_shapes_with_dynamic_input() -> None:
    from onnx import helper

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Mul", ["s", "two"], ["sizes"]),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear"),
    ]
    two = helper.make_tensor("two", 7, [4], [1, 1, 2, 2])
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", 1, [1, 2, "h", "w"])],
        [helper.make_tensor_value_info("y", 1, None)],
        [two],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    compiled = compile_model(model, shapes={"x": ((1, 2, 2, 2), (1, 2, 4, 5), (1, 2, 8, 8))})
    for shape in [(1, 2, 4, 5), (1, 2, 3, 7)]:
        feeds = {"x": random(shape)}
        np.testing.assert_allclose(compiled(feeds)["y"], onnxruntime(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_resize_scales_with_dynamic_input() -> None:
    model, _ = _resize(random((1, 2, 4, 5)), [1, 1, 1.5, 0.5], mode="nearest")
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "h"
    compiled = compile_model(model, shapes={"x": ((1, 2, 2, 5), (1, 2, 4, 5), (1, 2, 9, 5))})
    for shape in [(1, 2, 4, 5), (1, 2, 7, 5)]:
        feeds = {"x": random(shape)}
        expected = onnxruntime(model, feeds)[0]
        got = compiled(feeds)["y"]
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("opset", [10, 13])
def test_resize_opset_10_is_asymmetric(opset: int) -> None:
    x = random((1, 1, 3, 4))
    if opset == 10:
        model, feeds = node_model(
            "Resize", {"x": x, "scales": np.array([1, 1, 2, 1.5], np.float32)}, initializers=("scales",), opset=10
        )
    else:
        model, feeds = _resize(
            x, [1, 1, 2, 1.5], opset=13, coordinate_transformation_mode="asymmetric", nearest_mode="floor"
        )
    check(model, feeds, oracle=onnxruntime)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("opset", [7, 9])
def test_upsample(opset: int, mode: str) -> None:
    x = random((1, 2, 3, 4))
    scales = [1.0, 1.0, 2.0, 3.0]
    if opset == 7:
        model, feeds = node_model("Upsample", {"x": x}, opset=7, mode=mode, scales=scales)
    else:
        inputs = {"x": x, "scales": np.asarray(scales, np.float32)}
        model, feeds = node_model("Upsample", inputs, initializers=("scales",), opset=9, mode=mode)
    check(model, feeds, oracle=onnxruntime)


# --- Pad --------------------------------------------------------------------------------------------
PADS = [[0, 0, 1, 2, 0, 0, 3, 1], [0, 1, 2, 3, 1, 0, 1, 2], [0, 0, 0, 7, 0, 0, 5, 0], [0, 0, -1, 2, 0, 0, 1, -2]]


@pytest.mark.parametrize("pads", PADS, ids=["small", "all_axes", "wide", "negative"])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode: str, pads: list[int]) -> None:
    x = random((2, 3, 4, 5))
    if mode == "reflect" and pads == PADS[2]:
        pytest.skip("reflect padding wider than the axis: onnxruntime refuses it")
    inputs = {"x": x, "pads": np.array(pads, np.int64), "value": np.array(1.5, np.float32)}
    model, feeds = node_model("Pad", inputs, initializers=("pads", "value"), mode=mode, opset=19)
    old_wrap = ORT_IS_OLD and mode == "wrap" and pads == PADS[2]  # old onnxruntime wraps wide pads wrongly
    check(model, feeds, oracle=reference if old_wrap else onnxruntime)


def test_pad_reflect_wider_than_the_axis_repeats_like_numpy() -> None:
    x = random((1, 3))
    model, feeds = node_model(
        "Pad", {"x": x, "pads": np.array([0, 7, 0, 5], np.int64)}, initializers=("pads",), mode="reflect"
    )
    np.testing.assert_array_equal(plugrt_run(model, feeds)[0], np.pad(x, [(0, 0), (7, 5)], mode="reflect"))


def test_pad_axes_input_and_negative_axes() -> None:
    inputs = {
        "x": random((2, 3, 4)),
        "pads": np.array([1, 2, 0, 3], np.int64),
        "value": None,
        "axes": np.array([1, -1]),
    }
    model, feeds = node_model("Pad", inputs, initializers=("pads", "axes"), mode="edge", opset=18)
    check(model, feeds)


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.bool_])
def test_pad_constant_other_types(dtype: type) -> None:
    x = random((3, 4), np.int32, 0, 1).astype(dtype)
    inputs = {"x": x, "pads": np.array([1, 0, 0, 2], np.int64), "value": np.array(1, dtype)}
    model, feeds = node_model("Pad", inputs, initializers=("pads", "value"), opset=13)
    check(model, feeds)


def test_pad_opset_10_attributes_and_run_time_value() -> None:
    model, feeds = node_model("Pad", {"x": random((2, 3))}, opset=10, pads=[1, 0, 2, 1], mode="constant", value=-3.0)
    check(model, feeds)
    inputs = {"x": random((2, 3)), "pads": np.array([0, 1, 1, 0], np.int64), "value": np.array(4.0, np.float32)}
    model, feeds = node_model("Pad", inputs, initializers=("pads",), opset=13)
    check(model, feeds)


# --- misuse ------------------------------------------------------------------------------------------
def test_resize_scales_computed_at_run_time_are_refused() -> None:
    inputs = {"x": random((1, 1, 2, 2)), "roi": NO_ROI, "scales": np.array([1, 1, 2, 2], np.float32)}
    model, _ = node_model("Resize", inputs, initializers=("roi",), opset=13)
    with pytest.raises(OnnxImportError, match=r"the scales input is computed at run time"):
        compile_model(model)


def test_pad_with_pads_from_data_is_refused() -> None:
    inputs = {"x": random((2, 2)), "pads": np.array([1, 1, 1, 1], np.int64)}
    model, _ = node_model("Pad", inputs, opset=13)
    with pytest.raises(OnnxImportError, match=r"the pads input is computed from data"):
        compile_model(model)


def test_pad_unknown_mode_lists_the_valid_ones() -> None:
    model, _ = node_model(
        "Pad", {"x": random((2, 2)), "pads": np.zeros(4, np.int64)}, initializers=("pads",), mode="mirror"
    )
    with pytest.raises(OnnxImportError, match=r"unknown mode 'mirror'; valid: constant, reflect, edge, wrap"):
        compile_model(model)


def test_pad_infinite_constant_survives_the_plan() -> None:
    inputs = {"x": random((1, 2, 3, 3)), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    inputs["value"] = np.array(-np.inf, np.float32)
    model, feeds = node_model("Pad", inputs, initializers=("pads", "value"), opset=13)
    got = check(model, feeds)[0]
    assert np.isneginf(got[0, 0, 0, 0])
