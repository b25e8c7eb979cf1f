"""What the tests of oneDNN's direct kernels share (``tests/unit/test_onednn_*.py``): they skip where the library is
not installed and run with it switched on whatever the environment says (the ``onednn_on`` fixture,
``tests/conftest.py``). A test module sets ``pytestmark = ONEDNN_TESTS``."""

from __future__ import annotations

import pytest

from plugrt.ops import onednn

ONEDNN_TESTS = [
    pytest.mark.skipif(not onednn.available(), reason="needs oneDNN (pip install 'plugrt[onednn]')"),
    pytest.mark.usefixtures("onednn_on"),
]


class BusyMachine:
    """The engine's view of the machine for the tests of layers in parts (``onednn_buffers.Parts``): busy or quiet
    as ``busy`` says (``blas_threads.machine_busy``), two engine threads, a primitive per thread count for any
    work, parts of ``part_flops`` operations; ``pulled`` records each run's part count."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, part_flops: float = 1e4, busy: bool = False) -> None:
        from plugrt.ops import blas_threads, onednn_buffers

        self.busy = busy
        self.pulled: list[int] = []
        pulled = onednn_buffers.pulled_by_two

        def recording(count: int, work: object) -> None:
            self.pulled.append(count)
            pulled(count, work)  # type: ignore[arg-type]

        monkeypatch.setattr(blas_threads, "_machine_busy", lambda: self.busy)
        monkeypatch.setattr(onednn_buffers, "engine_threads", lambda: 2)
        monkeypatch.setattr(onednn_buffers, "MIN_OPENMP_FLOPS", 0.0)  # small test layers get two primitives
        monkeypatch.setattr(onednn_buffers, "PART_FLOPS", part_flops)
        monkeypatch.setattr(onednn_buffers, "pulled_by_two", recording)
