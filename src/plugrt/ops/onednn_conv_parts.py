"""A convolution's work in parts, for a machine whose other cores are busy.

oneDNN's OpenMP kernels split a layer's work evenly between their threads when the primitive is made. Where another
process keeps a core busy, the thread that shares a core with it finishes its half late while the other waits, so
the engine runs its primitives on one thread there (``blas_threads.machine_busy``) and a run takes as long as on
one core, where onnxruntime's pool, whose threads take small blocks of a layer as they are free, gets more than
one. A convolution of enough work therefore also gets, the first time it runs on a busy machine, one-thread
primitives over parts of its output: runs of whole images, or bands of an image's output rows, each reading the
input rows its windows cover with the padding of the edges it touches (for maps one row high, as magika's 1-D
convolution is told, bands of columns). This thread and the engine's helper take the parts in
turn as each is free (:func:`~plugrt.ops.host_threads.pulled_by_two`), so the thread that has a core does most of
them. The parts share the layer's reordered kernel, bias and post-ops (a residual's band is added to its output's
band). Their results are the whole primitive's bits wherever they were compared (the tests' grid, and ResNet-18,
MobileNetV2, magika: oneDNN picks the same kernel for a band as for the whole, so each pixel's sum runs alike).

oneDNN's fast kernels take only dense channels-last tensors, so a part is a band of rows (contiguous in a
channels-last buffer), never a range of channels.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import described
from .onednn_parts import Parts, part_count

__all__ = ["BYTE_FLOPS", "Band", "bands", "part_primitives"]

#: a byte a layer reads or writes counts as this many operations (a depthwise layer's time is its memory's: one
#: core here runs ResNet-18's 3x3 convolutions at ~118 GFLOP/s and streams 10-21 GB/s in and out of MobileNetV2's
#: depthwise ones at batch 8, 9-47 GFLOP/s)
BYTE_FLOPS = 8.0


class Band(NamedTuple):
    """One part: output rows ``[row0, row1)`` of ``images`` images from ``image``, read from input rows
    ``[first, last)`` with ``top`` and ``bottom`` rows of padding (several images: every row of each). Of maps one
    row high the rows are its columns (:func:`part_primitives`' ``columns``)."""

    image: int
    images: int
    row0: int
    row1: int
    first: int
    last: int
    top: int
    bottom: int


def bands(
    images: int, in_rows: int, out_rows: int, stride: int, reach: int, pads: tuple[int, int], work: float
) -> list[Band]:
    """The parts of a convolution of ``work`` (operations, :data:`BYTE_FLOPS` a byte moved) over ``images`` images
    of ``in_rows`` input and ``out_rows`` output rows, its window ``reach`` rows tall (dilation included), moving
    ``stride`` rows, with ``pads`` rows of padding (top, bottom): as many as
    :func:`~.onednn_parts.part_count` says; runs of whole images where there are as many images as parts, else each image in bands of
    rows of about equal height. None (an empty list) where the work makes fewer than two parts."""
    count = part_count(work)
    if count < 2:
        return []
    if images >= count:
        edges = [k * images // count for k in range(count + 1)]
        return [Band(i0, i1 - i0, 0, out_rows, 0, in_rows, *pads) for i0, i1 in itertools.pairwise(edges)]
    per_image = min(out_rows, count // images)
    edges = [k * out_rows // per_image for k in range(per_image + 1)]
    parts = []
    for image in range(images):
        for row0, row1 in itertools.pairwise(edges):
            first = row0 * stride - pads[0]
            last = (row1 - 1) * stride - pads[0] + reach
            top, bottom = max(0, -first), max(0, last - in_rows)
            first, last = max(first, 0), min(last, in_rows)
            if last <= first:  # a band wholly in the padding: no parts
                return []
            parts.append(Band(image, 1, row0, row1, first, last, top, bottom))
    return parts if len(parts) >= 2 else []


def part_primitives(
    lib: Any,
    whole: onednn.Primitive,
    parts: Sequence[Band],
    source: onednn.Memory,
    target: onednn.Memory,
    added: onednn.Memory | None,
    steps: Sequence[tuple[str, float, float]],
    window: tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int]],
    columns: bool = False,
) -> Parts | None:
    """One-thread primitives over ``parts`` of the convolution ``whole`` (its one-thread primitive: its kernel's
    layout and memory, its bias) binds to ``source``, ``target`` and the residual ``added`` (dense channels-last
    tensors, logical ``[N, C, H, W]``), with the eltwise post-ops ``steps``; ``window``: the strides, the dilations
    (oneDNN's, less one) and the padding before and after along both axes; ``columns``: the parts' rows are the
    columns of one-row maps. None where oneDNN makes any of them with another kernel layout or only its reference
    implementation."""
    weights = whole.bound(onednn.ARG_WEIGHTS)
    bias = whole.bound(onednn.ARG_BIAS)
    if weights is None:
        return None
    strides, dilations, begins, ends = window
    _, channels, rows, width = source.desc_shape
    _, maps, out_rows, out_width = target.desc_shape
    made: list[onednn.Primitive] = []
    relative: list[tuple[Any, Any, int]] = []

    def band(parent: onednn.Memory, desc: onednn.Desc, offset: int) -> onednn.Memory:
        memory = onednn.Memory(lib, desc, parent.address + offset, hold=parent)
        relative.append((memory, parent, offset))
        return memory

    for part in parts:
        if columns:  # one-row maps: a band of columns is a band of pixels
            in_dims = [part.images, channels, 1, part.last - part.first]
            out_dims = [part.images, maps, 1, part.row1 - part.row0]
            at_in = 4 * (part.image * width + part.first) * channels
            at_out = 4 * (part.image * out_width + part.row0) * maps
            pads = [begins[0], part.top], [ends[0], part.bottom]
        else:
            in_dims = [part.images, channels, part.last - part.first, width]
            out_dims = [part.images, maps, part.row1 - part.row0, out_width]
            at_in = 4 * (part.image * rows + part.first) * width * channels
            at_out = 4 * (part.image * out_rows + part.row0) * out_width * maps
            pads = [part.top, begins[1]], [part.bottom, ends[1]]
        band_in = described(lib, in_dims, TensorFormat.HWC)
        band_out = described(lib, out_dims, TensorFormat.HWC)
        post = onednn.PostOps(lib)
        args = [
            (onednn.ARG_SRC, band(source, band_in, at_in)),
            (onednn.ARG_DST, band(target, band_out, at_out)),
            (onednn.ARG_WEIGHTS, weights),
        ]
        if added is not None:
            band_added = described(lib, out_dims, TensorFormat.HWC)
            args.append((post.add(band_added), band(added, band_added, at_out)))
        for name, alpha, beta in steps:
            post.eltwise(name, alpha, beta)
        if bias is not None:
            args.append((onednn.ARG_BIAS, bias))
        make = onednn.convolution_maker(
            lib, band_in, weights.desc, None if bias is None else bias.desc, band_out, (strides, dilations, *pads)
        )
        try:
            primitive = onednn.Primitive(lib, make, post, 1)
        except onednn.OneDnnError:
            return None
        if primitive.implementation.startswith("ref") or not onednn.same_desc(
            lib, primitive.arg_desc(onednn.ARG_WEIGHTS), weights.desc
        ):
            return None
        primitive.bind(args)
        made.append(primitive)
    return Parts(lib, made, relative)
