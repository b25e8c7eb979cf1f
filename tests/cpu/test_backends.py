"""The backend boundary: selection by name, views of addresses, streams and graph capture."""

from __future__ import annotations

import gc
import importlib.util
import mmap
import os
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.backends.base import ALIGNMENT, Backend
from plugrt.backends.cpu import HUGE_PAGES_UP_TO, CpuBackend, zeroed_pages
from plugrt.backends.registry import (
    DEVICES,
    active_backend,
    backend_class,
    backend_for,
    check_device,
    get_backend,
    using_backend,
)
from plugrt.plugins._base import host_buffers, on_gpu, plugin_arrays
from plugrt.plugins._workspace import WorkspaceLayout

LOGGER = trt.Logger(trt.Logger.ERROR)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_cuda_device_without_cupy_says_what_to_install() -> None:
    with pytest.raises(trt.MissingBackendError, match=r"pip install 'plugrt\[cuda\]'"):
        trt.Runtime(trt.Logger(trt.Logger.ERROR), device="cuda")


def test_unknown_device_is_rejected() -> None:
    with pytest.raises(trt.TypeMismatchError, match="unknown device 'tpu'"):
        trt.Runtime(trt.Logger(trt.Logger.ERROR), device="tpu")


# --- finding backends ----------------------------------------------------------------------
def test_backends_are_found_by_name_once() -> None:
    cpu = get_backend("cpu")
    assert isinstance(cpu, Backend) and cpu is get_backend("cpu") and cpu.name == "cpu" and cpu.xp is np
    assert cpu.host_memory and not cpu.gpu and cpu.ALIGNMENT == ALIGNMENT == 256
    assert backend_for(np) is cpu
    assert backend_class("cuda").gpu and not backend_class("cuda").host_memory  # known without CuPy
    assert DEVICES == ("cpu", "cuda")


def test_unknown_device_class_and_array_module_are_rejected() -> None:
    with pytest.raises(trt.TypeMismatchError, match=r"unknown device 'tpu'; choose one of \('cpu', 'cuda'\)"):
        backend_class("tpu")
    with pytest.raises(trt.TypeMismatchError, match="no backend has the array module 'math'"):
        import math

        backend_for(math)


def test_check_device_names_the_caller_and_the_value() -> None:
    assert check_device("cuda", "compile") == "cuda"
    with pytest.raises(trt.TypeMismatchError, match="compile: device must be 'cpu' or 'cuda', got 'gpu0'"):
        check_device("gpu0", "compile")


def test_the_active_backend_is_the_cpu_unless_one_is_made_active() -> None:
    other = CpuBackend()
    assert active_backend() is get_backend("cpu") and trt.active_device() == "cpu"
    with using_backend(other):
        assert active_backend() is other
    assert active_backend() is get_backend("cpu")


# --- views ---------------------------------------------------------------------------------
def test_view_of_a_shape_and_of_a_descriptor() -> None:
    cpu = get_backend("cpu")
    x = np.arange(8, dtype=np.float32)
    view = cpu.view(x.ctypes.data, (2, 4), np.float32)
    view[1, 3] = 70
    assert x[7] == 70 and cpu.address_of(view) == x.ctypes.data
    desc = trt.PluginTensorDesc(trt.Dims((2, 4)), trt.float32)
    assert cpu.view(x.ctypes.data, desc).shape == (2, 4)
    assert cpu.view(x.ctypes.data, desc, trt.int32).dtype == np.int32  # the type given wins
    chw4 = trt.PluginTensorDesc(trt.Dims((1, 3, 2, 1)), trt.float32, trt.TensorFormat.CHW4)
    assert cpu.view(np.zeros(8, np.float32).ctypes.data, chw4).shape == (1, 1, 2, 1, 4)  # the storage shape


def test_view_of_nothing_needs_no_address() -> None:
    assert get_backend("cpu").view(0, (0, 3), np.float16).shape == (0, 3)


@pytest.mark.parametrize("address", [0, -8, 1.5, None, True])
def test_view_of_a_bad_address_names_it(address: Any) -> None:
    with pytest.raises(trt.ExecutionError, match=rf"cannot view 12 bytes at address {address!r}: not a valid cpu address"):
        get_backend("cpu").view(address, (3,), np.float32)


def test_view_of_a_shape_without_a_type_is_rejected() -> None:
    with pytest.raises(trt.ExecutionError, match=r"a view of shape \(2, 2\) needs an element type"):
        get_backend("cpu").view(8, (2, 2))


def test_view_keeps_its_owner_alive() -> None:
    cpu = get_backend("cpu")
    owner, base = cpu.allocate_arena(64)
    assert base % ALIGNMENT == 0 and owner.nbytes == 64
    view = cpu.view(base + 16, (4,), np.int32, owner=owner)
    del owner
    gc.collect()
    view[...] = [1, 2, 3, 4]  # still valid memory
    assert view.tolist() == [1, 2, 3, 4]


def test_device_buffer_views_go_through_the_backend() -> None:
    with trt.device_malloc(16) as buffer:
        assert buffer.backend is get_backend("cpu") and buffer.device == "cpu"
        view = buffer.as_array((2, 2), np.float32)
        view[...] = 3
        assert buffer.as_array((4,), np.float32).tolist() == [3.0] * 4
        with pytest.raises(trt.ExecutionError, match=r"needs 32 bytes; the buffer has 16"):
            buffer.as_array((8,), np.float32)


def test_host_copies() -> None:
    cpu = get_backend("cpu")
    x = np.arange(3, dtype=np.float32)
    out = np.zeros(3, np.float32)
    assert cpu.to_host(x) is x and cpu.to_host(x, out=out) is out and out.tolist() == [0, 1, 2]
    cpu.copy_from_host(out, np.full(3, 5, np.float32))
    assert out.tolist() == [5, 5, 5]


def test_cpu_matmul_and_special_functions() -> None:
    cpu = get_backend("cpu")
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    out = np.empty((2, 4), np.float32)
    cpu.matmul_into(a, b, out, np.arange(4, dtype=np.float32))
    assert out[0].tolist() == [3, 4, 5, 6]
    erf = cpu.special_function("erf")
    if erf is not None:
        assert abs(float(erf(np.float64(0.5))) - 0.5204998778) < 1e-9


def test_cpu_has_no_graphs() -> None:
    with pytest.raises(trt.ExecutionError, match="the cpu backend has no graphs to capture a run into"):
        get_backend("cpu").capture(lambda: None, 7)


# --- plugin helpers view through the active backend -----------------------------------------
class RecordingBackend(CpuBackend):
    """Host memory, but remembers each view and stream scope (a stand-in for another device)."""

    def __init__(self) -> None:
        self.views: list[int] = []
        self.scopes: list[int] = []

    def _view(self, address: int, shape: tuple[int, ...], dtype: np.dtype, nbytes: int, owner: Any) -> np.ndarray:
        self.views.append(address)
        return super()._view(address, shape, dtype, nbytes, owner)

    def stream_scope(self, stream: int) -> Any:
        self.scopes.append(stream)
        return super().stream_scope(stream)


def test_plugin_helpers_use_the_active_backend() -> None:
    backend = RecordingBackend()
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    desc = trt.PluginTensorDesc(trt.Dims((4,)), trt.float32)
    with using_backend(backend):
        assert not on_gpu()
        with plugin_arrays([x.ctypes.data], [desc], [y.ctypes.data], [desc], 5) as (xp, (a,), (b,)):
            xp.add(a, 1, out=b)
        with host_buffers([x.ctypes.data], [desc], [y.ctypes.data], [desc], 6) as ((a,), (b,)):
            b += a
        scratch = np.zeros(64, np.uint8)
        views = WorkspaceLayout().add("t", (4,), np.int32).bind(scratch.ctypes.data)
        views["t"][...] = 9
    assert y.tolist() == [1, 3, 5, 7] and scratch.view(np.int32)[:4].tolist() == [9] * 4
    assert backend.scopes == [5] and {x.ctypes.data, y.ctypes.data, scratch.ctypes.data} <= set(backend.views)




def _resident_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


@pytest.mark.parametrize("nbytes", [0, 1, 4096, (1 << 20) + 3])
@pytest.mark.parametrize("huge_up_to", [0, HUGE_PAGES_UP_TO])
def test_zeroed_pages_are_zeroed_writable_bytes(nbytes: int, huge_up_to: int) -> None:
    """Every size: a writable uint8 buffer of that many bytes (one at least), all zeros; beyond ``huge_pages_up_to``
    a mapping of its own (freed with the array)."""
    pages = zeroed_pages(nbytes, huge_pages_up_to=huge_up_to)
    assert pages.dtype == np.uint8 and pages.size == max(nbytes, 1) and pages.flags.writeable
    assert not pages.any()
    pages[-1] = 7
    assert pages[-1] == 7
    assert isinstance(getattr(pages.base, "obj", None), mmap.mmap) == (max(nbytes, 1) > huge_up_to)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS from /proc")
def test_an_arena_written_in_part_holds_only_the_pages_written() -> None:
    """A large arena's memory is taken 4 KiB at a time where it is written, not in 2 MiB huge pages (NumPy asks for
    those on its large arrays): one byte written every 2 MiB of 64 MiB holds well under 64 MiB."""
    arena, _ = CpuBackend().allocate_arena(HUGE_PAGES_UP_TO + (1 << 20))
    before = _resident_kib()
    arena[:: 2 << 20] = 1
    grown = _resident_kib() - before
    assert grown < 8 << 10, f"{grown} KiB resident after writing {arena[:: 2 << 20].size} bytes"
    assert int(arena.sum()) == arena[:: 2 << 20].size
