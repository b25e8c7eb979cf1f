"""The one-pass LayerNorm CUDA kernel against a NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(("rows", "cols"), [(1, 256), (37, 768), (5, 1024), (130, 2048), (3, 4096), (9, 8192)])
def test_layer_norm_kernel_matches_numpy(dtype: type, rows: int, cols: int) -> None:
    import cupy as cp

    from plugrt.plugins._layer_norm_cuda import layer_norm_cuda, supports

    assert supports(dtype, cols)
    rng = np.random.default_rng(rows * cols)
    x = (rng.standard_normal((rows, cols)) * 3 + 1).astype(dtype)
    gamma = rng.standard_normal(cols).astype(np.float32)
    beta = rng.standard_normal(cols).astype(np.float32)
    dx, dg, db = cp.asarray(x), cp.asarray(gamma), cp.asarray(beta)
    dy = cp.zeros_like(dx)
    stream = cp.cuda.Stream(non_blocking=True)
    layer_norm_cuda(dx.data.ptr, dg.data.ptr, db.data.ptr, dy.data.ptr, rows, cols, 1e-5, dtype, stream.ptr)
    stream.synchronize()
    xf = x.astype(np.float64)
    mean = xf.mean(-1, keepdims=True)
    ref = (xf - mean) / np.sqrt(((xf - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * gamma + beta
    tol = 1e-4 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(cp.asnumpy(dy).astype(np.float64), ref, rtol=tol, atol=tol * 4)


def test_unsupported_shapes_are_reported() -> None:
    from plugrt.plugins._layer_norm_cuda import supports

    assert not supports(np.float32, 3)  # not a multiple of the vector width
    assert not supports(np.int32, 1024)
