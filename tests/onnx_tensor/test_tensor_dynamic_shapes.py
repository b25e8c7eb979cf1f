"""Shape-computing subgraphs under dynamic shapes: one engine per profile, run at several shapes."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as TP
from onnx import helper
from tensor_harness import Compiled, check_shapes, make_model, reference

RNG = np.random.default_rng(7)
BIG = np.iinfo(np.int64).max


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_shape_gather_concat_reshape_flattens_a_dynamic_batch() -> None:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = {"zero": np.array(0, np.int64), "axes": i64(0), "minus1": i64(-1)}
    model = make_model(nodes, {"x": (TP.FLOAT, ["N", 3, "W"])}, ["y"], inits)
    profile = {"x": ((1, 3, 1), (2, 3, 4), (6, 3, 8))}
    check_shapes(model, profile, [{"x": rand(*s)} for s in [(2, 3, 4), (6, 3, 8), (1, 3, 1), (5, 3, 2)]])


def test_shape_slice_constant_of_shape_and_range_from_a_dimension() -> None:
    fill = helper.make_tensor("v", TP.FLOAT, [1], [2.5])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "start", "end"], ["lead"]),
        helper.make_node("ConstantOfShape", ["lead"], ["filled"], value=fill),
        helper.make_node("Shape", ["x"], ["last"], start=-1),
        helper.make_node("Squeeze", ["last"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Size", ["x"], ["count"]),
    ]
    inits = {"start": i64(0), "end": i64(-1), "zero": np.array(0, np.int64), "one": np.array(1, np.int64)}
    model = make_model(nodes, {"x": (TP.FLOAT, ["N", 2, "W"])}, ["filled", "r", "count"], inits)
    profile = {"x": ((1, 2, 1), (2, 2, 4), (7, 2, 9))}
    check_shapes(model, profile, [{"x": rand(*s)} for s in [(2, 2, 4), (7, 2, 9), (1, 2, 1), (3, 2, 5)]])


def test_slices_with_negative_steps_clamping_and_shape_valued_ends() -> None:
    nodes = [
        helper.make_node("Slice", ["x", "s1", "e1", "a1", "st1"], ["reversed"]),
        helper.make_node("Slice", ["x", "s2", "e2", "a2"], ["inner"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "one", "two"], ["width"]),
        helper.make_node("Slice", ["x", "zero", "width", "one"], ["same"]),
        helper.make_node("Slice", ["x", "s3", "e3", "a3", "st3"], ["strided"]),
    ]
    inits = {
        "s1": i64(-1, BIG),
        "e1": i64(-BIG, 0),
        "a1": i64(0, 1),
        "st1": i64(-1, -2),
        "s2": i64(1),
        "e2": i64(-1),
        "a2": i64(-1),
        "one": i64(1),
        "two": i64(2),
        "zero": i64(0),
        "s3": i64(-100, 1),
        "e3": i64(100, -1),
        "a3": i64(1, 0),
        "st3": i64(3, 2),
    }
    outputs = ["reversed", "inner", "same", "strided"]
    model = make_model(nodes, {"x": (TP.FLOAT, ["N", "W"])}, outputs, inits)
    profile = {"x": ((1, 1), (4, 6), (9, 11))}
    check_shapes(model, profile, [{"x": rand(*s)} for s in [(4, 6), (9, 11), (1, 1), (2, 3), (5, 2)]])


def test_expand_tile_split_and_topk_driven_by_shapes() -> None:
    nodes = [
        helper.make_node("Shape", ["y"], ["ys"]),
        helper.make_node("Expand", ["x", "ys"], ["expanded"]),
        helper.make_node("Tile", ["x", "reps"], ["tiled"]),
        helper.make_node("Split", ["y"], ["p0", "p1", "p2"], axis=1, num_outputs=3),
        helper.make_node("Shape", ["y"], ["k"], start=-1),
        helper.make_node("TopK", ["y", "k"], ["values", "indices"], axis=-1),
    ]
    inputs = {"x": (TP.FLOAT, ["N", 1]), "y": (TP.FLOAT, ["N", "W"])}
    outputs = ["expanded", "tiled", "p0", "p1", "p2", "values", "indices"]
    model = make_model(nodes, inputs, outputs, {"reps": i64(2, 3)})
    profile = {"x": ((1, 1), (3, 1), (6, 1)), "y": ((1, 3), (3, 5), (6, 10))}
    shapes = [(3, 5), (6, 10), (1, 3), (2, 7)]
    check_shapes(model, profile, [{"x": rand(n, 1), "y": rand(n, w)} for n, w in shapes])


def test_squeeze_unsqueeze_flatten_gather_where_and_one_hot_on_dynamic_dims() -> None:
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax"], ["back"]),
        helper.make_node("Flatten", ["u"], ["flat"], axis=2),
        helper.make_node("Gather", ["x", "idx"], ["picked"], axis=1),
        helper.make_node("Greater", ["x", "zero_f"], ["positive"]),
        helper.make_node("Where", ["positive", "x", "row"], ["chosen"]),
        helper.make_node("Shape", ["x"], ["width"], start=1),
        helper.make_node("Squeeze", ["width"], ["depth"]),
        helper.make_node("OneHot", ["idx", "depth", "onoff"], ["hot"], axis=0),
    ]
    inits = {
        "ax": i64(1),
        "idx": np.array([[0, -1], [1, 0]], np.int64),
        "zero_f": np.zeros((1,), np.float32),
        "row": np.full((1, 1), -7.0, np.float32),
        "onoff": np.array([0.5, 3.0], np.float32),
    }
    outputs = ["back", "flat", "picked", "chosen", "hot"]
    model = make_model(nodes, {"x": (TP.FLOAT, ["N", "W"])}, outputs, inits)
    profile = {"x": ((1, 2), (3, 4), (5, 9))}
    check_shapes(model, profile, [{"x": rand(*s)} for s in [(3, 4), (5, 9), (1, 2), (4, 3)]])


def test_data_dependent_nonzero_and_compress_feed_later_layers() -> None:
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["pairs"], perm=[1, 0]),
        helper.make_node("Greater", ["c", "zero"], ["keep"]),
        helper.make_node("Compress", ["x", "keep"], ["rows"], axis=0),
        helper.make_node("Compress", ["x", "keep"], ["flat"]),
        helper.make_node("Shape", ["rows"], ["rows_shape"]),
    ]
    inputs = {"x": (TP.FLOAT, ["N", "W"]), "c": (TP.FLOAT, ["N"])}
    outputs = ["pairs", "rows", "flat", "rows_shape"]
    model = make_model(nodes, inputs, outputs, {"zero": np.zeros((1,), np.float32)})
    compiled = Compiled(model, {"x": ((1, 1), (3, 4), (6, 8)), "c": ((1,), (3,), (6,))})
    for n, w in [(3, 4), (6, 8), (1, 1), (5, 2)]:
        x = np.where(RNG.random((n, w)) > 0.5, rand(n, w), 0).astype(np.float32)
        feed = {"x": x, "c": rand(n)}
        for got, want in zip(compiled(feed), reference(model, feed)):
            np.testing.assert_array_equal(got, want.astype(got.dtype))
