"""On the GPU: FLOAT and HALF SUM, SUB, PROD and DIV layers launch PyTorch's kernel (~6 us of host time against
CuPy's ~20: an eager run's residual adds), with NumPy's broadcasting and results; other operations stay CuPy's."""

from __future__ import annotations

import numpy as np
import pytest

from plugrt.ops.elementwise import ElementwiseOperator

pytestmark = pytest.mark.gpu

_NUMPY = {"SUM": np.add, "SUB": np.subtract, "PROD": np.multiply, "DIV": np.divide}
_TORCH = {"SUM": "add", "SUB": "sub", "PROD": "mul", "DIV": "div"}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", sorted(_NUMPY))
def test_arithmetic_on_the_gpu_is_pytorch_s_kernel(op: str, dtype: type) -> None:
    cp = pytest.importorskip("cupy")
    pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 1, 6)).astype(dtype)
    b = rng.uniform(0.5, 2.0, (1, 5, 6)).astype(dtype)
    layer = ElementwiseOperator({"op": op})
    layer.prepare([a.shape, b.shape], [(4, 5, 6)])
    out = cp.full((4, 5, 6), np.nan, dtype)
    launch = layer.direct_launch([cp.asarray(a), cp.asarray(b)], [out], cp)
    assert launch is not None
    call, args = launch
    assert call.func.__name__ == _TORCH[op]
    call(*args)
    cp.cuda.Device().synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), _NUMPY[op](a, b).astype(dtype))


def test_an_output_over_its_input_is_written_in_place() -> None:
    cp = pytest.importorskip("cupy")
    pytest.importorskip("torch")
    a = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    b = cp.full((1, 4), 0.5, cp.float32)
    layer = ElementwiseOperator({"op": "SUM"})
    layer.prepare([a.shape, b.shape], [a.shape])
    call, args = layer.direct_launch([a, b], [a], cp)
    call(*args)
    np.testing.assert_array_equal(cp.asnumpy(a), np.arange(12, dtype=np.float32).reshape(3, 4) + 0.5)


@pytest.mark.parametrize("op, dtype", [("MAX", np.float32), ("SUM", np.int32), ("POW", np.float32)])
def test_other_operations_and_types_keep_cupy_s_kernel(op: str, dtype: type) -> None:
    cp = pytest.importorskip("cupy")
    a, b = cp.ones((2, 3), dtype), cp.ones((2, 3), dtype)
    layer = ElementwiseOperator({"op": op})
    layer.prepare([a.shape, b.shape], [a.shape])
    assert layer.direct_launch([a, b], [cp.empty((2, 3), dtype)], cp) is None
