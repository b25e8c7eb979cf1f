"""Depthwise convolution on the CPU as a sum over kernel taps, without im2col.

A depthwise convolution (every group reads one input channel) is, per output
map, ``sum over taps t of weight[t] * (the input shifted by t)``. im2col spends
a copy of the input per tap and then one tiny matrix product per channel; here
each tap is one multiply-add over a contiguous slice.

The input is copied once into *phase planes*: for strides ``s`` the padded input
is split into ``prod(s)`` planes by the remainder of each padded coordinate, so
that every tap reads one plane at a fixed offset with unit stride. Each plane
row (one ``(n, c)`` pair) is flat; outputs are computed on the plane's full
width (the columns past the output width are discarded), which makes every tap
``acc += plane[:, offset : offset + L] * w[:, t]`` over contiguous memory. The
padding and a guard tail stay zero from when the planes were made. Rows are
processed in blocks that stay in the cache; the bias and the fused activation are
applied per block while it is hot. Large layers share the blocks between two
threads when a core is free (``host_threads.py``).

Numerics: float32 sums in tap order (kernel row-major), as im2col's products
do up to the summation order: within a few float32 ulps of a float64 reference.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .host_threads import in_two_parts
from .spatial import Window, tap_offsets

__all__ = ["DepthwiseTaps"]

#: float32 elements of one row block of the accumulator (a few of these stay in a 512 KiB L2)
BLOCK_ELEMENTS = 1 << 15


class DepthwiseTaps:
    """A depthwise convolution planned for one input shape: each output map reads one input channel.

    ``multiplier`` output maps per input channel (ONNX group = C, maps = C * multiplier).
    """

    def __init__(
        self,
        window: Window,
        x_shape: tuple[int, ...],
        out_shape: tuple[int, ...],
        begins: Sequence[int],
        multiplier: int,
    ) -> None:
        self.rows = x_shape[0] * x_shape[1]
        self.channels = x_shape[1]
        self.multiplier = multiplier
        self.out_spatial = tuple(out_shape[2:])
        spatial, strides, dilations = x_shape[2:], window.strides, window.dilations
        reach = [(k - 1) * d // s for k, d, s in zip(window.kernel, dilations, strides)]
        planes = [o + r for o, r in zip(self.out_spatial, reach)]
        flat = [math.prod(planes[a + 1 :]) for a in range(len(planes))]
        self.planes = tuple(planes)
        self.length = self.out_spatial[0] * flat[0]
        self.row = math.prod(planes) + sum(r * f for r, f in zip(reach[1:], flat[1:]))
        phases = list(itertools.product(*(range(s) for s in strides)))
        self.phase_count = len(phases)
        #: (phase, source index into x's rows, destination index into the phase's rows): one strided copy each
        self.copies: list[tuple[int, tuple[slice, ...], tuple[slice, ...]]] = []
        for p, phase in enumerate(phases):
            src, dst = [slice(None)], [slice(None)]
            for a, q in enumerate(phase):
                first = (q - begins[a]) % strides[a]
                start = (first + begins[a]) // strides[a]
                count = min(-(-(spatial[a] - first) // strides[a]), planes[a] - start)
                if count <= 0:
                    break
                src.append(slice(first, first + (count - 1) * strides[a] + 1, strides[a]))
                dst.append(slice(start, start + count))
            else:
                self.copies.append((p, tuple(src), tuple(dst)))
        #: (phase, offset in the flat plane row, tap index) for every kernel tap, row-major
        self.taps: list[tuple[int, int, int]] = []
        for t, shifted in tap_offsets(window):
            which = phases.index(tuple(u % s for u, s in zip(shifted, strides)))
            self.taps.append((which, sum((u // s) * f for u, s, f in zip(shifted, strides, flat)), t))
        self.block = max(1, min(self.rows, BLOCK_ELEMENTS // max(self.length, 1)))
        self._phases: np.ndarray | None = None
        self._views: list[np.ndarray] = []
        #: per part (two threads may share the blocks, see host_threads.py): accumulator and product
        self._scratch: list[np.ndarray] = []  # made at the first run
        #: (kernel the rows were made from, its rows as [multiplier, taps, rows, 1]); the same for the bias
        self._weights: tuple[Any, np.ndarray] | None = None
        self._bias: tuple[Any, np.ndarray] | None = None

    def _bind(self) -> np.ndarray:
        phases = np.zeros((self.phase_count, self.rows, self.row), np.float32)
        size = math.prod(self.planes)
        self._views = [phases[p, :, :size].reshape(self.rows, *self.planes) for p in range(phases.shape[0])]
        self._phases = phases
        return phases

    def weight_rows(self, kernel: np.ndarray) -> np.ndarray:
        """``kernel`` ``[maps, taps]`` as ``[multiplier, taps, rows, 1]``: the weight of each plane row per tap."""
        held = self._weights
        if held is not None and held[0] is kernel:
            return held[1]
        n = self.rows // self.channels
        per_map = np.asarray(kernel, np.float32).reshape(self.channels, self.multiplier, -1).transpose(1, 2, 0)
        rows = np.ascontiguousarray(np.broadcast_to(per_map[:, :, None, :], (*per_map.shape[:2], n, self.channels)))
        self._weights = (kernel, rows.reshape(*per_map.shape[:2], self.rows, 1))
        return self._weights[1]

    def bias_rows(self, bias: np.ndarray) -> np.ndarray:
        """``bias`` ``[maps]`` as ``[multiplier, rows, 1, ...]`` (broadcasting over one map)."""
        held = self._bias
        if held is not None and held[0] is bias:
            return held[1]
        n = self.rows // self.channels
        per_map = np.asarray(bias, np.float32).reshape(self.channels, self.multiplier).T
        rows = np.broadcast_to(per_map[:, None, :], (self.multiplier, n, self.channels)).reshape(self.multiplier, -1)
        self._bias = (bias, rows.reshape(*rows.shape, *(1,) * len(self.out_spatial)))
        return self._bias[1]

    def run(
        self,
        x: np.ndarray,
        weights: np.ndarray,
        bias: np.ndarray | None,
        out: np.ndarray,
        finish: Callable[[np.ndarray], None],
    ) -> None:
        """``out`` (float32 ``[N, C * multiplier, *out]``) = the convolution of ``x`` plus ``bias``, then ``finish``
        (the fused activation, in place) on each block of output rows.

        ``weights`` from :meth:`weight_rows`, ``bias`` from :meth:`bias_rows` or None.
        """
        phases = self._phases if self._phases is not None else self._bind()
        if not self._scratch:
            self._scratch = [np.empty((2, self.block, self.length), np.float32) for _ in range(2)]
        rows = x.reshape(self.rows, *x.shape[2:])
        for p, src, dst in self.copies:
            np.copyto(self._views[p][dst], rows[src])
        targets = out.reshape(self.rows, self.multiplier, *self.out_spatial)
        keep = (slice(None), slice(None), *(slice(0, o) for o in self.out_spatial[1:]))
        length = self.length

        def blocks(part: int, first: int, stop: int) -> None:
            scratch = self._scratch[part]
            for r0 in range(first * self.block, min(stop * self.block, self.rows), self.block):
                r1 = min(self.rows, r0 + self.block)
                acc, tmp = scratch[0, : r1 - r0], scratch[1, : r1 - r0]
                for q in range(self.multiplier):
                    first_tap = True
                    for phase, offset, t in self.taps:
                        source = phases[phase, r0:r1, offset : offset + length]
                        if first_tap:
                            np.multiply(source, weights[q, t, r0:r1], out=acc)
                            first_tap = False
                        else:
                            np.multiply(source, weights[q, t, r0:r1], out=tmp)
                            np.add(acc, tmp, out=acc)
                    result = acc.reshape(r1 - r0, self.out_spatial[0], *self.planes[1:])[keep]
                    target = targets[r0:r1, q]
                    if bias is not None:
                        np.add(result, bias[q, r0:r1], out=target)
                    else:
                        np.copyto(target, result)
                    finish(target)

        blocks_count = -(-self.rows // self.block)
        in_two_parts(blocks_count, self.rows * self.length * len(self.taps) * self.multiplier, blocks)
