"""The CNN ops on the GPU (CuPy), checked against the CPU engine and the stored outputs.

ONNX's node cases and the PyTorch-exported cases of the CNN ops, the light
models, HALF (and a few integer) variants of each op, a network whose shapes
change between runs, a CUDA graph replay, and that the tables and weights the
operators keep on the device are copied there once, not per run.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, version_converter

import plugrt.onnx.backend as backend
import plugrt.ops.base as ops_base
from plugrt.onnx.compile import compile as compile_model

from gpu_helpers import run_plan

# The CNN harness and case lists live next to the CPU tests (pytest puts that folder on the path
# when it collects them; this module may be collected alone).
CNN_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "onnx_cnn")
if CNN_TESTS not in sys.path:
    sys.path.insert(0, CNN_TESTS)

from cnn_harness import node_model, random, tolerance  # noqa: E402
from test_cnn_light_models import LIGHT, MODELS, _runner_inputs  # noqa: E402
from test_cnn_node_suite import CONVERTER_KEEPS_OLD_SLOPE, MODULES, SLOW, _cases, _pytorch_cases  # noqa: E402

pytestmark = pytest.mark.gpu

Shapes = dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], device: str, shapes: Shapes | None = None) -> list:
    """Outputs of ``model`` built for ``device`` (host arrays in and out), in graph output order."""
    results = compile_model(model, device=device, shapes=shapes)(feeds)
    return [results[o.name] for o in model.graph.output]


def _mismatch(got: Sequence[Any], want: Sequence[Any], atol: float | None = None) -> str:
    """'' when the GPU outputs ``got`` match the CPU outputs ``want``, else what differs.

    FLOAT within rtol 1e-4 / atol 1e-5, HALF within 1e-2 / 1e-2; integers exactly (or within ``atol``).
    """
    for index, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {index}: {g.dtype}{list(g.shape)} on the GPU, {w.dtype}{list(w.shape)} on the CPU"
        tol = tolerance(w.dtype) if w.dtype.kind == "f" else {"rtol": 0.0, "atol": atol or 0.0}
        if atol is not None:
            tol["atol"] = atol
        try:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), **tol)
        except AssertionError as exc:
            return f"output {index}: {exc}"
    return ""


def _check_against_cpu(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], shapes: Shapes | None = None, atol: float | None = None
) -> None:
    problem = _mismatch(_run(model, feeds, "cuda", shapes), _run(model, feeds, "cpu", shapes), atol)
    assert not problem, problem


# --- ONNX's node cases and the PyTorch-exported cases --------------------------------------------
@pytest.mark.parametrize("module", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MODULES])
def test_onnx_node_cases_on_the_gpu_match_the_cpu(module: str) -> None:
    cases = _cases(module)
    assert cases, f"no node cases found for {module}"
    failures, compared = [], 0
    for case in cases:
        inputs = [np.asarray(a) for a in case.data_sets[0][0]]
        try:
            want = backend.prepare(case.model).run(inputs)
        except Exception:
            continue  # the CPU engine does not run it either; the CPU suite reports that
        try:
            got = backend.prepare(case.model, "CUDA").run(inputs)
        except Exception as exc:
            failures.append(f"{case.name}: {type(exc).__name__}: {exc}")
            continue
        compared += 1
        problem = _mismatch(got, want)
        if problem:
            failures.append(f"{case.name}: {problem}")
    assert compared, f"the CPU engine ran none of the {len(cases)} {module} cases"
    assert not failures, f"{len(failures)} of {len(cases)} cases differ on the GPU:\n" + "\n".join(failures)


@pytest.mark.parametrize("folder", _pytorch_cases(), ids=os.path.basename)
def test_pytorch_exported_models_on_the_gpu_match_the_cpu(folder: str) -> None:
    if os.path.basename(folder) in CONVERTER_KEEPS_OLD_SLOPE:
        pytest.skip("the opset 6 to 11 conversion gives a PRelu slope that does not broadcast (as on the CPU)")
    model = onnx.load(os.path.join(folder, "model.onnx"))
    if model.opset_import[0].version < 7:
        model = version_converter.convert_version(model, 11)
    data = os.path.join(folder, "test_data_set_0")
    inputs = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    want = backend.prepare(model).run(inputs)
    got = backend.prepare(model, "CUDA").run(inputs)
    problem = _mismatch(got, want)
    assert not problem, problem


@pytest.mark.slow
@pytest.mark.parametrize("name, rtol", MODELS, ids=[m for m, _ in MODELS])
def test_light_model_on_the_gpu_gives_the_stored_output(name: str, rtol: float) -> None:
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"this onnx install has no {os.path.basename(path)}")
    model = onnx.load(path)
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    outputs = backend.prepare(model, "CUDA").run(_runner_inputs(model))
    assert outputs[0].shape == expected.shape
    np.testing.assert_allclose(outputs[0], expected, rtol=rtol, atol=1e-7)


# --- HALF and integer variants, and paths the node cases do not take ------------------------------
H = np.float16
NO_ROI = np.zeros(0, np.float32)


def _resize(x: np.ndarray, scales: Any = None, sizes: Any = None, roi: Any = None, **attrs: Any) -> tuple:
    inputs = {
        "x": x,
        "roi": NO_ROI if roi is None else np.asarray(roi, np.float32),
        "scales": None if scales is None else np.asarray(scales, np.float32),
        "sizes": None if sizes is None else np.asarray(sizes, np.int64),
    }
    return node_model("Resize", inputs, initializers=("roi", "scales", "sizes"), opset=19, **attrs)


def _batch_norm(dtype: Any, constant: bool) -> tuple:
    inputs = {
        "x": random((2, 4, 3, 5), dtype),
        "scale": random((4,), dtype),
        "bias": random((4,), dtype),
        "mean": random((4,), dtype),
        "var": random((4,), dtype, 0.5, 2.0),
    }
    inits = ("scale", "bias", "mean", "var") if constant else ()
    return node_model("BatchNormalization", inputs, initializers=inits, epsilon=1e-3)


CONV_ATTRS = {"pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2]}
POOL_ATTRS = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}


def _variants() -> dict[str, tuple[Any, ...]]:
    """name -> (model, feeds) or (model, feeds, atol for integer outputs)."""
    x4 = random((2, 4, 9, 10), H)
    cases: dict[str, tuple[Any, ...]] = {
        # convolution and transposed convolution
        "conv_half": node_model(
            "Conv", {"x": x4, "w": random((6, 4, 3, 2), H), "b": random((6,), H)}, initializers=("w", "b"), **CONV_ATTRS
        ),
        "conv_half_depthwise": node_model(
            "Conv",
            {"x": random((2, 5, 9, 7), H), "w": random((5, 1, 3, 3), H), "b": random((5,), H)},
            initializers=("w", "b"),
            group=5,
            pads=[1, 1, 1, 1],
            strides=[2, 2],
        ),
        "conv_half_pointwise": node_model(
            "Conv", {"x": random((2, 8, 5, 5), H), "w": random((3, 8, 1, 1), H)}, initializers=("w",)
        ),
        "conv_half_run_time_kernel_and_bias": node_model(
            "Conv", {"x": x4, "w": random((6, 2, 3, 3), H), "b": random((6,), H)}, group=2, pads=[1, 1, 1, 1]
        ),
        "conv_3d": node_model(
            "Conv",
            {"x": random((1, 2, 5, 6, 4)), "w": random((3, 2, 2, 3, 2)), "b": random((3,))},
            initializers=("w", "b"),
            pads=[1, 0, 1, 0, 1, 1],
            dilations=[2, 1, 1],
        ),
        "conv_uniform_kernel": node_model(
            "Conv",
            {"x": random((1, 3, 6, 6)), "w": np.full((4, 3, 3, 3), 0.25, np.float32)},
            initializers=("w",),
            pads=[1, 1, 1, 1],
        ),
        "conv_transpose_half": node_model(
            "ConvTranspose",
            {"x": random((2, 4, 4, 5), H), "w": random((4, 3, 3, 2), H), "b": random((3,), H)},
            initializers=("w", "b"),
            strides=[2, 3],
            pads=[1, 0, 0, 1],
            dilations=[1, 2],
            output_padding=[1, 1],
        ),
        "conv_transpose_run_time_kernel": node_model(
            "ConvTranspose", {"x": random((1, 4, 3, 3)), "w": random((4, 2, 3, 3))}, group=2, strides=[2, 2]
        ),
        "conv_transpose_half_run_time_kernel": node_model(
            "ConvTranspose",
            {"x": random((1, 2, 5, 5), H), "w": random((2, 3, 3, 3), H)},
            output_shape=[10, 8],
            strides=[2, 2],
        ),
        "gemm_half": node_model(
            "Gemm",
            {"a": random((3, 6), H), "b": random((4, 6), H), "c": random((4,), H)},
            initializers=("b", "c"),
            transB=1,
            alpha=0.5,
            beta=2.0,
        ),
        "gemm_half_run_time": node_model(
            "Gemm", {"a": random((6, 3), H), "b": random((6, 4), H), "c": random((3, 1), H)}, transA=1, beta=0.25
        ),
        # pooling
        "max_pool_half": node_model("MaxPool", {"x": random((2, 3, 7, 8), H)}, **POOL_ATTRS),
        "max_pool_int8": node_model("MaxPool", {"x": random((1, 2, 6, 7), np.int8, -100, 100)}, **POOL_ATTRS),
        "max_pool_uint8": node_model("MaxPool", {"x": random((1, 2, 6, 7), np.uint8, 0, 255)}, **POOL_ATTRS),
        "max_pool_half_indices": node_model(
            "MaxPool", {"x": random((2, 3, 7, 8), H)}, ("y", "i"), output_types=[H, np.int64], **POOL_ATTRS
        ),
        "max_pool_indices_column_major": node_model(
            "MaxPool",
            {"x": random((2, 3, 7, 8))},
            ("y", "i"),
            output_types=[np.float32, np.int64],
            storage_order=1,
            **POOL_ATTRS,
        ),
        "average_pool_half": node_model("AveragePool", {"x": random((2, 3, 7, 8), H)}, **POOL_ATTRS),
        "average_pool_half_ceil_count_pad": node_model(
            "AveragePool",
            {"x": random((1, 2, 7, 7), H)},
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            ceil_mode=1,
            count_include_pad=1,
        ),
        "lp_pool_half": node_model("LpPool", {"x": random((2, 3, 7, 8), H)}, p=3, **POOL_ATTRS),
        "lp_pool_half_p2": node_model("LpPool", {"x": random((2, 3, 7, 8), H)}, **POOL_ATTRS),
        "global_max_pool_half": node_model("GlobalMaxPool", {"x": random((2, 3, 4, 5), H)}),
        "global_average_pool_half": node_model("GlobalAveragePool", {"x": random((2, 3, 4, 5), H)}),
        "global_lp_pool_half": node_model("GlobalLpPool", {"x": random((2, 3, 4, 5), H)}),
        # resize
        "resize_half_nearest": _resize(random((1, 2, 5, 6), H), [1, 1, 2.0, 1.5], mode="nearest"),
        "resize_half_linear": _resize(random((1, 2, 5, 6), H), [1, 1, 0.6, 1.5], mode="linear"),
        "resize_half_cubic": _resize(random((1, 2, 5, 6), H), [1, 1, 1.7, 3.0], mode="cubic"),
        "resize_half_cubic_antialias": _resize(random((1, 2, 10, 9), H), [1, 1, 0.3, 0.6], mode="cubic", antialias=1),
        "resize_half_tf_crop_and_resize": _resize(
            random((1, 2, 5, 6), H),
            sizes=[1, 2, 7, 5],
            roi=[0, 0, 0.4, -0.2, 1, 1, 1.3, 0.8],
            mode="linear",
            coordinate_transformation_mode="tf_crop_and_resize",
            extrapolation_value=10.0,
        ),
        "resize_uint8_linear": (*_resize(random((1, 2, 4, 5), np.uint8, 0, 200), [1, 1, 2.0, 1.5], mode="linear"), 1),
        "resize_axes_keep_aspect_ratio": _resize(
            random((1, 2, 6, 8)), sizes=[5, 3], mode="linear", axes=[3, 2], keep_aspect_ratio_policy="not_larger"
        ),
        # normalization
        "batch_norm_half": _batch_norm(H, constant=True),
        "batch_norm_half_run_time_statistics": _batch_norm(H, constant=False),
        "batch_norm_training_mode": node_model(
            "BatchNormalization",
            {
                "x": random((3, 4, 2, 5)),
                "scale": random((4,)),
                "bias": random((4,)),
                "mean": random((4,)),
                "var": random((4,), np.float32, 0.5, 2.0),
            },
            ("y", "running_mean", "running_var"),
            training_mode=1,
            momentum=0.8,
        ),
        "instance_norm_half": node_model(
            "InstanceNormalization",
            {"x": random((2, 3, 4, 5), H), "s": random((3,), H), "b": random((3,), H)},
            initializers=("s", "b"),
        ),
        "layer_norm_half": node_model(
            "LayerNormalization",
            {"x": random((2, 3, 8), H), "s": random((8,), H), "b": random((8,), H)},
            initializers=("s", "b"),
        ),
        "layer_norm_stashed_statistics": node_model(
            "LayerNormalization",
            {"x": random((2, 3, 4)), "s": random((3, 4)), "b": random((3, 4))},
            ("y", "mean", "inv_std"),
            initializers=("s", "b"),
            output_types=[np.float32] * 3,
            axis=1,
        ),
        "group_norm_half_per_channel": node_model(
            "GroupNormalization",
            {"x": random((2, 6, 3, 3), H), "s": random((6,), H), "b": random((6,), H)},
            initializers=("s", "b"),
            num_groups=3,
        ),
        "group_norm_per_group": node_model(
            "GroupNormalization",
            {"x": random((2, 6, 3, 3)), "s": random((3,)), "b": random((3,))},
            initializers=("s", "b"),
            num_groups=3,
            opset=18,
        ),
        "lrn_half": node_model("LRN", {"x": random((1, 6, 3, 3), H)}, size=3),
        "lrn_beta": node_model("LRN", {"x": random((2, 5, 3, 4))}, size=4, beta=0.6, alpha=1e-3, bias=2.0),
        # PRelu and Pad
        "prelu_half_constant_slope": node_model(
            "PRelu", {"x": random((2, 3, 4), H), "slope": random((3, 1), H)}, initializers=("slope",)
        ),
        "prelu_half_run_time_slope": node_model("PRelu", {"x": random((2, 3), H), "slope": random((3,), H)}),
        "prelu_int32": node_model(
            "PRelu", {"x": random((2, 3), np.int32, -5, 5), "slope": random((3,), np.int32, -3, 3)}
        ),
    }
    pads = np.array([0, 1, 2, 0, 0, 2, 1, 1], np.int64)
    for mode in ("constant", "reflect", "edge", "wrap"):
        cases[f"pad_half_{mode}"] = node_model(
            "Pad", {"x": random((1, 2, 4, 5), H), "pads": pads}, initializers=("pads",), mode=mode
        )
    cases["pad_run_time_value"] = node_model(
        "Pad",
        {"x": random((2, 3, 4)), "pads": np.array([0, 1, -1, 1, 0, 2], np.int64), "value": np.array(2.5, np.float32)},
        initializers=("pads",),
    )
    return cases


VARIANTS = _variants()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_on_the_gpu_matches_the_cpu(name: str) -> None:
    model, feeds, *atol = VARIANTS[name]
    _check_against_cpu(model, feeds, atol=atol[0] if atol else None)


def test_pads_computed_from_shapes_on_the_gpu_match_the_cpu() -> None:
    """Pads from the input's shape reach the kernel as a run-time input (read back from the device)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Concat", ["begins", "s"], ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([0, 1], np.int64), "begins")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    shapes: Shapes = {"x": ((2, 1), (2, 4), (2, 9))}
    gpu, cpu = compile_model(model, device="cuda", shapes=shapes), compile_model(model, shapes=shapes)
    for width in (4, 7, 1):
        feeds = {"x": random((2, width))}
        got, want = gpu(feeds)["y"], cpu(feeds)["y"]
        assert got.shape == want.shape == (4, 2 * width + 1)
        np.testing.assert_array_equal(got, want)


# --- shapes that change between runs --------------------------------------------------------------
def _network(dynamic: bool) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv, BatchNormalization, Relu, MaxPool (with indices), InstanceNormalization, Resize, Pad, LRN,
    PRelu, AveragePool and ConvTranspose in a chain; with ``dynamic`` the batch and spatial dims are free."""
    weights = {
        "w": random((6, 3, 3, 3)),
        "b": random((6,)),
        "bn_s": random((6,)),
        "bn_b": random((6,)),
        "bn_m": random((6,)),
        "bn_v": random((6,), np.float32, 0.5, 2.0),
        "in_s": random((6,)),
        "in_b": random((6,)),
        "scales": np.array([1, 1, 1.5, 2.0], np.float32),
        "pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64),
        "slope": random((6, 1, 1)),
        "wt": random((6, 2, 3, 3)),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("InstanceNormalization", ["p", "in_s", "in_b"], ["q"]),
        helper.make_node("Resize", ["q", "", "scales"], ["z"], mode="linear"),
        helper.make_node("Pad", ["z", "pads"], ["padded"], mode="reflect"),
        helper.make_node("LRN", ["padded"], ["l"], size=3),
        helper.make_node("PRelu", ["l", "slope"], ["s"]),
        helper.make_node("AveragePool", ["s"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["a", "wt"], ["y"], strides=[2, 2]),
    ]
    shape: list[Any] = ["n", 3, "h", "w"] if dynamic else [2, 3, 8, 9]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [
            helper.make_tensor_value_info(name, elem, None)
            for name, elem in (("y", TensorProto.FLOAT), ("i", TensorProto.INT64))
        ],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    return model, {"x": random((2, 3, 8, 9))}


def test_shapes_changing_between_runs_on_the_gpu_match_the_cpu() -> None:
    model, _ = _network(dynamic=True)
    shapes: Shapes = {"x": ((1, 3, 4, 4), (2, 3, 8, 9), (3, 3, 16, 16))}
    gpu, cpu = compile_model(model, device="cuda", shapes=shapes), compile_model(model, shapes=shapes)
    for shape in [(2, 3, 8, 9), (1, 3, 5, 7), (3, 3, 16, 15), (2, 3, 8, 9)]:
        feeds = {"x": random(shape)}
        got, want = gpu(feeds), cpu(feeds)
        problem = _mismatch([got["y"], got["i"]], [want["y"], want["i"]])
        assert not problem, f"input shape {shape}: {problem}"


def test_cuda_graph_replay_matches_the_eager_run() -> None:
    pytest.importorskip("torch")  # without PyTorch, CuPy's matrix products cannot be captured
    model, feeds = _network(dynamic=False)
    plan = compile_model(model, device="cuda").serialize()
    eager = run_plan(plan, "cuda", feeds)
    replayed = run_plan(plan, "cuda", feeds, graph=True)
    cpu = run_plan(plan, "cpu", feeds)
    for name in eager:
        np.testing.assert_allclose(replayed[name], eager[name], rtol=1e-6, atol=1e-6, err_msg=name)
    problem = _mismatch([eager["y"], eager["i"]], [cpu["y"], cpu["i"]])
    assert not problem, problem


def test_tables_and_weights_are_copied_to_the_device_once(monkeypatch: pytest.MonkeyPatch) -> None:
    copies: list[Any] = []
    original = ops_base._to_module

    def counting(value: Any, xp: Any) -> Any:
        copies.append(value)
        return original(value, xp)

    monkeypatch.setattr(ops_base, "_to_module", counting)
    model, feeds = _network(dynamic=False)
    compiled = compile_model(model, device="cuda")
    first = compiled(feeds)
    assert copies, "the first run copies the weights and tables to the device"
    copies.clear()
    second = compiled(feeds)
    assert not copies, f"a second run copied {len(copies)} arrays to the device again"
    for name in first:
        np.testing.assert_array_equal(second[name], first[name], err_msg=name)
