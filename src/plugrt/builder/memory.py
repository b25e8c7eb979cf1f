"""Activation memory planning: place buffers in one arena, reusing space between lifetimes."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from ..backends.base import ALIGNMENT

__all__ = ["ALIGNMENT", "Block", "align", "plan_memory"]


def align(size: int, alignment: int = ALIGNMENT) -> int:
    """``size`` rounded up to a multiple of ``alignment``."""
    return -(-size // alignment) * alignment


@dataclass(frozen=True)
class Block:
    """A buffer of ``size`` bytes live from step ``start`` to step ``end`` (inclusive)."""

    key: Hashable
    size: int
    start: int
    end: int


def plan_memory(blocks: Sequence[Block]) -> tuple[int, dict[Hashable, int]]:
    """Offsets for ``blocks`` such that blocks alive at the same time never overlap.

    Greedy best-fit by decreasing size: each block takes the lowest aligned
    offset that does not collide with an already placed, time-overlapping block.
    Returns (arena size, offsets). The overlap test over placed blocks is
    vectorised, so networks of thousands of tensors plan in milliseconds.
    """
    count = len(blocks)
    lo = np.zeros(count, dtype=np.int64)  # offsets of placed blocks (in placement order)
    hi = np.zeros(count, dtype=np.int64)
    starts = np.zeros(count, dtype=np.int64)
    ends = np.zeros(count, dtype=np.int64)
    offsets: dict[Hashable, int] = {}
    arena = 0
    for placed, block in enumerate(sorted(blocks, key=lambda b: (-b.size, b.start, str(b.key)))):
        size = align(max(block.size, 1))
        alive = (starts[:placed] <= block.end) & (block.start <= ends[:placed])
        order = np.argsort(lo[:placed][alive], kind="stable")
        offset = 0
        for busy_lo, busy_hi in zip(lo[:placed][alive][order].tolist(), hi[:placed][alive][order].tolist()):
            if offset + size <= busy_lo:
                break
            offset = max(offset, align(busy_hi))
        lo[placed], hi[placed], starts[placed], ends[placed] = offset, offset + size, block.start, block.end
        offsets[block.key] = offset
        arena = max(arena, offset + size)
    return arena, offsets
