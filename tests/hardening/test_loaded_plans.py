"""Plans that load cannot hang or eat memory: layer rules are re-run at load, sizes are capped.

The fuzz test edits one header value of a real model's plan (SqueezeNet from
ONNX's light models, dynamic batch) at a time, keeps the checksums valid, and
asserts that every mutant either fails to load with a ``PlugrtError`` or runs
within a time and memory budget.
"""

from __future__ import annotations

import copy
import os
import random
import resource
import time
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.engine.plan_format import PlanContents, decode_plan, encode_plan

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
QUIET = trt.Logger(trt.Logger.INTERNAL_ERROR)


def build(model: onnx.ModelProto, shapes: dict[str, tuple[tuple[int, ...], ...]]) -> bytes:
    builder = trt.Builder(QUIET)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, QUIET)
    assert parser.parse(model.SerializeToString())
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in shapes.items():
        profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(profile)
    return bytes(builder.build_serialized_network(network, config))


def rewrite(plan: bytes, edit: Any) -> bytes:
    contents = decode_plan(plan)
    header = copy.deepcopy(contents.header)
    edit(header)
    return encode_plan(PlanContents(header, dict(contents.weights), list(contents.plugins)))


def load(data: bytes) -> trt.ICudaEngine:
    return trt.Runtime(QUIET).deserialize_cuda_engine(data)


def run(engine: trt.ICudaEngine, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    context = engine.create_execution_context()
    for name, array in inputs.items():
        assert context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, array.ctypes.data)
    outputs = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            outputs[name] = np.empty(shape, engine.get_tensor_dtype(name).nptype())
            context.set_tensor_address(name, outputs[name].ctypes.data)
    context.execute_async_v3(0)
    return outputs


# --- one Conv: parameters checked against weights and shape rules -----------------------------


@pytest.fixture(scope="module")
def conv_plan() -> bytes:
    kernel = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [kernel])
    return build(helper.make_model(graph), {"x": ((1, 3, 8, 8), (1, 3, 8, 8), (2, 3, 8, 8))})


def _conv(header: dict[str, Any]) -> dict[str, Any]:
    return next(layer for layer in header["layers"] if layer["kind"] == "convolution")


def _set_param(key: str, value: Any) -> Any:
    def edit(header: dict[str, Any]) -> None:
        _conv(header)["params"][key] = value
    return edit


@pytest.mark.parametrize("key, value, message", [
    ("kernel_shape", [3, 100000000], r"convolution.*(channels|kernel)"),
    ("pads", [1, 1, 10**8, 10**8], r"output 'y' axis 2 is 8 in the plan but its operator makes 100000007"),
    ("strides", [1, 0], r"convolution"),
    ("dilations", [10**8, 1], r"axis 2 is 8 in the plan but its operator makes -199999990"),
    ("num_output_maps", 4096, r"output 'y' axis 1 is 4 in the plan but its operator makes 4096"),
    ("auto_pad", "SIDEWAYS", r"layer 'Conv_y/convolution#\d+' \(convolution\) has bad parameters"),
    ("group", 3, r"convolution"),
])
def test_conv_parameters_that_disagree_with_the_plan_fail_at_load(conv_plan: bytes, key: str, value: Any,
                                                                  message: str) -> None:
    with pytest.raises(trt.PlanFormatError, match=message):
        load(rewrite(conv_plan, _set_param(key, value)))


def test_conv_output_shape_edited_along_with_pads_is_capped(conv_plan: bytes) -> None:
    """Editing the recorded shape too moves the problem to the allocation limit, refused before allocating."""
    def edit(header: dict[str, Any]) -> None:
        _conv(header)["params"]["pads"] = [1, 1, 10**5, 10**5]
        output = header["tensors"][_conv(header)["outputs"][0]]
        output["shape"][2] = output["shape"][3] = 8 + 10**5 - 1
        header["io_shapes"][output["name"]][2:] = output["shape"][2:]
    with pytest.raises(trt.AllocationLimitError, match=r"tensor 'y' at profile 0's largest shapes needs \d+ bytes"):
        load(rewrite(conv_plan, edit))


def test_unedited_conv_plan_still_runs(conv_plan: bytes) -> None:
    x = np.ones((2, 3, 8, 8), np.float32)
    y = run(load(conv_plan), {"x": x})["y"]
    assert y.shape == (2, 4, 8, 8) and y[0, 0, 4, 4] == 27.0 and y[0, 0, 0, 0] == 12.0


def test_huge_arena_in_a_plan_is_refused_at_load(conv_plan: bytes) -> None:
    def edit(header: dict[str, Any]) -> None:
        header["profiles"][0]["arena_size"] = 1 << 44
    with pytest.raises(trt.AllocationLimitError, match=r"activation arena of profile 0 needs 17592186044416 bytes"):
        load(rewrite(conv_plan, edit))


# --- the fuzz test on a real model ----------------------------------------------------------


@pytest.fixture(scope="module")
def squeezenet() -> tuple[bytes, np.ndarray]:
    path = os.path.join(LIGHT, "light_squeezenet.onnx")
    if not os.path.exists(path):
        pytest.skip("this onnx install has no light_squeezenet.onnx")
    model = onnx.load(path)
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in ("data_0", model.graph.output[0].name):
            value.type.tensor_type.shape.dim[0].dim_param = "N"
        if value.name == "data_0":  # the network ends in a global pool: 64x64 images keep the test fast
            value.type.tensor_type.shape.dim[2].dim_value = value.type.tensor_type.shape.dim[3].dim_value = 64
    plan = build(model, {"data_0": ((1, 3, 64, 64), (1, 3, 64, 64), (2, 3, 64, 64))})
    x = np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)
    return plan, x


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for key, sub in value.items() for p in _leaves(sub, (*path, key))]
    if isinstance(value, list) and value:
        return [p for i, sub in enumerate(value) for p in _leaves(sub, (*path, i))]
    return [path]


JUNK: list[Any] = [-1, 0, 1, 2, 7, 10**4, 10**8, 2**62, "", "x", None, [], {}, 1.5, True, [1], ["sym", "data_0[0]"],
                   ["PROD", ["sym", "data_0[0]"], 100000], "FLOAT", "HALF", "internal", "NOTSET", "SAME_UPPER"]


def _mutant_value(rng: random.Random, old: Any) -> Any:
    if isinstance(old, int) and not isinstance(old, bool) and rng.random() < 0.5:
        return rng.choice([old * 1000, old + 1, -old, old * 10**6, old // 2])
    return copy.deepcopy(rng.choice(JUNK))


def test_squeezenet_mutants_load_and_fail_cleanly_or_run_within_budget(squeezenet: tuple[bytes, np.ndarray]) -> None:
    """120 one-value edits (most in layer parameters): each raises PlugrtError, or loads and runs batch 1
    within a CPU-time budget (10x the unedited plan's, at least 1 s) and a memory budget."""
    plan, x = squeezenet
    base = decode_plan(plan)
    paths = _leaves(base.header)
    params = [p for p in paths if p[0] == "layers" and p[2] == "params"]  # where a builder's checks matter most
    rng = random.Random(11)
    previous = trt.get_allocation_limit()
    trt.set_allocation_limit(256 << 20)  # the budget: no tensor and no arena above 256 MiB
    start = time.process_time()
    for _ in range(3):
        run(load(plan), {"data_0": x})
    budget = max(1.0, 10 * (time.process_time() - start) / 3)  # CPU time: other processes' load does not count
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    escaped: dict[str, str] = {}
    slow: list[str] = []
    loaded = 0
    try:
        for _ in range(120):
            header = copy.deepcopy(base.header)
            path = rng.choice(params if rng.random() < 0.6 else paths)
            node: Any = header
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = _mutant_value(rng, node[path[-1]])
            try:
                data = encode_plan(PlanContents(header, base.weights, base.plugins))
            except trt.SerializationError:
                continue
            start = time.process_time()
            try:
                engine = load(data)
                loaded += 1
                run(engine, {"data_0": x})
            except trt.PlugrtError:
                pass
            except AssertionError:  # set_input_shape refused: the profile was edited
                pass
            except Exception as exc:
                escaped.setdefault(type(exc).__name__, f"{path}: {exc}")
            spent = time.process_time() - start
            if spent > budget:
                slow.append(f"{path} = {node[path[-1]]!r}: {spent:.2f} s of CPU (budget {budget:.2f} s)")
    finally:
        trt.set_allocation_limit(previous)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert not escaped, escaped
    assert not slow, slow
    assert grown_mib < 1024, f"peak memory grew by {grown_mib:.0f} MiB"
    assert loaded > 10  # harmless edits (names, unused values) still load


# --- allocation limits at build ---------------------------------------------------------------


def _model(nodes: list[Any], initializers: list[Any]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


_SIZE = numpy_helper.from_array(np.array([10**6, 10**6], np.int64), "s")
HUGE = {
    "Expand": (_model([helper.make_node("Expand", ["x", "s"], ["y"])], [_SIZE]), "y", 4 * 10**12),
    "Tile": (_model([helper.make_node("Tile", ["x", "s"], ["y"])], [_SIZE]), "y", 4 * 10**12),
    "Pad": (_model([helper.make_node("Pad", ["x", "p"], ["y"])],
                   [numpy_helper.from_array(np.array([0, 0, 10**6, 10**6], np.int64), "p")]), "y", 4 * (10**6 + 1) ** 2),
    "Resize": (_model([helper.make_node("Resize", ["x", "", "r"], ["y"])],
                      [numpy_helper.from_array(np.array([1e6, 1e6], np.float32), "r")]), "y", 4 * 10**12),
    "ConstantOfShape": (_model([helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("Add", ["x", "c"], ["y"])],
                               [_SIZE]), "c", 4 * 10**12),
}


@pytest.mark.parametrize("op", sorted(HUGE))
def test_huge_tensors_are_refused_at_build_naming_tensor_and_size(op: str) -> None:
    model, tensor, nbytes = HUGE[op]
    with pytest.raises(trt.AllocationLimitError, match=rf"tensor '{tensor}' at profile 0's largest shapes needs {nbytes} bytes"):
        trt.compile(model)({"x": np.ones((1, 1), np.float32)})


def test_allocation_limit_is_configurable() -> None:
    model = _model([helper.make_node("Expand", ["x", "s"], ["y"])],
                   [numpy_helper.from_array(np.array([512, 1024], np.int64), "s")])  # 2 MiB output
    previous = trt.get_allocation_limit()
    try:
        trt.set_allocation_limit(1 << 20)
        with pytest.raises(trt.AllocationLimitError, match=r"'y'.*2097152 bytes.*limit of 1048576 bytes"):
            trt.compile(model)({"x": np.ones((1, 1), np.float32)})
        trt.set_allocation_limit(4 << 20)
        assert trt.compile(model)({"x": np.full((1, 1), 2, np.float32)})["y"].shape == (512, 1024)
    finally:
        trt.set_allocation_limit(previous)
    assert isinstance(trt.AllocationLimitError("x"), MemoryError)


@pytest.mark.parametrize("value", [0, -5, 1.5, "1G", True, None])
def test_set_allocation_limit_rejects_non_positive_ints(value: Any) -> None:
    with pytest.raises(trt.TypeMismatchError, match=r"set_allocation_limit takes a positive int of bytes, got"):
        trt.set_allocation_limit(value)
