"""Large matrix products run as blocks that this thread and the helper share; results are the one-call product's."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from plugrt.ops import blas_threads, host_threads, product_parts
from plugrt.ops.gemm import GemmOperator
from plugrt.ops.matrix_multiply import MatrixMultiplyOperator

# (a, b) shapes as the transformer exports have them: a [B, S, K] by a weight [1, K, N] or [K, N], and
# the attention's batched products of heads
SHAPES = [
    ((1, 128, 768), (1, 768, 3072)),
    ((4, 197, 768), (1, 768, 768)),
    ((2, 40, 3072), (3072, 96)),
    ((300, 512), (512, 40)),  # narrow: row blocks
    ((1, 12, 128, 64), (1, 12, 64, 128)),
    ((4, 12, 197, 64), (4, 12, 64, 197)),
    ((3, 1, 50, 64), (1, 5, 64, 50)),  # batch broadcast both ways
]


@pytest.fixture
def always_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(product_parts, "split_products", lambda flops: True)
    monkeypatch.setattr(product_parts, "MIN_BLOCK_FLOPS", 1.0)


def _operands(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(len(sa) * 100 + sa[-1])
    a = rng.standard_normal(sa, dtype=np.float32)
    b = rng.standard_normal(sb, dtype=np.float32)
    return a, b


@pytest.mark.parametrize(("sa", "sb"), SHAPES)
def test_blocks_cover_every_output_element_once(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = _operands(sa, sb)
    if b.ndim < a.ndim:
        b = b.reshape((1,) * (a.ndim - b.ndim) + b.shape)
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    blocks = product_parts.product_blocks(a, b, out, None, 1e12)
    assert blocks is not None and 2 <= len(blocks) <= product_parts.MAX_BLOCKS
    out[...] = 0
    for _, _, part, _ in blocks:
        assert np.shares_memory(part, out)
        part += 1  # a view: counts how many blocks write each element
    np.testing.assert_array_equal(out, 1)


@pytest.mark.parametrize(("sa", "sb"), SHAPES)
def test_split_products_match_the_one_call_product(
    always_split: None, sa: tuple[int, ...], sb: tuple[int, ...]
) -> None:
    a, b = _operands(sa, sb)
    if b.ndim < a.ndim:
        b = b.reshape((1,) * (a.ndim - b.ndim) + b.shape)
    bias = np.random.default_rng(1).standard_normal(b.shape[-1], dtype=np.float32)
    whole = np.matmul(a, b) + bias
    out = np.full(whole.shape, np.nan, np.float32)
    product_parts.matmul_parts_into(np, a, b, out, bias)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64)) + bias
    # the same BLAS kernels over the same reductions, perhaps summed in another order for another block size:
    # within 2e-6 of the largest output (about 17 ulp of it) from the one call
    np.testing.assert_allclose(out, whole, rtol=0, atol=2e-6 * np.abs(exact).max())
    assert np.abs(out - exact).max() <= 1e-5 * np.abs(exact).max()


def test_transposed_operands_split_without_copies(always_split: None) -> None:
    rng = np.random.default_rng(2)
    a_t = rng.standard_normal((1, 768, 128), dtype=np.float32)
    b_t = rng.standard_normal((1, 3072, 768), dtype=np.float32)
    layer = MatrixMultiplyOperator({"op0": "TRANSPOSE", "op1": "TRANSPOSE"})
    out = np.empty((1, 128, 3072), np.float32)
    layer.prepare([a_t.shape, b_t.shape], [out.shape])
    layer.run([a_t, b_t], [out])
    np.testing.assert_allclose(out, a_t.swapaxes(1, 2) @ b_t.swapaxes(1, 2), rtol=1e-5, atol=1e-4)
    blocks = product_parts.product_blocks(a_t.swapaxes(1, 2), b_t.swapaxes(1, 2), out, None, 1e12)
    assert blocks is not None and all(np.shares_memory(x, a_t) and np.shares_memory(y, b_t) for x, y, _, _ in blocks)


def test_gemm_splits_with_its_scaled_weights(always_split: None) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 300), dtype=np.float32)
    w = rng.standard_normal((200, 300), dtype=np.float32)
    c = rng.standard_normal(200, dtype=np.float32)
    from plugrt.ops.gemm import pack_gemm_weights

    layer = GemmOperator({"trans_b": True, "alpha": 0.5, "beta": 2.0, "has_c": True}, pack_gemm_weights(w, c, 0.5, 2.0))
    out = np.empty((64, 200), np.float32)
    layer.run([a], [out])
    np.testing.assert_allclose(out, 0.5 * a @ w.T + 2.0 * c, rtol=1e-5, atol=1e-4)


def test_small_or_single_thread_products_are_not_split(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _operands((1, 128, 768), (1, 768, 3072))
    out = np.empty((1, 128, 3072), np.float32)
    assert product_parts.product_blocks(a[:, :1, :8], b[:, :8, :8], out[:, :1, :8], None, 128.0) is None
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 1)
    assert not blas_threads.split_products(1e12)
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 2)
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: True)  # the load does not matter
    assert blas_threads.split_products(1e12) == (
        blas_threads._BLAS is not None and (blas_threads.os.cpu_count() or 1) >= 2
    )
    assert not blas_threads.split_products(blas_threads.MIN_THREADED_FLOPS / 2)


def test_pulled_items_run_once_each_on_both_threads() -> None:
    seen: list[tuple[int, str]] = []
    lock = threading.Lock()
    release = threading.Event()

    def work(item: int) -> None:
        with lock:
            seen.append((item, threading.current_thread().name))
        if item == 0:
            release.wait(5)  # the caller holds item 0 until the helper has taken one
        elif threading.current_thread().name.startswith("plugrt-kernel"):
            release.set()

    host_threads.pulled_by_two(6, work)
    assert sorted(item for item, _ in seen) == list(range(6))
    if (host_threads.os.cpu_count() or 1) >= 2:
        assert any(name.startswith("plugrt-kernel") for _, name in seen)


def test_the_caller_does_not_wait_for_a_helper_that_has_not_started() -> None:
    if (host_threads.os.cpu_count() or 1) < 2:
        pytest.skip("one core: no helper")
    busy, release = threading.Event(), threading.Event()
    blocker = host_threads._helper().submit(lambda: (busy.set(), release.wait(10)))
    busy.wait(5)
    names: list[str] = []
    finished = threading.Event()

    def caller() -> None:
        host_threads.pulled_by_two(4, lambda item: names.append(threading.current_thread().name))
        finished.set()

    thread = threading.Thread(target=caller)
    thread.start()
    try:
        assert finished.wait(5), "the caller waited for the busy helper"
        assert names == [thread.name] * 4
    finally:
        release.set()
        blocker.result(10)
        thread.join(10)


def test_an_error_in_a_block_reaches_the_caller() -> None:
    def work(item: int) -> None:
        if item == 3:
            raise ValueError(f"block {item} failed")

    with pytest.raises(ValueError, match="block 3 failed"):
        host_threads.pulled_by_two(8, work)


def test_gemm_weights_of_factor_one_are_the_given_arrays() -> None:
    """A contiguous FLOAT ``B`` or ``C`` with factor 1 is held as given (no second copy of a model's weights); other
    factors and types are new arrays with the factor applied."""
    from plugrt.ops.gemm import pack_gemm_weights

    b, c = np.ones((4, 3), np.float32), np.arange(3, dtype=np.float32)
    held = pack_gemm_weights(b, c, 1.0, 1.0)
    assert held["b"] is b and held["c"] is c
    scaled = pack_gemm_weights(b, c.astype(np.float64), 0.5, 1.0)
    assert not np.shares_memory(scaled["b"], b) and scaled["b"].dtype == np.float32
    np.testing.assert_array_equal(scaled["b"], b * 0.5)
    assert scaled["c"].dtype == np.float32 and not np.shares_memory(scaled["c"], c)
    transposed = pack_gemm_weights(b.T, None, 1.0, 1.0)["b"]
    assert transposed.flags.c_contiguous and "c" not in pack_gemm_weights(b, None, 1.0, 1.0)
    np.testing.assert_array_equal(transposed, b.T)
