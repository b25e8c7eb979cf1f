"""Tensor descriptors handed to plugin hooks (frozen: hooks cannot change them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.dims import Dims, ReadOnlyDims
from ..core.types import DataType, TensorFormat

__all__ = ["DynamicPluginTensorDesc", "PluginTensorDesc"]


@dataclass(frozen=True)
class PluginTensorDesc:
    """Shape, type, format and INT8 scale of one plugin input or output."""

    dims: Dims = field(default_factory=Dims)
    type: DataType = DataType.FLOAT
    format: TensorFormat = TensorFormat.LINEAR
    scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", ReadOnlyDims(self.dims))


@dataclass(frozen=True)
class DynamicPluginTensorDesc:
    """A descriptor plus the min/opt/max shapes of its optimization profile.

    ``desc.dims`` holds ``-1`` for dynamic dimensions at build time and the
    concrete shape when shapes are known.
    """

    desc: PluginTensorDesc = field(default_factory=PluginTensorDesc)
    min: Dims = field(default_factory=Dims)
    max: Dims = field(default_factory=Dims)
    opt: Dims = field(default_factory=Dims)

    def __post_init__(self) -> None:
        for name in ("min", "max", "opt"):
            object.__setattr__(self, name, ReadOnlyDims(getattr(self, name)))
