"""The CUDA backend's own logic (kernel compilation, graph capture, stream wrappers) over a stand-in
for CuPy, so it is checked on machines without a GPU; tests/gpu runs it for real."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import plugrt as trt
from plugrt.backends import cuda


class _Stream:
    def __init__(self, handle: int, log: list[str]) -> None:
        self.handle, self.log = handle, log

    def begin_capture(self) -> None:
        self.log.append(f"begin {self.handle}")

    def end_capture(self) -> Any:
        self.log.append(f"end {self.handle}")
        return SimpleNamespace(launch=lambda stream: self.log.append(f"replay on {stream.handle}"))

    def __enter__(self) -> _Stream:
        self.log.append(f"enter {self.handle}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.append(f"exit {self.handle}")


def _fake_cupy(log: list[str]) -> Any:
    class RawModule:
        def __init__(self, code: str, options: tuple[str, ...], name_expressions: Any = None) -> None:
            log.append(f"compile {options} {name_expressions}")

        def get_function(self, name: str) -> str:
            return f"kernel {name}"

    @contextlib.contextmanager
    def using_allocator(malloc: Any) -> Iterator[None]:
        log.append("pool allocator on")
        yield
        log.append("pool allocator off")

    class ExternalStream(_Stream):
        def __init__(self, handle: int) -> None:
            super().__init__(handle, log)

    class Module:
        def load(self, ptx: bytes) -> None:
            log.append(f"load {ptx!r}")

        def get_function(self, name: str) -> Any:
            def launch(grid: Any, block: Any, args: Any, shared_mem: int, stream: _Stream) -> None:
                log.append(f"{name} {grid} {block} {args} {shared_mem} on {stream.handle}")

            return launch

    stream_type = SimpleNamespace(null=_Stream(0, log))
    runtime = SimpleNamespace(getDeviceCount=lambda: 1, CUDARuntimeError=RuntimeError)
    memory_pool = lambda: SimpleNamespace(malloc=None)  # noqa: E731
    cuda_ns = SimpleNamespace(
        Stream=stream_type, ExternalStream=ExternalStream, runtime=runtime, MemoryPool=memory_pool,
        using_allocator=using_allocator, function=SimpleNamespace(Module=Module),
    )
    return SimpleNamespace(RawModule=RawModule, cuda=cuda_ns, uint8="uint8")


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    events: list[str] = []
    monkeypatch.setattr(cuda, "_CUPY", [_fake_cupy(events)])
    monkeypatch.setattr(cuda, "_STREAMS", {})
    return events


def test_kernels_compile_once_per_module_or_template_instance(log: list[str]) -> None:
    module = cuda.CudaModule("source", ("--std=c++14", "--fmad=false"))
    assert module.function("nms_scan") == "kernel nms_scan"
    assert module.function("nms_mask") == "kernel nms_mask"  # the same module
    assert module.function("rows<float, 4>") == "kernel rows<float, 4>"
    assert module.function("rows<float, 4>") == "kernel rows<float, 4>"  # cached
    assert log == [
        "compile ('--std=c++14', '--fmad=false') None",
        "compile ('--std=c++14', '--fmad=false') ['rows<float, 4>']",
    ]


def test_capture_runs_once_then_records_with_the_graphs_own_pool(log: list[str]) -> None:
    backend = cuda.CudaBackend()
    graph = backend.capture(lambda: log.append("run"), 7)
    assert log == ["run", "pool allocator on", "begin 7", "run", "end 7", "pool allocator off"]
    graph.launch(7)
    assert log[-1] == "replay on 7" and graph.pool is not None


def test_capture_refuses_the_default_stream_before_running(log: list[str]) -> None:
    with pytest.raises(trt.ExecutionError, match="CUDA graph capture needs a non-default stream"):
        cuda.CudaBackend().capture(lambda: log.append("run"), 0)
    assert "run" not in log


def test_stream_wrappers_are_cached_and_scoped(log: list[str]) -> None:
    backend = cuda.CudaBackend()
    assert cuda.cupy_stream(5) is cuda.cupy_stream(5) and cuda.cupy_stream(0).handle == 0
    with backend.stream_scope(5):
        log.append("work")
    assert log == ["enter 5", "work", "exit 5"]


def test_ptx_kernels_launch_on_the_given_stream_handle(log: list[str]) -> None:
    kernel = cuda.load_ptx_kernel(b".entry add", "add")
    kernel((2, 1, 1), (32, 1, 1), (1, 2), 64, 9)
    assert log == ["load b'.entry add'", "add (2, 1, 1) (32, 1, 1) (1, 2) 64 on 9"]
