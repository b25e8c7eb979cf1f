"""``Tensor``: a plugin's buffer inside ``impl``, usable directly by the array library of its device.

On the CPU ``np.asarray(t)`` is a zero-copy view (``__array_interface__``); on the GPU
``torch.as_tensor(t, device="cuda")`` or ``cp.asarray(t)`` (``__cuda_array_interface__``);
``from_dlpack`` on both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..backends.registry import DEFAULT_DEVICE, backend_class, get_backend
from ..core.errors import PluginDefinitionError
from ..core.types import DataType, TensorFormat, nptype
from ..interfaces.descriptors import PluginTensorDesc
from ._desc import Shape

__all__ = ["Tensor"]


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
        self._device = DEFAULT_DEVICE
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
        if not backend_class(self._device).host_memory:
            raise AttributeError(
                "__array_interface__: this Tensor lives in CUDA device memory; use __cuda_array_interface__ "
                "(torch.as_tensor(t, device='cuda'), cp.asarray(t)) or __dlpack__"
            )
        cached: dict[str, Any] | None = self.__dict__.get("_host_interface")
        if cached is None:
            cached = self._array_description("__array_interface__")
            cached["data"] = (self._data_ptr, self._read_only)
            if self._immutable:  # a plugin's Tensor never changes: describe it once
                object.__setattr__(self, "_host_interface", cached)
        return cached

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if not backend_class(self._device).gpu:
            raise AttributeError(
                "__cuda_array_interface__: this Tensor lives in host memory (a CPU engine); use np.asarray(t) "
                "(__array_interface__) or __dlpack__"
            )
        cached: dict[str, Any] | None = self.__dict__.get("_device_interface")
        if cached is None:
            cached = self._array_description("__cuda_array_interface__")
            cached["data"] = (self._data_ptr, False)
            cached["stream"] = self._stream or None  # 0 is not a valid value in the protocol
            if self._immutable:
                object.__setattr__(self, "_device_interface", cached)
        return cached

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        if backend_class(self._device).host_memory:
            return np.asarray(_Writable(self)).__dlpack__(**kwargs)
        backend = get_backend(self._device)
        with backend.stream_scope(self._stream):
            return backend.xp.asarray(self).__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return get_backend(self._device).dlpack_device()

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
