"""Attention in row blocks on two threads (``ops/attention_blocks.py``) against the operator's whole-tensor kernel:
every parameter (pre-scale by product or division, mask broadcast over heads and rows, softmax scale, the NaN
guard, transposed operands, a key shared by the batch) within 2e-6 of the output's scale, scores included; the
blocks split rows unevenly; small attention keeps the whole-tensor kernel."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from plugrt.ops import attention_blocks
from plugrt.ops.attention import AttentionOperator

RNG = np.random.default_rng(29)


def _run(op: AttentionOperator, inputs: list[np.ndarray], scores_shape: tuple[int, ...], width: int):
    out = np.full((*scores_shape[:-1], width), np.nan, np.float32)
    scores = np.full(scores_shape, np.nan, np.float32)
    op.prepare([x.shape for x in inputs], [out.shape, scores.shape])
    op.run(inputs, [out, scores])
    return out, scores


def _both(monkeypatch, params: dict, inputs: list[np.ndarray], scores_shape: tuple[int, ...], width: int):
    op = AttentionOperator(params)
    monkeypatch.setattr(attention_blocks, "MIN_BLOCKED_SCORES", 1 << 62)
    whole = _run(op, inputs, scores_shape, width)
    monkeypatch.setattr(attention_blocks, "MIN_BLOCKED_SCORES", 1)
    blocks = _run(op, inputs, scores_shape, width)
    return whole, blocks


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * float(np.abs(want).max()))


@pytest.mark.parametrize("transposed", [False, True])
def test_blocks_equal_the_whole_kernel_with_every_step(monkeypatch, transposed: bool) -> None:
    batch, heads, rows, keys, depth = 2, 3, 200, 300, 16
    q = RNG.standard_normal((batch, heads, rows, depth)).astype(np.float32)
    k = RNG.standard_normal((1, heads, keys, depth) if transposed else (1, heads, depth, keys)).astype(np.float32)
    v = RNG.standard_normal((batch, heads, depth, keys) if transposed else (batch, heads, keys, depth))
    mask = np.where(RNG.random((batch, 1, 1, keys)) < 0.2, -1e4, 0.0).astype(np.float32)
    params = {
        "op1": "TRANSPOSE" if transposed else "NONE",
        "value_op": "TRANSPOSE" if transposed else "NONE",
        "pre": "DIV",
        "mask": True,
        "scaled": True,
    }
    inputs = [q, k, v.astype(np.float32), np.full((1, 1, 1, 1), 4.0, np.float32), mask, np.full((1,), 0.5, np.float32)]
    (out, scores), (got, got_scores) = _both(monkeypatch, params, inputs, (batch, heads, rows, keys), depth)
    _close(got, out)
    _close(got_scores, scores)


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # -inf - -inf in the removed row, as unblocked
def test_the_nan_guard_and_a_product_pre_scale_in_blocks(monkeypatch) -> None:
    rows, keys, depth = 70, 90, 8
    q = RNG.standard_normal((1, 2, rows, depth)).astype(np.float32)
    k = RNG.standard_normal((1, 2, depth, keys)).astype(np.float32)
    v = RNG.standard_normal((1, 2, keys, depth)).astype(np.float32)
    mask = np.zeros((1, 1, rows, keys), np.float32)
    mask[0, 0, 5] = -np.inf  # a row the mask removes entirely: NaN probabilities, zeroed by the guard
    params = {"pre": "PROD", "mask": True, "nan_to_zero": True}
    inputs = [q, k, v, np.full((1,), 0.25, np.float32), mask]
    (out, scores), (got, got_scores) = _both(monkeypatch, params, inputs, (1, 2, rows, keys), depth)
    assert not got[0, :, 5].any() and not got_scores[0, :, 5].any()
    _close(got, out)
    _close(got_scores, scores)
    if importlib.util.find_spec("torch") is not None:  # PyTorch's tactic, every head at once
        for whole in (1 << 62, 1):
            monkeypatch.setattr(attention_blocks, "MIN_BLOCKED_SCORES", whole)
            torch_out = np.full_like(out, np.nan)
            kernel = AttentionOperator(params).torch_kernel(inputs, [torch_out, np.empty_like(scores)])
            assert kernel is not None
            kernel()
            assert not torch_out[0, :, 5].any()
            _close(torch_out, out)


def test_rows_per_block_are_whole_vectors_and_cover_the_rows() -> None:
    assert attention_blocks._rows_per_block(1500, 1500) == 80  # 128 K scores: 87 rows, down to a multiple of 16
    assert attention_blocks._rows_per_block(10, 1500) == 10
    assert attention_blocks._rows_per_block(5000, 100_000) == 16  # a very long row: one aligned group of rows


def test_small_attention_keeps_the_whole_kernel() -> None:
    x = np.zeros((1, 12, 128, 128), np.float32)
    assert not attention_blocks.blocked(x.shape, x)
    assert attention_blocks.blocked((1, 6, 1500, 1500), x)
    assert not attention_blocks.blocked((1, 6, 1500, 1500), x.astype(np.float16))


@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("mask_rows", [1, 200])
@pytest.mark.parametrize("transposed", [False, True])
def test_the_torch_tactic_runs_the_blocks_with_torch_kernels(
    monkeypatch, mask_rows: int, transposed: bool, scaled: bool, whole: bool
) -> None:
    """Many scores: the row blocks; fewer than ``MIN_BLOCKED_SCORES``: every head at once (batched products)."""
    pytest.importorskip("torch")
    batch, heads, rows, keys, depth = 2, 3, 200, 300, 16
    q = RNG.standard_normal((batch, heads, rows, depth)).astype(np.float32)
    k = RNG.standard_normal((batch, heads, keys, depth) if transposed else (batch, heads, depth, keys))
    v = RNG.standard_normal((batch, heads, depth, keys) if transposed else (batch, heads, keys, depth))
    mask = np.where(RNG.random((batch, 1, mask_rows, keys)) < 0.2, -1e4, 0.0).astype(np.float32)
    op1 = "TRANSPOSE" if transposed else "NONE"
    params = {"op1": op1, "value_op": op1, "pre": "DIV", "mask": True, "scaled": scaled}
    inputs = [q, k.astype(np.float32), v.astype(np.float32), np.full((1, 1, 1, 1), 4.0, np.float32), mask]
    inputs += [np.full((1,), 0.7, np.float32)] if scaled else []
    (want, _), _ = _both(monkeypatch, params, inputs, (batch, heads, rows, keys), depth)
    op = AttentionOperator(params)
    got = np.full_like(want, np.nan)
    scores = np.empty((batch, heads, rows, keys), np.float32)
    monkeypatch.setattr(attention_blocks, "MIN_BLOCKED_SCORES", 1 << 62 if whole else 1)
    kernel = op.torch_kernel(inputs, [got, scores])
    assert kernel is not None
    assert kernel.__qualname__.startswith("_torch_whole" if whole else "torch_attention_blocks")
    kernel()
    _close(got, want)


def test_transposed_inputs_their_scales_and_a_transposed_result_in_blocks(monkeypatch) -> None:
    # the exported scaled_dot_product_attention as the rule takes it in: [B, S, H, D] inputs read through
    # transposes, q and k each scaled, the result written back to [B, S, H, D]
    batch, seq, heads, depth = 2, 150, 3, 16
    q, k, v = (RNG.standard_normal((batch, seq, heads, depth)).astype(np.float32) for _ in range(3))
    params = {
        "perm_a": [0, 2, 1, 3],
        "perm_b": [0, 2, 3, 1],
        "perm_v": [0, 2, 1, 3],
        "perm_out": [0, 2, 1, 3],
        "scale_a": True,
        "scale_b": True,
        "mask": True,
    }
    mask = np.where(RNG.random((batch, 1, 1, seq)) < 0.2, -1e4, 0.0).astype(np.float32)
    inputs = [q, k, v, mask, np.full((1,), 0.5, np.float32), np.full((1,), 0.35, np.float32)]
    op = AttentionOperator(params)
    out_shape, scores_shape = (batch, seq, heads, depth), (batch, heads, seq, seq)

    def run(kernel: str) -> np.ndarray:
        out, scores = np.full(out_shape, np.nan, np.float32), np.empty(scores_shape, np.float32)
        op.prepare([x.shape for x in inputs], [out_shape, scores_shape])
        monkeypatch.setattr(attention_blocks, "MIN_BLOCKED_SCORES", 1 << 62 if "whole" in kernel else 1)
        if kernel.startswith("torch"):
            torch_run = op.torch_kernel(inputs, [out, scores])
            assert torch_run is not None
            torch_run()
        else:
            op.run(inputs, [out, scores])
        return out

    want = run("whole")
    _close(run("blocks"), want)
    if pytest.importorskip("torch"):
        _close(run("torch"), want)
        _close(run("torch whole"), want)  # the heads read through their transposes, the result written back
