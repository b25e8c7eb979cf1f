"""Tests for activation memory planning: plugrt.builder.memory."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugrt.builder.memory import ALIGNMENT, Block, align, plan_memory


def lifetimes_overlap(a: Block, b: Block) -> bool:
    return not (a.end < b.start or b.end < a.start)


def check_plan(blocks: list[Block], arena: int, offsets: dict[object, int]) -> None:
    """Every invariant a plan must satisfy."""
    assert set(offsets) == {b.key for b in blocks}
    for block in blocks:
        offset = offsets[block.key]
        assert offset >= 0
        assert offset % ALIGNMENT == 0, (block, offset)
        assert offset + block.size <= arena, (block, offset, arena)
    for a, b in itertools.combinations(blocks, 2):
        if lifetimes_overlap(a, b):
            a_lo, b_lo = offsets[a.key], offsets[b.key]
            a_hi, b_hi = a_lo + max(a.size, 1), b_lo + max(b.size, 1)
            assert a_hi <= b_lo or b_hi <= a_lo, (a, b, offsets[a.key], offsets[b.key])
    assert arena % ALIGNMENT == 0
    assert arena <= sum(align(max(b.size, 1)) for b in blocks)


# ---------------------------------------------------------------------------
# align
# ---------------------------------------------------------------------------


def test_alignment_constant() -> None:
    assert ALIGNMENT == 256


@pytest.mark.parametrize(
    ("size", "expected"), [(0, 0), (1, 256), (255, 256), (256, 256), (257, 512), (1000, 1024), (4096, 4096)]
)
def test_align(size: int, expected: int) -> None:
    assert align(size) == expected


@pytest.mark.parametrize(
    ("size", "alignment", "expected"), [(5, 4, 8), (8, 4, 8), (0, 64, 0), (65, 64, 128), (7, 1, 7)]
)
def test_align_custom(size: int, alignment: int, expected: int) -> None:
    assert align(size, alignment) == expected


# ---------------------------------------------------------------------------
# plan_memory
# ---------------------------------------------------------------------------


def test_empty_plan() -> None:
    assert plan_memory([]) == (0, {})


def test_single_block() -> None:
    arena, offsets = plan_memory([Block("a", 1000, 0, 3)])
    assert offsets == {"a": 0}
    assert arena == 1024


def test_overlapping_blocks_are_stacked() -> None:
    blocks = [Block("a", 300, 0, 2), Block("b", 100, 1, 3), Block("c", 256, 2, 2)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)
    assert arena == align(300) + align(100) + align(256)


def test_lifetimes_sharing_one_step_overlap() -> None:
    # end is inclusive: a block ending at step 2 and one starting at step 2 are alive together
    blocks = [Block("a", 256, 0, 2), Block("b", 256, 2, 4)]
    arena, offsets = plan_memory(blocks)
    assert offsets["a"] != offsets["b"]
    assert arena == 512


def test_disjoint_lifetimes_reuse_memory() -> None:
    blocks = [Block(f"t{i}", 1024, i, i) for i in range(10)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)
    assert arena == 1024
    assert set(offsets.values()) == {0}


def test_chain_of_pairs_uses_two_slots() -> None:
    # a typical layer chain: each activation lives from its producer to its consumer
    blocks = [Block(f"t{i}", 4096, i, i + 1) for i in range(20)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)
    assert arena == 2 * 4096
    assert arena < sum(b.size for b in blocks)


def test_small_block_fits_in_gap_left_by_large_block() -> None:
    blocks = [
        Block("big_early", 4096, 0, 1),
        Block("long", 1024, 0, 5),
        Block("small_late", 2048, 3, 5),
    ]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)
    assert arena == 4096 + 1024
    assert offsets["small_late"] == 0  # reuses big_early's space


@pytest.mark.parametrize("size", [0, 1, 100, 255, 256, 257])
def test_offsets_are_aligned_for_odd_sizes(size: int) -> None:
    blocks = [Block(i, size, 0, 0) for i in range(5)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)
    assert sorted(offsets.values()) == [i * align(max(size, 1)) for i in range(5)]


def test_zero_size_blocks_get_distinct_aligned_offsets() -> None:
    blocks = [Block("empty", 0, 0, 5), Block("data", 512, 0, 5), Block("empty2", 0, 1, 2)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)
    assert len(set(offsets.values())) == 3
    assert arena >= 512


def test_only_zero_size_blocks() -> None:
    blocks = [Block("a", 0, 0, 0), Block("b", 0, 1, 1)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)
    assert offsets == {"a": 0, "b": 0}


def test_plan_is_deterministic_and_order_independent() -> None:
    rng = random.Random(7)
    blocks = [Block(f"k{i}", rng.randint(1, 5000), s, s + rng.randint(0, 4)) for i, s in enumerate(range(30))]
    first = plan_memory(blocks)
    shuffled = blocks[:]
    rng.shuffle(shuffled)
    assert plan_memory(shuffled) == first
    assert plan_memory(tuple(blocks)) == first


def test_keys_can_be_any_hashable() -> None:
    blocks = [Block(("layer", 1), 10, 0, 1), Block(42, 10, 0, 1), Block(frozenset({"x"}), 10, 2, 2)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)


def test_block_is_frozen() -> None:
    block = Block("a", 1, 0, 0)
    with pytest.raises(AttributeError, match="cannot assign to field 'size'"):
        block.size = 5  # type: ignore[misc]


def test_random_block_sets() -> None:
    rng = random.Random(2024)
    for _ in range(200):
        count = rng.randint(1, 25)
        blocks = []
        for i in range(count):
            start = rng.randint(0, 15)
            size = rng.choice([0, 1, 64, 255, 256, 1000, 4096, rng.randint(0, 10_000)])
            blocks.append(Block(i, size, start, start + rng.randint(0, 6)))
        arena, offsets = plan_memory(blocks)
        check_plan(blocks, arena, offsets)
        # the arena can never be smaller than the (aligned) bytes alive at the busiest step
        peak = max(sum(align(max(b.size, 1)) for b in blocks if b.start <= step <= b.end) for step in range(0, 22))
        assert arena >= peak


@settings(max_examples=150, deadline=None, database=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5000), st.integers(0, 12), st.integers(0, 5)),
        min_size=1,
        max_size=20,
    )
)
def test_overlapping_lifetimes_never_overlap_in_memory(specs: list[tuple[int, int, int]]) -> None:
    blocks = [Block(i, size, start, start + length) for i, (size, start, length) in enumerate(specs)]
    arena, offsets = plan_memory(blocks)
    check_plan(blocks, arena, offsets)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.integers(1, 5000), min_size=2, max_size=15))
def test_sequential_lifetimes_need_only_the_largest_block(sizes: list[int]) -> None:
    blocks = [Block(i, size, i, i) for i, size in enumerate(sizes)]
    arena, _ = plan_memory(blocks)
    assert arena == align(max(sizes))
    assert arena < sum(align(s) for s in sizes)


# ---------------------------------------------------------------------------
# memory_plans: constants computed before the first run
# ---------------------------------------------------------------------------


def _gate_reshuffle_model() -> tuple[bytes, np.ndarray, np.ndarray]:
    """A weight too large to fold at import, its two halves swapped by Slice and Concat layers (as exporters
    reorder an LSTM's gates), then read by a product: Slice's outputs are constants only Concat reads."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 1024)).astype(np.float32)
    v = rng.standard_normal((1024, 16)).astype(np.float32)
    ints = {"s0": 0, "e0": 64, "s1": 64, "e1": 128, "ax": 0}
    nodes = [
        helper.make_node("Slice", ["W", "s0", "e0", "ax"], ["A"]),
        helper.make_node("Slice", ["W", "s1", "e1", "ax"], ["B"]),
        helper.make_node("Concat", ["B", "A"], ["C"], axis=0),
        helper.make_node("MatMul", ["X", "C"], ["Y"]),
        helper.make_node("Relu", ["Y"], ["R"]),
        helper.make_node("MatMul", ["R", "V"], ["Z"]),
    ]
    initializers = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(v, "V")]
    initializers += [numpy_helper.from_array(np.array([value], np.int64), name) for name, value in ints.items()]
    graph = helper.make_graph(
        nodes,
        "reshuffle",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 128])],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["n", 16])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return model.SerializeToString(), w, v


def test_constants_only_constants_read_share_memory_with_the_run() -> None:
    """A constant read only by other constant layers is dead once the engine has computed the constants (before its
    first run), so the run's tensors may take its memory; the constant the run reads keeps its own, and results stay
    right call after call and at new shapes."""
    import plugrt

    data, w, v = _gate_reshuffle_model()
    engine = plugrt.compile(data, shapes={"X": ((1, 128), (4, 128), (64, 128))})
    rng = np.random.default_rng(1)
    for rows in (4, 4, 9, 64):
        x = rng.standard_normal((rows, 128)).astype(np.float32)
        want = np.maximum(x @ np.concatenate([w[64:], w[:64]]), 0) @ v
        np.testing.assert_allclose(engine(X=x)["Z"], want, rtol=1e-4, atol=1e-3)
    plan = engine.engine.plan
    offsets = plan.profiles[0].offsets
    arrays = engine.context._executor.arrays  # (the last call's, at the profile's largest shapes)
    ranges = {}
    for index, tensor in enumerate(plan.tensors):
        if index in offsets:
            count = math.prod(int(d.evaluate({})) for d in tensor.shape) if tensor.role == "constant" else None
            nbytes = 4 * count if count is not None else arrays[index].nbytes
            ranges[tensor.name] = (tensor.role, offsets[index], offsets[index] + nbytes)
    read_by_run = {"C", "V"}
    dead = [(lo, hi) for name, (role, lo, hi) in ranges.items() if role == "constant" and name not in read_by_run]
    run = [(lo, hi) for name, (role, lo, hi) in ranges.items() if role == "internal"]
    assert dead and run
    assert any(a < d and c < b for a, b in run for c, d in dead), ranges
    kept = [ranges[name] for name in read_by_run]
    assert not any(a < d and c < b for a, b in run for _, c, d in kept), ranges
