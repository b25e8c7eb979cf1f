"""Weights laid out as their products take them (``ops/products.rows_first``): the NumPy recurrent loops read a
constant ``W`` and ``R`` so, weights given at run time as given."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.ops import depthwise_numba, recurrent, recurrent_steps
from plugrt.ops.products import is_rows_first, rows_first

from testing_plugins import run


def test_rows_first_keeps_shape_and_values_and_makes_each_transpose_contiguous() -> None:
    w = np.arange(2 * 6 * 4, dtype=np.float32).reshape(2, 6, 4)
    ordered = rows_first(w)
    assert ordered.shape == w.shape and np.array_equal(ordered, w)
    assert all(ordered[d].T.flags.c_contiguous for d in range(2))
    assert not ordered.flags.writeable
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_array_equal(x @ ordered[1].T, x @ w[1].T)


def _lstm(cell: str, weights_as_inputs: bool) -> tuple[object, dict[str, np.ndarray]]:
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[cell]
    hidden, inputs = 5, 3
    rng = np.random.default_rng(1)
    weights = {
        "W": rng.normal(0, 0.4, (2, gates * hidden, inputs)).astype(np.float32),
        "R": rng.normal(0, 0.4, (2, gates * hidden, hidden)).astype(np.float32),
    }
    node = helper.make_node(cell, ["x", "W", "R"], ["Y"], hidden_size=hidden, direction="bidirectional")
    feeds = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2, inputs])]
    if weights_as_inputs:
        feeds += [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in weights.items()]
        initializers = []
    else:
        initializers = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    graph = helper.make_graph(
        [node], "rnn", feeds, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializers
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, weights


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("weights_as_inputs", [False, True])
def test_the_numpy_loop_reads_constant_weights_rows_first(
    cell: str, weights_as_inputs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    monkeypatch.setenv(depthwise_numba.ENV_SWITCH, "0")
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    bound = recurrent_steps.bound_cells

    def recording(spec, x, w, r, *rest):  # type: ignore[no-untyped-def]
        seen.append((w, r))
        return bound(spec, x, w, r, *rest)

    monkeypatch.setattr(recurrent, "bound_cells", recording)
    model, weights = _lstm(cell, weights_as_inputs)
    x = np.random.default_rng(2).normal(size=(4, 2, 3)).astype(np.float32)
    feeds = {"x": x, **(weights if weights_as_inputs else {})}
    got = plugrt.compile(model)(feeds)["Y"]
    monkeypatch.setattr(recurrent, "bound_cells", bound)
    assert seen
    for w, r in seen:
        ordered = all(w[d].T.flags.c_contiguous and r[d].T.flags.c_contiguous for d in range(2))
        assert ordered is not weights_as_inputs  # inputs are read as given: their contents change between calls
        np.testing.assert_array_equal(w, weights["W"])
        np.testing.assert_array_equal(r, weights["R"])
    other, _ = _lstm(cell, not weights_as_inputs)  # the same cell read the other way
    want = plugrt.compile(other)({"x": x, **({} if weights_as_inputs else weights)})["Y"]
    assert got.shape == (4, 2, 2, 5)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def _products() -> object:
    """Gemms by ``g``, ``w`` (its alpha folded into it) and ``s``, each taken transposed (transB)."""
    rng = np.random.default_rng(5)
    inits = {
        "g": rng.normal(size=(24, 16)).astype(np.float32),
        "w": rng.normal(size=(12, 24)).astype(np.float32),
        "s": rng.normal(size=(12, 12)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "g"], ["h"], transB=1),
        helper.make_node("Gemm", ["h", "w"], ["m"], transB=1, alpha=0.5),
        helper.make_node("Gemm", ["m", "s"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "products",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), inits


def test_numpys_products_hold_weights_they_take_transposed_rows_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU an engine lays out rows first each constant matrix that only NumPy's products read, all as
    ``[N, K]`` (OpenBLAS's product by a transposed operand is up to 7x slower at a few rows): the same values,
    held once (read in place, not copied into the arena), and a plan written with the original bytes."""
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    model, inits = _products()
    compiled = plugrt.compile(model, shapes={"x": ((1, 16), (4, 16), (8, 16))})
    x = np.random.default_rng(6).normal(size=(4, 16)).astype(np.float32)
    want = ((x @ inits["g"].T) @ inits["w"].T * 0.5) @ inits["s"].T
    np.testing.assert_allclose(compiled(x=x)["y"], want, rtol=1e-5, atol=1e-5)
    weights = compiled.engine.plan.weights
    ordered = {k for k, v in weights.items() if is_rows_first(v) and not v.flags.c_contiguous}
    assert compiled.engine.packed_weights == len(ordered) == 3
    scales = {"w": np.float32(0.5)}  # the builder folds the Gemm's alpha into its weight
    laid = {
        name
        for name, value in inits.items()
        if any(np.array_equal(weights[k], value * scales.get(name, np.float32(1))) for k in ordered)
    }
    assert laid == {"g", "w", "s"}
    data = compiled.serialize()
    loaded = plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(data)
    assert loaded.plan.to_bytes() == bytes(data)
    stored = plugrt.engine.plan.EnginePlan.from_bytes(data).weights
    assert all(stored[k].flags.c_contiguous and np.array_equal(stored[k], weights[k]) for k in ordered)


@pytest.mark.parametrize("also_read", [False, True])
def test_a_constant_taken_transposed_is_read_in_place_unless_another_layer_reads_it(
    also_read: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MatMul's constant taken transposed (``op1`` TRANSPOSE) is held rows first and read in place (not copied
    into the arena); where an elementwise layer reads the same constant it stays as it is."""
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    none, transpose = plugrt.MatrixOperation.NONE, plugrt.MatrixOperation.TRANSPOSE
    value = np.random.default_rng(8).normal(size=(1, 12, 10)).astype(np.float32)
    builder = plugrt.Builder(plugrt.Logger())
    network = builder.create_network(0)
    x = network.add_input("x", plugrt.float32, (1, -1, 10))
    w = network.add_constant((1, 12, 10), value).get_output(0)
    y = network.add_matrix_multiply(x, none, w, transpose).get_output(0)
    y.name = "y"
    network.mark_output(y)
    if also_read:
        v = network.add_input("v", plugrt.float32, (1, 12, 10))
        z = network.add_elementwise(w, v, plugrt.ElementWiseOperation.SUM).get_output(0)
        z.name = "z"
        network.mark_output(z)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 1, 10), (1, 4, 10), (1, 12, 10))
    config = builder.create_builder_config()
    config.add_optimization_profile(profile)
    engine = plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    assert engine.packed_weights == (0 if also_read else 1)
    context = engine.create_execution_context()
    xs = np.random.default_rng(9).normal(size=(1, 12, 10)).astype(np.float32)
    vs = np.ones((1, 12, 10), np.float32)
    outputs = run(context, {"x": xs, **({"v": vs} if also_read else {})})
    np.testing.assert_allclose(outputs["y"], xs @ value.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)
    if also_read:
        np.testing.assert_array_equal(outputs["z"], value + vs)
    executor = context._executor
    assert executor.weight_views and not any(np.shares_memory(v, executor.arena) for v in executor.weight_views.values())
    assert any(is_rows_first(v) and not v.flags.c_contiguous for v in executor.weight_views.values()) is not also_read


def test_numpys_product_is_timed_on_the_weight_laid_out_as_the_engine_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """With PyTorch's tactic timed against NumPy's, NumPy's product is timed on the rows-first weight where the
    engine would hold it so."""
    pytest.importorskip("torch")
    import plugrt.builder.tactics as tactics

    made: list[tuple[int, ...]] = []
    original = tactics.rows_first

    def recording(weight: np.ndarray) -> np.ndarray:
        made.append(tuple(weight.shape))
        return original(weight)

    monkeypatch.setattr(tactics, "rows_first", recording)
    monkeypatch.setenv("PLUGRT_TORCH", "1")  # timed, not forced
    model, inits = _products()
    plugrt.compile(model, shapes={"x": ((1, 16), (4, 16), (8, 16))})
    assert set(made) >= {inits["g"].shape, inits["w"].shape, inits["s"].shape}
