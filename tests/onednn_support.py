"""What the tests of oneDNN's direct kernels share (``tests/unit/test_onednn_*.py``): they skip where the library is
not installed and run with it switched on whatever the environment says (the ``onednn_on`` fixture,
``tests/conftest.py``). A test module sets ``pytestmark = ONEDNN_TESTS``."""

from __future__ import annotations

from typing import Any

import pytest

from plugrt.ops import depthwise_numba, onednn

#: the tests of numba's compiled loops (``plugrt[numba]``)
NEEDS_NUMBA = pytest.mark.skipif(not depthwise_numba.available(), reason="needs numba (pip install 'plugrt[numba]')")

ONEDNN_TESTS = [
    pytest.mark.skipif(not onednn.available(), reason="needs oneDNN (pip install 'plugrt[onednn]')"),
    pytest.mark.usefixtures("onednn_on"),
]


class BusyMachine:
    """The engine's view of the machine for the tests of layers in parts (``onednn_parts.Parts``): busy or quiet
    as ``busy`` says (``blas_threads.machine_busy``), two engine threads, a primitive per thread count for any
    work, parts of ``part_flops`` operations, run by the compiled loop or as Python items (``compiled``; the
    compiled loop only where numba is there); ``pulled`` records each run's part count, ``made`` the parts made."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, part_flops: float = 1e4, busy: bool = False, compiled: bool = True
    ) -> None:
        from plugrt.ops import blas_threads, onednn_buffers, onednn_parts

        self.busy = busy
        self.pulled: list[int] = []
        self.made: list[onednn_parts.Parts] = []
        run, init = onednn_parts.Parts.run, onednn_parts.Parts.__init__
        made = onednn_parts._Compiled.made

        def recording(parts: onednn_parts.Parts) -> None:
            self.pulled.append(len(parts))
            run(parts)

        def making(parts: onednn_parts.Parts, *args: Any) -> None:
            init(parts, *args)
            self.made.append(parts)

        monkeypatch.setattr(blas_threads, "_machine_busy", lambda: self.busy)
        monkeypatch.setattr(onednn_buffers, "engine_threads", lambda: 2)
        monkeypatch.setattr(onednn_buffers, "MIN_OPENMP_FLOPS", 0.0)  # small test layers get two primitives
        monkeypatch.setattr(onednn_parts, "PART_FLOPS", part_flops)
        monkeypatch.setattr(onednn_parts.Parts, "run", recording)
        monkeypatch.setattr(onednn_parts.Parts, "__init__", making)
        monkeypatch.setattr(onednn_parts._Compiled, "made", made if compiled else lambda *args: None)
