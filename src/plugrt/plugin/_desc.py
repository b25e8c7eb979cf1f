"""Tensor descriptions of the decorator API: ``TensorDesc``, ``SizeTensorDesc`` and ``Shape``.

A ``TensorDesc`` describes a tensor where no data exists (``register``, ``autotune``,
``aot_impl``): symbolic shape and type always; inside ``autotune`` and ``aot_impl`` also the
concrete shape range and format.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..core.errors import PluginDefinitionError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.builder import DimsExprs, IExprBuilder
from ._expr import ShapeExpr, ShapeExprs, SizeTensorShapeExpr, SymIntExpr

__all__ = ["Shape", "SizeTensorDesc", "TensorDesc", "from_shape_expr", "lower_outputs", "size_tensor"]


class Shape:
    """A concrete shape; ``-1`` marks a dimension not known yet (dynamic or data-dependent).

    Made from a tuple, a ``PluginTensorDesc`` or a ``DynamicPluginTensorDesc`` (which also
    gives :attr:`min`, :attr:`opt` and :attr:`max` of each dimension).
    """

    def __init__(self, tensor_desc: tuple[int, ...] | PluginTensorDesc | DynamicPluginTensorDesc | None = None) -> None:
        self._range: DynamicPluginTensorDesc | None = None
        if isinstance(tensor_desc, DynamicPluginTensorDesc):
            dims = list(tensor_desc.desc.dims)
            self._range = tensor_desc
        elif isinstance(tensor_desc, PluginTensorDesc):
            dims = list(tensor_desc.dims)
        elif isinstance(tensor_desc, (tuple, list)):
            dims = list(tensor_desc)
        elif tensor_desc is None:
            dims = []
        else:
            raise PluginDefinitionError(
                "Shape takes a tuple of ints, a PluginTensorDesc or a DynamicPluginTensorDesc, "
                f"got {type(tensor_desc).__name__}"
            )
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims):
            raise PluginDefinitionError(f"Shape dimensions must be ints, got {dims!r}")
        self._dims = [int(d) for d in dims]

    @property
    def is_dynamic(self) -> bool:
        """True when some dimension is ``-1``."""
        return any(d == -1 for d in self._dims)

    def numel(self) -> int:
        """The number of elements (raises while a dimension is unknown)."""
        if self.is_dynamic:
            raise PluginDefinitionError(f"{self} has a dimension that is not known yet (-1); numel() needs all of them")
        return int(np.prod(self._dims, dtype=np.int64))

    def _bound(self, which: str) -> tuple[int, ...]:
        if not self.is_dynamic:
            raise PluginDefinitionError(f"Shape.{which} exists only for dynamic shapes; {self} is fully known")
        if self._range is None:
            raise PluginDefinitionError(f"{self} has dynamic dimensions but no range was given to read {which} from")
        return tuple(getattr(self._range, which))

    @property
    def min(self) -> tuple[int, ...]:
        """Smallest value of each dimension over the optimization profile."""
        return self._bound("min")

    @property
    def opt(self) -> tuple[int, ...]:
        """The value of each dimension the profile optimizes for."""
        return self._bound("opt")

    @property
    def max(self) -> tuple[int, ...]:
        """Largest value of each dimension over the optimization profile."""
        return self._bound("max")

    def __iter__(self) -> Iterator[int]:
        return iter(self._dims)

    def __getitem__(self, index: int) -> int:
        return self._dims[index]

    def __setitem__(self, index: int, value: int) -> None:
        self._dims[index] = int(value)

    def __len__(self) -> int:
        return len(self._dims)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Shape):
            return self._dims == other._dims
        if isinstance(other, (tuple, list)):
            return self._dims == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Shape{tuple(self._dims)}"

    def _copy(self) -> Shape:
        made = Shape(tuple(self._dims))
        made._range = self._range
        return made


class TensorDesc:
    """A tensor's description where no data exists: ``shape_expr`` and ``dtype`` always;
    ``shape``, ``format`` and ``scale`` once known (inside ``autotune`` and ``aot_impl``).

    Descriptions of a plugin's inputs are read-only: describe an output with :meth:`like`
    (a modifiable copy), :meth:`aliased` (an output sharing the input's buffer) or
    :func:`from_shape_expr`.
    """

    def __init__(
        self,
        shape_expr: ShapeExprs | tuple[Any, ...] | None = None,
        dtype: DataType | None = None,
        format: TensorFormat | None = None,  # noqa: A002 - TensorRT's name
        scale: float | None = None,
    ) -> None:
        if isinstance(shape_expr, (tuple, list)):
            shape_expr = ShapeExprs.from_tuple(shape_expr)
        if shape_expr is not None and not isinstance(shape_expr, ShapeExprs):
            raise PluginDefinitionError(
                f"TensorDesc shape_expr must be a ShapeExprs or a tuple, got {type(shape_expr).__name__}"
            )
        if dtype is not None and not isinstance(dtype, DataType):
            raise PluginDefinitionError(f"TensorDesc dtype must be a DataType, got {dtype!r}")
        self._shape_expr = shape_expr if shape_expr is not None else ShapeExprs(0)
        self._dtype = dtype
        self._shape: Shape | None = None
        self._format = format
        self._scale = scale
        self._aliased_to: TensorDesc | None = None
        self._immutable = False

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_immutable", False) and name != "_immutable":
            raise PluginDefinitionError(
                f"this TensorDesc is read-only (cannot set {name.lstrip('_')!r}); describe outputs with like(), "
                "aliased() or from_shape_expr()"
            )
        object.__setattr__(self, name, value)

    # --- description ---------------------------------------------------------------
    @property
    def shape_expr(self) -> ShapeExprs:
        """The symbolic shape."""
        return self._shape_expr

    @shape_expr.setter
    def shape_expr(self, value: ShapeExprs | tuple[Any, ...]) -> None:
        self._shape_expr = ShapeExprs.from_tuple(value) if isinstance(value, (tuple, list)) else value

    @property
    def dtype(self) -> DataType | None:
        """The data type."""
        return self._dtype

    @dtype.setter
    def dtype(self, value: DataType) -> None:
        if not isinstance(value, DataType):
            raise PluginDefinitionError(f"TensorDesc dtype must be a DataType, got {value!r}")
        self._dtype = value

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape_expr)

    @property
    def is_size_tensor(self) -> bool:
        """True for a :class:`SizeTensorDesc`."""
        return False

    @property
    def has_shape_expr(self) -> bool:
        """Always True: every description has a symbolic shape."""
        return True

    @property
    def has_shape(self) -> bool:
        """True where a concrete shape is known (``autotune``, ``aot_impl``)."""
        return self._shape is not None

    def _require_shape(self, what: str) -> Shape:
        if self._shape is None:
            raise PluginDefinitionError(
                f"TensorDesc.{what} is known only inside autotune and aot_impl (check has_shape); "
                "in register, use shape_expr"
            )
        return self._shape

    @property
    def shape(self) -> Shape:
        """The concrete shape (``-1`` where dynamic, with min/opt/max)."""
        return self._require_shape("shape")

    @shape.setter
    def shape(self, value: Shape) -> None:
        self._shape = value

    @property
    def format(self) -> TensorFormat:
        """The tensor format."""
        self._require_shape("format")
        return self._format if self._format is not None else TensorFormat.LINEAR

    @format.setter  # noqa: A003 - TensorRT's name
    def format(self, value: TensorFormat) -> None:
        self._format = value

    @property
    def scale(self) -> float:
        """The INT8 scale."""
        self._require_shape("scale")
        return self._scale if self._scale is not None else 1.0

    @scale.setter
    def scale(self, value: float) -> None:
        self._scale = value

    @property
    def is_dynamic(self) -> bool:
        """True when the concrete shape has a dynamic dimension."""
        return self.shape.is_dynamic

    def numel(self) -> int:
        """The number of elements of the concrete shape (use ``shape_expr.numel()`` symbolically)."""
        return self.shape.numel()

    # --- outputs from inputs -------------------------------------------------------
    def like(self) -> TensorDesc:
        """A modifiable copy: an output with the same shape and type."""
        return self._copy(aliased_to=None)

    def aliased(self) -> TensorDesc:
        """A read-only copy aliased to this tensor: the output shares this input's buffer (in place)."""
        made = self._copy(aliased_to=self)
        made._immutable = True
        return made

    def get_aliased(self) -> TensorDesc | None:
        """The description this one is aliased to, or None."""
        return self._aliased_to

    @property
    def is_aliased(self) -> bool:
        """True when this output shares an input's buffer."""
        return self._aliased_to is not None

    def _copy(self, aliased_to: TensorDesc | None) -> TensorDesc:
        made = TensorDesc(self._shape_expr._copy(), self._dtype, self._format, self._scale)
        made._shape = self._shape._copy() if self._shape is not None else None
        made._aliased_to = aliased_to
        return made

    def _freeze(self) -> TensorDesc:
        self._shape_expr._frozen = True
        self._immutable = True
        return self

    def _set_concrete(self, desc: DynamicPluginTensorDesc | PluginTensorDesc, with_type: bool) -> None:
        """Give a description its concrete shape and format, and type (bypasses the read-only flag)."""
        plain = desc.desc if isinstance(desc, DynamicPluginTensorDesc) else desc
        object.__setattr__(self, "_shape", Shape(desc))
        object.__setattr__(self, "_format", plain.format)
        object.__setattr__(self, "_scale", plain.scale)
        if with_type:
            object.__setattr__(self, "_dtype", plain.type)

    def __repr__(self) -> str:
        return f"TensorDesc(shape_expr={self._shape_expr!r}, dtype={self._dtype!r})"


class SizeTensorDesc(TensorDesc):
    """A size tensor: a 0-d INT32 (or INT64) output holding the extent of a data-dependent dimension.

    ``opt`` is the extent the build tunes for, ``upper_bound`` the largest it may be
    (output buffers are sized by it). Use :meth:`expr` as that dimension of another output.
    """

    def __init__(self, opt: ShapeExpr | int, upper_bound: ShapeExpr | int) -> None:
        super().__init__(ShapeExprs(0), DataType.INT32)
        self._opt = _shape_expr("size_tensor opt", opt)
        self._upper_bound = _shape_expr("size_tensor upper_bound", upper_bound)
        self._index: int | None = None
        self._declared: Any = None
        self._size_expr = SizeTensorShapeExpr(self)

    @property
    def is_size_tensor(self) -> bool:
        return True

    @property
    def opt(self) -> ShapeExpr:
        """The extent the build tunes for."""
        return self._opt

    @property
    def upper_bound(self) -> ShapeExpr:
        """The largest extent."""
        return self._upper_bound

    @property
    def index(self) -> int | None:
        """The output position of this size tensor (known once the plugin placed it)."""
        return self._index

    def expr(self) -> SizeTensorShapeExpr:
        """This size tensor's value, to use as a dimension of another output."""
        return self._size_expr


def _shape_expr(where: str, value: Any) -> ShapeExpr:
    if isinstance(value, ShapeExpr):
        return value
    if isinstance(value, SymIntExpr):
        return ShapeExpr(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return ShapeExpr(value)
    raise PluginDefinitionError(f"{where} must be a ShapeExpr or an int, got {type(value).__name__} {value!r}")


def size_tensor(opt: ShapeExpr | int, upper_bound: ShapeExpr | int) -> SizeTensorDesc:
    """A size tensor output description (see :class:`SizeTensorDesc`)."""
    return SizeTensorDesc(opt, upper_bound)


def from_shape_expr(shape_expr: ShapeExprs | tuple[Any, ...], dtype: DataType) -> TensorDesc:
    """An output description with this symbolic shape and type."""
    if not isinstance(dtype, DataType):
        raise PluginDefinitionError(f"from_shape_expr: dtype must be a DataType, got {dtype!r}")
    if isinstance(shape_expr, ShapeExprs):
        shape_expr = shape_expr._copy()
    return TensorDesc(shape_expr, dtype)


def lower_outputs(
    outputs: list[TensorDesc], builder: IExprBuilder, who: str
) -> tuple[list[DimsExprs], list[tuple[int, int]]]:
    """Output shapes as dimension expressions (declaring size tensors), and the data-dependent (output, axis) pairs."""
    for index, out in enumerate(outputs):
        if isinstance(out, SizeTensorDesc):
            if out.dtype not in (DataType.INT32, DataType.INT64):
                raise PluginDefinitionError(
                    f"{who}: size tensor output {index} must be INT32 or INT64, got {out.dtype!r}"
                )
            object.__setattr__(out, "_index", index)
            object.__setattr__(
                out, "_declared", builder.declare_size_tensor(index, out.opt._expr, out.upper_bound._expr)
            )
    sizes = {e.symbol for e in builder.declared_size_tensors.values()}
    shapes: list[DimsExprs] = []
    dependent: list[tuple[int, int]] = []
    for index, out in enumerate(outputs):
        if isinstance(out, SizeTensorDesc):
            shapes.append(DimsExprs(0))
            continue
        dims = []
        for axis, entry in enumerate(out.shape_expr):
            if entry is None:
                raise PluginDefinitionError(f"{who}: dimension {axis} of output {index} was never set")
            dim = entry._expr
            if dim.symbols() & sizes:
                dependent.append((index, axis))
            dims.append(dim)
        shapes.append(DimsExprs(dims))
    return shapes, dependent
