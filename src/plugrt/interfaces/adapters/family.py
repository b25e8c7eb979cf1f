"""The adapter base class: the hooks the builder and executor call, per family."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from ...core.dims import Dims
from ...core.errors import PlugrtError, TypeMismatchError
from ...core.logger import ILogger, Severity
from ...core.types import DataType, TensorFormat
from ...shape.builder import IExprBuilder
from ...shape.expr import IDimensionExpr
from ..descriptors import PluginTensorDesc
from ..recorder import ErrorPolicy, Phase, PluginCaller
from .base import (
    BuildRequest,
    IOChoice,
    Port,
    candidate_list,
    format_answer,
    negotiate_combination,
    plugin_label,
)

__all__ = ["BuildResult", "Descs", "PluginAdapter", "checked_output_count"]

#: The descriptors of a layer's inputs or outputs.
Descs = Sequence[PluginTensorDesc]


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
    ``enqueue``… → ``detach`` (context) → ``release`` (engine); a context runs it
    through a :class:`~plugrt.interfaces.adapters.node.PluginNode`.
    """

    family: ClassVar[str] = ""
    #: The record's interface tag in the plan ("v2" or "v3").
    interface: ClassVar[str] = ""
    #: The plugin's output-shape hook, for messages about the shapes it gave.
    shape_hook: ClassVar[str] = ""
    #: The plugin's output-type hook.
    type_hook: ClassVar[str] = ""
    #: The hook answering format questions.
    format_hook: ClassVar[str] = "supports_format_combination"
    #: The attributes holding (name, version, namespace).
    identity_labels: ClassVar[tuple[str, str, str]] = ("plugin_type", "plugin_version", "plugin_namespace")
    #: The class every plugin object of this family (clones, revived plugins) must be.
    expected_class: ClassVar[type] = object
    #: True when a plugin revived from a plan need not answer build questions (a V3 plugin created for
    #: TensorRT's RUNTIME phase): a failing load check then only leaves its shapes unchecked.
    revived_may_refuse_shapes: ClassVar[bool] = False

    def __init__(self, layer: str, logger: ILogger | None, policy: ErrorPolicy | None = None) -> None:
        """``policy``: how failing hooks are reported (None: the engine's errors)."""
        self.layer = layer
        self.logger = logger
        self.policy = policy
        self.build_caller: PluginCaller | None = None
        self.identity_of_build: tuple[str, str, str] = ("", "", "")

    # --- identity -----------------------------------------------------------------
    @staticmethod
    def identity_source(plugin: Any) -> Any:
        """The object holding the identity attributes (the plugin, or its core capability)."""
        return plugin

    @classmethod
    def identity(cls, plugin: Any) -> tuple[str, str, str]:
        """(name, version, namespace) of a plugin of this family, each checked to be a str."""
        return cls.checked_identity(plugin, cls.identity_source(plugin), cls.identity_labels)

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

    def declared_outputs(self, plugin: Any) -> int:
        """The number of outputs ``plugin`` declares (``num_outputs``), asked when a network adds its layer."""
        return checked_output_count(plugin, plugin)

    def network_caller(self, plugin: Any) -> PluginCaller:
        """A caller for questions asked while a network is made: neither recorded nor logged."""
        caller = self.caller(plugin)
        return _UnrecordedCaller(plugin, self.layer, caller.label, self.logger, self.policy)

    def use_build_instance(self, plugin: Any) -> None:
        """Make ``plugin`` itself the build instance (``begin_build`` makes a clone first)."""
        self.build_caller = self.caller(plugin)
        self.identity_of_build = self.identity(plugin)

    def clone_of(
        self, source: PluginCaller, phase: str, method: str = "clone", *args: Any, original: Any = None
    ) -> Any:
        """``source``'s ``clone()`` (or ``method(*args)``), checked to be a new plugin of this family.

        ``original``: the plugin the answer must not be (default ``source``'s object).
        """
        clone = source(phase, method, *args)
        original = source.plugin if original is None else original
        if not isinstance(clone, self.expected_class):
            raise source.fail(
                method,
                f" returned {type(clone).__name__}; expected an {self.expected_class.__name__}",
                phase=phase,
            )
        if clone is original:
            raise source.fail(method, " returned the plugin itself; it must return a new object", phase=phase)
        return clone

    # --- formats ------------------------------------------------------------------
    def format_desc(self, port: Port, dtype: DataType, fmt: TensorFormat) -> Any:
        """The descriptor of ``port`` the format hook is asked with."""
        return port.desc(dtype, fmt)

    def format_question(self, pos: int, descs: list[Any], num_inputs: int) -> bool:
        """The build instance's answer about position ``pos`` of ``descs``."""
        caller = self._build()
        answer = caller(Phase.BUILD, "supports_format_combination", pos, descs, num_inputs)
        return format_answer(caller, "supports_format_combination", answer)

    def _negotiate_formats(
        self, request: BuildRequest, outputs: list[Port], preferred: list[IOChoice | None]
    ) -> list[IOChoice]:
        """Incremental ``supports_format_combination`` over every position."""
        ports = request.inputs + outputs
        candidates = [candidate_list(pref, len(port.shape), request.fp16) for pref, port in zip(preferred, ports)]
        return negotiate_combination(
            self.format_question,
            candidates,
            lambda pos, c: self.format_desc(ports[pos], *c),
            len(request.inputs),
            self._build(),
        )

    def caller(self, plugin: Any) -> PluginCaller:
        """A caller recording hook calls of ``plugin`` in this layer."""
        source = self.identity_source(plugin)
        label = plugin_label(*(str(getattr(source, name, "")) for name in self.identity_labels))
        return PluginCaller(plugin, self.layer, label, self.logger, self.policy)

    def describe_shapes(self, plugin: Any = None) -> str:
        """Names the layer, the plugin and its output-shape hook: the build instance's, or ``plugin``'s."""
        caller = self.build_caller if plugin is None else self.caller(plugin)
        if caller is None:
            raise RuntimeError(f"layer {self.layer!r}: no plugin to describe before begin_build")
        return caller.describe(self.shape_hook)

    # --- loading a plan ---------------------------------------------------------------------
    def revived_output_shapes(
        self, plugin: Any, inputs: list[Port], shape_inputs: list[Port]
    ) -> list[list[IDimensionExpr]] | None:
        """The output shapes the engine's ``plugin``, revived from a plan, gives for ``inputs`` and ``shape_inputs``
        (the plan's tensors its layer reads), asked of a throwaway clone whose calls are recorded in phase
        ``load_check``.

        TensorRT asks output shapes only while building; plugrt asks again when a plan loads, to refuse
        a plugin record that does not give the shapes the plan's memory was planned for. The clone keeps
        ``plugin`` itself as TensorRT left it. None when the plugin cannot be asked: the clone has no
        build interface, or (families whose revived plugins need not answer build questions,
        ``revived_may_refuse_shapes``) a hook failed; the logger says why at INFO.
        """
        try:
            clone = self.clone_of(self.caller(plugin), Phase.LOAD_CHECK)
        except PlugrtError as exc:
            self._not_asked(exc)
            return None
        root = _LoadCheckCaller(clone, self.layer, self.caller(clone).label, self.logger, self.policy)
        try:
            build = self.checking_interface(root)
            if build is None:
                return None
            self.build_caller = build
            request = BuildRequest(self.layer, inputs)
            return self.output_shapes(request, shape_inputs, IExprBuilder(owner=self.layer))
        except PlugrtError as exc:
            self._not_asked(exc)
            return None
        finally:
            self.build_caller = None
            if callable(getattr(clone, "destroy", None)):
                root(Phase.LOAD_CHECK, "destroy")

    def _not_asked(self, exc: PlugrtError) -> None:
        """Re-raise ``exc``, unless this family's revived plugins may refuse build questions (then log it)."""
        if not self.revived_may_refuse_shapes:
            raise exc
        if self.logger is not None:
            self.logger.emit(
                Severity.INFO, f"{exc}; the plugin revived from the plan cannot say its output shapes, so they are "
                "not checked against the plan's"
            )

    def checking_interface(self, root: PluginCaller) -> PluginCaller | None:
        """The caller of the object answering a plan-load check's shape questions: ``root``'s plugin itself
        (V3: its BUILD capability, None without one)."""
        return root

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
        self.build_caller = _UnrecordedCaller(self.build_interface(plugin), self.layer, label, self.logger, self.policy)
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

    @abstractmethod
    def serialize_build(self) -> BuildResult:
        """Serialize and tear down the build instance, without ``finish_build``'s consistency checks."""
        raise NotImplementedError

    @abstractmethod
    def serialized(self, caller: PluginCaller) -> bytes:
        """What the plan stores for ``caller``'s plugin (no teardown)."""
        raise NotImplementedError

    @abstractmethod
    def adopt_build(self) -> Any:
        """The build instance, kept as the engine's plugin instead of serialized and revived.

        The conformance checker runs plugins this way to tell serialization faults from others.
        """
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
    def enqueue_hook(self, plugin: Any) -> tuple[PluginCaller, str]:
        """The caller of a context's plugin and the hook every run calls (``enqueue``, ``execute_async``)."""
        raise NotImplementedError

    def enqueue_args(
        self, inputs: Descs, outputs: Descs, in_addresses: Sequence[int], out_addresses: Sequence[int], workspace: int
    ) -> tuple[Any, ...]:
        """The run hook's arguments before the stream, made once per shape change."""
        return (inputs, outputs, in_addresses, out_addresses, workspace)

    def detach(self, plugin: Any) -> None:
        """Release a context's plugin."""

    def release(self, engine_plugin: Any) -> None:
        """Release the engine's plugin."""


class _UnrecordedCaller(PluginCaller):
    """A caller whose calls are neither recorded nor logged (questions asked while a network is made)."""

    def note(self, phase: str, method: str) -> None:
        """Record nothing."""


class _LoadCheckCaller(PluginCaller):
    """A caller recording every call in phase ``load_check`` (plugrt's check of a revived plugin at load)."""

    def note(self, phase: str, method: str) -> None:
        """Record and log the call as a load check."""
        super().note(Phase.LOAD_CHECK, method)

    def with_plugin(self, plugin: Any) -> PluginCaller:
        """A load-check caller for a capability interface of the same plugin."""
        return _LoadCheckCaller(plugin, self.layer, self.label, self.logger, self.policy)


def checked_output_count(plugin: Any, source: Any) -> int:
    """``source.num_outputs`` (``source`` is ``plugin`` or its build capability), checked to be an int >= 0."""
    count = getattr(source, "num_outputs", None)
    if not isinstance(count, int) or count < 0:
        raise TypeMismatchError(f"plugin {type(plugin).__name__}.num_outputs must be a non-negative int, got {count!r}")
    return count
