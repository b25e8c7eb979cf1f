"""Weights of products by a constant matrix packed in oneDNN's layout by the engine on the CPU: the packed matrix
replaces the plan's array (held once), results equal the unpacked oneDNN kernel's bit for bit, plans write the
original bytes, and a product whose weight is packed still runs where torch is turned off afterwards or where
its input is not one strided matrix. Skips without torch."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
import plugrt.engine.engine as engine_module
from plugrt.core.errors import TypeMismatchError
from plugrt.ops.linear_weights import PackedMatrix, PackedWeight, packed_matrix, placeholder, stored_weights, unpacked
from plugrt.ops.torch_cpu_linear import linear

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _torch_s_own_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin torch's packed matrices: oneDNN's primitive called directly, which the products take first where its
    library is there, is turned off (tests/unit/test_onednn_matmul.py pins that one)."""
    monkeypatch.setenv("PLUGRT_ONEDNN", "0")

RNG = np.random.default_rng(47)
K, N, SHARED = 96, 80, 64
IDX = np.array([0, 2], np.int64)
INITS = {
    "w": RNG.standard_normal((K, N)),
    "b": RNG.standard_normal(N),
    "g": RNG.standard_normal((N, N)),
    "s": RNG.standard_normal((N, SHARED)),
}
n = helper.make_node


def _model() -> object:
    """A MatMul by ``w`` with its bias, a Gemm by ``g`` (transposed, alpha),
    and ``s`` read by a MatMul and by a Gather of given indices (not packed: the Gather reads its values)."""
    inits = INITS
    nodes = [
        n("MatMul", ["x", "w"], ["m"]),
        n("Add", ["m", "b"], ["h"]),
        n("Reshape", ["h", "flat"], ["h2"]),
        n("Gemm", ["h2", "g"], ["gm"], transB=1, alpha=0.5),
        n("MatMul", ["gm", "s"], ["y"]),
        n("Gather", ["s", "idx"], ["rows"]),
    ]
    graph = helper.make_graph(
        nodes,
        "packed",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 7, K]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "rows")],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()]
        + [numpy_helper.from_array(np.array([-1, N], np.int64), "flat")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _compile(monkeypatch, pack: bool) -> plugrt.onnx.compile.CompiledModel:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    if not pack:
        monkeypatch.setattr(engine_module, "pack_product_weights", lambda plan: 0)
    compiled = plugrt.compile(_model(), shapes={"x": ((1, 7, K), (2, 7, K), (4, 7, K)), "idx": ((2,),) * 3})
    monkeypatch.undo()
    return compiled


def test_packed_weights_replace_the_arrays_and_compute_what_the_plain_kernel_does(monkeypatch) -> None:
    plain, packed = _compile(monkeypatch, False), _compile(monkeypatch, True)
    assert plain.engine.packed_weights == 0 and packed.engine.packed_weights == 2  # w and g; s is read by a Gather
    assert plain.network is not None and packed.network is None  # released: it held the plain arrays
    x = RNG.standard_normal((3, 7, K)).astype(np.float32)
    want, got = plain(x=x, idx=IDX), packed(x=x, idx=IDX)
    np.testing.assert_array_equal(got["y"], want["y"])  # the same oneDNN product, only its weight packed ahead
    np.testing.assert_array_equal(got["rows"], want["rows"])
    places = [w for w in packed.engine.plan.weights.values() if packed_matrix(w) is not None]
    assert len(places) == 2
    for place in places:  # no elements of their own: zero strides over one value, read-only
        assert isinstance(place, PackedWeight) and not place.flags.writeable and set(place.strides) == {0}
    arena = packed.context._executor.arena
    assert not any(np.shares_memory(v, arena) for v in packed.context._executor.weight_views.values())


def test_a_plan_with_packed_weights_is_written_with_the_original_bytes(monkeypatch) -> None:
    plain, packed = _compile(monkeypatch, False), _compile(monkeypatch, True)
    stored = stored_weights(packed.engine.plan.weights)
    for name, array in plain.engine.plan.weights.items():
        np.testing.assert_array_equal(stored[name], array)
        assert stored[name].dtype == array.dtype and stored[name].shape == array.shape
    data = packed.serialize()
    monkeypatch.setenv("PLUGRT_TORCH", "1")
    loaded = plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(data)
    assert loaded.plan.to_bytes() == bytes(data)
    assert loaded.packed_weights == 2


def test_a_packed_weight_runs_with_numpy_once_torch_is_turned_off(monkeypatch) -> None:
    packed = _compile(monkeypatch, True)
    x = RNG.standard_normal((2, 7, K)).astype(np.float32)
    with_torch = packed(x=x, idx=IDX)["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "0")  # read at bind: the next shapes bind the NumPy kernels
    context = packed.engine.create_execution_context()
    context.set_input_shape("x", x.shape)
    context.set_input_shape("idx", IDX.shape)
    y = np.empty(tuple(context.get_tensor_shape("y")), np.float32)
    rows = np.empty(tuple(context.get_tensor_shape("rows")), np.float32)
    for name, array in (("x", x), ("idx", IDX), ("y", y), ("rows", rows)):
        context.set_tensor_address(name, array.ctypes.data)
    assert context.execute_async_v3(0)
    assert not np.isnan(y).any()
    np.testing.assert_allclose(y, with_torch, rtol=0, atol=2e-6 * float(np.abs(with_torch).max()))


def test_the_torch_tactic_of_a_product_is_timed_on_the_weight_the_engine_packs(monkeypatch) -> None:
    """The builder times oneDNN's product on the packed weight where the engine will hold it packed (a plain one
    is reordered at every call and made NumPy's product look the faster), on the plain one where it will not."""
    import plugrt.ops.gemm as gemm_module
    import plugrt.ops.matrix_multiply as matmul_module

    seen: list[tuple[tuple[int, ...], bool]] = []

    def recording(a, weight, transposed, bias, out):  # type: ignore[no-untyped-def]
        seen.append((tuple(weight.shape), packed_matrix(weight) is not None))
        return linear(a, weight, transposed, bias, out)

    monkeypatch.setattr(matmul_module, "linear", recording)
    monkeypatch.setattr(gemm_module, "linear", recording)
    monkeypatch.setenv("PLUGRT_TORCH", "1")  # timed, not forced
    plugrt.compile(_model(), shapes={"x": ((1, 7, K), (2, 7, K), (4, 7, K)), "idx": ((2,),) * 3})
    timed: dict[tuple[int, ...], bool] = {}
    for shape, packed in seen:  # the first call of each: the timing's (the engine's binds come after)
        timed.setdefault(shape[-2:], packed)
    assert timed[(K, N)] is True  # w: read by its MatMul alone
    assert timed[(N, N)] is True  # g: the Gemm's own weight
    assert timed[(N, SHARED)] is False  # s: a Gather reads it too, the engine keeps it plain


def test_a_packed_weight_takes_an_input_that_is_not_one_strided_matrix() -> None:
    weight = RNG.standard_normal((K, N)).astype(np.float32)
    place = _place(weight)
    x = RNG.standard_normal((5, 3, K)).astype(np.float32).transpose(1, 0, 2)  # rows not one strided matrix
    out = np.empty((3, 5, N), np.float32)
    kernel = linear(x, place, False, None, out)
    assert kernel is not None
    kernel()
    plain = np.empty_like(out)
    direct = linear(np.ascontiguousarray(x), weight, False, None, plain)
    assert direct is not None
    direct()
    np.testing.assert_array_equal(out, plain)
    empty = linear(np.empty((0, K), np.float32), place, False, None, np.empty((0, N), np.float32))
    assert empty is not None
    empty()  # nothing to compute


def test_unpacked_gives_the_original_array_before_and_after_packing() -> None:
    weight = RNG.standard_normal((1, N, K)).astype(np.float32)
    place = _place(weight, transposed=True)
    matrix = packed_matrix(place)
    assert matrix is not None and matrix.cols == N
    assert np.shares_memory(unpacked(place), weight)  # not packed yet: the plain array itself
    assert tuple(matrix.matrix.shape) == (N, K)  # packs it, whole
    again = unpacked(place)
    assert not np.shares_memory(again, weight)
    np.testing.assert_array_equal(again, weight)
    plain = np.ones(3, np.float32)
    assert unpacked(plain) is plain and packed_matrix(plain) is None


def test_network_input_type_after_the_network_is_released(monkeypatch) -> None:
    packed = _compile(monkeypatch, True)
    assert packed.network is None
    assert packed.network_input_type("x") is np.float32
    with pytest.raises(TypeMismatchError, match="'nope' is not an input; inputs: \\['x', 'idx'\\]"):
        packed.network_input_type("nope")


def _place(weight: np.ndarray, transposed: bool = False) -> PackedWeight:
    place = placeholder(PackedMatrix(weight, transposed))
    gc.collect()
    return place


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("transposed", [False, True])
def test_a_wide_weight_is_packed_whole_and_its_product_is_one_call(monkeypatch, threads: int, transposed: bool) -> None:
    """Whatever the engine's threads, a weight is one packed matrix and its product one call of oneDNN's linear on
    torch's threads (handing blocks to the helper thread cost more than it saved); an ``a`` that is not one strided
    matrix is staged."""
    from plugrt.ops import blas_threads

    monkeypatch.setattr(blas_threads, "engine_threads", lambda: threads)
    wide = 2 * 300
    weight = RNG.standard_normal((wide, K) if transposed else (K, wide)).astype(np.float32)
    bias = RNG.standard_normal(wide).astype(np.float32)
    place = _place(weight, transposed)
    matrix = packed_matrix(place)
    assert matrix is not None and tuple(matrix.matrix.shape) == (wide, K)
    np.testing.assert_array_equal(unpacked(place), weight)  # the packed matrix gives the original bytes back
    x = RNG.standard_normal((2, 50, K)).astype(np.float32)
    exact = x.astype(np.float64) @ (weight.T if transposed else weight).astype(np.float64) + bias
    for given in (x, x.transpose(1, 0, 2)):  # one strided matrix, and not (staged)
        out = np.empty((*given.shape[:-1], wide), np.float32)
        kernel = linear(given, place, transposed, bias, out)
        assert kernel is not None
        kernel()
        want = exact if given is x else exact.transpose(1, 0, 2)
        np.testing.assert_allclose(out, want, rtol=0, atol=2e-6 * float(np.abs(want).max()))
