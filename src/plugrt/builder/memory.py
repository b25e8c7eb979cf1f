"""Activation memory planning: place buffers in one arena, reusing space between lifetimes."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..backends.base import ALIGNMENT
from ..engine.plan import ProfilePlan, host_computed, tensor_max_bytes

if TYPE_CHECKING:
    from .state import BuildState

__all__ = ["ALIGNMENT", "Block", "align", "memory_plans", "plan_memory"]


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


def memory_plans(state: BuildState) -> list[ProfilePlan]:
    """Each profile's arena: tensors by lifetime (in-place outputs in their input's memory) and workspaces."""
    end = len(state.layers)
    # the engine computes constant layers once, before its first run (``Executor.bind``): on this timeline they take
    # the steps before 0, so a constant that only other constant layers read (the Slice, Concat and Unsqueeze
    # reshuffling an exported LSTM's gates: 46 MB of a BiLSTM's) shares memory with the run's tensors
    constant_layer = [
        bool(layer.outputs) and all(state.tensors[o].role == "constant" for o in layer.outputs) for layer in state.layers
    ]
    last_use: dict[int, int] = {}
    producer: dict[int, int] = {}
    for step, layer in enumerate(state.layers):
        when = step - end - 1 if constant_layer[step] else step
        for i in layer.inputs + layer.shape_inputs:
            last_use[i] = max(last_use.get(i, when), when)
        for o in layer.outputs:
            producer[o] = when
    size_symbols = {sym for layer in state.layers for sym in layer.size_outputs.values()}
    # shape tensors the executor writes when shapes change live for the whole run, as constants do
    whole_run = {
        o for layer in state.layers if host_computed(layer, state.tensors, size_symbols) for o in layer.outputs
    }

    def root(index: int) -> int:  # in-place outputs live in the memory of the input they overwrite
        while index in state.shares:
            index = state.shares[index]
        return index

    plans = []
    for profile in state.profiles:
        lifetimes: dict[int, tuple[int, int, int]] = {}
        for index, tensor in enumerate(state.tensors):
            data_dependent = any(d.symbols() - set(profile.low) for d in tensor.shape)
            if tensor.role == "input" or (tensor.role == "output" and not data_dependent):
                continue
            nbytes = tensor_max_bytes(tensor, profile.low, profile.high)
            constant = tensor.role == "constant"
            read_by_run = last_use.get(index, -1) >= 0
            kept = (constant and (read_by_run or index not in producer)) or index in whole_run
            start = -end - 1 if kept else producer.get(index, 0)
            stop = end if kept or tensor.role == "output" else last_use.get(index, start)
            owner = root(index)
            if owner in lifetimes:
                size, first, last = lifetimes[owner]
                lifetimes[owner] = (max(size, nbytes), min(first, start), max(last, stop))
            else:
                lifetimes[owner] = (nbytes, start, stop)
        blocks = [Block(("t", index), size, start, stop) for index, (size, start, stop) in lifetimes.items()]
        for step, layer in enumerate(state.layers):
            if layer.workspace:
                blocks.append(Block(("w", step), layer.workspace, step, step))
        arena, offsets = plan_memory(blocks)
        tensor_offsets = {k[1]: v for k, v in offsets.items() if isinstance(k, tuple) and k[0] == "t"}
        for member in state.shares:
            tensor_offsets[member] = tensor_offsets[root(member)]
        plans.append(
            ProfilePlan(
                profile.shapes,
                arena,
                tensor_offsets,
                {k[1]: v for k, v in offsets.items() if isinstance(k, tuple) and k[0] == "w"},
            )
        )
    return plans
