"""The adapter base class: the hooks the builder and executor call, per family."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from ...core.dims import Dims
from ...core.errors import TypeMismatchError
from ...core.logger import ILogger
from ...core.types import DataType
from ...shape.builder import IExprBuilder
from ...shape.expr import IDimensionExpr
from ..descriptors import PluginTensorDesc
from ..recorder import Phase, PluginCaller
from .base import BuildRequest, IOChoice, Port, candidate_list, negotiate_combination, plugin_label

__all__ = ["BuildResult", "PluginAdapter"]


class BuildResult:
    """What a finished plugin build leaves in the plan."""

    def __init__(self, payload: bytes, tactic: int = 0) -> None:
        self.payload = payload
        self.tactic = tactic


class PluginAdapter(ABC):
    """Drives one plugin layer through TensorRT's call order for its family.

    Build side: ``begin_build`` → ``output_types`` → ``output_shapes`` →
    ``choose_formats`` → ``configure`` → ``finish_build`` (or ``abort_build``).
    Run side: ``revive`` (engine) → ``attach`` (context) → ``shape_change`` →
    ``enqueue``… → ``detach`` (context) → ``release`` (engine).
    """

    family: ClassVar[str] = ""
    #: The record's interface tag in the plan ("v2" or "v3").
    interface: ClassVar[str] = ""
    #: The plugin's output-shape hook, for messages about the shapes it gave.
    shape_hook: ClassVar[str] = ""

    def __init__(self, layer: str, logger: ILogger | None) -> None:
        self.layer = layer
        self.logger = logger
        self.build_caller: PluginCaller | None = None
        self.identity_of_build: tuple[str, str, str] = ("", "", "")

    # --- identity -----------------------------------------------------------------
    @staticmethod
    @abstractmethod
    def identity(plugin: Any) -> tuple[str, str, str]:
        """(name, version, namespace) of a plugin of this family."""
        raise NotImplementedError

    @staticmethod
    def checked_identity(plugin: Any, source: Any, labels: tuple[str, str, str]) -> tuple[str, str, str]:
        """The (name, version, namespace) attributes ``labels`` of ``source``, each checked to be a str."""
        values = tuple(getattr(source, label, "") for label in labels)
        for label, value in zip(labels, values):
            if not isinstance(value, str):
                raise TypeMismatchError(f"{type(plugin).__name__}.{label} must be a str, got {value!r}")
        return values  # type: ignore[return-value]

    def _build(self) -> PluginCaller:
        assert self.build_caller is not None, "begin_build was not called"
        return self.build_caller

    def _negotiate_formats(
        self, request: BuildRequest, outputs: list[Port], preferred: list[IOChoice | None], make_desc: Any
    ) -> list[IOChoice]:
        """Incremental ``supports_format_combination`` over every position; ``make_desc(port, type,
        format)`` is the descriptor the plugin family is asked with."""
        caller = self._build()
        ports = request.inputs + outputs
        candidates = [candidate_list(pref, len(port.shape), request.fp16) for pref, port in zip(preferred, ports)]

        def ask(pos: int, descs: list[Any], num_inputs: int) -> Any:
            return caller(Phase.BUILD, "supports_format_combination", pos, descs, num_inputs)

        return negotiate_combination(
            ask,
            candidates,
            lambda pos, c: make_desc(ports[pos], *c),
            len(request.inputs),
            caller.describe("supports_format_combination"),
        )

    def caller(self, plugin: Any) -> PluginCaller:
        """A caller recording hook calls of ``plugin`` in this layer."""
        return PluginCaller(plugin, self.layer, plugin_label(*self.identity(plugin)), self.logger)

    def describe_shapes(self, plugin: Any = None) -> str:
        """Names the layer, the plugin and its output-shape hook: the build instance's, or ``plugin``'s."""
        caller = self.build_caller if plugin is None else self.caller(plugin)
        if caller is None:
            raise RuntimeError(f"layer {self.layer!r}: no plugin to describe before begin_build")
        return caller.describe(self.shape_hook)

    # --- network construction ----------------------------------------------------------
    def network_outputs(
        self, plugin: Any, inputs: Sequence[tuple[DataType, list[IDimensionExpr]]], shape_values: Sequence[Any]
    ) -> list[tuple[DataType, list[IDimensionExpr]]]:
        """(type, shape) of each output ``plugin`` gives for ``inputs`` (type, shape) and the values of its
        shape inputs (None where unknown), as TensorRT answers ``ITensor.shape`` while a network is made.

        The network's plugin itself is asked (not a build clone), through this
        family's type and shape hooks and their checks; the calls are not recorded.
        """
        label = plugin_label(*self.identity(plugin))
        self.build_caller = _UnrecordedCaller(self.build_interface(plugin), self.layer, label, self.logger)
        try:
            types = self.output_types([dtype for dtype, _ in inputs])
            request = BuildRequest(self.layer, [Port(list(shape), [], dtype) for dtype, shape in inputs])
            shape_ports = [Port([], [], values=None if v is None else list(v)) for v in shape_values]
            shapes = self.output_shapes(request, shape_ports, IExprBuilder(owner=self.layer))
        finally:
            self.build_caller = None
        return list(zip(types, shapes))

    def build_interface(self, plugin: Any) -> Any:
        """The object answering ``plugin``'s build-time hooks (the plugin itself; V3: its BUILD capability)."""
        return plugin

    # --- build --------------------------------------------------------------------
    @abstractmethod
    def begin_build(self, plugin: Any) -> None:
        """Make the build instance (a clone of the network's plugin)."""
        raise NotImplementedError

    @abstractmethod
    def output_types(self, input_types: list[DataType]) -> list[DataType]:
        """Declared output types."""
        raise NotImplementedError

    @abstractmethod
    def output_shapes(
        self, request: BuildRequest, shape_inputs: list[Port], eb: IExprBuilder
    ) -> list[list[IDimensionExpr]]:
        """Output shapes as expressions."""
        raise NotImplementedError

    @abstractmethod
    def choose_formats(
        self, request: BuildRequest, outputs: list[Port], preferred: list[IOChoice | None]
    ) -> list[IOChoice]:
        """One (type, format) per input then output."""
        raise NotImplementedError

    @abstractmethod
    def configure(self, request: BuildRequest, outputs: list[Port], num_profiles: int) -> int:
        """Configure the plugin for every profile; return the workspace bytes needed."""
        raise NotImplementedError

    @abstractmethod
    def finish_build(self, request: BuildRequest, outputs: list[Port]) -> BuildResult:
        """Serialize and tear down the build instance."""
        raise NotImplementedError

    def abort_build(self) -> None:
        """Tear down the build instance after a failed build (errors ignored)."""

    # --- in-place outputs ---------------------------------------------------------------
    def offers_aliasing(self) -> bool:
        """True when the plugin declares in-place outputs (asked to warn when the feature is off)."""
        return False

    def aliased_inputs(self, request: BuildRequest, outputs: list[Port]) -> dict[int, int]:
        """Output index → the input index whose buffer it shares (read, then overwritten in place).

        The builder asks only with ``PreviewFeature.ALIASED_PLUGIN_IO_10_03`` on, after
        format negotiation. Default: no aliasing.
        """
        return {}

    # --- run ----------------------------------------------------------------------
    @abstractmethod
    def revive(self, name: str, version: str, namespace: str, payload: bytes, registry: Any, tactic: int) -> Any:
        """The engine's plugin, recreated from the plan through the registry."""
        raise NotImplementedError

    @abstractmethod
    def attach(self, engine_plugin: Any, resource_context: Any) -> Any:
        """The plugin instance an execution context uses."""
        raise NotImplementedError

    def shape_change(
        self,
        plugin: Any,
        inputs: Sequence[PluginTensorDesc],
        outputs: Sequence[PluginTensorDesc],
        input_ranges: Sequence[tuple[Dims, Dims, Dims]],
        output_ranges: Sequence[tuple[Dims, Dims, Dims]],
    ) -> None:
        """Tell a context's plugin about new concrete shapes."""

    @abstractmethod
    def make_enqueue(self, plugin: Any) -> Any:
        """A callable ``(in_descs, out_descs, in_ptrs, out_ptrs, workspace, stream)`` running the plugin."""
        raise NotImplementedError

    def detach(self, plugin: Any) -> None:
        """Release a context's plugin."""

    def release(self, engine_plugin: Any) -> None:
        """Release the engine's plugin."""


class _UnrecordedCaller(PluginCaller):
    """A caller whose calls are neither recorded nor logged (questions asked while a network is made)."""

    def note(self, phase: str, method: str) -> None:
        """Record nothing."""
