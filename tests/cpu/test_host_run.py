"""HostRun: the one driver that runs an engine over arrays (plugrt.compile, plugrt exec, the checker)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.engine.host_run import ArrayBuffer, HostRun
from plugrt.examples import circ_pad_v2, nonzero_v3

from testing_plugins import build, fields

LOGGER = trt.Logger(trt.Logger.ERROR)


def _pad_engine() -> trt.ICudaEngine:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    pad = network.add_plugin_v2([x], circ_pad_v2.register().create_plugin("pad", fields(pads=[1, 1])))
    pad.get_output(0).name = "y"
    network.mark_output(pad.get_output(0))
    return trt.Runtime(LOGGER).deserialize_cuda_engine(build(network, builder, [{"x": ((1, 4), (2, 4), (8, 4))}]))


def _pad(x: np.ndarray) -> np.ndarray:
    return np.pad(x, [(0, 0), (1, 1)], mode="wrap")


def test_owned_buffers_upload_run_and_results() -> None:
    run = HostRun(_pad_engine())
    assert (run.input_names, run.output_names) == (["x"], ["y"])
    run.set_shapes({"x": (3, 4)})
    assert run.shape("y") == (3, 6) and run.dtype("y") == np.float32 and run.data_dependent == []
    run.allocate()
    assert {n: type(b) for n, b in run.buffers.items()} == {"x": ArrayBuffer, "y": ArrayBuffer}
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    run.upload({"x": x})
    run.execute()
    np.testing.assert_array_equal(run.results()["y"], _pad(x))
    into = {"y": np.zeros((3, 6), np.float32)}
    assert run.results(into=into)["y"] is into["y"]
    np.testing.assert_array_equal(into["y"], _pad(x))


def test_arrays_bound_in_place() -> None:
    run = HostRun(_pad_engine())
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y = np.zeros((2, 6), np.float32)
    run.bind_arrays({"x": x, "y": y})
    run.execute()
    np.testing.assert_array_equal(y, _pad(x))  # written where the caller's array is
    assert run.output_arrays()["y"] is y


def test_a_buffer_factory_makes_every_buffer() -> None:
    made: list[tuple[tuple[int, ...], np.dtype]] = []
    engine = _pad_engine()

    def factory(shape: tuple[int, ...], dtype: np.dtype) -> ArrayBuffer:
        made.append((shape, dtype))
        return ArrayBuffer.empty(engine.backend, shape, dtype)

    run = HostRun(engine, factory)
    run.set_shapes({"x": (5, 4)})
    run.allocate()
    assert made == [((5, 4), np.dtype(np.float32)), ((5, 6), np.dtype(np.float32))]


def test_data_dependent_outputs_are_placed_by_an_allocator() -> None:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, -1))
    plugin = nonzero_v3.register().create_plugin("nz", trt.PluginFieldCollection(), trt.TensorRTPhase.BUILD)
    layer = network.add_plugin_v3([x], [], plugin)
    layer.get_output(0).name = "indices"
    network.mark_output(layer.get_output(0))
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(build(network, builder, [{"x": ((1, 1), (4, 4), (16, 16))}]))
    run = HostRun(engine)
    rng = np.random.default_rng(5)
    for shape in [(3, 5), (16, 16), (1, 1)]:
        x_val = (rng.random(shape) > 0.6).astype(np.float32)
        run.bind_arrays({"x": x_val})
        assert run.data_dependent == ["indices"]
        run.allocate(run.output_names)
        run.execute()
        np.testing.assert_array_equal(run.results()["indices"], np.argwhere(x_val))
        np.testing.assert_array_equal(run.output_arrays()["indices"], np.argwhere(x_val))
    assert "indices" not in run.buffers


def test_a_shape_outside_the_profile_names_the_input_and_the_range() -> None:
    run = HostRun(_pad_engine())
    with pytest.raises(
        trt.ShapeError,
        match=r"input 'x' has shape \(9, 4\), outside the engine's profile \(min \(1, 4\), max \(8, 4\)\)",
    ):
        run.set_shapes({"x": (9, 4)})


def test_output_arrays_need_array_buffers() -> None:
    run = HostRun(_pad_engine())
    run.set_shapes({"x": (2, 4)})
    with pytest.raises(trt.ExecutionError, match=r"output 'y' is bound to no buffer, not an array"):
        run.output_arrays()

    class Opaque:
        def __init__(self, inner: ArrayBuffer) -> None:
            self.ptr, self.nbytes, self.inner = inner.ptr, inner.nbytes, inner

        def upload(self, array: np.ndarray, stream: int = 0) -> None:
            self.inner.upload(array, stream)

        def download(self, out: np.ndarray, stream: int = 0) -> None:
            self.inner.download(out, stream)

    engine: Any = run.engine
    run.bind("y", Opaque(ArrayBuffer.empty(engine.backend, (2, 6), np.dtype(np.float32))))
    with pytest.raises(
        trt.ExecutionError, match=r"output 'y' is bound to a buffer of type Opaque, not an array; use results\(\)"
    ):
        run.output_arrays()


def test_a_run_is_freed_by_reference_count() -> None:
    """No reference cycle: the context (and its plugins) go when the last reference does, not at a collection."""
    run = HostRun(_pad_engine())
    run.set_shapes({"x": (2, 4)})
    run.allocate()
    run.execute()
    context = weakref.ref(run.context)
    gc.disable()
    try:
        del run
        assert context() is None
    finally:
        gc.enable()
