"""What the builder knows about a node's tensors: ports (shapes, profile ranges, type, format) and the request.

A :class:`Port` is one input or output of a layer while it is built: its shape as
dimension expressions, its (min, opt, max) dims in every profile, the type and
format chosen so far, its values when it is a shape tensor, and its INT8 scale.
A :class:`BuildRequest` is everything the builder hands a node for one layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.dims import Dims
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.expr import IDimensionExpr

if TYPE_CHECKING:
    from ..backends.base import Backend

__all__ = ["BuildRequest", "IOChoice", "Port", "ProfileDims"]

#: One position's (type, format).
IOChoice = tuple[DataType, TensorFormat]
#: (min, opt, max) dims of a tensor in one optimization profile.
ProfileDims = tuple[Dims, Dims, Dims]


@dataclass
class Port:
    """One node input or output at build time: shape expressions and profile ranges."""

    shape: list[IDimensionExpr]
    #: For each profile: (min, opt, max) concrete dims.
    ranges: list[ProfileDims]
    dtype: DataType = DataType.FLOAT
    format: TensorFormat = TensorFormat.LINEAR
    values: list[IDimensionExpr] | None = None
    #: The INT8 scale (``PluginTensorDesc.scale``): the tensor's dynamic range / 127, 1 when unknown.
    scale: float = 1.0

    @property
    def build_dims(self) -> Dims:
        """Dims with -1 where the dimension is not a build-time constant."""
        return Dims([d.get_constant_value() if d.is_constant() else -1 for d in self.shape])

    def desc(self, dtype: DataType | None = None, fmt: TensorFormat | None = None) -> PluginTensorDesc:
        """A build-time descriptor (dynamic dims are -1)."""
        return PluginTensorDesc(
            self.build_dims, self.dtype if dtype is None else dtype, self.format if fmt is None else fmt, self.scale
        )

    def dynamic_desc(
        self, profile: int, dtype: DataType | None = None, fmt: TensorFormat | None = None
    ) -> DynamicPluginTensorDesc:
        """A descriptor with the min/opt/max of ``profile``."""
        lo, mid, hi = self.ranges[profile]
        return DynamicPluginTensorDesc(self.desc(dtype, fmt), Dims(lo), Dims(hi), Dims(mid))


@dataclass
class BuildRequest:
    """What the builder knows when it asks a node to build one layer."""

    layer: str
    inputs: list[Port]
    fp16: bool = False
    int8: bool = False
    workspace_limit: int = 1 << 40
    extra: dict[str, Any] = field(default_factory=dict)
    #: the backend of the build device (``Builder(device=...)``): tactics are timed there; None is the CPU
    backend: Backend | None = None
    #: False: take the first valid tactic instead of timing them (the conformance checker's builds)
    time_tactics: bool = True
