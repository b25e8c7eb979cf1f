"""The PyTorch kernel of products by a constant matrix on the CPU: oneDNN's linear, bias included.

``out = a @ w (+ bias)`` where ``w`` is an engine constant ``[K, N]`` (or ``[N, K]`` used
transposed) and ``a`` any ``[..., M, K]`` whose rows are one strided matrix: one call of
``torch.ops.mkldnn._linear_pointwise`` (oneDNN's matrix product, picking its kernels for the
CPU it runs on, AVX-512 where there is one), then the result is copied into the output. The
weight is passed as a transposed view of the plan's array (no copy, nothing packed ahead:
weights stay held once). A large product (:func:`~plugrt.ops.blas_threads.split_products`) is
split into blocks of rows (up to ``MAX_BLOCKS``, ``MIN_BLOCK_ROWS`` rows or more) that this thread
and the engine's helper thread take in turn (:func:`~plugrt.ops.host_threads.pulled_by_two`),
each a one-thread oneDNN call, as NumPy's products are (``product_parts.py``); in CPU time a
row block costs 2-5% more than the whole product. Never column blocks: oneDNN reorders a weight
whose columns are a strided slice on every call (thousands of times slower).

Packed weights: an engine on the CPU packs each constant matrix that only such products read into
oneDNN's own layout once, when it is made (:func:`pack_product_weights`); without that, oneDNN
reorders the plain weight at every call (128x768 by 768x3072: 3.5 ms plain, 2.8 ms packed). The
packed matrix *replaces* the weight in the engine's plan: the plan then holds a :class:`PackedWeight`,
an array of the weight's dims and type that stores no elements (every element reads as NaN) and
carries the packed matrix, so the weight is in memory once. Writing the plan unpacks the exact
original bytes (:func:`unpacked`, a reorder is a permutation), and the product's NumPy kernel is
never left to read the placeholder: a product whose weight is packed always runs oneDNN (an input
that is not one strided matrix is first copied into one).

Measured on the 2-core AMD EPYC VM (Zen 5, AVX-512) with ``OPENBLAS_CORETYPE=Haswell`` set in
its environment, one thread, 128x768 by 768x768: NumPy's OpenBLAS 1.29 ms, this 0.68 ms,
onnxruntime's MLAS 0.64 ms; 128x768 by 768x3072: 5.5, 3.1 and 2.6 ms.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from .blas_threads import split_products
from .host_threads import on_helper, pulled_by_two
from .product_parts import as_rows
from .torch_cpu import TORCH_TACTIC, Kernel, available, one_thread_here, torch_module, use_threads, view

__all__ = [
    "MAX_BLOCKS",
    "MIN_BLOCK_ROWS",
    "PackedMatrix",
    "PackedWeight",
    "linear",
    "linear_available",
    "linear_function",
    "pack_product_weights",
    "packed_matrix",
    "stored_weights",
    "unpacked",
]

#: at most this many row blocks per product
MAX_BLOCKS = 4
#: a row block has at least this many rows
MIN_BLOCK_ROWS = 48

_STATE: dict[str, Any] = {}


def linear_function() -> Any:
    """oneDNN's linear (``x @ w^T + b``), or None where this torch has none."""
    torch = torch_module()
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


def linear_available() -> bool:
    """Whether this torch has oneDNN's linear (built with MKLDNN, the CPU default of its wheels)."""
    return torch_module() is not None and linear_function() is not None


class PackedMatrix:
    """A product's constant ``[K, N]`` weight (``[N, K]`` where ``transposed``) as oneDNN's packed ``[N, K]``
    matrix (``torch.ops.mkldnn._reorder_linear_weight``), packed when a kernel first asks for it
    (:attr:`tensor`, at a context's first bind), which then drops the plain array: weights are packed one by one,
    each replacing its array, and the plain ones are held only until then."""

    def __init__(self, weight: np.ndarray, transposed: bool) -> None:
        self._plain: np.ndarray | None = weight
        self._tensor: Any = None
        self._kept: np.ndarray | None = None
        self._lock = threading.Lock()
        self.transposed = transposed
        self.shape: tuple[int, ...] = tuple(weight.shape)
        self.dtype = weight.dtype
        #: the output's width (``N``)
        self.cols = int(weight.shape[-2] if transposed else weight.shape[-1])

    @property
    def tensor(self) -> Any:
        """The packed matrix (packed now on the first call)."""
        if self._tensor is None:
            with self._lock:  # contexts may bind in threads of their own
                if self._tensor is None and self._plain is not None:
                    matrix = self._plain.reshape(self._plain.shape[-2:])
                    plain = view(matrix) if self.transposed else view(matrix).t()
                    self._tensor = torch_module().ops.mkldnn._reorder_linear_weight(plain)
                    self._plain = None
                    _return_freed_memory()
        return self._tensor

    def original(self, keep: bool = False) -> np.ndarray:
        """The weight as it was given (the plain array while not packed yet, else a new array with its bytes);
        with ``keep`` unpacked once and kept (for a NumPy kernel that runs the product after all: torch turned
        off after the engine was made)."""
        plain = self._plain if self._plain is not None else self._kept
        if plain is not None:
            return plain
        dense = self.tensor.to_dense()
        matrix = dense if self.transposed else dense.t().contiguous()
        array = np.asarray(matrix.numpy(), dtype=self.dtype).reshape(self.shape)
        array.flags.writeable = False
        if keep:
            self._kept = array
        return array


def _return_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere). A plain
    weight freed after packing stays in the heap otherwise, while the packed ones are allocated elsewhere:
    BERT-base's peak after its first run 871 MB without this, 752 MB with it (72 weights, 39 ms in all)."""
    trim = _STATE.get("trim", False)
    if trim is False:
        try:
            trim = ctypes.CDLL(None).malloc_trim
        except (AttributeError, OSError):
            trim = None
        _STATE["trim"] = trim
    if trim is not None:
        trim(0)


class PackedWeight(np.ndarray):
    """The place of a weight that a :class:`PackedMatrix` holds: an array of its dims and type without
    elements of its own (zero strides over one NaN, read-only) carrying the packed matrix in ``packed``;
    views and reshapes of it carry it too."""

    packed: PackedMatrix | None

    def __array_finalize__(self, obj: Any) -> None:
        self.packed = getattr(obj, "packed", None)


def _placeholder(matrix: PackedMatrix) -> PackedWeight:
    nan = np.full(1, np.nan, dtype=matrix.dtype)
    empty = np.lib.stride_tricks.as_strided(nan, matrix.shape, (0,) * len(matrix.shape), writeable=False)
    placeholder = empty.view(PackedWeight)
    placeholder.packed = matrix
    return placeholder


def packed_matrix(weight: Any) -> PackedMatrix | None:
    """The packed matrix ``weight`` stands for, or None for an ordinary array."""
    return weight.packed if isinstance(weight, PackedWeight) else None


def unpacked(weight: np.ndarray, keep: bool = False) -> np.ndarray:
    """``weight`` itself, or for a :class:`PackedWeight` the original array (unpacked now; with ``keep``, once
    for the engine's life: see :meth:`PackedMatrix.original`), viewed as ``weight`` is."""
    matrix = packed_matrix(weight)
    return weight if matrix is None else matrix.original(keep).reshape(weight.shape)


def linear(
    a: np.ndarray, weight: np.ndarray, transposed: bool, bias: np.ndarray | None, out: np.ndarray
) -> Kernel | None:
    """The kernel ``out = a @ weight (+ bias)``; ``weight`` is ``[K, N]``, or ``[N, K]`` with ``transposed``
    (leading dimensions of one allowed), or a :class:`PackedWeight`; ``bias`` has ``N`` values. None where it
    does not apply (never for a packed weight: an ``a`` that is not one strided matrix is copied into one)."""
    function = linear_function()
    packed = packed_matrix(weight)
    rows = as_rows(a)
    if function is None or (packed is None and (rows is None or rows.shape[0] == 0 or not out.flags.c_contiguous)):
        return None
    if packed is not None:
        n, wt = packed.cols, packed.tensor
    else:
        matrix: np.ndarray = weight.reshape(weight.shape[-2:])
        n = int(matrix.shape[0] if transposed else matrix.shape[1])
        wt = view(matrix) if transposed else view(matrix).t()
    count_rows = int(np.prod(a.shape[:-1], dtype=np.int64))
    if out.size != count_rows * n:
        return None
    bt = None if bias is None else view(bias).reshape(-1)
    if count_rows == 0:
        return lambda: None
    if rows is None or not out.flags.c_contiguous:
        return _staged(function, a, wt, bt, out, n)
    at, ot = view(rows), view(out).reshape(-1, n)
    flops = 2.0 * out.size * rows.shape[1]
    count = min(MAX_BLOCKS, rows.shape[0] // MIN_BLOCK_ROWS) if split_products(flops) else 1
    if count < 2:

        def run() -> None:
            use_threads(flops)
            ot.copy_(function(at, wt, bt, "none", [], ""))

        return run
    step = -(-rows.shape[0] // count)
    spans = [(start, min(start + step, rows.shape[0])) for start in range(0, rows.shape[0], step)]

    def block(item: int) -> None:
        if on_helper():
            one_thread_here()
        start, stop = spans[item]
        ot[start:stop].copy_(function(at[start:stop], wt, bt, "none", [], ""))

    def run_blocks() -> None:
        use_threads(0.0)  # one thread here too
        pulled_by_two(len(spans), block)

    return run_blocks


def _staged(function: Any, a: np.ndarray, wt: Any, bt: Any, out: np.ndarray, n: int) -> Kernel:
    """The product for an ``a`` that is not one strided matrix (copied into one first) or an ``out`` that is not
    C-contiguous (the result copied into it)."""
    torch = torch_module()
    source, target = view(a), view(out)
    staged = torch.empty(source.shape)
    flops = 2.0 * out.size * a.shape[-1]

    def run() -> None:
        use_threads(flops)
        staged.copy_(source)
        result = function(staged.reshape(-1, a.shape[-1]), wt, bt, "none", [], "")
        target.copy_(result.view(target.shape))

    return run


def _reader_of_constant(layer: Any, tensor: int) -> bool | None:
    """For a layer reading constant ``tensor``: whether its product takes it as ``[N, K]`` (True) or ``[K, N]``
    (False) when it runs oneDNN's linear on it, None where it reads it otherwise."""
    params = layer.params
    if layer.kind != "matrix_multiply" or layer.tactic != TORCH_TACTIC or params.get("op0") != "NONE":
        return None
    if params.get("op1") not in ("NONE", "TRANSPOSE") or layer.inputs[1:2] != [tensor] or layer.inputs[0] == tensor:
        return None
    return params.get("op1") == "TRANSPOSE"


def _gemm_reader(layer: Any, name: str) -> bool | None:
    """For a layer holding a weight as ``name``: as :func:`_reader_of_constant`, for a Gemm's ``b``."""
    params = layer.params
    if layer.kind != "gemm" or name != "b" or layer.tactic != TORCH_TACTIC:
        return None
    if params.get("trans_a") or params.get("uniform_b"):
        return None
    return bool(params.get("trans_b", False))


def pack_product_weights(plan: Any) -> int:
    """Pack, in ``plan`` (an engine's own, on the CPU), every FLOAT constant matrix that is read only by products
    which chose the PyTorch tactic and run oneDNN's linear on it, all taking it the same way round: the plan's
    weight becomes a :class:`PackedWeight` (see the module's note). Nothing is packed where torch is absent or
    turned off. Returns how many weights were packed."""
    if not available() or not linear_available():
        return 0
    readers: dict[str, list[bool | None]] = {}
    consumers: dict[int, list[Any]] = {}
    for layer in plan.layers:
        for tensor in set(layer.inputs):
            consumers.setdefault(tensor, []).append(layer)
    outputs = set(plan.io)
    for layer in plan.layers:
        for name, key in layer.weights.items():
            if layer.kind == "constant" and name == "value" and len(layer.outputs) == 1:
                tensor = layer.outputs[0]
                taken = [_reader_of_constant(c, tensor) for c in consumers.get(tensor, [])]
                readers.setdefault(key, []).extend(taken if taken and tensor not in outputs else [None])
            else:
                readers.setdefault(key, []).append(_gemm_reader(layer, name))
    count = 0
    for key, ways in readers.items():
        weight = plan.weights.get(key)
        if not ways or None in ways or len(set(ways)) != 1 or not _packable(weight):
            continue
        plan.weights[key] = _placeholder(PackedMatrix(weight, bool(ways[0])))
        count += 1
    return count


def _packable(weight: Any) -> bool:
    return (
        type(weight) is np.ndarray
        and weight.dtype == np.float32
        and weight.ndim >= 2
        and weight.size > 0
        and all(d == 1 for d in weight.shape[:-2])
    )


def stored_weights(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``weights`` with every :class:`PackedWeight` unpacked (what a plan file stores)."""
    return {name: unpacked(array) for name, array in weights.items()}
