"""``ITensor``: a named value flowing between layers of a network definition."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.dims import Dims
from ..core.enums import TrtEnum
from ..core.errors import NetworkError, TypeMismatchError
from ..core.types import DataType, TensorFormat

if TYPE_CHECKING:
    from .layer import ILayer

__all__ = ["ITensor", "TensorIOMode", "TensorLocation"]


class TensorLocation(TrtEnum):
    """Where a tensor lives (TensorRT's names)."""

    DEVICE = 0
    HOST = 1


class TensorIOMode(TrtEnum):
    """Whether an engine tensor is an input, an output or neither."""

    NONE = 0
    INPUT = 1
    OUTPUT = 2


class ITensor:
    """A tensor of a network: name, shape (``-1`` where dynamic) and type.

    Tensors are made by ``INetworkDefinition.add_input`` and by layers; the shape
    and type of a layer output are known only after building (they read as the
    declared values or ``Dims()``/FLOAT before that).
    """

    def __init__(self, name: str, dtype: DataType, shape: Dims, producer: ILayer | None) -> None:
        self._name = name
        self._dtype = DataType(dtype)
        self._shape = Dims(shape)
        self.producer = producer
        self.is_network_input = producer is None
        self.is_network_output = False
        self.location = TensorLocation.DEVICE
        self.allowed_formats = 1 << TensorFormat.LINEAR
        self.dynamic_range: tuple[float, float] | None = None
        self.network: Any = None

    @property
    def name(self) -> str:
        """The tensor's unique name within its network."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise NetworkError(f"a tensor name must be a non-empty str, got {value!r}")
        if self.network is not None:
            self.network._rename_tensor(self, value)
        self._name = value

    @property
    def shape(self) -> Dims:
        """The declared shape (network inputs) or the last inferred shape."""
        return Dims(self._shape)

    @shape.setter
    def shape(self, value: Any) -> None:
        if not self.is_network_input:
            raise NetworkError(f"the shape of tensor {self._name!r} is inferred; only network inputs can be reshaped")
        self._shape = Dims(value)

    @property
    def dtype(self) -> DataType:
        """The element type."""
        return self._dtype

    @dtype.setter
    def dtype(self, value: DataType) -> None:
        if not isinstance(value, DataType):
            raise TypeMismatchError(f"tensor {self._name!r}: dtype must be a DataType, got {value!r}")
        self._dtype = value

    def set_inferred(self, dtype: DataType, shape: Sequence[int]) -> None:
        """Record the type and shape the builder inferred for this tensor (``-1`` where dynamic)."""
        if not isinstance(dtype, DataType):
            raise TypeMismatchError(f"tensor {self._name!r}: dtype must be a DataType, got {dtype!r}")
        self._dtype = dtype
        self._shape = Dims(shape)

    def set_dynamic_range(self, min_value: float, max_value: float) -> bool:
        """Record an INT8 dynamic range."""
        self.dynamic_range = (float(min_value), float(max_value))
        return True

    @property
    def is_shape_tensor(self) -> bool:
        """True when the tensor is used as a shape (plugrt tracks these while building)."""
        return False

    def __repr__(self) -> str:
        return f"ITensor({self._name!r}, {self._dtype.name}, {self._shape!r})"
