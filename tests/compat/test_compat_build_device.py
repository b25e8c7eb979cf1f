"""The build times plugin tactics on its device (``Builder(logger, device=...)``), as TensorRT times
on the GPU: buffers come from that device's backend and ``enqueue`` gets a real stream there."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.backends.cpu import CpuBackend
from plugrt.builder.compile import build_plan
from plugrt.compat import installed

LOGGER = trt.Logger(trt.Logger.ERROR)


class TimedAdd(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    """y = x + 1 with two tactics; records what each build-time enqueue was given."""

    seen: list[tuple[int, int, list[int], list[int]]] = []  # (tactic, stream, inputs, outputs)

    def __init__(self) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.plugin_name, self.plugin_version, self.plugin_namespace, self.num_outputs = "TimedAdd", "1", "", 1
        self.tactic, self.phase = 0, trt.TensorRTPhase.BUILD

    def get_capability_interface(self, plugin_capability_type: Any) -> trt.IPluginCapability:
        return self

    def get_output_data_types(self, input_types: Any) -> list[Any]:
        return [input_types[0]]

    def get_output_shapes(self, inputs: Any, shape_inputs: Any, expr_builder: Any) -> list[Any]:
        return [trt.DimsExprs(inputs[0])]

    def supports_format_combination(self, pos: int, in_out: Any, num_inputs: int) -> bool:
        return bool(in_out[pos].desc.type == trt.float32)

    def get_valid_tactics(self) -> list[int]:
        return [1, 2]

    def set_tactic(self, tactic: int) -> None:
        self.tactic = tactic

    def on_shape_change(self, inputs: Any, outputs: Any) -> None:
        pass

    def configure_plugin(self, inputs: Any, outputs: Any) -> None:
        pass

    def enqueue(self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: int, stream: int) -> None:
        if self.phase == trt.TensorRTPhase.BUILD:
            TimedAdd.seen.append((self.tactic, stream, list(inputs), list(outputs)))
        x = trt.as_array(inputs[0], input_desc[0])
        y = trt.as_array(outputs[0], output_desc[0])
        np.add(x, 1, out=y)

    def attach_to_context(self, resource_context: Any) -> TimedAdd:
        return self.clone()

    def get_fields_to_serialize(self) -> trt.PluginFieldCollection:
        return trt.PluginFieldCollection([])

    def clone(self) -> TimedAdd:
        copy = TimedAdd()
        copy.__dict__.update(self.__dict__)
        return copy


class RecordingBackend(CpuBackend):
    """The CPU backend with a made-up stream handle, recording what the build asks of it."""

    def __init__(self) -> None:
        self.arenas: list[tuple[int, int]] = []
        self.synchronized: list[int] = []

    def allocate_arena(self, nbytes: int) -> tuple[np.ndarray, int]:
        owner, address = super().allocate_arena(nbytes)
        self.arenas.append((address, nbytes))
        return owner, address

    def create_stream(self) -> tuple[None, int]:
        return None, 4242

    def synchronize(self, stream: int) -> None:
        self.synchronized.append(stream)


def _network() -> tuple[Any, Any]:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    layer = network.add_plugin_v3([x], [], TimedAdd())
    network.mark_output(layer.get_output(0))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4), (2, 4), (8, 4))
    config.add_optimization_profile(profile)
    return network, config


def test_tactics_are_timed_with_the_build_devices_buffers_and_stream() -> None:
    TimedAdd.seen.clear()
    backend = RecordingBackend()
    network, config = _network()
    build_plan(network, config, LOGGER, backend)
    assert {tactic for tactic, *_ in TimedAdd.seen} == {1, 2}
    assert {stream for _, stream, _, _ in TimedAdd.seen} == {4242}
    assert set(backend.synchronized) == {4242}
    arenas = backend.arenas
    for _, _, inputs, outputs in TimedAdd.seen:
        for address in inputs + outputs:  # every pointer lies in a buffer the backend gave
            assert any(base <= address < base + size for base, size in arenas)


def test_cpu_builds_time_on_host_buffers_and_stream_zero() -> None:
    TimedAdd.seen.clear()
    network, config = _network()
    trt.Builder(LOGGER).build_serialized_network(network, config)
    assert {stream for _, stream, _, _ in TimedAdd.seen} == {0}


def test_builder_device_is_checked() -> None:
    with pytest.raises(trt.TypeMismatchError, match=r"unknown device 'tpu'.*'cpu', 'cuda'"):
        trt.Builder(LOGGER, device="tpu")


def test_builder_default_device_is_the_cpu() -> None:
    assert trt.Builder(LOGGER).device == "cpu"


def test_compat_cuda_install_makes_builder_and_runtime_default_to_cuda() -> None:
    import inspect

    with installed(device="cuda") as tensorrt:
        for name in ("Builder", "Runtime"):
            cls = getattr(tensorrt, name)
            assert issubclass(cls, getattr(trt, name)) and cls.__name__ == name
            assert inspect.signature(cls.__init__).parameters["device"].default == "cuda"
    with installed(device="cpu") as tensorrt:
        assert tensorrt.Builder is trt.Builder and tensorrt.Runtime is trt.Runtime
