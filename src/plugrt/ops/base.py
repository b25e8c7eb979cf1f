"""The operator: one standard layer's shape rule, type rule and kernel.

Every standard layer lowers to an :class:`Operator` when the network is built.
An operator is described by its ``kind`` (a registered name), ``params`` (plain
JSON values) and ``weights`` (named NumPy arrays); that triple is what the plan
file stores, and :func:`create_operator` revives it without importing anything
named by the file.

Rules are pure: :meth:`Operator.output_shapes` maps input shapes (lists of
:class:`~plugrt.IDimensionExpr`) to output shapes; :meth:`Operator.output_types`
does the same for types. :meth:`Operator.run` is the kernel: it writes into the
given output arrays (``out=``), never allocating them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..core.errors import NetworkError, PlanFormatError
from ..core.types import DataType
from ..shape.expr import IDimensionExpr

__all__ = ["Operator", "ShapeExprs", "create_operator", "register_operator", "registered_operators"]

ShapeExprs = list[IDimensionExpr]


class Operator:
    """Base class of standard-layer operators.

    Subclasses set ``kind`` and implement :meth:`output_shapes` and :meth:`run`;
    they may override :meth:`output_types` (default: the first input's type),
    :meth:`output_values` (shape-tensor propagation), :meth:`prepare` (work done
    once per shape change) and ``num_outputs``.
    """

    kind: ClassVar[str] = ""
    #: True when the output never changes (e.g. constants): run once per context.
    is_constant: ClassVar[bool] = False

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        self.params: dict[str, Any] = dict(params or {})
        self.weights: dict[str, np.ndarray] = dict(weights or {})
        self.name = ""
        #: output index -> size expression, for outputs that hold a data-dependent size (0-d ints)
        self.size_exprs: dict[int, IDimensionExpr] = {}

    def declare_size(self, output_index: int, opt: IDimensionExpr, upper: IDimensionExpr) -> IDimensionExpr:
        """Declare 0-d output ``output_index`` as a data-dependent size; use the result in other output shapes.

        The kernel must write the size into that output; buffers of outputs whose
        shapes use it are sized by ``upper`` (as plugins do with ``declare_size_tensor``).
        """
        from ..shape.builder import IExprBuilder

        builder = IExprBuilder(owner=self.name or self.kind)
        expr = builder.declare_size_tensor(output_index, opt, upper)
        self.size_exprs[output_index] = expr
        return expr

    @property
    def num_outputs(self) -> int:
        """Number of outputs (1 unless overridden)."""
        return 1

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        """Output types for ``input_types``; default: the first input's type."""
        return [input_types[0] if input_types else DataType.FLOAT] * self.num_outputs

    def output_shapes(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs]:
        """Output shapes as expressions of the input shapes.

        ``input_values[i]`` holds the values of input ``i`` as expressions when
        it is a shape tensor known at build time (a 0-d or 1-d int tensor
        computed from shapes), else None.
        """
        raise NotImplementedError(f"operator {type(self).__name__} does not implement output_shapes")

    def output_values(
        self, input_shapes: Sequence[ShapeExprs], input_values: Sequence[ShapeExprs | None]
    ) -> list[ShapeExprs | None]:
        """Values of outputs that are shape tensors, as expressions (default: none)."""
        return [None] * self.num_outputs

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        """Precompute what :meth:`run` needs for these concrete shapes (optional)."""

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        """The kernel: compute ``outputs`` from ``inputs`` in place; ``xp`` is the array module."""
        raise NotImplementedError(f"operator {type(self).__name__} does not implement run")

    def param(self, key: str) -> Any:
        """A required parameter, with a clear error when absent."""
        try:
            return self.params[key]
        except KeyError:
            raise NetworkError(f"operator {self.kind!r} ({self.name!r}) is missing parameter {key!r}") from None

    def describe(self) -> str:
        """One line for inspectors: kind and parameters."""
        args = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.kind}({args})"


_OPERATORS: dict[str, type[Operator]] = {}


def register_operator(cls: type[Operator]) -> type[Operator]:
    """Class decorator adding an operator kind; a duplicate kind raises."""
    if not cls.kind:
        raise NetworkError(f"operator class {cls.__name__} has no kind")
    if cls.kind in _OPERATORS and _OPERATORS[cls.kind] is not cls:
        raise NetworkError(f"operator kind {cls.kind!r} is already registered by {_OPERATORS[cls.kind].__name__}")
    _OPERATORS[cls.kind] = cls
    return cls


def registered_operators() -> dict[str, type[Operator]]:
    """Every operator kind and its class."""
    _load_builtin_operators()
    return dict(_OPERATORS)


def create_operator(kind: str, params: dict[str, Any], weights: dict[str, np.ndarray]) -> Operator:
    """Revive an operator from a plan; an unknown kind raises :class:`PlanFormatError`."""
    _load_builtin_operators()
    cls = _OPERATORS.get(kind)
    if cls is None:
        raise PlanFormatError(
            f"plan names operator kind {kind!r}, which this plugrt does not have; known: {sorted(_OPERATORS)}"
        )
    return cls(params, weights)


def _load_builtin_operators() -> None:
    from . import standard  # noqa: F401  (registers the built-in kinds)
