"""Canonical forms of dimension expressions: the exporters' spellings simplify, bounds stay tight, rewrites are exact."""

from __future__ import annotations

import random
from typing import Any

import pytest

from plugrt.core.errors import ShapeError
from plugrt.shape import DimensionOperation as Op
from plugrt.shape import constant, operation, symbol
from plugrt.shape.expr import _APPLY, IDimensionExpr
from plugrt.shape.simplify import nonnegative

B, S, L = symbol("x[0]"), symbol("x[1]"), symbol("audio[1]")


def c(value: int) -> IDimensionExpr:
    return constant(value)


def add(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    return operation(Op.SUM, a, b)


def sub(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    return operation(Op.SUB, a, b)


def mul(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    return operation(Op.PROD, a, b)


def div(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    return operation(Op.FLOOR_DIV, a, b)


def test_bert_reshape_dimension_cancels_to_its_constant() -> None:
    """The dynamo export of BERT infers ``(B*64*S*(12*S)//S)//(S*B)``: it is 768, bounded as 768."""
    clamped = operation(Op.MAX, c(0), operation(Op.MIN, c(512), operation(Op.MAX, c(0), S)))
    merged = operation(Op.MAX, clamped, operation(Op.MAX, S, operation(Op.MAX, clamped, S)))
    heads = div(mul(merged, c(12)), S)
    total = mul(mul(mul(B, c(64)), S), heads)
    dim = div(total, mul(S, B))
    assert dim == c(768)
    assert div(mul(heads, mul(c(64), S)), S) == c(768)


def test_slice_end_clamp_of_a_dimension_is_the_dimension() -> None:
    """``(S < 0) * ((512 + S) - S) + S`` (a Slice end normalised) is S: dimensions are never negative."""
    end = add(mul(operation(Op.LESS, S, c(0)), sub(add(c(512), S), S)), S)
    assert end == S
    assert operation(Op.MAX, operation(Op.MAX, S, c(0)), S) == S
    assert operation(Op.MAX, S, operation(Op.MIN, S, c(512))) == S  # absorption


def test_like_terms_collect_and_constants_leave_divisions() -> None:
    assert sub(add(c(512), S), S) == c(512)
    assert add(div(sub(L, c(2)), c(2)), c(1)) == div(L, c(2))  # a convolution's (L - 2) // 2 + 1
    assert div(div(L, c(5)), c(2)) == div(L, c(10))
    assert div(add(mul(c(6), S), c(7)), c(3)) == add(mul(c(2), S), c(2))
    assert operation(Op.CEIL_DIV, mul(c(6), S), c(4)) == operation(Op.CEIL_DIV, mul(c(3), S), c(2))


def test_a_multiple_of_a_sum_divides_out() -> None:
    """wav2vec2's reshape: ``(12 * T - 12) // (T - 1)`` is 12."""
    t = sub(div(L, c(320)), c(1))
    assert div(mul(c(12), t), t) == c(12)
    assert div(add(mul(c(12), t), c(5)), t) == add(c(12), div(c(5), t))


def test_bounds_of_a_clamped_truncation_refine_over_the_profile() -> None:
    """max(q, 0) + min(ceil, 0) of a dividend positive over the profile bounds like the floor division."""
    t = sub(div(L, c(80)), c(2))
    down = operation(Op.MAX, div(t, c(2)), c(0))
    up = operation(Op.MIN, operation(Op.CEIL_DIV, t, c(2)), c(0))
    spelled = add(down, up)  # what an integer Div of a shape value gives
    ratio = div(mul(c(12), mul(spelled, div(t, c(2)))), div(t, c(2)))
    low, high = {"audio[1]": 1000}, {"audio[1]": 64000}
    assert ratio.refined(low, high) == mul(c(12), div(t, c(2)))
    assert ratio.bounds(low, high) == (12 * ((1000 // 80 - 2) // 2), 12 * ((64000 // 80 - 2) // 2))


def test_symbols_are_nonnegative_and_subtractions_are_not() -> None:
    assert nonnegative(S) and nonnegative(mul(S, B)) and nonnegative(div(S, c(2)))
    assert not nonnegative(sub(S, c(1))) and not nonnegative(c(-1))
    assert operation(Op.LESS, S, c(0)) == c(0)
    assert operation(Op.LESS, c(-1), S) == c(1)


def test_division_by_a_zero_constant_still_raises() -> None:
    with pytest.raises(ShapeError, match="division by zero"):
        div(c(4), c(0))
    zero_dim = div(S, sub(S, S))  # S // 0
    with pytest.raises(ShapeError, match="division by zero"):
        zero_dim.evaluate({"x[1]": 3})


def _random_tree(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.25:
        return ("c", rng.randint(-3, 6)) if rng.random() < 0.5 else ("s", rng.choice("abc"))
    return ("o", rng.choice(list(Op)), _random_tree(rng, depth - 1), _random_tree(rng, depth - 1))


def _reference(tree: Any, env: dict[str, int]) -> int:
    if tree[0] == "c":
        return int(tree[1])
    if tree[0] == "s":
        return env[tree[1]]
    return int(_APPLY[tree[1]](_reference(tree[2], env), _reference(tree[3], env)))


def _build(tree: Any) -> IDimensionExpr:
    if tree[0] == "c":
        return constant(tree[1])
    if tree[0] == "s":
        return symbol(tree[1])
    return operation(tree[1], _build(tree[2]), _build(tree[3]))


def test_every_rewrite_is_exact_and_bounds_contain_every_value() -> None:
    """3000 random expressions (fixed seed): the simplified value equals the tree's; bounds contain it."""
    rng = random.Random(0)
    low, high = dict.fromkeys("abc", 0), dict.fromkeys("abc", 7)
    checked = 0
    for _ in range(3000):
        tree = _random_tree(rng, rng.choice([3, 4, 5]))
        try:
            expr = _build(tree)
            lo, hi = expr.bounds(low, high)
        except ShapeError:
            continue  # a division by zero, found while building or bounding

        for _ in range(4):
            env = {name: rng.randint(0, 7) for name in "abc"}
            try:
                expected = _reference(tree, env)
            except ShapeError:
                continue
            assert expr.evaluate(env) == expected, (tree, env, expr)
            assert lo <= expected <= hi, (tree, env, expr, lo, hi)
            checked += 1
    assert checked > 5000


def test_deep_expressions_evaluate_print_and_compare_without_recursion() -> None:
    """A chain of 1200 x 3 operations (deeper than Python's recursion limit) stays usable."""
    expr = S
    other = S
    for k in range(1200):
        expr = operation(Op.MAX, div(add(expr, c(k % 7 + 1)), c(2)), B)
        other = operation(Op.MAX, div(add(other, c(k % 7 + 1)), c(2)), B)
    assert expr.depth > 1200
    assert expr == other and expr is not other
    assert expr.evaluate({"x[0]": 1, "x[1]": 10**6}) >= 1
    assert expr.bounds({"x[0]": 1, "x[1]": 1}, {"x[0]": 4, "x[1]": 10**6})[1] >= 4
    assert len(repr(expr)) <= 2000
