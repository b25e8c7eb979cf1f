"""The IPluginV3 family: one plugin object exposing core, build and runtime capabilities."""

from __future__ import annotations

from typing import Any

from ..core.enums import TrtEnum
from ..core.types import DataType
from ..shape.builder import DimsExprs, IExprBuilder
from .descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from .fields import PluginFieldCollection
from .hooks import missing_hook

__all__ = [
    "IPluginCapability",
    "IPluginResourceContext",
    "IPluginV3",
    "IPluginV3OneBuild",
    "IPluginV3OneBuildV2",
    "IPluginV3OneCore",
    "IPluginV3OneRuntime",
    "PluginCapabilityType",
    "TensorRTPhase",
]


class PluginCapabilityType(TrtEnum):
    """Capability interfaces an IPluginV3 offers."""

    CORE = 0
    BUILD = 1
    RUNTIME = 2


class TensorRTPhase(TrtEnum):
    """Why a V3 plugin is created: to build an engine or to run one."""

    BUILD = 0
    RUNTIME = 1


class IPluginResourceContext:
    """What ``attach_to_context`` receives (one per execution context, as in TensorRT).

    ``gpu_allocator``: an :class:`IGpuAllocator` for the engine's device (the one given, else
    plugrt's default on ``backend``); ``error_recorder``: the context's :class:`IErrorRecorder`
    or None. ``backend`` ('cpu' or 'cuda') and ``allocator`` (what was given) are plugrt's.
    """

    def __init__(self, backend: str, allocator: Any = None, error_recorder: Any = None) -> None:
        self.backend = backend
        self.allocator = allocator
        self._error_recorder = error_recorder
        self._default_allocator: Any = None

    @property
    def gpu_allocator(self) -> Any:
        """The allocator plugins may use for device memory."""
        if self.allocator is not None:
            return self.allocator
        if self._default_allocator is None:
            from .gpu_allocator import DefaultGpuAllocator

            self._default_allocator = DefaultGpuAllocator(self.backend)
        return self._default_allocator

    @property
    def error_recorder(self) -> Any:
        """The error recorder of this context (None when none is set)."""
        return self._error_recorder


class IPluginCapability:
    """Base of the V3 capability interfaces (core, build, runtime), as in TensorRT.

    ``get_capability_interface`` returns one of these; plugins subclass the concrete
    interfaces (:class:`IPluginV3OneCore`, :class:`IPluginV3OneBuild`,
    :class:`IPluginV3OneRuntime`), never this class directly.
    """

    def __init__(self) -> None:
        pass


_CAPABILITY_CLASS: dict[PluginCapabilityType, str] = {
    PluginCapabilityType.CORE: "IPluginV3OneCore",
    PluginCapabilityType.BUILD: "IPluginV3OneBuild",
    PluginCapabilityType.RUNTIME: "IPluginV3OneRuntime",
}


class IPluginV3:
    """Base of V3 plugins. A plugin usually subclasses all four V3 classes."""

    def __init__(self) -> None:
        pass

    def get_capability_interface(self, type: PluginCapabilityType) -> Any:  # noqa: A002
        """The object implementing capability ``type``; default: ``self`` if it subclasses it."""
        wanted = _CAPABILITY_CLASS[PluginCapabilityType(type)]
        return self if any(cls.__name__ == wanted for cls in type_mro(self)) else None

    def clone(self) -> IPluginV3:
        """A copy with the same configuration. Required."""
        missing_hook(self, "clone", "IPluginV3")

    def destroy(self) -> None:
        """Called once when the owner (builder, engine or execution context) lets the plugin go."""


def type_mro(obj: object) -> tuple[type, ...]:
    """The method resolution order of ``obj``'s class."""
    return type(obj).__mro__


class IPluginV3OneCore(IPluginCapability):
    """Identity of a V3 plugin: ``plugin_name``, ``plugin_version``, ``plugin_namespace``."""

    plugin_name: str = ""
    plugin_version: str = "1"
    plugin_namespace: str = ""

    def __init__(self) -> None:
        pass


class IPluginV3OneBuild(IPluginCapability):
    """Build-time hooks of a V3 plugin.

    ``timing_cache_id``: ``None`` (the default) times every instance; a string lets
    instances with the same id, identity and I/O descriptors share one timing (TensorRT's
    timing cache).
    """

    #: TensorRT's default for ``format_combination_limit``.
    DEFAULT_FORMAT_COMBINATION_LIMIT: int = 100

    num_outputs: int = 1
    format_combination_limit: int = 100
    metadata_string: str = ""
    timing_cache_id: str | None = None

    def __init__(self) -> None:
        pass

    def get_output_data_types(self, input_types: list[DataType]) -> list[DataType]:
        """Types of all outputs. Required."""
        missing_hook(self, "get_output_data_types", "IPluginV3OneBuild")

    def get_output_shapes(
        self, inputs: list[DimsExprs], shape_inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> list[DimsExprs]:
        """Shapes of all outputs as expressions. Required."""
        missing_hook(self, "get_output_shapes", "IPluginV3OneBuild")

    def supports_format_combination(self, pos: int, in_out: list[DynamicPluginTensorDesc], num_inputs: int) -> bool:
        """Whether position ``pos`` may take ``in_out[pos].desc``. Required."""
        missing_hook(self, "supports_format_combination", "IPluginV3OneBuild")

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        """Receive the chosen descriptors and profile ranges at build time."""

    def get_workspace_size(self, inputs: list[DynamicPluginTensorDesc], outputs: list[DynamicPluginTensorDesc]) -> int:
        """Scratch bytes for the profile's range. Default 0."""
        return 0

    def get_valid_tactics(self) -> list[int]:
        """Custom tactics to time (positive integers). Default: none."""
        return []


class IPluginV3OneBuildV2(IPluginV3OneBuild):
    """Build capability with in-place outputs (TensorRT's ``IPluginV3OneBuildV2``).

    Honoured only with ``PreviewFeature.ALIASED_PLUGIN_IO_10_03`` on the builder config.
    """

    def get_aliased_input(self, output_index: int) -> int:
        """The input whose buffer output ``output_index`` shares (it is read, then overwritten
        in place), or -1 for none (the default). An input may be aliased by one output only."""
        return -1


class IPluginV3OneRuntime(IPluginCapability):
    """Run-time hooks of a V3 plugin."""

    def __init__(self) -> None:
        pass

    def set_tactic(self, tactic: int) -> None:
        """The tactic chosen at build time (0 when the plugin offers none)."""

    def on_shape_change(self, inputs: list[PluginTensorDesc], outputs: list[PluginTensorDesc]) -> None:
        """Receive concrete shapes before the first ``enqueue`` with them."""

    def enqueue(
        self,
        input_desc: list[PluginTensorDesc],
        output_desc: list[PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> int | None:
        """Run on buffer addresses. Required."""
        missing_hook(self, "enqueue", "IPluginV3OneRuntime")

    def attach_to_context(self, resource_context: IPluginResourceContext) -> Any:
        """The plugin an execution context uses; default: ``self.clone()``."""
        clone = getattr(self, "clone", None)
        if clone is None:
            missing_hook(self, "clone", "IPluginV3")
        return clone()

    def get_fields_to_serialize(self) -> PluginFieldCollection:
        """Fields that recreate this plugin through its creator. Required."""
        missing_hook(self, "get_fields_to_serialize", "IPluginV3OneRuntime")
