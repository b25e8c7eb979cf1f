"""One place runs an operator's rules (output_info) and its kernel over NumPy values (evaluate)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from plugrt.core.errors import ShapeError, TypeMismatchError
from plugrt.core.types import DataType
from plugrt.ops.base import Operator, ShapeExprs, create_operator
from plugrt.ops.rules import TensorInfo, evaluate, output_info
from plugrt.shape import constant, symbol


def test_output_info_runs_the_type_shape_and_value_rules() -> None:
    op = create_operator("elementwise", {"op": "SUM"}, {})
    n = symbol("x[0]")
    shape_tensor = TensorInfo(DataType.INT64, [constant(2)], [n, constant(3)])
    (out,) = output_info(op, [shape_tensor, TensorInfo(DataType.INT64, [constant(1)], [constant(1)])])
    assert out.dtype == DataType.INT64
    assert out.dims == [2]
    assert out.values is not None and out.values[1] == constant(4)
    assert out.values[0].evaluate({"x[0]": 5}) == 6


def test_output_info_keeps_rule_errors_and_names_the_operator_for_others() -> None:
    op = create_operator("elementwise", {"op": "SUM"}, {})
    op.name = "adder"
    with pytest.raises(TypeMismatchError, match="adder: SUM needs inputs of one type"):
        output_info(op, [TensorInfo(DataType.FLOAT, [constant(2)]), TensorInfo(DataType.INT32, [constant(2)])])

    class Broken(Operator):
        kind = "broken_rules"

        def output_shapes(self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[Any]) -> list[ShapeExprs]:
            return [list(input_shapes[3])]

    broken = Broken()
    broken.name = "odd"
    with pytest.raises(ShapeError, match=r"odd \(broken_rules\): IndexError"):
        output_info(broken, [TensorInfo(DataType.FLOAT, [constant(1)])])


def test_output_info_rejects_rules_that_disagree_on_the_output_count() -> None:
    class TwoTypes(Operator):
        kind = "two_types"

        def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
            return [DataType.FLOAT, DataType.FLOAT]

        def output_shapes(self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[Any]) -> list[ShapeExprs]:
            return [list(input_shapes[0])]

    with pytest.raises(ShapeError, match=r"two_types \(two_types\): the type rule gives 2 outputs, the shape rule 1"):
        output_info(TwoTypes(), [TensorInfo(DataType.FLOAT, [constant(1)])])


def test_evaluate_runs_the_kernel_over_numpy_values() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.float32([[10.0, 20.0, 30.0]])
    (out,) = evaluate(create_operator("elementwise", {"op": "SUM"}, {}), [a, b])
    np.testing.assert_array_equal(out, a + b)
    assert out.dtype == np.float32


def test_evaluate_keeps_zero_dimensional_values_and_gives_shape_values_to_the_rules() -> None:
    (picked,) = evaluate(create_operator("gather", {"axis": 0}, {}), [np.int64([2, 7]), np.array(1, np.int64)])
    assert picked.shape == () and int(picked) == 7
    (reshaped,) = evaluate(create_operator("shuffle", {}, {}), [np.arange(6, dtype=np.float32), np.int64([3, 2])])
    assert reshaped.shape == (3, 2)


def test_evaluate_cuts_data_dependent_outputs_to_the_sizes_the_kernel_wrote() -> None:
    x = np.float32([[0, 1, 0], [2, 0, 3]])
    indices, count = evaluate(create_operator("nonzero", {}, {}), [x])
    np.testing.assert_array_equal(indices, np.array(np.nonzero(x)))
    assert int(count) == 3


def test_evaluate_lets_kernel_errors_through() -> None:
    with pytest.raises(IndexError, match="gather indices must be in"):
        evaluate(create_operator("gather", {"axis": 0}, {}), [np.float32([1, 2]), np.int64([5])])
