"""Attention as oneDNN's matmul and softmax primitives called directly (``ops/onednn_attention.py``): every head at
once or in blocks of query rows, operands and output read and written through their strides, the scale and the
mask as the first product's post-ops, NaN rows made zero; against a float64 reference. Skips without the
library."""

from __future__ import annotations

import numpy as np
import pytest

from onednn_support import ONEDNN_TESTS
from plugrt.ops.onednn_attention import attention_onednn

pytestmark = ONEDNN_TESTS

RNG = np.random.default_rng(23)



def _heads(batch: int, seq: int, heads: int, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k^T and v of ``[B, H, S, D]`` read out of one ``[B, S, 3, H, D]`` projection (strided views)."""
    x = RNG.standard_normal((batch, seq, 3, heads, depth)).astype(np.float32)
    return x[:, :, 0].transpose(0, 2, 1, 3), x[:, :, 1].transpose(0, 2, 3, 1), x[:, :, 2].transpose(0, 2, 1, 3)


def _reference(a, b, v, factor, mask, post, nan_to_zero):  # type: ignore[no-untyped-def]
    s = a.astype(np.float64) @ b.astype(np.float64)
    if factor is not None:
        s = s * factor
    if mask is not None:
        s = s + mask
    if post is not None:
        s = s * post
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    if nan_to_zero:
        p = np.where(np.isnan(p), 0.0, p)
    return p @ v.astype(np.float64)


def _run(a, b, v, factor=None, mask=None, post=None, nan_to_zero=False, transposed_out=True):  # type: ignore[no-untyped-def]
    batch, heads, seq, depth = a.shape[0], a.shape[1], a.shape[2], v.shape[-1]
    width = b.shape[-1]
    stored = np.full((batch, seq, heads, depth), np.nan, np.float32)
    out = stored.transpose(0, 2, 1, 3) if transposed_out else np.full((batch, heads, seq, depth), np.nan, np.float32)
    kernel = attention_onednn(a, b, v, (batch, heads, seq, width), out, factor, mask, post, nan_to_zero)
    assert kernel is not None
    kernel()
    return out


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "full"])
def test_every_head_at_once_with_its_masks(mask_kind: str) -> None:
    a, b, v = _heads(2, 24, 3, 16)
    mask = {
        "none": None,
        "padding": np.where(np.arange(24) < 20, 0.0, -1e9).astype(np.float32).reshape(1, 1, 1, 24).repeat(2, 0),
        "causal": np.triu(np.full((24, 24), -1e9, np.float32), 1).reshape(1, 1, 24, 24),
        "full": RNG.standard_normal((2, 3, 24, 24)).astype(np.float32),
    }[mask_kind]
    got = _run(a, b, v, factor=0.25, mask=mask, post=1.5)
    want = _reference(a, b, v, 0.25, mask, 1.5, False)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


@pytest.mark.parametrize("mask_kind", ["causal", "padding", "full"])
def test_large_scores_in_blocks_of_one_head_s_rows_with_a_partial_last_block(
    monkeypatch: pytest.MonkeyPatch, mask_kind: str
) -> None:
    from plugrt.ops import onednn_attention

    monkeypatch.setattr(onednn_attention, "MIN_BLOCKED_SCORES", 1 << 12)
    monkeypatch.setattr(onednn_attention, "BLOCK_SCORES", 1 << 11)
    a, b, v = _heads(2, 70, 3, 8)  # 2 x 3 heads of 70 x 70 scores: blocks of 16 rows of one head, the last of 6
    mask = {
        "causal": np.triu(np.full((70, 70), -1e9, np.float32), 1).reshape(1, 1, 70, 70),
        "padding": np.where(np.arange(70) < 60, 0.0, -np.inf).astype(np.float32).reshape(1, 1, 1, 70).repeat(2, 0),
        "full": RNG.standard_normal((2, 3, 70, 70)).astype(np.float32),
    }[mask_kind]
    if mask_kind == "padding":
        mask[1, ..., :] = -np.inf  # the second sequence masked whole: NaN rows, made 0 by the guard
    got = _run(a, b, v, factor=0.5, mask=mask, post=2.0, nan_to_zero=True)
    want = _reference(a, b, v, 0.5, mask, 2.0, True)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_a_row_the_mask_removes_entirely_is_zero_with_the_guard() -> None:
    a, b, v = _heads(1, 8, 2, 4)
    mask = np.zeros((1, 1, 8, 8), np.float32)
    mask[..., 3, :] = -np.inf
    guarded = _run(a, b, v, mask=mask, nan_to_zero=True, transposed_out=False)
    np.testing.assert_array_equal(guarded[:, :, 3], 0.0)
    np.testing.assert_allclose(guarded, _reference(a, b, v, None, mask, None, True), rtol=0, atol=2e-5)
    assert np.isnan(_run(a, b, v, mask=mask, transposed_out=False)[:, :, 3]).all()  # without: NaN, as softmax gives


def test_broadcast_operands_and_contiguous_ones() -> None:
    a = RNG.standard_normal((2, 4, 10, 8)).astype(np.float32)
    b = RNG.standard_normal((1, 1, 8, 10)).astype(np.float32)  # one key matrix for every head
    v = RNG.standard_normal((10, 6)).astype(np.float32)  # rank 2: broadcast
    out = np.empty((2, 4, 10, 6), np.float32)
    kernel = attention_onednn(a, b, v, (2, 4, 10, 10), out, None, None, None, False)
    assert kernel is not None
    kernel()
    np.testing.assert_allclose(out, _reference(a, b, v, None, None, None, False), rtol=0, atol=1e-5)


def test_what_it_declines() -> None:
    a, b, v = _heads(1, 8, 2, 4)
    out = np.empty((1, 2, 8, 4), np.float32)
    assert attention_onednn(a.astype(np.float64), b, v, (1, 2, 8, 8), out, None, None, None, False) is None
    assert attention_onednn(a, b, v, (1, 2, 8, 8), out.astype(np.float64), None, None, None, False) is None
    assert attention_onednn(a[:, :, :0], b, v, (1, 2, 0, 8), out[:, :, :0], None, None, None, False) is None
    assert attention_onednn(a[0, 0], b[0, 0], v[0, 0], (8, 8), out[0, 0], None, None, None, False) is None  # rank 2
