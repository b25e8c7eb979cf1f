"""oneDNN's matmul primitive called directly (``ops/onednn_matmul.py``) for products by a constant matrix: results
against a float64 reference, weights packed without torch and given back bit for bit, every way ``a``, the weight
and the bias come, the cases it declines, and whole models whose products take it. Skips without the library."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from onednn_support import NEEDS_NUMBA, ONEDNN_TESTS, BusyMachine
from plugrt.ops import blas_threads, onednn, onednn_buffers, onednn_parts
from plugrt.ops.linear_weights import PackedMatrix, matmul_weight, packed_matrix, placeholder, stored_weights, unpacked
from plugrt.ops.onednn_matmul import MatmulWeight, pack, product_onednn
from plugrt.ops.torch_cpu_linear import linear

pytestmark = ONEDNN_TESTS

RNG = np.random.default_rng(5)
K, N = 72, 56


def _random(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * max(float(np.abs(want).max()), 1.0))


def _run(a: np.ndarray, weight: np.ndarray | MatmulWeight, transposed: bool, bias: np.ndarray | None) -> np.ndarray:
    out = np.full((*a.shape[:-1], N), np.nan, np.float32)
    kernel = product_onednn(a, weight, transposed, bias, out)
    assert kernel is not None
    kernel()
    return out


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("rows", [1, 7, 130])
def test_products_by_plain_and_packed_weights(transposed: bool, with_bias: bool, rows: int) -> None:
    weight = _random(N, K) if transposed else _random(K, N)
    bias = _random(N) if with_bias else None
    a = _random(2, rows, K)
    plain = weight.T if transposed else weight
    want = a.astype(np.float64) @ plain + (0 if bias is None else bias)
    _close(_run(a, weight, transposed, bias), want)
    packed = pack(weight, transposed)
    assert packed is not None and packed.cols == N
    _close(_run(a, packed, transposed, bias), want)


def test_a_packed_weight_is_given_back_bit_for_bit() -> None:
    for transposed in (False, True):
        weight = _random(1, N, K) if transposed else _random(1, K, N)  # leading dimensions of one
        place = placeholder(PackedMatrix(weight, transposed))
        matrix = packed_matrix(place)
        assert matrix is not None
        assert isinstance(matrix.matrix, MatmulWeight)  # packed without torch
        back = unpacked(place)
        assert back.shape == weight.shape and not back.flags.writeable
        np.testing.assert_array_equal(back, weight)


def test_rows_that_are_not_one_matrix_are_staged_and_strided_rows_are_read_in_place() -> None:
    weight, bias = _random(K, N), _random(N)
    transposed_rows = _random(5, 3, K).transpose(1, 0, 2)  # not one strided matrix: copied into one at each run
    want = transposed_rows.astype(np.float64) @ weight + bias
    _close(_run(transposed_rows, weight, False, bias), want)
    wide = _random(9, K + 8)[:, :K]  # one matrix, rows K + 8 apart: read where it is
    _close(_run(wide, weight, False, None), wide.astype(np.float64) @ weight)
    transposed_rows[...] = _random(3, 5, K)  # the staged copy is made at every run, not once
    out = np.empty((3, 5, N), np.float32)
    kernel = product_onednn(transposed_rows, weight, False, bias, out)
    assert kernel is not None
    for _ in range(2):
        transposed_rows += 1.0
        kernel()
        _close(out, transposed_rows.astype(np.float64) @ weight + bias)


def test_no_rows_is_a_run_that_does_nothing() -> None:
    out = np.empty((0, N), np.float32)
    kernel = product_onednn(np.empty((0, K), np.float32), _random(K, N), False, None, out)
    assert kernel is not None
    kernel()


def test_what_it_declines() -> None:
    weight, a, out = _random(K, N), _random(4, K), np.empty((4, N), np.float32)
    assert product_onednn(a.astype(np.float64), weight, False, None, out) is None  # not FLOAT
    assert product_onednn(a, weight.astype(np.float16), False, None, out) is None
    assert product_onednn(a, weight, False, None, np.empty((4, N), np.float64)) is None
    assert product_onednn(a, weight, False, None, np.empty((N, 4), np.float32).T) is None  # out not C-ordered
    assert product_onednn(a, weight, False, None, np.empty((4, N + 1), np.float32)) is None  # wrong width
    assert product_onednn(np.empty((4, 0), np.float32), np.empty((0, N), np.float32), False, None, out) is None
    assert pack(weight.astype(np.float64), False) is None
    assert pack(np.empty((0, N), np.float32), False) is None


def test_the_library_turned_off_leaves_torch_s_linear_or_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(onednn.ENV_SWITCH, "0")
    assert pack(_random(K, N), False) is None
    assert product_onednn(_random(4, K), _random(K, N), False, None, np.empty((4, N), np.float32)) is None


def test_one_primitive_per_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large product is made for one thread and for the engine's count; the run picks by the machine's load."""
    monkeypatch.setattr(blas_threads, "engine_threads", lambda: 2)
    monkeypatch.setattr(onednn_buffers, "engine_threads", lambda: 2)
    made = []
    real = onednn.Primitive.__init__

    def recording(self, lib, make, post_ops, threads):  # type: ignore[no-untyped-def]
        made.append(threads)
        real(self, lib, make, post_ops, threads)

    monkeypatch.setattr(onednn.Primitive, "__init__", recording)
    monkeypatch.setattr(onednn_parts, "PART_FLOPS", 1e6)
    weight, a = _random(K, N), _random(4000, K)
    want = a.astype(np.float64) @ weight
    for busy in (False, True):
        monkeypatch.setattr(blas_threads, "_machine_busy", lambda busy=busy: busy)
        _close(_run(a, weight, False, None), want)
    assert made == [1, 2, 1, 2] + [1] * 8  # busy: one-thread primitives over 8 bands of rows (below)


@pytest.mark.parametrize(
    ("weight_kind", "with_bias", "steps", "rows_kind"),
    [
        ("plain", False, (), "strided"),
        ("transposed", True, (("relu", 0.0, 0.0),), "dense"),
        ("packed", True, (("gelu_erf", 0.0, 0.0),), "dense"),
        ("packed_transposed", False, (), "staged"),
    ],
)
@pytest.mark.parametrize("compiled", [pytest.param(True, marks=NEEDS_NUMBA), False])
def test_on_a_busy_machine_bands_of_rows_give_the_whole_products_bits(
    monkeypatch: pytest.MonkeyPatch, weight_kind: str, with_bias: bool, steps: tuple, rows_kind: str, compiled: bool
) -> None:
    """Busy: the product runs as one-thread primitives over bands of its rows (at most MAX_PARTS), pulled by two
    threads, sharing the weight (plain, transposed or packed), the bias and the post-ops: the quiet run's bits,
    rows read in place (strided) or staged."""
    machine = BusyMachine(monkeypatch, compiled=compiled)
    transposed = "transposed" in weight_kind
    weight = _random(N, K) if transposed else _random(K, N)
    plain = weight.T if transposed else weight
    given = pack(weight, transposed) if weight_kind.startswith("packed") else weight
    assert given is not None
    bias = _random(N) if with_bias else None
    a = {"dense": _random(37, K), "strided": _random(37, K + 8)[:, :K], "staged": _random(37, 1, K).transpose(1, 0, 2)}[
        rows_kind
    ]
    out = np.full((*a.shape[:-1], N), np.nan, np.float32)
    kernel = product_onednn(a, given, transposed, bias, out, steps)
    assert kernel is not None
    kernel()
    quiet = out.copy()
    machine.busy = True
    out.fill(np.nan)
    kernel()
    assert machine.pulled == [min(37, onednn_parts.MAX_PARTS)]
    assert len(machine.made) == 1 and (machine.made[0].compiled is not None) == compiled
    np.testing.assert_array_equal(out, quiet)
    want = a.astype(np.float64) @ plain + (0 if bias is None else bias)
    if steps and steps[0][0] == "relu":
        want = np.maximum(want, 0.0)
    if steps and steps[0][0] == "gelu_erf":
        import math

        want = want * 0.5 * (1.0 + np.vectorize(math.erf)(want / math.sqrt(2.0)))
    _close(out, want)


def _model(transposed: bool) -> object:
    weight = _random(N, K) if transposed else _random(K, N)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=int(transposed), alpha=0.5, beta=2.0)]
    graph = helper.make_graph(
        nodes,
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(_random(N), "b")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("transposed", [False, True])
def test_a_model_s_products_run_it_and_plans_keep_the_original_bytes(
    monkeypatch: pytest.MonkeyPatch, transposed: bool
) -> None:
    pytest.importorskip("torch")  # (the tactic is PyTorch's; its products take this kernel first)
    model = _model(transposed)
    x = _random(33, K)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    plain = plugrt.compile(model)
    want = plain(x=x)["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    compiled = plugrt.compile(model)
    got = compiled(x=x)["y"]
    _close(got, want)
    assert compiled.engine.packed_weights == 1
    modules = {getattr(fn, "__module__", "") for _, fn, _ in compiled.context._executor._calls}
    assert "plugrt.ops.onednn_buffers" in modules  # the primitive's run (ops/onednn_buffers.launcher)
    data = compiled.serialize()
    assert plugrt.Runtime(plugrt.Logger()).deserialize_cuda_engine(data).plan.to_bytes() == bytes(data)
    stored = stored_weights(compiled.engine.plan.weights)  # what a plan file holds: the original bytes
    for name, array in plain.engine.plan.weights.items():
        np.testing.assert_array_equal(stored[name], array)


def test_a_weight_packed_for_it_is_not_given_to_torch_s_linear() -> None:
    """A weight packed for the direct primitive: torch's linear declines it (the operator's own kernel unpacks it
    where the primitive declines too), and :func:`matmul_weight` hands the packing to the primitive."""
    pytest.importorskip("torch")
    weight = _random(K, N)
    place = placeholder(PackedMatrix(weight, False))
    a, out = _random(6, K), np.empty((6, N), np.float32)
    assert linear(a, place, False, None, out) is None
    packed = matmul_weight(place)
    assert isinstance(packed, MatmulWeight)
    _close(_run(a, packed, False, None), a.astype(np.float64) @ weight)
    assert matmul_weight(weight) is weight  # a plain array as it is


def test_each_thread_has_one_buffer_per_slot_its_layers_share() -> None:
    """Transient memories (scratchpads, staging copies) live in aligned buffers of the running thread's, one per
    slot, grown to the largest need; another slot or another thread has its own."""
    slot = onednn.SCRATCH_SLOT
    first = onednn.thread_buffer(slot, 1000)
    assert first % onednn.SCRATCH_ALIGN == 0 and onednn.thread_buffer(slot, 10) == first
    grown = onednn.thread_buffer(slot, 8 << 20)
    assert grown % onednn.SCRATCH_ALIGN == 0 and onednn.thread_buffer(slot, 1000) == grown
    assert onednn.thread_buffer(slot + 3, 1000) != grown
    other: list[int] = []
    helper_thread = threading.Thread(target=lambda: other.append(onednn.thread_buffer(slot, 1000)))
    helper_thread.start()
    helper_thread.join()
    assert other and other[0] != grown


def test_products_on_two_threads_at_once_keep_their_scratch_apart() -> None:
    """Two products run over and over on two threads at the same time (each primitive's scratch in its thread's
    buffer): every result is right."""
    cases = []
    for rows in (64, 96):
        weight, a = _random(K, N), _random(rows, K)
        out = np.zeros((rows, N), np.float32)
        kernel = product_onednn(a, pack(weight, False), False, None, out)
        assert kernel is not None
        cases.append((kernel, out, a.astype(np.float64) @ weight))
    failures: list[str] = []

    def repeat(kernel: object, out: np.ndarray, want: np.ndarray) -> None:
        for _ in range(200):
            out[...] = np.nan
            kernel()  # type: ignore[operator]
            if not np.allclose(out, want, rtol=0, atol=2e-6 * max(float(np.abs(want).max()), 1.0)):
                failures.append("wrong product")
                return

    threads = [threading.Thread(target=repeat, args=case) for case in cases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
