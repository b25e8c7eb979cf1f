"""The C heap keeps freed blocks once a CPU engine binds a channels-last PyTorch kernel (``ops/heap.py``): a large tensor comes
from the heap, not from fresh pages, and ``PLUGRT_KEEP_HEAP=0`` leaves glibc's thresholds alone."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

from plugrt.ops import heap, onednn


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _mapped_bytes() -> int:
    """Bytes glibc serves as mapped blocks now (``mallinfo2().hblkhd``); skips where that is not there."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        info = libc.mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc 2.33 or later")
    info.restype = _MallInfo2
    return int(info().hblkhd)


def test_large_blocks_come_from_the_heap_once_kept() -> None:
    if not heap.keep_freed_memory():
        pytest.skip("no glibc mallopt here")
    before = _mapped_bytes()
    block = np.empty(48 << 20, np.uint8)  # above glibc's own largest threshold (32 MiB)
    assert _mapped_bytes() - before < 1 << 20, "a 48 MiB block was mapped as fresh pages"
    del block


def test_the_switch_leaves_the_heap_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(heap._STATE, "kept", None)
    monkeypatch.setenv(heap.SWITCH, "0")
    monkeypatch.setattr(heap, "_set_thresholds", lambda: pytest.fail("mallopt called with PLUGRT_KEEP_HEAP=0"))
    assert heap.keep_freed_memory() is False
    assert heap.keep_freed_memory() is False  # decided once


def test_without_glibc_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(heap._STATE, "kept", None)
    monkeypatch.delenv(heap.SWITCH, raising=False)

    def missing(name: str | None) -> None:
        raise OSError(f"no library {name}")

    monkeypatch.setattr(heap.ctypes, "CDLL", missing)
    assert heap.keep_freed_memory() is False


def test_a_channels_last_kernel_keeps_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from onnx import TensorProto, helper, numpy_helper

    import plugrt

    calls: list[bool] = []
    monkeypatch.setattr("plugrt.ops.torch_cpu.keep_freed_memory", lambda: calls.append(True) or True)
    weight = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.ones((1, 4, 8, 8), np.float32)
    monkeypatch.setenv("PLUGRT_TORCH", "always")  # PyTorch's NCHW kernel: the heap as it is
    y = plugrt.compile(model, device="cpu")(x=x)["y"]
    assert not calls, "an NCHW PyTorch kernel changed the heap's thresholds"
    monkeypatch.setenv("PLUGRT_TORCH", "nhwc")  # the channels-last kernel: its results are handed over
    monkeypatch.setenv(onednn.ENV_SWITCH, "0")  # (PyTorch's kernel, not oneDNN's called directly)
    y = plugrt.compile(model, device="cpu")(x=x)["y"]
    assert calls, "binding a channels-last kernel on the CPU did not keep the heap"
    assert y[0, 0, 3, 3] == 36.0 and y[0, 0, 0, 0] == 16.0
    monkeypatch.delenv(onednn.ENV_SWITCH)
    if onednn.available():  # oneDNN's kernel writes the engine's buffers: nothing is handed over, the heap stays
        calls.clear()
        y = plugrt.compile(model, device="cpu")(x=x)["y"]
        assert not calls, "oneDNN's direct kernel changed the heap's thresholds"
        assert y[0, 0, 3, 3] == 36.0


def test_freed_memory_is_given_back_unless_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """``return_freed_memory`` trims the heap, except where the process keeps its freed blocks."""
    trims: list[int] = []
    monkeypatch.setattr(heap, "_TRIM", [lambda pad: trims.append(pad)])
    monkeypatch.setitem(heap._STATE, "kept", None)
    heap.return_freed_memory()
    assert trims == [0]
    monkeypatch.setitem(heap._STATE, "kept", True)
    heap.return_freed_memory()
    assert trims == [0]
