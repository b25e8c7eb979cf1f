"""Matrix products run on one BLAS thread unless they are large and the machine has a core to spare."""

from __future__ import annotations

import numpy as np
import pytest

from plugrt.ops import blas_threads


def _threads() -> int:
    assert blas_threads._BLAS is not None
    return blas_threads._BLAS[1]()


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    if blas_threads._BLAS is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    before = _threads()
    blas_threads.set_blas_threads(2)
    monkeypatch.setattr(blas_threads, "_CONFIGURED", 2)
    yield
    blas_threads.set_blas_threads(before)


def test_small_products_use_one_thread_and_the_setting_comes_back(two_threads: None) -> None:
    with blas_threads.blas_threads_for(1e3):
        assert _threads() == 1
        a = np.ones((4, 4), np.float32)
        np.testing.assert_array_equal(a @ a, np.full((4, 4), 4, np.float32))
    assert _threads() == 2


def test_large_products_keep_the_threads_only_on_a_quiet_machine(
    two_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: False)
    with blas_threads.blas_threads_for(1e9):
        assert _threads() == 2
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: True)
    with blas_threads.blas_threads_for(1e9):
        assert _threads() == 1
    assert _threads() == 2


def test_an_error_inside_restores_the_setting(two_threads: None) -> None:
    with pytest.raises(ValueError, match="inside"), blas_threads.blas_threads_for(0):
        raise ValueError("inside")
    assert _threads() == 2
