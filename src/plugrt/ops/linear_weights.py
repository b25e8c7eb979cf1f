"""Weights of products by a constant matrix held packed in oneDNN's layout by an engine on the CPU.

oneDNN's linear (``ops/torch_cpu_linear.py``) reorders a plain weight into its own blocked layout at every
call (128x768 by 768x3072, one thread: 3.5 ms plain, 2.8 ms packed; 128x512 by 512x512: 0.33 against 0.31).
An engine on the CPU therefore packs each constant matrix that only such products read
(:func:`pack_product_weights`, when the engine is made), and the packed matrix *replaces* the weight in the
engine's plan: the plan then holds a :class:`PackedWeight`, an array of the weight's dims and type that stores
no elements (zero strides over one NaN, read-only) and carries the :class:`PackedMatrix`. The matrix is packed
when a kernel first asks for it (a context's first bind) and then drops the plain array, so weights are packed
one by one, each replacing its array, and the freed memory is given back to the system (glibc's
``malloc_trim``: the packed matrices are allocated elsewhere than the plain ones were). A weight is packed whole:
its product runs on torch's threads in one call (``torch_cpu_linear.py``).

Writing the plan gives the exact original bytes back (:func:`stored_weights`: a reorder is a permutation), and
a product's NumPy kernel never reads a placeholder: it unpacks the weight once (:func:`unpacked`) where it runs
after all (torch turned off after the engine was made).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .heap import return_freed_memory
from .onednn_matmul import MatmulWeight, pack
from .products import rows_first
from .torch_cpu import TORCH_TACTIC, available, direct_runs, torch_module, view

__all__ = [
    "PackedMatrix",
    "PackedWeight",
    "matmul_weight",
    "pack_product_weights",
    "packable_weights",
    "packed_matrix",
    "placeholder",
    "stored_weights",
    "timed_packing",
    "unpacked",
]


class PackedMatrix:
    """A product's constant ``[K, N]`` weight (``[N, K]`` where ``transposed``) packed in oneDNN's layout, when a
    kernel first asks for it (:attr:`matrix`), which then drops the plain array: for oneDNN's matmul primitive
    called directly where its library is there (a :class:`~.onednn_matmul.MatmulWeight`), else as torch's packed
    ``[N, K]`` matrix (``torch.ops.mkldnn._reorder_linear_weight``)."""

    def __init__(self, weight: np.ndarray, transposed: bool) -> None:
        self._plain: np.ndarray | None = weight
        self._packed: Any = None
        self._kept: np.ndarray | None = None
        self._lock = threading.Lock()
        self.transposed = transposed
        self.shape: tuple[int, ...] = tuple(weight.shape)
        self.dtype = weight.dtype
        #: the output's width (``N``)
        self.cols = int(weight.shape[-2] if transposed else weight.shape[-1])

    @property
    def matrix(self) -> Any:
        """The packed matrix (packed now on the first call): a :class:`~.onednn_matmul.MatmulWeight`, or torch's
        packed ``[N, K]`` tensor."""
        if self._packed is None:
            with self._lock:  # contexts may bind in threads of their own
                if self._packed is None and self._plain is not None:
                    self._packed = self._pack(self._plain)
                    self._plain = None
                    return_freed_memory()
        assert self._packed is not None
        return self._packed

    def _pack(self, weight: np.ndarray) -> Any:
        direct = pack(weight.reshape(weight.shape[-2:]), self.transposed)
        if direct is not None:  # packed for oneDNN's matmul primitive called directly (ops/onednn_matmul.py)
            return direct
        reorder = torch_module().ops.mkldnn._reorder_linear_weight
        matrix = view(weight.reshape(weight.shape[-2:]))
        rows = matrix if self.transposed else matrix.t()  # [N, K]
        return reorder(rows.contiguous())  # (a transposed view is strided: made contiguous for the reorder)

    def original(self, keep: bool = False) -> np.ndarray:
        """The weight as it was given (the plain array while not packed yet, else a new array with its bytes);
        with ``keep`` unpacked once and kept (for a NumPy kernel that runs the product after all)."""
        plain = self._plain if self._plain is not None else self._kept
        if plain is not None:
            return plain
        packed = self.matrix
        if isinstance(packed, MatmulWeight):
            array = packed.plain(self.shape, self.transposed)
        else:
            dense = packed.to_dense()  # [N, K]
            matrix = dense if self.transposed else dense.t().contiguous()
            array = np.asarray(matrix.numpy(), dtype=self.dtype).reshape(self.shape)
        array.flags.writeable = False
        if keep:
            self._kept = array
        return array


class PackedWeight(np.ndarray):
    """The place of a weight that a :class:`PackedMatrix` holds: an array of its dims and type without
    elements of its own (zero strides over one NaN, read-only) carrying the packed matrix in ``packed``;
    views and reshapes of it carry it too."""

    packed: PackedMatrix | None

    def __array_finalize__(self, obj: Any) -> None:
        self.packed = getattr(obj, "packed", None)


def placeholder(matrix: PackedMatrix) -> PackedWeight:
    """The :class:`PackedWeight` standing for ``matrix``."""
    nan = np.full(1, np.nan, dtype=matrix.dtype)
    empty = np.lib.stride_tricks.as_strided(nan, matrix.shape, (0,) * len(matrix.shape), writeable=False)
    place = empty.view(PackedWeight)
    place.packed = matrix
    return place


def packed_matrix(weight: Any) -> PackedMatrix | None:
    """The packed matrix ``weight`` stands for, or None for an ordinary array."""
    return weight.packed if isinstance(weight, PackedWeight) else None


def matmul_weight(weight: np.ndarray) -> np.ndarray | MatmulWeight:
    """``weight`` as oneDNN's matmul called directly takes it: the :class:`~.onednn_matmul.MatmulWeight` a
    :class:`PackedWeight` stands for (packed now on the first call), the original array of one torch packed, or
    ``weight`` itself."""
    matrix = packed_matrix(weight)
    if matrix is None:
        return weight
    packed = matrix.matrix
    return packed if isinstance(packed, MatmulWeight) else unpacked(weight, keep=True)


def unpacked(weight: np.ndarray, keep: bool = False) -> np.ndarray:
    """``weight`` itself, or for a :class:`PackedWeight` the original array (see :meth:`PackedMatrix.original`),
    viewed as ``weight`` is."""
    matrix = packed_matrix(weight)
    return weight if matrix is None else matrix.original(keep).reshape(weight.shape)


def stored_weights(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``weights`` with every :class:`PackedWeight` unpacked (what a plan file stores)."""
    return {name: unpacked(array) for name, array in weights.items()}


def _reader_of_constant(layer: Any, tensor: int, takes_linear: Callable[[Any], bool]) -> bool | None:
    """For a layer reading constant ``tensor``: whether its product takes it as ``[N, K]`` (True) or ``[K, N]``
    (False) when it runs oneDNN's linear on it (``takes_linear(layer)``), None where it reads it otherwise."""
    params = layer.params
    if layer.kind != "matrix_multiply" or not takes_linear(layer) or params.get("op0") != "NONE":
        return None
    if params.get("op1") not in ("NONE", "TRANSPOSE") or layer.inputs[1:2] != [tensor] or layer.inputs[0] == tensor:
        return None
    return params.get("op1") == "TRANSPOSE"


def _gemm_reader(layer: Any, name: str, takes_linear: Callable[[Any], bool]) -> bool | None:
    """For a layer holding a weight as ``name``: as :func:`_reader_of_constant`, for a Gemm's ``b``."""
    params = layer.params
    if layer.kind != "gemm" or name != "b" or not takes_linear(layer):
        return None
    if params.get("trans_a") or params.get("uniform_b"):
        return None
    return bool(params.get("trans_b", False))


def packable_weights(layers: Sequence[Any], outputs: set[int], takes_linear: Callable[[Any], bool]) -> dict[str, bool]:
    """The weight keys of ``layers`` (plan or build layers) that an engine holds packed: FLOAT constant matrices
    read only by products that run oneDNN's linear on them (``takes_linear(layer)``), all taking them the same
    way round, none an engine output (``outputs``); each with whether it is taken as ``[N, K]``."""
    readers: dict[str, list[bool | None]] = {}
    consumers: dict[int, list[Any]] = {}
    for layer in layers:
        for tensor in set(layer.inputs):
            consumers.setdefault(tensor, []).append(layer)
    for layer in layers:
        for name, key in layer.weights.items():
            if layer.kind == "constant" and name == "value" and len(layer.outputs) == 1:
                tensor = layer.outputs[0]
                taken = [_reader_of_constant(c, tensor, takes_linear) for c in consumers.get(tensor, [])]
                readers.setdefault(key, []).extend(taken if taken and tensor not in outputs else [None])
            else:
                readers.setdefault(key, []).append(_gemm_reader(layer, name, takes_linear))
    return {key: bool(ways[0]) for key, ways in readers.items() if ways and None not in ways and len(set(ways)) == 1}


def pack_product_weights(plan: Any) -> int:
    """Lay out, in ``plan`` (an engine's own, on the CPU), the constant matrices that only products read as those
    products take them, all taking them the same way round: each read only by products that chose the PyTorch
    tactic and run oneDNN's linear on it is packed, the plan's weight becoming a :class:`PackedWeight` (see the
    module's note; nothing is packed where torch is absent or turned off); each read only by NumPy's products, as
    ``[N, K]`` (a Gemm's ``transB``, a MatMul's transposed constant), is laid out rows first
    (:func:`~plugrt.ops.products.rows_first`: the same values, each product then by a contiguous ``[K, N]``; the
    builder times NumPy's product so where :func:`timed_packing` finds the weight taken as ``[N, K]``). Returns how
    many weights were laid out anew."""
    from .torch_cpu_linear import linear_available

    count = 0
    if direct_runs(np) or (available() and linear_available()):  # (torch not imported where oneDNN packs them)
        for key, transposed in packable_weights(plan.layers, set(plan.io), _takes_linear).items():
            weight = plan.weights.get(key)
            if _packable(weight):
                plan.weights[key] = placeholder(PackedMatrix(weight, transposed))
                count += 1
    for key, transposed in packable_weights(plan.layers, set(plan.io), _takes_numpy).items():
        weight = plan.weights.get(key)
        if transposed and _packable(weight) and weight.flags.c_contiguous and min(weight.shape[-2:]) > 1:
            plan.weights[key] = rows_first(weight)
            count += 1
    return count


def _takes_linear(layer: Any) -> bool:
    return bool(layer.tactic == TORCH_TACTIC)


def _takes_numpy(layer: Any) -> bool:
    return bool(layer.tactic != TORCH_TACTIC)


def timed_packing(layers: Sequence[Any], outputs: set[int], layer: Any) -> tuple[int | str, bool] | None:
    """Where the engine would hold the weight of product ``layer`` (a build layer) packed if it chose oneDNN's
    linear, every other product reading that weight choosing it too: the input position (a MatMul's constant
    ``b``, 1) or the weight's name (a Gemm's ``b``), and whether it is taken as ``[N, K]``; None where the engine
    would not pack it. The builder times the PyTorch tactic of such a layer on a packed weight, as it then runs:
    a plain one is reordered at every call (BERT-base's 128x768 by 768x3072 on one thread, a Zen 4 core: 8.1 ms
    plain, 5.9 packed, NumPy's 7.1-7.4, so NumPy's was chosen and ran 1.2x slower than the packed product)."""
    where: int | str
    if layer.kind == "gemm":
        key, where = layer.weights.get("b"), "b"
    elif layer.kind == "matrix_multiply" and len(layer.inputs) > 1:
        source = next((c for c in layers if c.kind == "constant" and c.outputs == layer.inputs[1:2]), None)
        key, where = (None if source is None else source.weights.get("value")), 1
    else:
        return None
    if key is None:
        return None
    packable = packable_weights(layers, outputs, lambda c: c.kind in ("gemm", "matrix_multiply"))
    return (where, packable[key]) if key in packable else None


def _packable(weight: Any) -> bool:
    return (
        type(weight) is np.ndarray
        and weight.dtype == np.float32
        and weight.ndim >= 2
        and weight.size > 0
        and all(d == 1 for d in weight.shape[:-2])
    )
