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


def test_a_product_the_blas_runs_alone_gets_no_guard(two_threads: None) -> None:
    """Decided at bind: a matrix-matrix product of at most GEMM_ALONE_AT_MOST multiply-adds runs on the calling
    thread whatever the count, so its guard changes nothing (the count stays 2 inside); a larger one gets one
    thread; a matrix-vector product keeps the lower threshold; a large one is decided per call (None)."""
    guard = blas_threads.product_guard(576, 8, 8)
    with guard:
        assert _threads() == 2
    assert blas_threads.product_guard(64, 64, 64) is blas_threads.product_guard(576, 8, 8)
    with blas_threads.product_guard(192, 32, 104):  # 638976 multiply-adds: OpenBLAS would take its threads
        assert _threads() == 1
    assert _threads() == 2
    with blas_threads.product_guard(1, 200, 100):  # matrix-vector, 20000 > BLAS_ALONE_BELOW
        assert _threads() == 1
    assert blas_threads.product_guard(1024, 1024, 1024) is None


def test_only_single_products_use_the_matrix_matrix_threshold(two_threads: None) -> None:
    """Rows of several products stacked (a batch of matrix-vector products) keep the lower threshold."""
    assert blas_threads.blas_runs_alone(100, 100, 20, single=True)
    assert not blas_threads.blas_runs_alone(100, 100, 20)
    assert not blas_threads.blas_runs_alone(1, 400, 100, single=True)
    assert blas_threads.blas_runs_alone(1, 90, 100, single=True)
    most = blas_threads._GEMM_ALONE
    assert most in (blas_threads.GEMM_ALONE_AT_MOST, 2 * blas_threads.GEMM_ALONE_AT_MOST - 1)
    assert blas_threads.blas_runs_alone(most // 4, 2, 2, single=True)  # at most `most` multiply-adds
    assert not blas_threads.blas_runs_alone(most // 4 + 1, 2, 2, single=True)


def test_the_blas_version_is_read_from_its_configuration() -> None:
    if blas_threads._BLAS is None:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    version = blas_threads._version()
    assert len(version) == 3 and version >= (0, 2, 0)


def test_without_threads_to_set_every_guard_is_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas_threads, "_CONFIGURED", 1)
    assert blas_threads.product_guard(192, 32, 104) is blas_threads.product_guard(8, 8, 8)
    monkeypatch.setattr(blas_threads, "_BLAS", None)
    assert blas_threads.blas_runs_alone(10**4, 10**4, 10**4, single=True)
