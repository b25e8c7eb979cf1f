"""The ``stream-gpu`` check: a CuPy plugin must launch on the stream ``enqueue`` is given."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.examples import circ_pad_v2
from plugrt.testing import check_plugin

pytestmark = pytest.mark.gpu

RANGE = [((1, 1000), (4, 1000), (8, 1000))]
_SOURCE = r"""
extern "C" __global__ void stream_check_scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""
_KERNELS: dict[str, Any] = {}


def _device_array(cp: Any, pointer: int, n: int, owner: Any) -> Any:
    memory = cp.cuda.UnownedMemory(pointer, n * 4, owner)
    return cp.ndarray((n,), cp.float32, cp.cuda.MemoryPointer(memory, 0))


class CupyScale(trt.IPluginV2DynamicExt):
    """y = 3 x, written the TensorRT way: RawKernel on the raw pointers, on ``ExternalStream(stream)``."""

    NAME = "StreamCheckOnItsStream"

    def __init__(self) -> None:
        super().__init__()
        self.plugin_type, self.plugin_version = self.NAME, "1"
        self.streams: list[Any] = []

    def get_output_dimensions(self, index, inputs, builder):
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos, in_out, num_inputs):
        return in_out[pos].type == trt.float32 and in_out[pos].format == trt.TensorFormat.LINEAR

    def launch_stream(self, cp: Any, stream: int) -> Any:
        return cp.cuda.ExternalStream(stream)

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        import cupy as cp

        if "scale" not in _KERNELS:
            _KERNELS["scale"] = cp.RawKernel(_SOURCE, "stream_check_scale")
        n = int(np.prod(tuple(input_desc[0].dims)))
        x, y = _device_array(cp, inputs[0], n, self), _device_array(cp, outputs[0], n, self)
        launch = self.launch_stream(cp, stream)
        self.streams.append(launch)  # keeps a stream of its own alive until its work is done
        with launch:
            _KERNELS["scale"](((n + 255) // 256,), (256,), (x, y, np.float32(3.0), np.int32(n)))
        return 0

    def serialize(self) -> bytes:
        return b""

    def clone(self):
        return type(self)()


class OnDefaultStream(CupyScale):
    NAME = "StreamCheckOnDefaultStream"

    def launch_stream(self, cp: Any, stream: int) -> Any:
        return cp.cuda.Stream.null


class OnItsOwnStream(CupyScale):
    NAME = "StreamCheckOnItsOwnStream"

    def launch_stream(self, cp: Any, stream: int) -> Any:
        return cp.cuda.Stream(non_blocking=True)


class GpuOnly(CupyScale):
    """Refuses to run unless a CUDA engine runs it: the CPU engine cannot give a comparison."""

    NAME = "StreamCheckGpuOnly"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        if trt.active_device() != "cuda":
            raise RuntimeError("this plugin only runs on the GPU")
        return super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)


class HostOnly(CupyScale):
    """NumPy on host memory: works in the CPU engine only."""

    NAME = "StreamCheckHostOnly"

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        x = np.asarray(trt.as_array(inputs[0], input_desc[0]))
        np.multiply(x, 3.0, out=np.asarray(trt.as_array(outputs[0], output_desc[0])))
        return 0


class Creator(trt.IPluginCreator):
    def __init__(self, plugin_class: type[CupyScale]) -> None:
        super().__init__()
        self.plugin_class = plugin_class
        self.name, self.plugin_version = plugin_class.NAME, "1"
        self.field_names = trt.PluginFieldCollection()

    def create_plugin(self, name, fc):
        return self.plugin_class()

    def deserialize_plugin(self, name, data):
        return self.plugin_class()


def _stream_gpu(plugin_class: type[CupyScale], **options: Any) -> Any:
    report = check_plugin(Creator(plugin_class), {}, RANGE, checks=["stream-gpu"], **options)
    print(report)
    return report["stream-gpu"]


def test_plugin_on_its_stream_passes() -> None:
    result = _stream_gpu(CupyScale)
    assert result.passed, result.message
    assert "nothing was written before the held non-default stream ran" in result.message


@pytest.mark.parametrize("plugin_class", [OnDefaultStream, OnItsOwnStream], ids=["null-stream", "own-stream"])
def test_plugin_off_its_stream_fails(plugin_class: type[CupyScale]) -> None:
    result = _stream_gpu(plugin_class)
    assert result.failed, result.message
    assert "before the stream could run" in result.message
    assert "enqueue must launch on the `stream` it is given" in result.message
    assert "cp.cuda.ExternalStream(stream)" in result.message and "torch.cuda.ExternalStream" in result.message


def test_gpu_only_plugin_is_compared_with_the_reference() -> None:
    result = _stream_gpu(GpuOnly, reference=lambda x: 3 * x)
    assert result.passed, result.message
    assert "agree with the reference function" in result.message
    wrong = _stream_gpu(GpuOnly, reference=lambda x: 2 * x)
    assert wrong.failed and "disagree with the reference function" in wrong.message, wrong.message
    unchecked = _stream_gpu(GpuOnly)
    assert unchecked.passed and "a complete write of every output" in unchecked.message, unchecked.message


def test_host_only_plugin_is_skipped() -> None:
    result = _stream_gpu(HostOnly)
    assert result.status == "skip", result.message
    assert "cannot run in a CUDA engine" in result.message


def test_as_array_plugin_runs_on_the_engine_stream() -> None:
    pads = [1, 2]
    report = check_plugin(
        circ_pad_v2.register(),
        {"pads": pads},
        [((1, 3, 1), (2, 3, 4), (5, 3, 9))],
        checks=["stream-gpu"],
        reference=lambda x: np.pad(x, [(0, 0), (0, 0), (1, 2)], mode="wrap"),
    )
    print(report)
    assert report["stream-gpu"].passed, report["stream-gpu"].message
    assert "CPU engine" in report["stream-gpu"].message
