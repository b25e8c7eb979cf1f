"""Canonical forms for dimension expressions, applied as each operation is built.

Exporters spell simple sizes in roundabout ways: a Reshape back to ``[B, S, 768]``
infers its last dimension as ``((S * 12) // S * (64 * S)) // S``, a Slice clamps
its end as ``max(0, min(512, max(0, (S < 0) * ((512 + S) - S) + S)))``. Left as
trees these grow with every layer (a plan of 60 chained convolutions nests
hundreds of levels) and bound badly (largest numerator over smallest
denominator: a tensor of 98 GiB instead of 3 MiB). Each new operation is
therefore rewritten into a canonical form:

- sums as ``constant + sum of coefficient * monomial``, like terms collected
  (``(512 + S) - S`` is ``512``); a constant factor distributes over a sum;
- products as ``coefficient * sorted factors``;
- exact division cancels common factors (``(768 * S) // S`` is ``768``), divides
  the terms of a sum that the divisor divides out, and merges nested floor
  divisions by non-negative divisors;
- max / min flatten, drop duplicates, arguments dominated by another (known by
  a constant difference, by sign or by absorption: ``max(a, min(a, b))`` is
  ``a``);
- comparisons fold when the sign of the difference is known.

Signs come from structure: symbols and size tensors are dimensions, never
negative. Every rewrite is an identity over the integers wherever the original
is defined (a division by a dimension that is zero stays an error only where
the divisor survives).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .expr import _APPLY, DimensionOperation, IDimensionExpr

__all__ = ["monomial", "nonnegative", "simplified"]

Op = DimensionOperation
Linear = tuple[int, dict[IDimensionExpr, int]]  # constant, monomial -> coefficient


def _const(value: int) -> IDimensionExpr:
    return IDimensionExpr("const", value=int(value))


def _node(op: DimensionOperation, a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    return IDimensionExpr("op", op=op, args=(a, b))


def _order(items: Iterable[IDimensionExpr]) -> list[IDimensionExpr]:
    return sorted(items, key=lambda e: (e.depth, hash(e)))


def nonnegative(expr: IDimensionExpr) -> bool:
    """True when ``expr`` is never negative, judged from its structure (cached on the node)."""
    return expr._nonneg


# --- products -----------------------------------------------------------------------------------


#: sums and products longer than this stay opaque terms (bounds the work per operation, even for a hostile plan)
MAX_TERMS = 64


def _monomial(expr: IDimensionExpr) -> tuple[int, list[IDimensionExpr]]:
    """``expr`` as coefficient * factors (a non-product is one factor)."""
    if expr.is_constant():
        return expr._value, []
    if expr._kind == "op" and expr._op == Op.PROD:
        cached = expr._forms.get("monomial")
        if cached is None:
            ca, fa = _monomial(expr._args[0])
            cb, fb = _monomial(expr._args[1])
            cached = (ca * cb, fa + fb) if len(fa) + len(fb) <= MAX_TERMS else (1, [expr])
            expr._forms["monomial"] = cached
        return cached[0], list(cached[1])
    return 1, [expr]


def monomial(expr: IDimensionExpr) -> tuple[int, list[IDimensionExpr]]:
    """``expr`` as (coefficient, factors) whose product it is; a sum, quotient or other term is one factor."""
    return _monomial(expr)


def _product(factors: list[IDimensionExpr]) -> IDimensionExpr:
    ordered = _order(factors)
    if not ordered:
        return _const(1)
    result = ordered[0]
    for factor in ordered[1:]:
        result = _node(Op.PROD, result, factor)
    return result


def _scaled(coefficient: int, monomial: IDimensionExpr) -> IDimensionExpr:
    if coefficient == 1:
        return monomial
    if monomial.is_constant():
        return _const(coefficient * monomial._value)
    return _node(Op.PROD, _const(coefficient), monomial)


# --- sums ---------------------------------------------------------------------------------------


def _linear(expr: IDimensionExpr) -> Linear:
    """``expr`` as constant + sum of coefficient * monomial (monomials without coefficient)."""
    if expr.is_constant():
        return expr._value, {}
    cached = expr._forms.get("linear")
    if cached is not None:
        return cached
    if expr._kind == "op" and expr._op in (Op.SUM, Op.SUB):
        form = _combine(_linear(expr._args[0]), _linear(expr._args[1]), 1 if expr._op == Op.SUM else -1)
        if len(form[1]) > MAX_TERMS:
            form = (0, {expr: 1})
    else:
        coefficient, factors = _monomial(expr)
        form = (0, {}) if coefficient == 0 else (0, {_product(factors): coefficient})
    expr._forms["linear"] = form
    return form


def _combine(a: Linear, b: Linear, sign: int) -> Linear:
    terms = dict(a[1])
    for term, coefficient in b[1].items():
        terms[term] = terms.get(term, 0) + sign * coefficient
    return a[0] + sign * b[0], {t: c for t, c in terms.items() if c}


def _from_linear(form: Linear) -> IDimensionExpr:
    constant, terms = form
    if not terms:
        return _const(constant)
    positive = [_scaled(c, t) for t in _order(terms) if (c := terms[t]) > 0]
    negative = [_scaled(-c, t) for t in _order(terms) if (c := terms[t]) < 0]
    if constant > 0 or not positive:
        positive.append(_const(max(constant, 0)))
    if constant < 0:
        negative.append(_const(-constant))
    result = positive[0]
    for term in positive[1:]:
        result = _node(Op.SUM, result, term)
    for term in negative:
        result = _node(Op.SUB, result, term)
    return result


def _difference(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    return _from_linear(_combine(_linear(a), _linear(b), -1))


def _constant_difference(a: IDimensionExpr, b: IDimensionExpr) -> int | None:
    constant, terms = _combine(_linear(a), _linear(b), -1)
    return None if terms else constant


# --- the rewrite ----------------------------------------------------------------------------------


def simplified(op: DimensionOperation, a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    """``op(a, b)`` in canonical form (``a`` and ``b`` are canonical already)."""
    if a.is_constant() and b.is_constant():
        return _const(_APPLY[op](a._value, b._value))
    if op in (Op.SUM, Op.SUB):
        return _from_linear(_combine(_linear(a), _linear(b), 1 if op == Op.SUM else -1))
    if op == Op.PROD:
        return _multiply(a, b)
    if op in (Op.FLOOR_DIV, Op.CEIL_DIV):
        return _divide(op, a, b)
    if op in (Op.MAX, Op.MIN):
        return _extreme(op, [a, b])
    return _compare(op, a, b)


def _multiply(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    if b.is_constant():
        a, b = b, a
    if a.is_constant():
        if a._value == 0:
            return _const(0)
        constant, terms = _linear(b)  # a constant distributes over a sum
        return _from_linear((constant * a._value, {t: c * a._value for t, c in terms.items()}))
    ca, fa = _monomial(a)
    cb, fb = _monomial(b)
    return _scaled(ca * cb, _product(fa + fb))


def _remove(factors: list[IDimensionExpr], divisor: list[IDimensionExpr]) -> list[IDimensionExpr] | None:
    """``factors`` without each of ``divisor`` (as multisets), or None when one is missing."""
    rest = list(factors)
    for factor in divisor:
        if factor not in rest:
            return None
        rest.remove(factor)
    return rest


def _divide(op: DimensionOperation, a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    if b.is_constant() and b._value == 1:
        return a
    if a.is_constant() and a._value == 0 and not b.is_constant():
        return _node(op, a, b)  # 0 // b still checks that b is not zero
    divisor_coefficient, divisor_factors = _monomial(b)
    if op == Op.FLOOR_DIV and a._kind == "op" and a._op == Op.FLOOR_DIV and nonnegative(a._args[1]) and nonnegative(b):
        # floor(floor(x / p) / q) == floor(x / (p * q)) for positive p and q
        return _divide(op, a._args[0], _multiply(a._args[1], b))
    constant, terms = _linear(a)
    multiple = _multiple_of_sum(constant, terms, b)
    if multiple is not None:  # (k * d + r) / d == k + r / d
        k, rest_constant = multiple
        if rest_constant == 0:
            return _const(k)
        return _from_linear(_combine((k, {}), _linear(simplified(op, _const(rest_constant), b)), 1))
    if divisor_coefficient != 0:
        # Terms the divisor divides exactly leave the division: (q * d + r) // d == q + r // d.
        whole: Linear = (0, {})
        rest: Linear = (constant, {})
        for term, coefficient in terms.items():
            remaining = _remove(_monomial(term)[1], divisor_factors)
            if remaining is not None and coefficient % divisor_coefficient == 0:
                whole = _combine(whole, (0, {_product(remaining): coefficient // divisor_coefficient}), 1)
            else:
                rest = _combine(rest, (0, {term: coefficient}), 1)
        if not divisor_factors:  # (x + q * c + r) // c == q + (x + r) // c
            quotient, remainder = divmod(rest[0], divisor_coefficient)
            whole = _combine(whole, (quotient, {}), 1)
            rest = (remainder, rest[1])
        if whole[1] or whole[0]:
            if not rest[1] and rest[0] == 0:
                return _from_linear(whole)
            leftover = simplified(op, _from_linear(rest), b)
            return _from_linear(_combine(whole, _linear(leftover), 1))
    # A single monomial over a monomial: cancel common factors and the coefficients' gcd.
    if len(terms) == 1 and constant == 0 and divisor_coefficient != 0:
        ((term, coefficient),) = terms.items()
        factors = _monomial(term)[1]
        remaining_num, remaining_den, common = list(factors), [], False
        for factor in divisor_factors:
            if factor in remaining_num:
                remaining_num.remove(factor)
                common = True
            else:
                remaining_den.append(factor)
        g = math.gcd(coefficient, divisor_coefficient)
        num_c, den_c = coefficient // g, divisor_coefficient // g
        if den_c < 0:
            num_c, den_c = -num_c, -den_c
        if common or g != 1:
            numerator = _scaled(num_c, _product(remaining_num))
            denominator = _scaled(den_c, _product(remaining_den))
            return simplified(op, numerator, denominator)
    return _node(op, a, b)


def _multiple_of_sum(
    constant: int, terms: dict[IDimensionExpr, int], divisor: IDimensionExpr
) -> tuple[int, int] | None:
    """(k, r) when the sum ``constant + terms`` is ``k * divisor + r`` for a sum ``divisor`` and constant ``r``."""
    d_constant, d_terms = _linear(divisor)
    if len(d_terms) + (d_constant != 0) < 2:
        return None  # a monomial divisor: the cancellations in _divide cover it
    term, coefficient = next(iter(d_terms.items()))
    if terms.get(term, 0) % coefficient or not terms.get(term, 0):
        return None
    k = terms[term] // coefficient
    rest_constant, rest_terms = _combine(
        (constant, terms), (k * d_constant, {t: k * c for t, c in d_terms.items()}), -1
    )
    return None if rest_terms else (k, rest_constant)


def _extreme(op: DimensionOperation, args: list[IDimensionExpr]) -> IDimensionExpr:
    flat: list[IDimensionExpr] = []
    for arg in args:
        if arg._kind == "op" and arg._op == op:
            flat.extend(_flatten(op, arg))
        else:
            flat.append(arg)
    unique: list[IDimensionExpr] = []
    for arg in flat:
        if arg not in unique:
            unique.append(arg)
    constants = [a._value for a in unique if a.is_constant()]
    others = [a for a in unique if not a.is_constant()]
    pick = max if op == Op.MAX else min
    if constants:
        bound = pick(constants)
        # max(0, x) is x for a non-negative x; min(c, x) stays (x may exceed c)
        if not (op == Op.MAX and bound <= 0 and any(nonnegative(x) for x in others)):
            others.append(_const(bound))
    dual = Op.MIN if op == Op.MAX else Op.MAX
    kept: list[IDimensionExpr] = []
    for i, arg in enumerate(others):
        dominated = False
        if arg._kind == "op" and arg._op == dual and any(inner in others for inner in _flatten(dual, arg)):
            dominated = True  # max(a, min(a, b)) == a
        for j, other in enumerate(others):
            if dominated or j == i:
                continue
            gap = _constant_difference(arg, other)
            if gap is not None and ((gap < 0 if op == Op.MAX else gap > 0) or (gap == 0 and j < i)):
                dominated = True
        if not dominated:
            kept.append(arg)
    ordered = _order(kept)
    result = ordered[0]
    for arg in ordered[1:]:
        result = _node(op, result, arg)
    return result


def _flatten(op: DimensionOperation, expr: IDimensionExpr) -> list[IDimensionExpr]:
    """The arguments of a chain of ``op`` (cached; a chain longer than MAX_TERMS stays one argument)."""
    if expr._kind != "op" or expr._op != op:
        return [expr]
    cached = expr._forms.get("flat")
    if cached is None:
        cached = _flatten(op, expr._args[0]) + _flatten(op, expr._args[1])
        if len(cached) > MAX_TERMS:
            cached = [expr]
        expr._forms["flat"] = cached
    return list(cached)


def _compare(op: DimensionOperation, a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    gap = _constant_difference(a, b)
    if gap is not None:
        return _const(_APPLY[op](gap, 0))
    if op == Op.LESS:
        if nonnegative(_difference(a, b)):
            return _const(0)
        if nonnegative(_less_gap(a, b)):
            return _const(1)
        return _node(op, a, b)
    first, second = _order([a, b])
    return _node(op, first, second)


def _less_gap(a: IDimensionExpr, b: IDimensionExpr) -> IDimensionExpr:
    """``b - a - 1``: non-negative exactly when ``a < b``."""
    return _from_linear(_combine(_combine(_linear(b), _linear(a), -1), (1, {}), -1))
