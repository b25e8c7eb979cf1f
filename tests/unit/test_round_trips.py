"""The ``round_trips`` pass: HALF widened to FLOAT by a cast, then reformatted back to HALF for a layer that runs
in HALF, is read as the HALF source (exact), and what it must leave alone."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.builder.fusion import DISABLE_ENV, PASS_NAMES

LOGGER = trt.Logger(trt.Logger.ERROR)


def _plan(source_type: trt.DataType, output_reads_wide: bool = False) -> bytes:
    """x (``source_type``) → Cast to FLOAT → |x| computed in HALF (a reformat FLOAT → HALF before it) → y."""
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", source_type, (4, 6))
    wide = network.add_cast(x, trt.float32)
    wide.name = "widen"
    absolute = network.add_unary(wide.get_output(0), trt.UnaryOperation.ABS)
    absolute.name = "abs"
    absolute.precision = trt.float16
    absolute.get_output(0).name = "y"
    network.mark_output(absolute.get_output(0))
    if output_reads_wide:
        doubled = network.add_elementwise(wide.get_output(0), wide.get_output(0), trt.ElementWiseOperation.SUM)
        doubled.get_output(0).name = "z"
        network.mark_output(doubled.get_output(0))
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    return bytes(builder.build_serialized_network(network, config))


def _run(plan: bytes, feeds: dict[str, np.ndarray]) -> tuple[list[str], dict[str, np.ndarray]]:
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    outputs = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            context.set_input_shape(name, feeds[name].shape)
            context.set_tensor_address(name, feeds[name].ctypes.data)
        else:
            outputs[name] = np.empty(tuple(context.get_tensor_shape(name)), engine.get_tensor_dtype(name).nptype())
            context.set_tensor_address(name, outputs[name].ctypes.data)
    assert context.execute_async_v3(0)
    return [layer.kind for layer in engine.plan.layers], outputs


def test_the_pass_is_named_and_first() -> None:
    assert PASS_NAMES[0] == "round_trips"


def test_a_half_round_trip_is_read_from_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.array(np.random.default_rng(0).normal(0, 100, (4, 6)), np.float16)
    kinds, got = _run(_plan(trt.float16), {"x": x})
    assert "reformat" not in kinds[: kinds.index("unary")]  # the unary reads x itself
    assert "cast" not in kinds  # the cast nobody reads any more is gone
    monkeypatch.setenv(DISABLE_ENV, "round_trips")
    plain_kinds, want = _run(_plan(trt.float16), {"x": x})
    assert plain_kinds.count("reformat") > kinds.count("reformat")
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["y"], np.abs(x).astype(np.float32))


def test_a_float_source_keeps_its_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """FLOAT → FLOAT → HALF rounds: the reformat stays."""
    kinds, _ = _run(_plan(trt.float32), {"x": np.ones((4, 6), np.float32)})
    assert "reformat" in kinds[: kinds.index("unary")]


def test_a_widened_tensor_read_elsewhere_keeps_its_cast(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.array(np.random.default_rng(1).normal(0, 3, (4, 6)), np.float16)
    kinds, got = _run(_plan(trt.float16, output_reads_wide=True), {"x": x})
    assert "cast" in kinds
    np.testing.assert_array_equal(got["z"], 2 * x.astype(np.float32))
    np.testing.assert_array_equal(got["y"], np.abs(x).astype(np.float32))


def test_the_widening_cast_goes_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only at dead-layer removal: the rules after the pass ask who reads the HALF source."""
    import copy

    from plugrt.builder.fusion import fuse_layers

    monkeypatch.setenv(DISABLE_ENV, "all")
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(_plan(trt.float16))
    plan = engine.plan
    layers = [copy.deepcopy(layer) for layer in plan.layers]
    others = set(PASS_NAMES) - {"round_trips"}
    out, *_ = fuse_layers(layers, list(plan.tensors), list(plan.io), dict(plan.weights), disabled=others)
    kinds = [layer.kind for layer in out]
    assert "cast" not in kinds and kinds.count("reformat") == [layer.kind for layer in plan.layers].count("reformat") - 1
