"""Operator parameters declared on the class (ops/params.py) and the shared rules (ops/shared_rules.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugrt.core.errors import NetworkError, TypeMismatchError
from plugrt.core.types import DataType
from plugrt.ops.base import Operator
from plugrt.ops.params import ints, param
from plugrt.ops.shared_rules import FloatInput, SameShape, expect_float_inputs, expect_type
from plugrt.shape import constant

_COLOURS = {"red": 1, "green": 2}


class _Declared(Operator):
    kind = "declared_for_test"
    mode: str = param(choices=("fast", "exact"))
    size: int = param(int, key="window", minimum=1)
    scale: float = param(float, default=0.5)
    axes: list[int] | None = param(ints, default=None)
    colour: int = param(key="colour_name", default="red", choices=_COLOURS, lookup=True)


class _Dropped(_Declared):
    kind = "dropped_for_test"
    size = 3  # set by the class: no longer read from params


def test_declared_params_are_read_converted_and_defaulted() -> None:
    op = _Declared({"mode": "exact", "window": "4", "axes": (1, "2"), "colour_name": "green"})
    assert (op.mode, op.size, op.scale, op.axes, op.colour) == ("exact", 4, 0.5, [1, 2], 2)
    assert _Declared({"mode": "fast", "window": 1}).axes is None


def test_a_missing_required_param_names_the_operator_and_the_key() -> None:
    with pytest.raises(NetworkError, match=r"operator 'declared_for_test' \(''\) is missing parameter 'window'"):
        _Declared({"mode": "fast"})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mode": "slow", "window": 1}, r"declared_for_test: unknown mode 'slow'; valid: fast, exact"),
        ({"mode": "fast", "window": 0}, r"declared_for_test: window must be >= 1, got 0"),
        (
            {"mode": "fast", "window": 2, "colour_name": "blue"},
            r"declared_for_test: unknown colour_name 'blue'; valid: red, green",
        ),
    ],
)
def test_bad_param_values_raise_naming_the_key_and_value(params: dict[str, Any], message: str) -> None:
    with pytest.raises(NetworkError, match=message):
        _Declared(params)


def test_a_subclass_that_sets_the_attribute_does_not_read_it() -> None:
    op = _Dropped({"mode": "fast"})
    assert op.size == 3


def test_lookup_needs_a_mapping() -> None:
    with pytest.raises(TypeError, match="lookup=True"):
        param(choices=("a", "b"), lookup=True)


class _Like(SameShape, FloatInput, Operator):
    kind = "like_for_test"
    title = "LIKE"


def test_same_shape_and_float_input_rules() -> None:
    op = _Like()
    shape = [constant(2), constant(3)]
    assert op.output_shapes([shape], [None]) == [shape]
    assert op.output_types([DataType.HALF]) == [DataType.HALF]
    with pytest.raises(NetworkError, match=r"like_for_test: expected 1 input\(s\), got 2"):
        op.output_shapes([shape, shape], [None, None])
    with pytest.raises(TypeMismatchError, match=r"like_for_test: LIKE takes FLOAT or HALF, got INT32"):
        op.output_types([DataType.INT32])


def test_expect_type_and_expect_float_inputs_name_what_is_wrong() -> None:
    op = _Like()
    with pytest.raises(TypeMismatchError, match=r"like_for_test: thing takes INT32, INT64, got BOOL"):
        expect_type(op, DataType.BOOL, {DataType.INT64, DataType.INT32}, "thing")
    with pytest.raises(NetworkError, match=r"expected 2 input\(s\), got 1"):
        expect_float_inputs(op, [DataType.FLOAT], 2)
    with pytest.raises(TypeMismatchError, match=r"input 1 must be FLOAT or HALF, got INT8"):
        expect_float_inputs(op, [DataType.FLOAT, DataType.INT8], 2)
