"""Tensor descriptions and tensors of the decorator API.

``TensorDesc`` describes a tensor where no data exists (``register``, ``autotune``,
``aot_impl``): symbolic shape, type, and, inside ``autotune``, the concrete shape
range and format. ``Tensor`` is what ``impl`` gets: a buffer address with its
shape, type, format and strides, usable directly by the array library of its device
(``np.asarray(t)`` on the CPU, ``torch.as_tensor(t, device="cuda")`` or
``cp.asarray(t)`` on the GPU, ``from_dlpack`` on both), without a copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..core.errors import PluginDefinitionError
from ..core.types import DataType, TensorFormat, nptype
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ._expr import ShapeExpr, ShapeExprs, SizeTensorShapeExpr, SymInt32, SymIntExpr

__all__ = [
    "KernelLaunchParams",
    "Shape",
    "SizeTensorDesc",
    "Tensor",
    "TensorDesc",
    "from_shape_expr",
    "size_tensor",
]


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


class Tensor:
    """A plugin's buffer inside ``impl``: address, shape, type, format, strides (in elements).

    The array protocols make it usable directly: ``__array_interface__`` on the CPU
    (``np.asarray(t)`` is a view, read-only for inputs not aliased to an output),
    ``__cuda_array_interface__`` on the GPU, ``__dlpack__`` on both. A data-dependent
    output (``-1`` in its shape) is used through ``t.aliased(shape)`` once its extent is known.
    """

    def __init__(self) -> None:
        self._data_ptr = 0
        self._shape = Shape()
        self._format = TensorFormat.LINEAR
        self._dtype = DataType.FLOAT
        self._scale = 1.0
        self._strides: tuple[int, ...] = ()
        self._aliased_to: Tensor | None = None
        self._stream = 0
        self._read_only = False
        self._device = "cpu"
        self._elements = 0
        self._immutable = False

    @classmethod
    def _make(
        cls,
        desc: PluginTensorDesc,
        address: int,
        stream: int,
        device: str,
        read_only: bool,
        data_dependent: Iterable[int] = (),
    ) -> Tensor:
        made = cls()
        dims = list(desc.dims)
        for axis in data_dependent:
            dims[axis] = -1
        made._shape = Shape(tuple(dims))
        made._dtype, made._format, made._scale = desc.type, desc.format, desc.scale
        made._strides = _strides(list(desc.dims), desc.format)
        made._data_ptr, made._stream, made._device, made._read_only = int(address), int(stream), device, read_only
        made._elements = int(np.prod(list(desc.dims), dtype=np.int64))  # the buffer (an upper bound if data-dependent)
        made._immutable = True
        return made

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_immutable", False) and name != "_immutable":
            raise PluginDefinitionError(f"a plugin's Tensor is read-only (cannot set {name.lstrip('_')!r})")
        object.__setattr__(self, name, value)

    @property
    def data_ptr(self) -> int:
        """The buffer's address (device memory on the GPU)."""
        return self._data_ptr

    @property
    def dtype(self) -> DataType:
        """The data type."""
        return self._dtype

    @property
    def shape(self) -> Shape:
        """The shape (``-1`` for a data-dependent dimension)."""
        return self._shape

    @property
    def format(self) -> TensorFormat:
        """The tensor format."""
        return self._format

    @property
    def scale(self) -> float:
        """The INT8 scale."""
        return self._scale

    @property
    def strides(self) -> tuple[int, ...]:
        """Element strides of the logical dimensions."""
        return self._strides

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    @property
    def is_data_dependent(self) -> bool:
        """True while a dimension is data-dependent (``-1``)."""
        return self._shape.is_dynamic

    def numel(self) -> int:
        """The number of elements (raises for a data-dependent tensor)."""
        if self.is_data_dependent:
            raise PluginDefinitionError(
                f"this Tensor has a data-dependent dimension ({self._shape}); use aliased(shape) once the extent is known"
            )
        return self._shape.numel()

    @property
    def is_aliased(self) -> bool:
        """True when this tensor shares its buffer with another (in-place I/O or :meth:`aliased`)."""
        return self._aliased_to is not None

    def get_aliased(self) -> Tensor | None:
        """The tensor sharing this one's buffer, or None."""
        return self._aliased_to

    def aliased(self, shape: Shape | tuple[int, ...] | PluginTensorDesc | None = None) -> Tensor:
        """A tensor on the same buffer with another shape of at most as many elements (default: the same)."""
        if shape is None:
            new_shape = self._shape._copy()
        elif isinstance(shape, (Shape, tuple, list, PluginTensorDesc)):
            new_shape = (
                shape._copy()
                if isinstance(shape, Shape)
                else Shape(shape if not isinstance(shape, list) else tuple(shape))
            )
        else:
            raise PluginDefinitionError(
                f"Tensor.aliased takes a Shape, a tuple of ints or a PluginTensorDesc, got {type(shape).__name__}"
            )
        if new_shape.is_dynamic:
            raise PluginDefinitionError(f"Tensor.aliased needs a fully known shape, got {new_shape}")
        capacity = self._elements
        if new_shape.numel() > capacity:
            raise PluginDefinitionError(
                f"Tensor.aliased: shape {new_shape} has {new_shape.numel()} elements but the buffer holds {capacity}"
            )
        made = Tensor()
        for name in ("_data_ptr", "_format", "_dtype", "_scale", "_stream", "_read_only", "_device", "_elements"):
            object.__setattr__(made, name, getattr(self, name))
        made._shape = new_shape
        made._strides = _strides(list(new_shape), self._format)
        made._aliased_to = self
        made._immutable = True
        return made

    # --- array protocols -----------------------------------------------------------
    def _array_description(self, protocol: str) -> dict[str, Any]:
        if self.is_data_dependent:
            raise PluginDefinitionError(
                f"{protocol}: this Tensor has a data-dependent shape {self._shape}; view it with aliased(shape) "
                "once the extent is known"
            )
        if self._format not in (TensorFormat.LINEAR, TensorFormat.HWC):
            raise PluginDefinitionError(
                f"{protocol}: TensorFormat.{self._format.name} is not a strided layout; read the buffer through "
                "data_ptr (plugrt.as_array gives its storage view)"
            )
        itemsize = np.dtype(nptype(self._dtype)).itemsize
        return {
            "shape": tuple(self._shape),
            "typestr": np.dtype(nptype(self._dtype)).str,
            "strides": tuple(s * itemsize for s in self._strides),
            "version": 3,
        }

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if self._device != "cpu":
            raise AttributeError(
                "__array_interface__: this Tensor lives in CUDA device memory; use __cuda_array_interface__ "
                "(torch.as_tensor(t, device='cuda'), cp.asarray(t)) or __dlpack__"
            )
        described = self._array_description("__array_interface__")
        described["data"] = (self._data_ptr, self._read_only)
        return described

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self._device != "cuda":
            raise AttributeError(
                "__cuda_array_interface__: this Tensor lives in host memory (a CPU engine); use np.asarray(t) "
                "(__array_interface__) or __dlpack__"
            )
        described = self._array_description("__cuda_array_interface__")
        described["data"] = (self._data_ptr, False)
        described["stream"] = self._stream or None  # 0 is not a valid value in the protocol
        return described

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        if self._device == "cuda":
            import cupy

            with cupy.cuda.ExternalStream(self._stream) if self._stream else cupy.cuda.Stream.null:
                return cupy.asarray(self).__dlpack__(stream=stream, **kwargs)
        view = np.asarray(_Writable(self))
        return view.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        if self._device == "cuda":
            import cupy

            return (2, int(cupy.cuda.runtime.getDevice()))
        return (1, 0)

    def __repr__(self) -> str:
        return f"Tensor(shape={self._shape}, dtype={self._dtype!r}, format={self._format!r}, device={self._device!r})"


class _Writable:
    """The host view DLPack exports (DLPack cannot carry a read-only flag)."""

    def __init__(self, tensor: Tensor) -> None:
        described = tensor._array_description("__dlpack__")
        described["data"] = (tensor.data_ptr, False)
        self.__array_interface__ = described


def _strides(dims: list[int], fmt: TensorFormat) -> tuple[int, ...]:
    """Element strides of the logical dims for LINEAR and HWC (channels last); C-order otherwise."""
    if fmt == TensorFormat.HWC and len(dims) >= 3:
        *lead, c, h, w = dims
        inner = {"c": 1, "w": c, "h": w * c}
        outer = h * w * c
        lead_strides: list[int] = []
        for d in reversed(lead):
            lead_strides.insert(0, outer)
            outer *= d
        return (*lead_strides, inner["c"], inner["h"], inner["w"])
    strides: list[int] = []
    running = 1
    for d in reversed(dims):
        strides.insert(0, running)
        running *= d if d > 1 else 1
    return tuple(strides)


class KernelLaunchParams:
    """Grid and block extents and dynamic shared memory of an AOT kernel, symbolically.

    Each field is a :class:`SymInt32` (ints are taken as constants); they are evaluated
    for the concrete shapes whenever shapes change.
    """

    _FIELDS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shared_mem")

    def __init__(
        self,
        grid_x: SymIntExpr | int = 1,
        grid_y: SymIntExpr | int = 1,
        grid_z: SymIntExpr | int = 1,
        block_x: SymIntExpr | int = 1,
        block_y: SymIntExpr | int = 1,
        block_z: SymIntExpr | int = 1,
        shared_mem: SymIntExpr | int = 0,
    ) -> None:
        for name, value in zip(self._FIELDS, (grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem)):
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._FIELDS:
            raise AttributeError(f"KernelLaunchParams has no field {name!r}; its fields: {', '.join(self._FIELDS)}")
        if isinstance(value, bool) or not isinstance(value, (int, SymIntExpr)):
            raise PluginDefinitionError(f"KernelLaunchParams.{name} takes an int or a symbolic integer, got {value!r}")
        object.__setattr__(self, name, SymInt32(value))

    grid_x: SymInt32
    grid_y: SymInt32
    grid_z: SymInt32
    block_x: SymInt32
    block_y: SymInt32
    block_z: SymInt32
    shared_mem: SymInt32

    def __repr__(self) -> str:
        return "KernelLaunchParams(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS) + ")"
