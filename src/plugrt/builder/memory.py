"""Activation memory planning: place buffers in one arena, reusing space between lifetimes."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

__all__ = ["ALIGNMENT", "Block", "align", "plan_memory"]

#: Every buffer starts on this boundary (enough for any vector load).
ALIGNMENT = 256


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
    Returns (arena size, offsets).
    """
    placed: list[tuple[int, int, Block]] = []  # (offset, size, block)
    offsets: dict[Hashable, int] = {}
    arena = 0
    for block in sorted(blocks, key=lambda b: (-b.size, b.start, str(b.key))):
        size = align(max(block.size, 1))
        busy = sorted(
            (off, off + sz) for off, sz, other in placed if not (other.end < block.start or block.end < other.start)
        )
        offset = 0
        for lo, hi in busy:
            if offset + size <= lo:
                break
            offset = max(offset, align(hi))
        placed.append((offset, size, block))
        offsets[block.key] = offset
        arena = max(arena, offset + size)
    return arena, offsets
