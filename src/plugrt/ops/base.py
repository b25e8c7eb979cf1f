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

An operator is a :class:`~plugrt.nodes.Node`: at build its rules answer the
node's questions (``infer_shapes`` runs ``output_shapes`` and ``output_values``;
inputs are read linear, in their declared types); in a context ``bind`` runs
:meth:`Operator.prepare` for the bound shapes and keeps the arrays, and
``launch`` runs the kernel on them with the context's array module (the
executor's flat call list calls :meth:`Operator.run` itself).

Kernels run with NumPy or CuPy as ``xp``; arrays they keep between runs live in
``xp``'s memory: :meth:`Operator.weight` gives a weight there, :meth:`Operator.on_device`
any table ``prepare`` made with NumPy (copied once, again when ``prepare`` makes
a new one) and :meth:`Operator.scratch` a work buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

import numpy as np

from ..core.errors import NetworkError, PlanFormatError
from ..core.types import DataType, TensorFormat
from ..nodes.base import Binding, InferredShapes, Node
from ..nodes.ports import BuildRequest, IOChoice, Port
from ..nodes.shape_checks import broadcast_checks
from ..shape.expr import IDimensionExpr
from .params import read_params

__all__ = [
    "InputShapes",
    "InputValues",
    "Operator",
    "ShapeExprs",
    "assign",
    "create_operator",
    "host_ints",
    "register_operator",
    "registered_operators",
]

ShapeExprs = list[IDimensionExpr]
#: the parameter types of the shape rules (``output_shapes``, ``output_values``)
InputShapes = Sequence[ShapeExprs]
InputValues = Sequence[ShapeExprs | None]


class Operator(Node):
    """Base class of standard-layer operators.

    Subclasses set ``kind`` and implement :meth:`output_shapes` and :meth:`run`;
    they may override :meth:`output_types` (default: the first input's type),
    :meth:`output_values` (shape-tensor propagation), :meth:`prepare` (work done
    once per shape change) and ``num_outputs``.
    """

    kind: ClassVar[str] = ""
    #: True when the output never changes (e.g. constants): run once per context.
    is_constant: ClassVar[bool] = False
    #: Standard operators are deterministic: one reading only constants is computed once.
    pure: ClassVar[bool] = True
    #: False for operators that read only their inputs' shapes: they read a tensor in the type it is
    #: stored in (no reformat is made for them, e.g. a HALF activation under ``BuilderFlag.FP16``).
    reads_data: ClassVar[bool] = True
    #: The array module the kernel runs with in a context (NumPy, or CuPy on the GPU).
    xp: Any = np
    #: The kernel the builder chose among :meth:`tactics` (the plan's layer tactic); 0 is the operator's own.
    tactic: int = 0
    #: :meth:`direct_launch` for the bound arrays (None: :meth:`run` is called)
    _direct: tuple[Callable[..., Any], tuple[Any, ...]] | None = None

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        self.params: dict[str, Any] = dict(params or {})
        self.weights: dict[str, np.ndarray] = dict(weights or {})
        self.name = ""
        #: output index -> size expression, for outputs that hold a data-dependent size (0-d ints)
        self.size_exprs: dict[int, IDimensionExpr] = {}
        #: (axis, a, b): dimensions the shape rule broadcast without knowing them (see nodes/shape_checks.py)
        self.broadcast_pairs: list[tuple[int, IDimensionExpr, IDimensionExpr]] = []
        #: (key, array module) -> (host value, its copy in that module's memory)
        self._device_copies: dict[tuple[Hashable, Any], tuple[Any, Any]] = {}
        #: key -> (array module, work array, its shape, the type asked for)
        self._scratch: dict[Hashable, tuple[Any, Any, tuple[int, ...], Any]] = {}
        #: the bound inputs' shape-tensor values (None where an input is not one), set by :meth:`bind`
        self.bound_values: list[tuple[int, ...] | None] = []
        #: per input, whether the bound tensor is an engine constant (derived arrays may then be kept across binds)
        self.bound_constant: list[bool] = []
        read_params(self)  # the parameters the class declares (ops/params.py)

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

    def tactics(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> list[int]:
        """The kernels this layer can run with, for inputs of these types and (opt) shapes, ``constant[i]``
        telling whether input ``i`` is an engine constant; the builder times them when there are several
        (``builder/tactics.py``). Default: the operator's own kernel only, tactic 0."""
        return [0]

    # --- the node protocol ----------------------------------------------------------------
    def reads(self, input_types: Sequence[DataType]) -> list[IOChoice] | None:
        """Every input linear, in its declared type (the builder converts what differs)."""
        return [(t, TensorFormat.LINEAR) for t in input_types]

    def infer_shapes(self, request: BuildRequest, shape_inputs: Sequence[Port]) -> InferredShapes:
        """:meth:`output_shapes` and :meth:`output_values` on the request's inputs, with the sizes
        declared and the broadcasts left undecided."""
        shapes = [p.shape for p in request.inputs]
        values = [p.values for p in request.inputs]
        out_shapes = self.output_shapes(shapes, values)
        out_values = self.output_values(shapes, values)
        return InferredShapes(out_shapes, out_values, dict(self.size_exprs), list(broadcast_checks(self, self.name)))

    def direct_launch(
        self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any
    ) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        """The kernel over these bound arrays as one call and its arguments (a NumPy function with views
        made now), computing exactly what :meth:`run` computes; None (the default) to call :meth:`run`.
        Asked at bind, after :meth:`prepare`: small kernels then cost one call per run, not a Python frame
        of their own."""
        return None

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """:meth:`prepare` for the bound shapes; keep the arrays :meth:`launch` runs on (:meth:`bind_arrays`) and
        its :meth:`direct_launch`."""
        self.bind_arrays(inputs, outputs)
        self._direct = self.direct_launch(*self._bound_args)

    def bind_arrays(self, inputs: Sequence[Binding], outputs: Sequence[Binding]) -> None:
        """:meth:`prepare` for the bound shapes and keep the arrays :meth:`launch` runs on, without asking for
        :meth:`direct_launch` (an operator that may run another kernel asks only where it does not: the NumPy
        kernel's own layouts of the weights cost memory)."""
        self.bound_values = [b.values for b in inputs]
        self.bound_constant = [b.constant for b in inputs]
        self.prepare([b.shape for b in inputs], [b.shape for b in outputs])
        self._bound_args = ([b.array for b in inputs], [b.array for b in outputs], self.xp)
        self._direct = None

    def input_ints(self, position: int, array: Any) -> list[int]:
        """Input ``position``'s values as ints: a shape tensor's as the executor bound them (no device
        read), otherwise read from ``array`` (a device read on the GPU)."""
        bound = self.bound_values[position] if position < len(self.bound_values) else None
        return list(bound) if bound is not None else host_ints(array)

    def launch(self, stream: int) -> None:
        """Run the kernel on the bound arrays (the context has made ``stream`` current)."""
        self.run(*self._bound_args)

    def prepared_launch(self, stream: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The kernel and the bound arrays (or its :meth:`direct_launch`): the flat call list calls the kernel
        itself."""
        return self._direct if self._direct is not None else (self.run, self._bound_args)

    # --- arrays kept between runs, in the memory of the array module ----------------------
    def weight(self, name: str, xp: Any = np) -> Any:
        """Weight ``name`` as an array of ``xp``: the stored array for NumPy, a copy made once for a device."""
        if xp is np:
            return self.weights[name]
        return self.on_device(("weight", name), self.weights[name], xp)

    def on_device(self, key: Hashable, value: Any, xp: Any) -> Any:
        """``value`` (a NumPy array, or a list or tuple of them, nested; other items kept) in ``xp``'s memory.

        NumPy gets ``value`` itself. For a device the copy is made on the first
        call and reused while the same ``value`` object is passed under ``key``:
        a table that ``prepare`` rebuilds is copied again, once.
        """
        if xp is np:
            return value
        slot = (key, xp)
        cached = self._device_copies.get(slot)
        if cached is not None and cached[0] is value:
            return cached[1]
        copy = _to_module(value, xp)
        self._device_copies[slot] = (value, copy)
        return copy

    def scratch(self, key: Hashable, shape: tuple[int, ...], dtype: Any, xp: Any, zero: bool = False) -> Any:
        """A work array of ``xp`` owned by this operator, made again only when shape, type or module change.

        ``shape`` is a tuple; ``zero`` fills a new array with zeros (what the caller writes later stays).
        """
        held = self._scratch.get(key)
        if held is not None and held[0] is xp and held[2] == shape and (held[3] is dtype or held[3] == dtype):
            return held[1]
        array = (xp.zeros if zero else xp.empty)(shape, dtype=dtype)
        self._scratch[key] = (xp, array, tuple(shape), dtype)
        return array

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


def assign(out: Any, value: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """``out[...] = value`` as a call and its arguments (a :meth:`Operator.direct_launch`)."""
    return out.__setitem__, (Ellipsis, value)


def host_ints(array: Any) -> list[int]:
    """The values of a small int array (host or device) as Python ints."""
    if not isinstance(array, np.ndarray):
        array = array.get() if hasattr(array, "get") else np.asarray(array)
    return [int(v) for v in np.asarray(array).reshape(-1)]


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


def _to_module(value: Any, xp: Any) -> Any:
    """NumPy arrays in ``value`` (nested lists and tuples) as arrays of ``xp``."""
    if isinstance(value, np.ndarray):
        return xp.asarray(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_module(item, xp) for item in value)
    return value


def _load_builtin_operators() -> None:
    from . import standard  # noqa: F401  (registers the built-in kinds)
