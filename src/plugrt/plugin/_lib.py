"""The decorators, the definitions they make, ``trtp.op`` and the creator of each definition.

``@register(id)`` reads the schema and (unless ``lazy_register``) registers a creator
in the plugin registry under (name, "1", namespace), so plans holding the plugin
revive through the registry like any V3 plugin. ``@impl``, ``@autotune`` and
``@aot_impl`` attach functions to the definition, each checked against the schema.
``trtp.op.<namespace>.<name>(*tensors, **attrs)`` checks a call and returns what
``INetworkDefinition.add_plugin`` takes.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Any, TypeVar

from ..core.enums import TrtEnum
from ..core.errors import PluginDefinitionError
from ..core.types import DataType
from ..interfaces.creator import IPluginCreatorV3One
from ..interfaces.fields import PluginFieldCollection
from ..interfaces.registry import get_plugin_registry
from ..interfaces.v3 import TensorRTPhase
from ._schema import Schema, check_hook, parse_register, split_id
from ._stored import AOT_KERNELS
from ._template import QuickPlugin

__all__ = [
    "PluginDef",
    "QuickPluginCreationRequest",
    "QuickPluginCreator",
    "aot_impl",
    "autotune",
    "impl",
    "op",
    "register",
]

F = TypeVar("F", bound=Callable[..., Any])


class QuickPluginCreationRequest(TrtEnum):
    """Which implementation of a decorator-API plugin to build (TensorRT's values)."""

    UNKNOWN = 0
    PREFER_JIT = 1
    PREFER_AOT = 2
    STRICT_JIT = 3
    STRICT_AOT = 4


class PluginDef:
    """A registered decorator-API plugin: its schema and functions.

    Calling it (``trtp.op.ns.name(x, attr=1)``) checks the call against the schema and
    returns a function of a :class:`QuickPluginCreationRequest` giving
    ``(inputs, shape_inputs, plugin)``, which ``add_plugin`` takes.
    """

    def __init__(self, schema: Schema, register_func: Callable[..., Any]) -> None:
        self.schema = schema
        self.register_func = register_func
        self.impl_func: Callable[..., Any] | None = None
        self.impl_attrs: list[str] = []
        self.impl_takes_tactic = False
        self.autotune_func: Callable[..., Any] | None = None
        self.autotune_attrs: list[str] = []
        self.aot_func: Callable[..., Any] | None = None
        self.aot_attrs: list[str] = []
        self.creator: QuickPluginCreator | None = None

    @property
    def plugin_id(self) -> str:
        """``namespace::name``."""
        return self.schema.plugin_id

    def __call__(self, *tensors: Any, **attrs: Any) -> Callable[[Any], tuple[list[Any], list[Any], QuickPlugin]]:
        from ..network.tensor import ITensor

        schema = self.schema
        call = f"trtp.op.{schema.namespace}.{schema.name}"
        for i, t in enumerate(tensors):
            if not isinstance(t, ITensor):
                raise PluginDefinitionError(f"{call}: input {i} must be an ITensor, got {type(t).__name__}")
        if len(tensors) != len(schema.tensor_names):
            raise PluginDefinitionError(
                f"{call} takes {len(schema.tensor_names)} input tensors ({', '.join(schema.tensor_names)}), got {len(tensors)}"
            )
        unknown = sorted(set(attrs) - set(schema.attrs))
        missing = [name for name in schema.attrs if name not in attrs]
        if unknown or missing:
            raise PluginDefinitionError(
                f"{call}: attributes differ from register's (declared: {', '.join(schema.attrs) or 'none'})"
                + (f"; unexpected: {unknown}" if unknown else "")
                + (f"; missing: {missing}" if missing else "")
            )
        values = {name: schema.check_value(name, attrs[name]) for name in schema.attrs}
        inputs = list(tensors)
        described = [(len(t.shape), t.dtype) for t in inputs]
        creator = self.ensure_creator()

        def create(request: Any = QuickPluginCreationRequest.UNKNOWN) -> tuple[list[Any], list[Any], QuickPlugin]:
            plugin = creator.create_quick(values, request, described)
            return inputs, [], plugin

        return create

    def ensure_creator(self) -> QuickPluginCreator:
        """The creator, registered on first use for ``lazy_register`` definitions."""
        with _LOCK:
            if self.creator is None:
                creator = QuickPluginCreator(self)
                get_plugin_registry().register_creator(creator, self.schema.namespace)
                self.creator = creator
            return self.creator

    def choose_aot(self, request: Any) -> bool:
        """Whether a build with ``request`` uses the AOT implementation (TensorRT's rules)."""
        request = QuickPluginCreationRequest(request if request is not None else 0)
        has_aot, has_jit = self.aot_func is not None, self.impl_func is not None
        pid = self.plugin_id
        if request == QuickPluginCreationRequest.STRICT_AOT:
            if not has_aot:
                raise PluginDefinitionError(
                    f"QDP plugin {pid!r}: the AOT implementation was asked for, but no @trtp.aot_impl({pid!r}) is defined"
                )
            return True
        if request == QuickPluginCreationRequest.STRICT_JIT:
            if not has_jit:
                raise PluginDefinitionError(
                    f"QDP plugin {pid!r}: the JIT implementation was asked for, but no @trtp.impl({pid!r}) is defined"
                )
            return False
        if has_aot and has_jit:
            if request == QuickPluginCreationRequest.UNKNOWN:
                raise PluginDefinitionError(
                    f"QDP plugin {pid!r} has both an AOT and a JIT implementation; choose with add_plugin(..., aot=True/False) "
                    "or the network flag NetworkDefinitionCreationFlag.PREFER_AOT_PYTHON_PLUGINS / PREFER_JIT_PYTHON_PLUGINS"
                )
            return request == QuickPluginCreationRequest.PREFER_AOT
        if not has_aot and not has_jit:
            raise PluginDefinitionError(
                f"QDP plugin {pid!r} has no implementation; define @trtp.impl({pid!r}) (JIT) or @trtp.aot_impl({pid!r}) (AOT)"
            )
        return has_aot


class QuickPluginCreator(IPluginCreatorV3One):
    """The creator of one decorator-API plugin; its ``field_names`` come from the schema."""

    def __init__(self, definition: PluginDef) -> None:
        IPluginCreatorV3One.__init__(self)
        self.definition = definition
        self.name = definition.schema.name
        self.plugin_namespace = definition.schema.namespace
        self.plugin_version = "1"
        self.field_names = PluginFieldCollection(definition.schema.field_names())

    @property
    def build_only_fields(self) -> list[str]:
        """Attributes only the build needs: those the impl does not take (all of them without an impl)."""
        d = self.definition
        used = set(d.impl_attrs) if d.impl_func is not None else set()
        return [name for name in d.schema.attrs if name not in used]

    def create_plugin(
        self,
        name: str,
        field_collection: PluginFieldCollection,
        phase: TensorRTPhase,
        quick_request: Any = QuickPluginCreationRequest.UNKNOWN,
    ) -> QuickPlugin:
        """BUILD: a plugin from every attribute's field (JIT or AOT by ``quick_request``);
        RUNTIME: the plugin a plan stored (``get_fields_to_serialize``'s fields)."""
        if TensorRTPhase(phase) == TensorRTPhase.RUNTIME or any(f.name == AOT_KERNELS for f in field_collection):
            return QuickPlugin.from_fields(self.definition, field_collection)
        schema = self.definition.schema
        values = {}
        for f in field_collection:
            if f.name not in schema.attrs:
                raise PluginDefinitionError(
                    f"QDP plugin {schema.plugin_id!r}: unknown attribute {f.name!r}; declared: {', '.join(schema.attrs) or 'none'}"
                )
            values[f.name] = schema.from_field(f)
        return self.create_quick(values, quick_request, None)

    def create_quick(
        self, attrs: dict[str, Any], request: Any, inputs: list[tuple[int, DataType]] | None
    ) -> QuickPlugin:
        """A build-phase plugin from checked attribute values, for inputs of these (rank, type)."""
        schema = self.definition.schema
        missing = [name for name in schema.attrs if name not in attrs]
        if missing:
            raise PluginDefinitionError(
                f"QDP plugin {schema.plugin_id!r}: attributes {missing} were not given (declared: {', '.join(schema.attrs)})"
            )
        return QuickPlugin(self.definition, attrs, self.definition.choose_aot(request), inputs)


# --- trtp.op -------------------------------------------------------------------------------
class _Namespace(types.ModuleType):
    """``trtp.op.<namespace>``: the definitions of one namespace as attributes."""

    def __getattr__(self, name: str) -> Any:
        defined = sorted(k for k, v in vars(self).items() if isinstance(v, PluginDef))
        raise AttributeError(
            f"no QDP plugin {name!r} in namespace {self.__name__.rsplit('.', 1)[-1]!r}; defined: {', '.join(defined) or 'none'}"
        )


class _Op(types.ModuleType):
    """``trtp.op``: one attribute per namespace holding registered plugins."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        known = sorted(k for k, v in vars(self).items() if isinstance(v, _Namespace))
        raise AttributeError(f"no QDP plugin namespace {name!r}; namespaces: {', '.join(known) or 'none'}")

    def _namespace(self, namespace: str) -> _Namespace:
        found = vars(self).get(namespace)
        if not isinstance(found, _Namespace):
            found = _Namespace(f"plugrt.plugin.op.{namespace}")
            setattr(self, namespace, found)
        return found


op = _Op("plugrt.plugin.op")
_DEFINITIONS: dict[str, PluginDef] = {}
_LOCK = threading.RLock()


def definition_of(plugin_id: str, decorator: str) -> PluginDef:
    """The registered definition of ``plugin_id`` (for the other decorators and ``plugrt check``)."""
    with _LOCK:
        found = _DEFINITIONS.get(plugin_id)
    if found is None:
        known = ", ".join(sorted(_DEFINITIONS)) or "none"
        raise PluginDefinitionError(
            f"{decorator}({plugin_id!r}): no such QDP plugin is registered; define it with @trtp.register first "
            f"(registered: {known})"
        )
    return found


def register(plugin_id: str, lazy_register: bool = False) -> Callable[[F], F]:
    """Declare a plugin: the decorated function gives its outputs' descriptions from its inputs'.

    Its parameters are the input ``TensorDesc`` s, then the attributes, each with its
    type as the hint; its return hint is ``TensorDesc`` or ``Tuple[TensorDesc, ...]``.
    It must be pure: plugrt calls it whenever it needs the outputs' types or shapes.
    With ``lazy_register`` the registry learns of the plugin at its first use.
    """
    split_id(plugin_id)

    def decorate(func: F) -> F:
        schema = parse_register(plugin_id, func)
        with _LOCK:
            if plugin_id in _DEFINITIONS:
                raise PluginDefinitionError(
                    f"@trtp.register({plugin_id!r}) for {func.__name__}: the plugin is already registered "
                    f"(by {_DEFINITIONS[plugin_id].register_func.__name__}); plugin ids are unique"
                )
            definition = PluginDef(schema, func)
            if not lazy_register:
                definition.ensure_creator()
            _DEFINITIONS[plugin_id] = definition
            setattr(op._namespace(schema.namespace), schema.name, definition)
        return func

    return decorate


def _attach(kind: str, plugin_id: str) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        definition = definition_of(plugin_id, f"@trtp.{kind}")
        attrs, takes_tactic = check_hook(kind, func, definition.schema)
        with _LOCK:
            if kind == "impl":
                definition.impl_func, definition.impl_attrs, definition.impl_takes_tactic = func, attrs, takes_tactic
            elif kind == "autotune":
                definition.autotune_func, definition.autotune_attrs = func, attrs
            else:
                definition.aot_func, definition.aot_attrs = func, attrs
        return func

    return decorate


def impl(plugin_id: str) -> Callable[[F], F]:
    """The JIT implementation: ``(inputs..., attrs..., outputs, stream[, tactic]) -> None``.

    Inputs and outputs are :class:`~plugrt.plugin.Tensor` s; ``stream`` is the stream
    handle (0 on the CPU). Only the attributes it takes are stored in the plan.
    """
    return _attach("impl", plugin_id)


def autotune(plugin_id: str) -> Callable[[F], F]:
    """The combinations to tune over: ``(inputs..., attrs..., outputs) -> List[AutoTuneCombination]``."""
    return _attach("autotune", plugin_id)


def aot_impl(plugin_id: str) -> Callable[[F], F]:
    """The AOT implementation: ``(inputs..., attrs..., outputs, tactic) ->
    (kernel_name, ptx, KernelLaunchParams, SymIntExprs)``, called at build."""
    return _attach("aot_impl", plugin_id)


def forget(plugin_id: str) -> None:
    """Remove a definition and its creator (for tests that define plugins again)."""
    with _LOCK:
        definition = _DEFINITIONS.pop(plugin_id, None)
        if definition is None:
            return
        if definition.creator is not None:
            get_plugin_registry().deregister_creator(definition.creator)
        namespace = vars(op).get(definition.schema.namespace)
        if isinstance(namespace, _Namespace):
            vars(namespace).pop(definition.schema.name, None)


def plugin_for_check(plugin_id: str, fields: PluginFieldCollection, inputs: list[tuple[int, DataType]]) -> QuickPlugin:
    """A build-phase plugin of ``plugin_id`` from typed fields, for inputs of these (rank, type) (``plugrt check``)."""
    creator = definition_of(plugin_id, "check_plugin").ensure_creator()
    plugin = creator.create_plugin(plugin_id, fields, TensorRTPhase.BUILD)
    plugin.inputs = list(inputs)
    return plugin
