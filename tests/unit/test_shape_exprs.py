"""Tests for plugrt.shape: dimension expressions, IExprBuilder and DimsExprs."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plugrt as trt
from plugrt.core.errors import ShapeError
from plugrt.shape import DimensionOperation, DimsExprs, IDimensionExpr, IExprBuilder, constant, operation, symbol

D = DimensionOperation

REFERENCE: dict[DimensionOperation, Callable[[int, int], int]] = {
    D.SUM: lambda a, b: a + b,
    D.PROD: lambda a, b: a * b,
    D.MAX: lambda a, b: a if a >= b else b,
    D.MIN: lambda a, b: a if a <= b else b,
    D.SUB: lambda a, b: a - b,
    D.EQUAL: lambda a, b: 1 if a == b else 0,
    D.LESS: lambda a, b: 1 if a < b else 0,
    D.FLOOR_DIV: lambda a, b: math.floor(Fraction(a, b)),
    D.CEIL_DIV: lambda a, b: math.ceil(Fraction(a, b)),
}
DIVISIONS = (D.FLOOR_DIV, D.CEIL_DIV)


@pytest.fixture
def eb() -> IExprBuilder:
    return IExprBuilder("Plug")


# ---------------------------------------------------------------------------
# DimensionOperation and constants
# ---------------------------------------------------------------------------


def test_dimension_operation_values_match_tensorrt() -> None:
    assert {m.name: int(m) for m in DimensionOperation} == {
        "SUM": 0,
        "PROD": 1,
        "MAX": 2,
        "MIN": 3,
        "SUB": 4,
        "EQUAL": 5,
        "LESS": 6,
        "FLOOR_DIV": 7,
        "CEIL_DIV": 8,
    }
    assert trt.DimensionOperation is DimensionOperation
    assert trt.IExprBuilder is IExprBuilder
    assert trt.IDimensionExpr is IDimensionExpr
    assert trt.DimsExprs is DimsExprs


@pytest.mark.parametrize("value", [0, 1, 7, -3, 2**40, np.int64(5), np.int32(-2), True])
def test_constant(eb: IExprBuilder, value: int) -> None:
    expr = eb.constant(value)
    assert expr.is_constant()
    assert not expr.is_size_tensor()
    assert expr.get_constant_value() == int(value)
    assert type(expr.get_constant_value()) is int
    assert expr.symbols() == set()
    assert expr.evaluate({}) == int(value)
    assert expr.bounds({}, {}) == (int(value), int(value))
    assert repr(expr) == str(int(value))
    assert expr.symbol == ""


@pytest.mark.parametrize("bad", [2.5, "3", None, 3.0, [1]])
def test_constant_rejects_non_integers(eb: IExprBuilder, bad: object) -> None:
    with pytest.raises(ShapeError, match=rf"IExprBuilder\.constant takes an int, got {bad!r}".replace("[", r"\[")):
        eb.constant(bad)  # type: ignore[arg-type]


def test_symbol_is_not_constant() -> None:
    x = symbol("x")
    assert not x.is_constant()
    assert not x.is_size_tensor()
    assert x.symbol == "x"
    assert repr(x) == "x"
    with pytest.raises(ShapeError, match="dimension expression x is not a constant"):
        x.get_constant_value()


# ---------------------------------------------------------------------------
# Operations on constants against Python references
# ---------------------------------------------------------------------------

VALUES = range(-7, 8)


@pytest.mark.parametrize("op", list(DimensionOperation))
def test_operation_on_constants_matches_reference(eb: IExprBuilder, op: DimensionOperation) -> None:
    for a, b in itertools.product(VALUES, VALUES):
        if op in DIVISIONS and b == 0:
            continue
        result = eb.operation(op, eb.constant(a), eb.constant(b))
        assert result.is_constant(), (op, a, b)
        assert result.get_constant_value() == REFERENCE[op](a, b), (op, a, b)


@pytest.mark.parametrize("op", list(DimensionOperation))
def test_operation_accepts_integer_op_codes(eb: IExprBuilder, op: DimensionOperation) -> None:
    result = eb.operation(int(op), eb.constant(9), eb.constant(4))  # type: ignore[arg-type]
    assert result.get_constant_value() == REFERENCE[op](9, 4)


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [
        (D.FLOOR_DIV, 7, 2, 3),
        (D.FLOOR_DIV, -7, 2, -4),
        (D.FLOOR_DIV, 7, -2, -4),
        (D.FLOOR_DIV, -7, -2, 3),
        (D.FLOOR_DIV, -8, 2, -4),
        (D.CEIL_DIV, 7, 2, 4),
        (D.CEIL_DIV, -7, 2, -3),
        (D.CEIL_DIV, 7, -2, -3),
        (D.CEIL_DIV, -7, -2, 4),
        (D.CEIL_DIV, 8, 2, 4),
        (D.CEIL_DIV, 0, 5, 0),
        (D.EQUAL, 3, 3, 1),
        (D.LESS, 3, 3, 0),
        (D.LESS, -1, 0, 1),
    ],
)
def test_operation_known_values(eb: IExprBuilder, op: DimensionOperation, a: int, b: int, expected: int) -> None:
    assert eb.operation(op, eb.constant(a), eb.constant(b)).get_constant_value() == expected


@pytest.mark.parametrize("op", DIVISIONS)
@pytest.mark.parametrize("a", [0, 5, -5])
def test_constant_division_by_zero_raises(eb: IExprBuilder, op: DimensionOperation, a: int) -> None:
    with pytest.raises(ShapeError, match=rf"division by zero in a dimension expression \({a} / 0\)"):
        eb.operation(op, eb.constant(a), eb.constant(0))


@pytest.mark.parametrize("op", DIVISIONS)
def test_symbolic_division_by_zero_raises_at_evaluation(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    assert expr.evaluate({"x": 9, "y": 2}) == REFERENCE[op](9, 2)
    with pytest.raises(ShapeError, match=r"division by zero in a dimension expression \(9 / 0\)"):
        expr.evaluate({"x": 9, "y": 0})


@pytest.mark.parametrize("bad", [3, None, "x", 2.0])
def test_operation_rejects_non_expressions(eb: IExprBuilder, bad: object) -> None:
    kind = type(bad).__name__
    expected = rf"DimensionOperation\.SUM takes two IDimensionExpr, got IDimensionExpr and {kind}"
    with pytest.raises(ShapeError, match=expected):
        eb.operation(D.SUM, eb.constant(1), bad)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=rf"DimensionOperation\.PROD takes two IDimensionExpr, got {kind} and"):
        eb.operation(D.PROD, bad, symbol("x"))  # type: ignore[arg-type]


def test_operation_rejects_unknown_op(eb: IExprBuilder) -> None:
    with pytest.raises(ValueError, match="9 is not a valid DimensionOperation"):
        eb.operation(9, eb.constant(1), eb.constant(2))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Folding and simplification
# ---------------------------------------------------------------------------


def test_constant_folding_of_nested_constants(eb: IExprBuilder) -> None:
    c = eb.constant
    expr = eb.operation(D.SUB, eb.operation(D.PROD, c(3), c(4)), eb.operation(D.CEIL_DIV, c(7), c(2)))
    assert expr.is_constant()
    assert expr.get_constant_value() == 8


@pytest.mark.parametrize(
    ("op", "const", "const_first"),
    [
        (D.SUM, 0, True),
        (D.SUM, 0, False),
        (D.PROD, 1, True),
        (D.PROD, 1, False),
        (D.FLOOR_DIV, 1, False),
        (D.CEIL_DIV, 1, False),
        (D.SUB, 0, False),
    ],
)
def test_identity_elements_fold_away(eb: IExprBuilder, op: DimensionOperation, const: int, const_first: bool) -> None:
    x = symbol("x")
    args = (eb.constant(const), x) if const_first else (x, eb.constant(const))
    assert eb.operation(op, *args) is x


@pytest.mark.parametrize("op", [D.MAX, D.MIN])
def test_max_min_of_same_expression_fold(eb: IExprBuilder, op: DimensionOperation) -> None:
    x = eb.operation(D.SUM, symbol("x"), eb.constant(2))
    same = eb.operation(D.SUM, symbol("x"), eb.constant(2))
    assert eb.operation(op, x, same) is x


def test_equal_and_sub_of_same_expression_fold(eb: IExprBuilder) -> None:
    x = symbol("x")
    assert eb.operation(D.EQUAL, x, symbol("x")) == eb.constant(1)
    assert eb.operation(D.SUB, x, symbol("x")) == eb.constant(0)


def test_non_identity_operations_are_not_folded(eb: IExprBuilder) -> None:
    x = symbol("x")
    for op in DimensionOperation:
        expr = eb.operation(op, x, eb.constant(3))
        assert not expr.is_constant(), op
        assert expr.symbols() == {"x"}
    # 0 - x is not x, x // 0 is not folded at build time
    assert not eb.operation(D.SUB, eb.constant(0), x).is_constant()
    assert not eb.operation(D.FLOOR_DIV, x, eb.constant(0)).is_constant()
    assert eb.operation(D.FLOOR_DIV, eb.constant(1), x) != x


def test_repr_of_non_commutative_operations(eb: IExprBuilder) -> None:
    x, y = symbol("x"), symbol("y")
    assert repr(eb.operation(D.SUB, x, eb.constant(3))) == "(x - 3)"
    assert repr(eb.operation(D.FLOOR_DIV, x, y)) == "(x // y)"
    assert repr(eb.operation(D.CEIL_DIV, x, eb.constant(2))) == "(x /^ 2)"
    assert repr(eb.operation(D.LESS, x, y)) == "(x < y)"
    assert repr(eb.operation(D.MAX, x, x)) == "x"
    assert repr(eb.operation(D.MIN, x, y)) in ("min(x, y)", "min(y, x)")


# ---------------------------------------------------------------------------
# Structural equality and hashing
# ---------------------------------------------------------------------------


def _build(eb: IExprBuilder) -> IDimensionExpr:
    x, y = symbol("x"), symbol("y")
    return eb.operation(D.CEIL_DIV, eb.operation(D.SUM, x, eb.operation(D.PROD, y, eb.constant(2))), eb.constant(4))


def test_structurally_identical_expressions_are_equal_and_hash_equal(eb: IExprBuilder) -> None:
    a, b = _build(eb), _build(IExprBuilder("Other"))
    assert a is not b
    assert a == b
    assert hash(a) == hash(b)
    assert {a: "value"}[b] == "value"
    assert len({a, b}) == 1


@pytest.mark.parametrize("op", [D.SUM, D.PROD, D.MAX, D.MIN, D.EQUAL])
def test_commutative_operations_are_canonical(eb: IExprBuilder, op: DimensionOperation) -> None:
    x, y = symbol("x"), symbol("y")
    assert eb.operation(op, x, y) == eb.operation(op, y, x)
    assert hash(eb.operation(op, x, y)) == hash(eb.operation(op, y, x))


@pytest.mark.parametrize("op", [D.SUB, D.LESS, D.FLOOR_DIV, D.CEIL_DIV])
def test_non_commutative_operations_keep_order(eb: IExprBuilder, op: DimensionOperation) -> None:
    x, y = symbol("x"), symbol("y")
    assert eb.operation(op, x, y) != eb.operation(op, y, x)


def test_different_structures_are_not_equal(eb: IExprBuilder) -> None:
    x, y = symbol("x"), symbol("y")
    assert symbol("x") == x
    assert x != y
    assert eb.constant(3) != eb.constant(4)
    assert eb.constant(3) == constant(3)
    assert eb.operation(D.SUM, x, y) != eb.operation(D.PROD, x, y)
    assert eb.operation(D.SUM, x, eb.constant(1)) != eb.operation(D.SUM, x, eb.constant(2))
    # a constant and a symbol never compare equal, even with related names/values
    assert eb.constant(0) != symbol("")
    size = eb.declare_size_tensor(0, eb.constant(1), eb.constant(2))
    assert size != symbol(size.symbol)


def test_equality_with_other_types(eb: IExprBuilder) -> None:
    three = eb.constant(3)
    assert three != 3
    assert three != "3"
    assert three.__eq__(3) is NotImplemented


def test_expressions_are_immutable(eb: IExprBuilder) -> None:
    three = eb.constant(3)
    with pytest.raises(AttributeError):
        three.extra = 1  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# symbols() and evaluate()
# ---------------------------------------------------------------------------


def test_symbols(eb: IExprBuilder) -> None:
    assert _build(eb).symbols() == {"x", "y"}
    assert eb.operation(D.MAX, symbol("a[0]"), eb.constant(5)).symbols() == {"a[0]"}
    size = eb.declare_size_tensor(2, symbol("n"), symbol("m"))
    assert size.symbols() == {"Plug:size2"}
    assert eb.operation(D.SUM, size, symbol("k")).symbols() == {"Plug:size2", "k"}


def test_evaluate(eb: IExprBuilder) -> None:
    expr = _build(eb)
    for x, y in itertools.product(range(0, 6), range(-3, 4)):
        assert expr.evaluate({"x": x, "y": y}) == -(-(x + 2 * y) // 4)
    assert expr.evaluate({"x": 1, "y": 1, "unused": 9}) == 1


def test_evaluate_missing_symbol_names_it(eb: IExprBuilder) -> None:
    expr = _build(eb)
    with pytest.raises(ShapeError, match=r"dimension 'y' is not known yet"):
        expr.evaluate({"x": 3})
    with pytest.raises(ShapeError, match=r"dimension 'x' is not known yet"):
        symbol("x").evaluate({})


def test_evaluate_size_tensor(eb: IExprBuilder) -> None:
    size = eb.declare_size_tensor(0, eb.constant(4), eb.constant(16))
    doubled = eb.operation(D.PROD, size, eb.constant(2))
    assert doubled.evaluate({"Plug:size0": 5}) == 10
    with pytest.raises(ShapeError, match=r"dimension 'Plug:size0' is not known yet"):
        doubled.evaluate({})


# ---------------------------------------------------------------------------
# bounds(): interval arithmetic checked by brute force
# ---------------------------------------------------------------------------


def _brute_force(expr: IDimensionExpr, low: dict[str, int], high: dict[str, int]) -> list[int]:
    names = sorted(expr.symbols())
    values = []
    for combo in itertools.product(*(range(low[n], high[n] + 1) for n in names)):
        try:
            values.append(expr.evaluate(dict(zip(names, combo))))
        except ShapeError:
            continue  # division by zero: not a value the expression takes
    return values


RANGES = [(0, 0), (1, 1), (1, 4), (0, 3), (2, 5), (3, 3), (-3, -1), (-2, 2)]
NON_NEGATIVE_RANGES = [r for r in RANGES if r[0] >= 0]
POSITIVE_RANGES = [r for r in RANGES if r[0] >= 1]


@pytest.mark.parametrize("op", [D.SUM, D.PROD, D.MAX, D.MIN, D.SUB])
def test_bounds_of_monotone_ops_contain_all_values_and_are_tight(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    for (xl, xh), (yl, yh) in itertools.product(RANGES, RANGES):
        low, high = {"x": xl, "y": yl}, {"x": xh, "y": yh}
        values = _brute_force(expr, low, high)
        assert expr.bounds(low, high) == (min(values), max(values)), (op, low, high)


@pytest.mark.parametrize("op", [D.EQUAL, D.LESS])
def test_bounds_of_comparisons_contain_all_values(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    for (xl, xh), (yl, yh) in itertools.product(RANGES, RANGES):
        low, high = {"x": xl, "y": yl}, {"x": xh, "y": yh}
        lo, hi = expr.bounds(low, high)
        values = _brute_force(expr, low, high)
        assert 0 <= lo <= min(values) and max(values) <= hi <= 1, (op, low, high)
        if len(set(values)) == 1:
            assert (lo, hi) == (values[0], values[0]), (op, low, high)


@pytest.mark.parametrize("op", DIVISIONS)
def test_bounds_of_division_by_positive_ranges_are_exact(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    for (xl, xh), (yl, yh) in itertools.product(RANGES, POSITIVE_RANGES):
        low, high = {"x": xl, "y": yl}, {"x": xh, "y": yh}
        values = _brute_force(expr, low, high)
        assert expr.bounds(low, high) == (min(values), max(values)), (op, low, high)


@pytest.mark.parametrize("op", DIVISIONS)
def test_bounds_of_division_by_range_touching_zero_skip_zero(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    for xl, xh in RANGES:
        low, high = {"x": xl, "y": 0}, {"x": xh, "y": 3}
        values = _brute_force(expr, low, high)
        assert expr.bounds(low, high) == (min(values), max(values)), (op, low, high)


@pytest.mark.parametrize("op", DIVISIONS)
def test_bounds_of_division_by_negative_range(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    for xl, xh in RANGES:
        low, high = {"x": xl, "y": -4}, {"x": xh, "y": -1}
        values = _brute_force(expr, low, high)
        assert expr.bounds(low, high) == (min(values), max(values)), (op, low, high)


@pytest.mark.parametrize("op", DIVISIONS)
def test_bounds_of_division_by_range_crossing_zero_contain_all_values(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    low, high = {"x": 5, "y": -2}, {"x": 10, "y": 3}
    lo, hi = expr.bounds(low, high)
    values = _brute_force(expr, low, high)
    assert lo <= min(values) and max(values) <= hi


@pytest.mark.parametrize("op", DIVISIONS)
def test_bounds_of_division_by_always_zero_raises(eb: IExprBuilder, op: DimensionOperation) -> None:
    expr = eb.operation(op, symbol("x"), symbol("y"))
    with pytest.raises(ShapeError, match="division by a dimension that is always zero"):
        expr.bounds({"x": 1, "y": 0}, {"x": 5, "y": 0})


def test_bounds_of_symbol_and_missing_bounds(eb: IExprBuilder) -> None:
    assert symbol("x").bounds({"x": 2}, {"x": 9}) == (2, 9)
    expr = eb.operation(D.SUM, symbol("x"), symbol("y"))
    with pytest.raises(ShapeError, match=r"dimension 'y' has no bounds"):
        expr.bounds({"x": 1, "y": 1}, {"x": 2})
    with pytest.raises(ShapeError, match=r"dimension 'y' has no bounds"):
        expr.bounds({"x": 1}, {"x": 2, "y": 3})


def test_bounds_of_size_tensor_run_from_zero_to_upper(eb: IExprBuilder) -> None:
    size = eb.declare_size_tensor(0, symbol("n"), eb.operation(D.PROD, symbol("n"), eb.constant(3)))
    assert size.bounds({"n": 2}, {"n": 5}) == (0, 15)
    plus = eb.operation(D.SUM, size, eb.constant(1))
    assert plus.bounds({"n": 2}, {"n": 5}) == (1, 16)


# random expression trees over bounded symbols ----------------------------------

SYMBOLS = ("x", "y")  # dimensions: >= 0 (the simplifier relies on it); negative values come from constants and SUB
POSITIVE_SYMBOLS = ("p", "q")  # always >= 1
ORDINARY_OPS = [D.SUM, D.PROD, D.MAX, D.MIN, D.SUB, D.EQUAL, D.LESS]


def _positive_exprs() -> st.SearchStrategy[IDimensionExpr]:
    leaves = st.one_of(st.sampled_from(POSITIVE_SYMBOLS).map(symbol), st.integers(1, 4).map(constant))
    return st.recursive(
        leaves,
        lambda inner: st.builds(operation, st.sampled_from([D.SUM, D.PROD, D.MAX, D.MIN]), inner, inner),
        max_leaves=4,
    )


def _exprs() -> st.SearchStrategy[IDimensionExpr]:
    leaves = st.one_of(
        st.sampled_from(SYMBOLS + POSITIVE_SYMBOLS).map(symbol),
        st.integers(-3, 4).map(constant),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(operation, st.sampled_from(ORDINARY_OPS), inner, inner),
            st.builds(operation, st.sampled_from(DIVISIONS), inner, _positive_exprs()),
        ),
        max_leaves=6,
    )


@st.composite
def _ranges(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, int]]:
    low, high = {}, {}
    for name in SYMBOLS:
        lo = draw(st.integers(0, 3))
        low[name], high[name] = lo, lo + draw(st.integers(0, 3))
    for name in POSITIVE_SYMBOLS:
        lo = draw(st.integers(1, 3))
        low[name], high[name] = lo, lo + draw(st.integers(0, 2))
    return low, high


@settings(max_examples=150, deadline=None, database=None)
@given(expr=_exprs(), ranges=_ranges())
def test_bounds_of_random_expressions_contain_every_value(
    expr: IDimensionExpr, ranges: tuple[dict[str, int], dict[str, int]]
) -> None:
    low, high = ranges
    lo, hi = expr.bounds(low, high)
    values = _brute_force(expr, low, high)
    assert values, expr
    assert lo <= min(values) and max(values) <= hi, (expr, low, high, (lo, hi))


@settings(max_examples=100, deadline=None, database=None)
@given(
    ops=st.lists(st.sampled_from([D.SUM, D.MAX, D.MIN]), min_size=1, max_size=3),
    ranges=_ranges(),
)
def test_bounds_of_monotone_chains_over_distinct_symbols_are_tight(
    ops: list[DimensionOperation], ranges: tuple[dict[str, int], dict[str, int]]
) -> None:
    names = ["x", "y", "p", "q"]
    expr = symbol(names[0])
    for op, name in zip(ops, names[1:]):
        expr = operation(op, expr, symbol(name))
    low, high = ranges
    values = _brute_force(expr, low, high)
    assert expr.bounds(low, high) == (min(values), max(values))


# ---------------------------------------------------------------------------
# declare_size_tensor
# ---------------------------------------------------------------------------


def test_declare_size_tensor(eb: IExprBuilder) -> None:
    opt, upper = eb.constant(8), eb.operation(D.PROD, symbol("n"), eb.constant(4))
    size = eb.declare_size_tensor(1, opt, upper)
    assert size.is_size_tensor()
    assert not size.is_constant()
    assert size.size_bounds == (opt, upper)
    assert size.symbol == "Plug:size1"
    assert repr(size) == "Plug:size1"
    assert eb.declared_size_tensors == {1: size}
    with pytest.raises(ShapeError, match="is not a constant"):
        size.get_constant_value()


def test_declare_size_tensor_accepts_index_like_output_index(eb: IExprBuilder) -> None:
    size = eb.declare_size_tensor(np.int64(3), eb.constant(1), eb.constant(2))  # type: ignore[arg-type]
    assert size.symbol == "Plug:size3"
    assert 3 in eb.declared_size_tensors


def test_declare_size_tensor_names_are_per_owner_and_index() -> None:
    a = IExprBuilder("A").declare_size_tensor(0, constant(1), constant(2))
    b = IExprBuilder("B").declare_size_tensor(0, constant(1), constant(2))
    c = IExprBuilder("A").declare_size_tensor(1, constant(1), constant(2))
    assert len({a, b, c}) == 3
    assert a == IExprBuilder("A").declare_size_tensor(0, constant(1), constant(2))


@pytest.mark.parametrize(
    ("opt", "upper", "message"),
    [
        (3, constant(4), "declare_size_tensor: opt must be an IDimensionExpr, got 3"),
        (constant(3), 4, "declare_size_tensor: upper must be an IDimensionExpr, got 4"),
        (None, constant(4), "declare_size_tensor: opt must be an IDimensionExpr, got None"),
        (constant(3), "n", "declare_size_tensor: upper must be an IDimensionExpr, got 'n'"),
    ],
)
def test_declare_size_tensor_rejects_non_expressions(
    eb: IExprBuilder, opt: object, upper: object, message: str
) -> None:
    with pytest.raises(ShapeError, match=message):
        eb.declare_size_tensor(0, opt, upper)  # type: ignore[arg-type]
    assert eb.declared_size_tensors == {}


def test_size_bounds_of_non_size_tensor_raises(eb: IExprBuilder) -> None:
    with pytest.raises(ShapeError, match="x is not a size tensor"):
        _ = symbol("x").size_bounds
    with pytest.raises(ShapeError, match="5 is not a size tensor"):
        _ = eb.constant(5).size_bounds


# ---------------------------------------------------------------------------
# DimsExprs
# ---------------------------------------------------------------------------


def test_dims_exprs_with_unset_entries(eb: IExprBuilder) -> None:
    dims = DimsExprs(3)
    assert len(dims) == 3
    assert dims.nbDims == 3
    assert dims.unset_positions() == [0, 1, 2]
    assert dims[0] is None
    dims[1] = eb.constant(4)
    assert dims.unset_positions() == [0, 2]
    dims[0] = symbol("x")
    dims[-1] = eb.constant(2)
    assert dims.unset_positions() == []
    assert list(dims) == [symbol("x"), constant(4), constant(2)]


def test_dims_exprs_empty_and_zero() -> None:
    assert len(DimsExprs()) == 0
    assert len(DimsExprs(0)) == 0
    assert DimsExprs().unset_positions() == []
    assert DimsExprs() == []


def test_dims_exprs_negative_length_rejected() -> None:
    with pytest.raises(ShapeError, match="DimsExprs length must be >= 0, got -1"):
        DimsExprs(-1)


def test_dims_exprs_from_iterable_and_copy_is_independent(eb: IExprBuilder) -> None:
    original = DimsExprs([eb.constant(1), symbol("n"), eb.constant(3)])
    copy = DimsExprs(original)
    assert copy == original
    assert copy is not original
    copy[0] = eb.constant(99)
    copy.append(eb.constant(5))
    assert original == [constant(1), symbol("n"), constant(3)]
    assert len(original) == 3 and len(copy) == 4
    from_generator = DimsExprs(e for e in original)
    assert from_generator == original


def test_dims_exprs_copy_keeps_unset_entries(eb: IExprBuilder) -> None:
    partial = DimsExprs(2)
    partial[0] = eb.constant(1)
    copy = DimsExprs(partial)
    assert copy.unset_positions() == [1]
    assert copy[0] == eb.constant(1)
    copy[1] = eb.constant(2)
    assert partial.unset_positions() == [1]  # the copy is independent


@pytest.mark.parametrize("bad", [3, None, "n", 2.5])
def test_dims_exprs_setitem_type_checks(eb: IExprBuilder, bad: object) -> None:
    dims = DimsExprs(2)
    with pytest.raises(ShapeError, match=rf"a DimsExprs entry must be an IDimensionExpr, got {type(bad).__name__}"):
        dims[0] = bad  # type: ignore[assignment]
    assert dims.unset_positions() == [0, 1]


@pytest.mark.parametrize("bad", [3, None, "n"])
def test_dims_exprs_append_and_init_type_check(bad: object) -> None:
    dims = DimsExprs()
    with pytest.raises(ShapeError, match=rf"a DimsExprs entry must be an IDimensionExpr, got {type(bad).__name__}"):
        dims.append(bad)  # type: ignore[arg-type]
    assert len(dims) == 0
    with pytest.raises(ShapeError, match=rf"got {type(bad).__name__}"):
        DimsExprs([constant(1), bad])  # type: ignore[list-item]


def test_dims_exprs_index_errors(eb: IExprBuilder) -> None:
    dims = DimsExprs(2)
    with pytest.raises(IndexError):
        dims[2] = eb.constant(1)
    with pytest.raises(IndexError):
        _ = dims[5]


def test_dims_exprs_slicing_iteration_and_equality(eb: IExprBuilder) -> None:
    items = [eb.constant(i) for i in range(4)]
    dims = DimsExprs(items)
    assert dims[1:3] == items[1:3]
    assert [e.get_constant_value() for e in dims] == [0, 1, 2, 3]
    assert dims == tuple(items)
    assert dims == DimsExprs(items)
    assert dims != DimsExprs(items[:3])
    assert dims != "0123"
    with pytest.raises(TypeError):
        hash(dims)
    assert repr(DimsExprs([eb.constant(2)])) == "DimsExprs([2])"
