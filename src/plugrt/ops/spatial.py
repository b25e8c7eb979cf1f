"""Sliding-window geometry shared by convolution and pooling.

A window is described per spatial axis by its kernel size, stride, dilation and
padding (explicit ``pads`` as ``[begin..., end...]``, or ONNX's ``auto_pad``:
``SAME_UPPER``/``SAME_LOWER`` give ``ceil(in / stride)`` outputs with the odd
pad at the end/beginning, ``VALID`` pads nothing). :class:`Window` gives the
output sizes as dimension expressions (build time) and as integers with the
begin pads (``prepare``), and the tap plans kernels copy with:
for kernel offset ``k`` the outputs ``o`` that read input ``o * stride +
k * dilation - pad_begin`` inside the input, as a destination and a source slice.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import NetworkError
from ..shape import DimensionOperation, IDimensionExpr, constant, operation

__all__ = ["AUTO_PADS", "Window", "kernel_taps", "tap_offsets", "tap_slices"]

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _ints(value: Any, count: int, default: int, what: str, owner: str) -> tuple[int, ...]:
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return (default,) * count
    values = tuple(int(v) for v in value)
    if len(values) != count:
        raise NetworkError(f"{owner}: {what} has {len(values)} values, expected {count} (one per spatial axis)")
    return values


@dataclass(frozen=True)
class Window:
    """Kernel, strides, dilations and padding of a sliding window over ``rank`` spatial axes."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    auto_pad: str = "NOTSET"
    ceil_mode: bool = False

    @classmethod
    def from_params(cls, params: dict[str, Any], owner: str) -> Window:
        """Read ``kernel_shape``, ``strides``, ``dilations``, ``pads``, ``auto_pad``, ``ceil_mode``."""
        kernel = tuple(int(k) for k in params.get("kernel_shape", ()))
        rank = len(kernel)
        if rank == 0:
            raise NetworkError(f"{owner}: kernel_shape is empty; the window needs at least one spatial axis")
        pads = _ints(params.get("pads"), 2 * rank, 0, "pads", owner)
        auto_pad = str(params.get("auto_pad", "NOTSET")) or "NOTSET"
        if auto_pad not in AUTO_PADS:
            raise NetworkError(f"{owner}: unknown auto_pad {auto_pad!r}; valid: {', '.join(AUTO_PADS)}")
        window = cls(
            kernel,
            _ints(params.get("strides"), rank, 1, "strides", owner),
            _ints(params.get("dilations"), rank, 1, "dilations", owner),
            pads[:rank],
            pads[rank:],
            auto_pad,
            bool(params.get("ceil_mode", False)),
        )
        for what, values, low in (
            ("kernel_shape", window.kernel, 1),
            ("strides", window.strides, 1),
            ("dilations", window.dilations, 1),
            ("pads", pads, 0),
        ):
            if any(v < low for v in values):
                raise NetworkError(f"{owner}: {what} {list(values)} must be >= {low}")
        return window

    @property
    def rank(self) -> int:
        """Number of spatial axes."""
        return len(self.kernel)

    def extent(self, axis: int) -> int:
        """Span of the dilated kernel along ``axis``."""
        return (self.kernel[axis] - 1) * self.dilations[axis] + 1

    # --- shapes -----------------------------------------------------------------------
    def output_dims(self, sizes: Sequence[IDimensionExpr]) -> list[IDimensionExpr]:
        """Output sizes as expressions of the input sizes."""
        return [self._output_dim(axis, size) for axis, size in enumerate(sizes)]

    def _output_dim(self, axis: int, size: IDimensionExpr) -> IDimensionExpr:
        stride = constant(self.strides[axis])
        one = constant(1)
        if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return operation(DimensionOperation.CEIL_DIV, size, stride)
        pads = 0 if self.auto_pad == "VALID" else self.pads_begin[axis] + self.pads_end[axis]
        span = operation(DimensionOperation.SUM, size, constant(pads - self.extent(axis)))
        if not self.ceil_mode or self.auto_pad == "VALID":
            return operation(DimensionOperation.SUM, operation(DimensionOperation.FLOOR_DIV, span, stride), one)
        # ceil mode, but the last window must start inside the input or its begin padding
        steps = operation(DimensionOperation.CEIL_DIV, span, stride)
        start = operation(DimensionOperation.PROD, steps, stride)
        limit = operation(DimensionOperation.SUM, size, constant(self.pads_begin[axis]))
        return operation(DimensionOperation.SUM, steps, operation(DimensionOperation.LESS, start, limit))

    def resolve(self, sizes: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
        """Concrete (output sizes, begin pads, end pads) for input ``sizes``."""
        outs, begins, ends = [], [], []
        for axis, size in enumerate(sizes):
            stride, extent = self.strides[axis], self.extent(axis)
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out = -(-size // stride)
                total = max((out - 1) * stride + extent - size, 0)
                begin = total // 2 if self.auto_pad == "SAME_UPPER" else total - total // 2
                end = total - begin
            elif self.auto_pad == "VALID":
                out, begin, end = (size - extent) // stride + 1, 0, 0
            else:
                begin, end = self.pads_begin[axis], self.pads_end[axis]
                span = size + begin + end - extent
                if self.ceil_mode:
                    out = -(-span // stride)
                    out += int(out * stride < size + begin)
                else:
                    out = span // stride + 1
            outs.append(max(out, 0))
            begins.append(begin)
            ends.append(end)
        return outs, begins, ends


def tap_offsets(window: Window) -> Iterator[tuple[int, tuple[int, ...]]]:
    """Every kernel tap in row-major order: its index and, per spatial axis, its offset ``k * dilation``."""
    for tap, ks in enumerate(itertools.product(*(range(k) for k in window.kernel))):
        yield tap, tuple(k * d for k, d in zip(ks, window.dilations))


def kernel_taps(
    window: Window, size: Sequence[int], out: Sequence[int], begins: Sequence[int]
) -> Iterator[tuple[int, list[tuple[slice, slice]]]]:
    """Each kernel tap (in row-major order) that reads inside the input: its index and, per spatial
    axis, :func:`tap_slices` of it (``size``: the strided side's extents, ``out``: the other side's)."""
    for tap, offsets in tap_offsets(window):
        pairs = [tap_slices(size[a], out[a], window.strides[a], offsets[a] - begins[a]) for a in range(window.rank)]
        if all(p is not None for p in pairs):
            yield tap, [p for p in pairs if p is not None]


def tap_slices(size: int, out: int, stride: int, offset: int) -> tuple[slice, slice] | None:
    """(output slice, input slice) of the outputs ``o`` whose input ``o * stride + offset`` is in ``[0, size)``.

    None when no output reads inside the input for this offset.
    """
    low = (-offset + stride - 1) // stride if offset < 0 else 0
    high = min(out - 1, (size - 1 - offset) // stride)
    if low > high:
        return None
    start = low * stride + offset
    return slice(low, high + 1), slice(start, high * stride + offset + 1, stride)
