"""The one-pass LayerNorm CUDA kernel against a NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(("rows", "cols"), [(1, 256), (37, 768), (5, 1024), (130, 2048), (3, 4096), (9, 8192)])
def test_layer_norm_kernel_matches_numpy(dtype: type, rows: int, cols: int) -> None:
    import cupy as cp

    from plugrt.ops.layer_norm_cuda import layer_norm_cuda, supports

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
    from plugrt.ops.layer_norm_cuda import supports

    assert not supports(np.float32, 3)  # not a multiple of the vector width
    assert not supports(np.int32, 1024)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("cols", [768, 1024, 4096])
@pytest.mark.parametrize("keep_sum", [False, True])
def test_the_kernel_normalizes_a_sum_and_writes_it(dtype: type, cols: int, keep_sum: bool) -> None:
    """``LayerNorm(x + r)``: the sum rounded to the row type first (as a separate add stores it), kept on request."""
    import cupy as cp

    from plugrt.ops.layer_norm_cuda import layer_norm_launch

    rows = 67
    rng = np.random.default_rng(cols)
    x, r = (rng.normal(0, 2, (rows, cols)).astype(dtype) for _ in range(2))
    gamma, beta = rng.normal(1, 0.1, cols).astype(np.float32), rng.normal(0, 0.1, cols).astype(np.float32)
    dx, dr, dg, db = (cp.asarray(a) for a in (x, r, gamma, beta))
    dy, ds = cp.zeros_like(dx), cp.zeros_like(dx)
    kernel, arguments = layer_norm_launch(
        dx.data.ptr, dg.data.ptr, db.data.ptr, dy.data.ptr, rows, cols, 1e-5, dtype,
        residual=dr.data.ptr, total=ds.data.ptr if keep_sum else 0,
    )
    kernel(*arguments)
    total = (x + r).astype(np.float64)  # rounded to dtype by the add, as the kernel rounds it
    if keep_sum:
        np.testing.assert_array_equal(cp.asnumpy(ds), x + r)
    else:
        assert not cp.asnumpy(ds).any()
    d = total - total.mean(-1, keepdims=True)
    ref = d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * gamma + beta
    tol = 1e-4 if dtype == np.float32 else 1e-2
    np.testing.assert_allclose(cp.asnumpy(dy).astype(np.float64), ref, rtol=tol, atol=tol * 4)


def test_a_sum_output_without_a_residual_is_refused() -> None:
    from plugrt.ops.layer_norm_cuda import layer_norm_launch

    with pytest.raises(ValueError, match="the sum's output \\(total\\) needs a residual"):
        layer_norm_launch(16, 16, 16, 16, 1, 768, 1e-5, np.float32, residual=0, total=16)


def _residual_model(dtype: type, pre_ln: bool, width: int = 768) -> object:
    from onnx import TensorProto, helper, numpy_helper

    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    rng = np.random.default_rng(3)
    consts = {"gamma": rng.normal(1, 0.2, width), "beta": rng.normal(0, 0.2, width), "two": [2.0]}
    nodes = [
        helper.make_node("Add", ["x", "r"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1),
    ]
    if pre_ln:
        nodes.append(helper.make_node("Mul", ["s", "two"], ["z"]))
    graph = helper.make_graph(
        nodes,
        "residual_ln",
        [helper.make_tensor_value_info(k, elem, [4, 33, width]) for k in ("x", "r")],
        [helper.make_tensor_value_info(o, elem, None) for o in (("y", "z") if pre_ln else ("y",))],
        [numpy_helper.from_array(np.asarray(v, dtype), k) for k, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("pre_ln", [False, True])
def test_a_residual_layer_norm_fuses_on_the_gpu_and_matches_the_cpu(dtype: type, pre_ln: bool) -> None:
    import plugrt

    model = _residual_model(dtype, pre_ln)
    rng = np.random.default_rng(4)
    feeds = {k: rng.normal(0, 2, (4, 33, 768)).astype(dtype) for k in ("x", "r")}
    gpu = plugrt.compile(model, device="cuda")
    layers = [layer for layer in gpu.engine.plan.layers if layer.kind != "constant"]
    norm = next(layer for layer in layers if layer.kind == "normalization")
    assert norm.params["residual"] is True and norm.params["keep_sum"] is pre_ln
    assert norm.tactic == 0  # the one-pass CUDA kernel (PyTorch's layer_norm takes no residual)
    want = plugrt.compile(model)(feeds)
    for _ in range(3):  # eager, then captured and replayed
        got = gpu(feeds)
        tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-2, atol=1e-2)
        for name in want:
            np.testing.assert_allclose(np.asarray(got[name], np.float32), np.asarray(want[name], np.float32), **tol)
