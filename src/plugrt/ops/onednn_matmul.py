"""Products by a constant matrix on the CPU as oneDNN's matmul primitive called directly (:mod:`.onednn`).

``out = a @ w (+ bias)`` with ``w`` an engine constant ``[K, N]`` (or ``[N, K]`` used transposed): the products that
the PyTorch tactic runs as oneDNN's linear (``torch_cpu_linear.py`` takes this kernel first where the library is
there). The primitive is made at bind for the rows of ``a`` (one strided ``[M, K]`` matrix, else a copy into one made
at each run) and writes the engine's output buffer itself, where ``torch.ops.mkldnn._linear_pointwise`` returns a new
tensor that is then copied in. A weight the engine holds packed (``linear_weights.py``) is packed here, once, in the
layout oneDNN's matmul picks for it (:func:`pack`; the same for every row count measured); a plain weight is read in
place. One thread, a Zen 4 core, BERT-base's shapes (``benchmarks/onednn_matmul_cpu.py``, docs/benchmarks.md):
1 x 768 by 768 x 768 0.036 ms against the linear's 0.060, 128 x 768 by 768 x 3072 5.49 against 5.73. On a busy
machine a large product runs as one-thread primitives over bands of its rows that this thread and the engine's
helper take as each is free (:func:`_split`, ``onednn_parts.Parts``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import launcher, thread_counts
from .onednn_parts import Parts, part_count
from .product_parts import as_rows
from .torch_cpu import Kernel

__all__ = ["MatmulWeight", "pack", "product_onednn"]

#: the row count the layout of a packed weight is chosen for (oneDNN 3.2 picks the same one from 1 to 512 rows)
_PACKING_ROWS = 64


class MatmulWeight:
    """A ``[K, N]`` weight packed for oneDNN's matmul: its elements in ``array``, laid out as ``desc`` says (a
    descriptor the primitive ``owner`` holds, kept alive here)."""

    __slots__ = ("array", "cols", "desc", "owner")

    def __init__(self, array: np.ndarray, desc: Any, owner: onednn.Primitive, cols: int) -> None:
        self.array = array
        self.desc = desc
        self.owner = owner
        #: the output's width (``N``)
        self.cols = cols

    def plain(self, shape: Sequence[int], transposed: bool) -> np.ndarray:
        """The weight in its plain layout again, of dims ``shape``: ``[K, N]``, or ``[N, K]`` where ``transposed``
        (leading dimensions of one allowed)."""
        lib = self.owner.lib
        n = self.cols
        k = int(np.prod(shape, dtype=np.int64)) // n
        plain = _weight_desc(lib, k, n, transposed)
        return onednn.reorder(lib, self.array, self.desc, plain.handle)[: k * n].reshape(tuple(shape))


def _weight_desc(lib: Any, k: int, n: int, transposed: bool) -> onednn.Desc:
    """The descriptor of a dense ``[K, N]`` weight stored as such, or as ``[N, K]`` (``transposed``)."""
    return onednn.Desc(lib, [k, n], [1, k] if transposed else [n, 1])


def _primitives(
    lib: Any,
    rows: int,
    k: int,
    n: int,
    row_stride: int,
    weight: Any,
    bias: bool,
    flops: float,
    steps: Sequence[tuple[str, float, float]] = (),
) -> list[onednn.Primitive] | None:
    """The matmul primitives (one per thread count, :func:`~.onednn_buffers.thread_counts`) of ``[rows, K]`` (rows
    ``row_stride`` elements apart) by the weight ``weight`` describes (a :class:`~.onednn.Desc`, a primitive's
    descriptor, or None: the layout oneDNN picks) into a dense ``[rows, N]``, with an ``N``-value bias where
    ``bias``, then the eltwise post-ops ``steps`` (algorithm, alpha, beta); None where oneDNN has only its reference
    kernel for it."""
    src = onednn.Desc(lib, [rows, k], [row_stride, 1])
    weights = onednn.Desc(lib, [k, n], None) if weight is None else weight
    bias_desc = onednn.Desc(lib, [1, n], [n, 1]) if bias else None
    dst = onednn.Desc(lib, [rows, n], [n, 1])

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_matmul_primitive_desc_create(
            pd,
            lib.engine,
            src.handle,
            onednn.pointer(weights),
            None if bias_desc is None else bias_desc.handle,
            dst.handle,
            attr,
        )
        return status

    post_ops = onednn.PostOps(lib)
    for name, alpha, beta in steps:
        post_ops.eltwise(name, alpha, beta)
    return onednn.fast_primitives(lib, make, post_ops, thread_counts(flops))


def pack(matrix: np.ndarray, transposed: bool) -> MatmulWeight | None:
    """``matrix`` (``[K, N]``, or ``[N, K]`` where ``transposed``) reordered into the layout oneDNN's matmul picks
    for it; None where the library is not there or has only its reference kernel for it."""
    lib = onednn.library()
    if lib is None or matrix.dtype != np.float32 or matrix.ndim != 2 or not matrix.size:
        return None
    k, n = (matrix.shape[1], matrix.shape[0]) if transposed else matrix.shape
    try:
        made = _primitives(lib, _PACKING_ROWS, k, n, k, None, False, 0.0)
        if made is None:
            return None
        layout = made[0].arg_desc(onednn.ARG_WEIGHTS)
        array = onednn.reorder(lib, np.ascontiguousarray(matrix), _weight_desc(lib, k, n, transposed), layout)
    except onednn.OneDnnError:
        return None
    return MatmulWeight(array, layout, made[0], int(n))


def product_onednn(
    a: np.ndarray,
    weight: np.ndarray | MatmulWeight,
    transposed: bool,
    bias: np.ndarray | None,
    out: np.ndarray,
    steps: Sequence[tuple[str, float, float]] = (),
) -> Kernel | None:
    """The kernel ``out = f(a @ weight (+ bias))`` as one matmul primitive: ``a`` is ``[..., M, K]``; ``weight`` a
    plain ``[K, N]`` (``[N, K]`` where ``transposed``; leading dimensions of one allowed) or a :class:`MatmulWeight`;
    ``bias`` has ``N`` values; ``out`` a C-contiguous ``[..., M, N]``; ``f`` the eltwise post-ops ``steps``
    (algorithm, alpha, beta), none by default. None where it does not apply: the library
    absent, arrays that are not FLOAT, an empty ``K`` or ``N``, or only oneDNN's reference kernel for it."""
    lib = onednn.library()
    if lib is None or not all(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in (a, out)):
        return None
    k = int(a.shape[-1])
    if isinstance(weight, MatmulWeight):
        n, weight_desc, weights = weight.cols, weight.desc, weight.array
    else:
        if weight.dtype != np.float32:
            return None
        weights = np.ascontiguousarray(weight.reshape(weight.shape[-2:]))
        n = int(weights.shape[0] if transposed else weights.shape[1])
        weight_desc = _weight_desc(lib, k, n, transposed)
    if bias is not None and (bias.dtype != np.float32 or not bias.flags.c_contiguous or bias.size != n):
        return None
    count = int(np.prod(a.shape[:-1], dtype=np.int64))
    if not out.flags.c_contiguous or out.size != count * n or min(k, n) == 0:
        return None
    if count == 0:
        return _nothing
    rows = as_rows(a)
    staging = None
    if rows is None or rows.strides[1] != a.itemsize or rows.strides[0] % a.itemsize:
        staging = np.empty((count, k), np.float32)  # a's rows copied into one matrix at each run
        rows = staging
    flops = 2.0 * count * k * n
    try:
        stride = rows.strides[0] // a.itemsize
        primitives = _primitives(lib, count, k, n, stride, weight_desc, bias is not None, flops, steps)
        if primitives is None:
            return None
        first = primitives[0]
        args = [
            (onednn.ARG_SRC, onednn.Memory(lib, first.arg_desc(onednn.ARG_SRC), rows.ctypes.data, hold=rows)),
            (onednn.ARG_WEIGHTS, onednn.Memory(lib, first.arg_desc(onednn.ARG_WEIGHTS), weights.ctypes.data, weights)),
            (onednn.ARG_DST, onednn.Memory(lib, first.arg_desc(onednn.ARG_DST), out.ctypes.data, hold=out)),
        ]
        if bias is not None:
            args.append((onednn.ARG_BIAS, onednn.Memory(lib, first.arg_desc(onednn.ARG_BIAS), bias.ctypes.data, bias)))
        for primitive in primitives:
            primitive.bind(args)
    except onednn.OneDnnError:
        return None
    before = [] if staging is None else [functools.partial(np.copyto, staging.reshape(a.shape), a)]
    split = None
    if len(primitives) > 1:
        split = functools.partial(_split, lib, primitives[0], rows, out.reshape(count, n), bias is not None, steps)
    return launcher(lib, primitives, flops, [], out, TensorFormat.LINEAR, before=before, split=split)


def _split(
    lib: Any,
    whole: onednn.Primitive,
    rows: np.ndarray,
    out: np.ndarray,
    bias: bool,
    steps: Sequence[tuple[str, float, float]],
) -> Parts | None:
    """The product as one-thread primitives over bands of its rows (each a band of ``rows`` into the same band of
    ``out``, ``[M, N]``), sharing the weight and the bias ``whole`` (its one-thread primitive) binds, for a busy
    machine (``onednn_buffers.launcher``'s ``split``): as many as :func:`~.onednn_parts.part_count` says
    for its work (at most one a row). None where that makes fewer than two or oneDNN
    picks another weight layout or its reference kernel for a band."""
    count, (k, n) = rows.shape[0], (rows.shape[1], out.shape[1])
    parts = min(count, part_count(2.0 * count * k * n))
    weights, bias_memory = whole.bound(onednn.ARG_WEIGHTS), whole.bound(onednn.ARG_BIAS)
    if parts < 2 or weights is None:
        return None
    edges = [p * count // parts for p in range(parts + 1)]
    stride = rows.strides[0] // rows.itemsize
    made = []
    try:
        for first, last in itertools.pairwise(edges):
            band = _primitives(lib, last - first, k, n, stride, weights.desc, bias, 0.0, steps)
            if band is None or not onednn.same_desc(lib, band[0].arg_desc(onednn.ARG_WEIGHTS), weights.desc):
                return None
            source = onednn.Memory(lib, band[0].arg_desc(onednn.ARG_SRC), rows[first:].ctypes.data, hold=rows)
            target = onednn.Memory(lib, band[0].arg_desc(onednn.ARG_DST), out[first:].ctypes.data, hold=out)
            args = [(onednn.ARG_SRC, source), (onednn.ARG_WEIGHTS, weights), (onednn.ARG_DST, target)]
            if bias_memory is not None:
                args.append((onednn.ARG_BIAS, bias_memory))
            band[0].bind(args)
            made.append(band[0])
    except onednn.OneDnnError:
        return None
    return Parts(lib, made, [])


def _nothing() -> None:
    """The run of a product of no rows."""
