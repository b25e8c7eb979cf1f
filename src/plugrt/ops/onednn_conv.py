"""The 2-D convolution on the CPU as oneDNN's primitive called directly (:mod:`.onednn`).

A convolution of a channels-last run (tactic ``torch-nhwc``) or of PyTorch's linear tactic takes this kernel first
where the library is there (its buffers as oneDNN memories: :mod:`.onednn_buffers`):
the primitive is made at bind for the layer's shapes, on the buffers' addresses, its kernel reordered once into the
layout oneDNN chose for it, the bias, a residual (a binary add), the activation and the scalar affine map after it
as oneDNN's post-ops; a run is one execution writing the output's buffer. Compared with oneDNN through PyTorch's
call (``torch_channels_last.convolution_channels_last``) it saves ~20-27 us a layer, and it beats the compiled
depthwise loops and NumPy's small products too (``python benchmarks/onednn_conv_cpu.py``, docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import AXES, FIRST_STAGE, dense_strides, fit, launcher, staged, thread_counts
from .onednn_conv_parts import BYTE_FLOPS, bands, part_primitives
from .onednn_parts import Parts
from .torch_cpu import Kernel, torch_module
from .torch_cpu_kernels import ACTIVATIONS, bias_tensor, logical_view, post_affine, same_maps

if TYPE_CHECKING:
    from .conv import ConvolutionOperator

__all__ = ["convolution_onednn", "post_ops_of"]


class _Geometry(NamedTuple):
    """The convolution as oneDNN is told it: its window, and whether the two spatial axes are swapped. A layer over
    maps one pixel wide (a 1-D convolution exported as 2-D: magika's 5 x 1 kernel over 512 x 1) is described as one
    over maps one pixel high, the same bytes: oneDNN 3.2's kernels for 1-wide maps took 2.3x PyTorch's (14.4
    against 5.9 ms for magika's, one thread), over the 1-high ones they tie (5.8-6.0 ms)."""

    swapped: bool
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begins: tuple[int, ...]
    ends: tuple[int, ...]

    def axes(self, fmt: TensorFormat) -> tuple[int, ...]:
        """The stored tensor's axes in oneDNN's ``[N, C, H, W]`` order, for a tensor stored as ``fmt``."""
        n, c, h, w = AXES[fmt]
        return (n, c, w, h) if self.swapped else (n, c, h, w)

    def window(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """The strides, the dilations as oneDNN counts them (less one) and the padding before and after."""
        return list(self.strides), [d - 1 for d in self.dilations], list(self.begins), list(self.ends)

    def shape(self, array: np.ndarray, fmt: TensorFormat) -> list[int]:
        """The logical shape oneDNN is given for ``array`` stored as ``fmt``."""
        return [int(array.shape[a]) for a in self.axes(fmt)]


def _geometry(op: ConvolutionOperator, x_shape: Sequence[int]) -> _Geometry:
    """The layer's window over an input of logical ``[N, C, H, W]`` shape ``x_shape`` as oneDNN is told it: its
    axes swapped where the maps are one pixel wide (see :class:`_Geometry`); a 1-D window over ``[N, C, 1, L]`` as a
    2-D one of one row."""
    w = op.window
    if w.rank == 1:
        _, begins, ends = w.resolve(x_shape[3:])
        return _Geometry(False, (1, *w.kernel), (1, *w.strides), (1, *w.dilations), (0, *begins), (0, *ends))
    _, begins, ends = w.resolve(x_shape[2:])
    swapped = x_shape[3] == 1 and w.kernel[1] == 1 and begins[1] == 0 and ends[1] == 0
    plain = _Geometry(False, tuple(w.kernel), tuple(w.strides), tuple(w.dilations), tuple(begins), tuple(ends))
    return _Geometry(True, *(values[::-1] for values in plain[1:])) if swapped else plain


def post_ops_of(op: ConvolutionOperator) -> list[tuple[str, float, float]] | None:
    """The layer's epilogue after the bias and residual as eltwise post-ops in order (activation, then the scalar
    affine map as ``linear``); None where oneDNN has no post-op for its activation."""
    steps = onednn.activation_steps(op.activation, *op.activation_range)
    if steps is None:
        return None
    scale, shift = op.post_affine
    if scale != 1.0 or shift != 0.0:
        steps.append(("linear", scale, shift))
    return steps


def convolution_onednn(
    op: ConvolutionOperator,
    x: np.ndarray,
    out: np.ndarray,
    residual: np.ndarray | None,
    formats: Sequence[TensorFormat],
) -> Kernel | None:
    """The convolution (bias and epilogue included) as oneDNN's primitive on these buffers, ``formats`` the input's,
    the residual's (when there is one) and the output's, each HWC or LINEAR; an HWC input or residual is read from
    its hand-over slot when a PyTorch kernel left a tensor there, the output's slot is emptied. oneDNN's fast
    kernels read and write channels-last tensors: a LINEAR input or output of more than one channel goes through a
    channels-last buffer of the kernel's and a reorder primitive; a 1-D convolution of LINEAR tensors is told as a 2-D
    one of one row. None where it does not apply: the library absent, not a 1-D or 2-D FLOAT convolution of
    weights, empty tensors, an activation oneDNN lacks, oneDNN offering only its reference implementation, or a
    uniform kernel whose primitive gives unequal maps (:func:`_equal_maps`) with a residual or without PyTorch
    (without those its maps are made bit-identical after the convolution, as the other kernels do, then its
    epilogue runs)."""
    lib = onednn.library()
    w = op.window
    if lib is None or w.rank not in (1, 2) or "kernel" not in op.weights or op.bias_input is not None:
        return None
    if w.rank == 1:  # [N, C, L] stored LINEAR: the same bytes as [N, C, 1, L]
        if any(f != TensorFormat.LINEAR for f in formats) or x.ndim != 3:
            return None
        x, out = x[:, :, None, :], out[:, :, None, :]
        residual = None if residual is None else residual[:, :, None, :]
    if not fit([x, out, *([] if residual is None else [residual])], formats):
        return None
    steps = post_ops_of(op)
    if steps is None and not op.uniform:  # (a uniform kernel's epilogue may run after the convolution, below)
        return None
    logical = [x.shape[a] for a in AXES[formats[0]]]
    sizes, _, _ = w.resolve(logical[4 - w.rank :])
    expected = [logical[0], op.maps, *([1] if w.rank == 1 else []), *sizes]
    if [out.shape[a] for a in AXES[formats[-1]]] != expected or logical[1] % op.group:
        return None
    kernel = np.asarray(op.weights["kernel"], np.float32)
    if kernel.size != op.maps * logical[1] // op.group * math.prod(w.kernel):
        return None
    geometry = _geometry(op, logical)
    x_shape = geometry.shape(x, formats[0])
    try:
        source, before = staged(lib, x, formats[0], x_shape, True, FIRST_STAGE)
        target, after = staged(lib, out, formats[-1], geometry.shape(out, formats[-1]), False, FIRST_STAGE + 1)
        added, before_added = None, None
        if residual is not None:
            added, before_added = staged(
                lib, residual, formats[1], geometry.shape(residual, formats[1]), True, FIRST_STAGE + 2
            )
        flops = 2.0 * math.prod(target.desc_shape) * (x_shape[1] // op.group) * math.prod(geometry.kernel)
        made = (
            None
            if steps is None
            else _primitives(lib, op, source, target, added, x_shape, geometry, kernel, flops, steps)
        )
        uniform_after = op.uniform and (made is None or not _maps_come_equal(op, made, source, target, added, formats))
        if uniform_after:  # the convolution alone, then its maps made equal and the epilogue (_uniform_maps)
            if residual is not None or torch_module() is None:
                return None
            made = _primitives(lib, op, source, target, added, x_shape, geometry, kernel, flops, None)
    except onednn.OneDnnError:
        return None
    if made is None:
        return None
    primitives = made[0]
    reads = [(x, formats[0], source, before)]
    if residual is not None and added is not None:
        reads.append((residual, formats[1], added, before_added))
    finish = [
        *([after] if after is not None else []),
        *([_uniform_maps(op, out, formats[-1])] if uniform_after else []),
    ]
    split = None
    if not uniform_after and len(primitives) > 1:
        split = functools.partial(_split, lib, geometry, source, target, added, primitives[0], steps or [], flops)
    return launcher(lib, primitives, flops, reads, out, formats[-1], finish, split=split)


def _split(
    lib: Any,
    geometry: _Geometry,
    source: onednn.Memory,
    target: onednn.Memory,
    added: onednn.Memory | None,
    whole: onednn.Primitive,
    steps: list[tuple[str, float, float]],
    flops: float,
) -> Parts | None:
    """The convolution's one-thread primitives over parts of its output (:mod:`.onednn_conv_parts`), or None."""
    images, _, rows, cols = source.desc_shape
    out_rows, out_cols = target.desc_shape[2:]
    columns = rows == 1 and out_rows == 1  # maps one row high: bands of columns
    axis = 1 if columns else 0
    reach = (geometry.kernel[axis] - 1) * geometry.dilations[axis] + 1
    work = flops + BYTE_FLOPS * 4 * (math.prod(source.desc_shape) + math.prod(target.desc_shape))
    pads = (geometry.begins[axis], geometry.ends[axis])
    extent = (cols, out_cols) if columns else (rows, out_rows)
    parts = bands(images, *extent, geometry.strides[axis], reach, pads, work)
    if not parts:
        return None
    return part_primitives(lib, whole, parts, source, target, added, steps, geometry.window(), columns)


def _primitives(
    lib: Any,
    op: ConvolutionOperator,
    source: onednn.Memory,
    target: onednn.Memory,
    added: onednn.Memory | None,
    x_shape: list[int],
    geometry: _Geometry,
    kernel: np.ndarray,
    flops: float,
    steps: list[tuple[str, float, float]] | None,
) -> tuple[list[onednn.Primitive], onednn.Memory | None] | None:
    """The convolution's primitives, one per thread count a run may choose (one, and the engine's where its work
    reaches :data:`~.torch_cpu.MIN_OPENMP_FLOPS`), bound to ``source`` and ``target`` with the residual (``added``),
    the kernel reordered for each (shared where their layouts agree), and with ``steps`` the bias and the post-ops
    (``steps`` None: the convolution alone); with the bias's memory. None where oneDNN chose its reference
    implementation."""
    group, maps, channels, window = op.group, op.maps, x_shape[1] // op.group, geometry.kernel
    weight_shape = [maps, channels, *window] if group == 1 else [group, maps // group, channels, *window]
    bias_array = None if steps is None else _bias(op)
    bias = None if bias_array is None else onednn.Desc(lib, [maps], [1])
    post = onednn.PostOps(lib)
    args = [(onednn.ARG_SRC, source), (onednn.ARG_DST, target)]
    if added is not None:
        args.append((post.add(added.owner), added))
    for name, alpha, beta in steps or []:
        post.eltwise(name, alpha, beta)
    bias_memory = None
    if bias is not None:
        assert bias_array is not None
        bias_memory = onednn.Memory(lib, bias, bias_array.ctypes.data, hold=bias_array)
        args.append((onednn.ARG_BIAS, bias_memory))
    any_weights = onednn.Desc(lib, weight_shape, None)
    make = onednn.convolution_maker(lib, source.desc, any_weights, bias, target.desc, geometry.window())
    primitives = onednn.fast_primitives(lib, make, post, thread_counts(flops))
    if primitives is None:
        return None
    plain = onednn.Desc(lib, weight_shape, dense_strides(weight_shape))  # OIHW (GOIHW): the packed kernel's bytes
    packed: list[tuple[Any, np.ndarray]] = []
    for primitive in primitives:
        layout = primitive.arg_desc(onednn.ARG_WEIGHTS)
        reordered = next((array for desc, array in packed if onednn.same_desc(lib, desc, layout)), None)
        if reordered is None:
            key = ("onednn", tuple(x_shape), geometry.swapped, primitive.threads)
            make_packed = functools.partial(onednn.reorder, lib, kernel, plain, layout)
            reordered = op.derived_weight(f"onednn-{primitive.threads}", key, make_packed)
            packed.append((layout, reordered))
        weights = onednn.Memory(lib, layout, reordered.ctypes.data, hold=reordered)
        primitive.bind([*args, (onednn.ARG_WEIGHTS, weights)])
    return primitives, bias_memory


def _maps_come_equal(
    op: ConvolutionOperator,
    made: tuple[list[onednn.Primitive], onednn.Memory | None],
    source: onednn.Memory,
    target: onednn.Memory,
    added: onednn.Memory | None,
    formats: Sequence[TensorFormat],
) -> bool:
    """Whether every primitive of ``made`` gives a uniform kernel's maps equal (:func:`_equal_maps`), probed once per
    shapes, layouts and thread counts and kept with the layer's derived weights (a context whose outputs move binds
    their writers again at each call)."""
    primitives, bias = made
    zeroed = [m for m in (bias, added) if m is not None]
    key = (tuple(source.desc_shape), tuple(target.desc_shape), tuple(formats), tuple(p.threads for p in primitives))
    return bool(
        op.derived_weight(
            "onednn-equal-maps", key, lambda: all(_equal_maps(p, source, target, zeroed, op.group) for p in primitives)
        )
    )


def _equal_maps(
    primitive: onednn.Primitive, source: onednn.Memory, target: onednn.Memory, zeroed: list[onednn.Memory], group: int
) -> bool:
    """Whether ``primitive`` (a uniform kernel's convolution with its post-ops) gives every map of a group the same
    bits, run once here on random pixels with a zero bias and residual (``zeroed``; its memories pointed at arrays of
    this function's, then back): oneDNN's kernels compute the maps in vector lanes, each lane the same instructions, so its output maps are
    equal where their weights are, but that is the implementation's, not a promise; where they are not, the maps are
    made equal after the convolution (:func:`_uniform_maps`). A uniform layer that passes runs as any other (the
    evening's same-maps passes took 3.1 of SqueezeNet's 7.3 ms of convolutions)."""
    lib = primitive.lib
    pixels = np.random.default_rng(0).standard_normal(math.prod(source.desc_shape)).astype(np.float32)
    result = np.full(math.prod(target.desc_shape), np.nan, np.float32)
    zeros = np.zeros(math.prod(target.desc_shape), np.float32)  # (as long as the bias and the residual)
    moved = [(source, pixels), (target, result), *((memory, zeros) for memory in zeroed)]
    kept = [(memory, memory.address) for memory, _ in moved]
    try:
        for memory, array in moved:
            memory.point(lib, array.ctypes.data)
        primitive.run(pointed=[memory for memory, _ in moved])
    finally:
        for memory, address in kept:
            memory.point(lib, address)
    maps = result.reshape(-1, group, target.desc_shape[1] // group)  # channels-last rows
    return bool(np.array_equal(maps, np.broadcast_to(maps[:, :, :1], maps.shape)))


def _uniform_maps(op: ConvolutionOperator, out: np.ndarray, fmt: TensorFormat) -> Kernel:
    """A uniform kernel's epilogue after oneDNN's convolution (made without the bias and post-ops): every map of a
    group made bit-identical to the group's first, then the bias, the activation and the scalar map, with PyTorch's
    kernels on the output's logical view (as the channels-last kernel through PyTorch's call finishes it)."""
    torch = torch_module()
    result = logical_view(out, fmt)
    bias = bias_tensor(op, None, result)
    bias = None if bias is None else bias.reshape(-1, 1, 1)
    act = ACTIVATIONS[op.activation] if op.activation else None
    low, high = op.activation_range
    affine = post_affine(torch, op)

    def finish() -> None:
        same_maps(result, op.group, bias)
        if act is not None:
            act(torch, result, result, low, high)
        if affine is not None:
            affine(result, result)

    return finish


def _bias(op: ConvolutionOperator) -> np.ndarray | None:
    """The bias weight as a contiguous FLOAT vector, or None without one."""
    if "bias" not in op.weights:
        return None
    return np.ascontiguousarray(np.asarray(op.weights["bias"], np.float32).reshape(-1))
