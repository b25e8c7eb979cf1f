"""The checker's plugin driver: the engine's adapters with the checker's error policy.

Every hook call goes through an adapter of ``interfaces/adapters`` (one per
interface family), as in the builder and the executor; the adapters' callers use
:data:`~plugrt.testing.hooks.CHECK_ERRORS`, so a failing hook becomes a
:class:`~plugrt.testing.hooks.HookError` for the check that owns it. What this
module adds is the checker's side: input ranges as the builder would show them
(constants where min == max, symbols elsewhere), the ports an adapter is asked
with, and the few questions checks ask of plugins that no engine asks (the same
format question twice, the answers of an unconfigured copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.dims import Dims
from ..core.types import DataType, TensorFormat
from ..interfaces.adapters import PluginAdapter, adapter_for_plugin
from ..interfaces.adapters.base import BuildRequest, IOChoice, Port
from ..interfaces.adapters.v2_static import V2StaticAdapter, implicit_batch_problem
from ..interfaces.recorder import Phase
from ..interfaces.v3 import TensorRTPhase
from ..shape.builder import IExprBuilder, constant, symbol
from ..shape.expr import IDimensionExpr
from .hooks import CHECK_ERRORS, HookError, call
from .spec import CheckUsageError, InputRange

__all__ = ["Combination", "OutputRule", "PluginDriver", "driver_for"]

Shapes = Sequence[Sequence[int]]

#: Family names as reports show them.
_FAMILY_NAMES = {"v2_static": "IPluginV2Ext", "v2_dynamic": "IPluginV2DynamicExt", "v3": "IPluginV3"}


@dataclass(frozen=True)
class Combination:
    """One (type, format) per input and per output."""

    inputs: tuple[IOChoice, ...]
    outputs: tuple[IOChoice, ...]

    @property
    def positions(self) -> tuple[IOChoice, ...]:
        """Inputs then outputs."""
        return self.inputs + self.outputs

    def __str__(self) -> str:
        def text(items: tuple[IOChoice, ...]) -> str:
            return ", ".join(f"{t.name}/{f.name}" for t, f in items)

        return f"inputs [{text(self.inputs)}] -> outputs [{text(self.outputs)}]"


@dataclass
class OutputRule:
    """Output types and shapes as the hooks declared them (expressions of input dims)."""

    types: list[DataType]
    exprs: list[list[IDimensionExpr]]
    size_tensors: dict[int, IDimensionExpr] = field(default_factory=dict)

    def upper_shapes(self, env: dict[str, int]) -> list[tuple[int, ...]]:
        """Buffer shapes: size tensors at their declared upper bound."""
        return [tuple(e.bounds(env, env)[1] for e in dims) for dims in self.exprs]

    def actual_shapes(self, env: dict[str, int]) -> list[tuple[int, ...]]:
        """Shapes once every size tensor's value is in ``env``."""
        return [tuple(e.evaluate(env) for e in dims) for dims in self.exprs]

    def ranges(self, envs: Sequence[dict[str, int]]) -> list[tuple[Dims, Dims, Dims]]:
        """(min, opt, max) of every output for the min/opt/max input environments."""
        result = []
        for dims in self.exprs:
            lo = Dims([max(e.bounds(envs[0], envs[0])[0], 0) for e in dims])
            mid = Dims([e.bounds(envs[1], envs[1])[1] for e in dims])
            hi = Dims([e.bounds(envs[2], envs[2])[1] for e in dims])
            result.append((lo, mid, hi))
        return result


class _OneCreator:
    """The registry a checker's adapter revives plugins from: the creator under test, registered or not."""

    def __init__(self, creator: Any) -> None:
        self.creator = creator

    def require_creator(self, name: str, version: str, namespace: str) -> Any:
        return self.creator


class PluginDriver:
    """Adapters of one plugin family, with the checker's input ranges and error policy."""

    def __init__(self, adapter: type[PluginAdapter], ranges: Sequence[InputRange], name: str = "check") -> None:
        self.adapter_class = adapter
        self.name = name
        self.ranges = list(ranges)
        self.family = _FAMILY_NAMES[adapter.family]
        self.format_hook = adapter.format_hook
        #: The hooks that describe shapes and types (must be pure).
        self.shape_hooks = (adapter.type_hook, adapter.shape_hook)
        #: IPluginV2 plugins serialize bytes and have initialize/terminate; IPluginV3 serialize fields.
        self.serializes_bytes = self.has_initialize = adapter.interface == "v2"
        self.input_exprs = [
            [constant(r.min[a]) if r.is_static(a) else symbol(f"input{i}[{a}]") for a in range(r.rank)]
            for i, r in enumerate(self.ranges)
        ]
        if adapter is V2StaticAdapter:
            problem = implicit_batch_problem(self.input_ports())
            if problem:
                raise CheckUsageError(f"{problem} (inputs {', '.join(str(r) for r in self.ranges)})")

    def adapter(self) -> PluginAdapter:
        """A new adapter (one per engine layer the checker simulates)."""
        return self.adapter_class(self.name, None, CHECK_ERRORS)

    # --- shapes ------------------------------------------------------------------
    def env(self, shapes: Shapes) -> dict[str, int]:
        """Symbol values for concrete input shapes."""
        values: dict[str, int] = {}
        for exprs, shape in zip(self.input_exprs, shapes):
            for expr, dim in zip(exprs, shape):
                if expr.symbol:
                    values[expr.symbol] = int(dim)
        return values

    def profile_envs(self) -> list[dict[str, int]]:
        """Environments of the profile's min, opt and max shapes."""
        return [self.env([getattr(r, k) for r in self.ranges]) for k in ("min", "opt", "max")]

    def input_ranges(self) -> list[tuple[Dims, Dims, Dims]]:
        """(min, opt, max) of every input."""
        return [(Dims(r.min), Dims(r.opt), Dims(r.max)) for r in self.ranges]

    def input_ports(
        self, choices: Sequence[IOChoice] = (), exprs: list[list[IDimensionExpr]] | None = None
    ) -> list[Port]:
        """The inputs as the builder gives them to an adapter."""
        ports = []
        for i, (shape, ranges) in enumerate(zip(exprs or self.input_exprs, self.input_ranges())):
            dtype, fmt = choices[i] if i < len(choices) else (DataType.FLOAT, TensorFormat.LINEAR)
            ports.append(Port(list(shape), [ranges], dtype, fmt))
        return ports

    def output_ports(self, rule: OutputRule, choices: Sequence[IOChoice] = ()) -> list[Port]:
        """The outputs as the builder gives them to an adapter (ranges from the profile's min/opt/max)."""
        ranges = rule.ranges(self.profile_envs())
        ports = []
        for k, (shape, dtype) in enumerate(zip(rule.exprs, rule.types)):
            choice = choices[k] if k < len(choices) else (dtype, TensorFormat.LINEAR)
            ports.append(Port(list(shape), [ranges[k]], *choice))
        return ports

    def request(self, combo: Combination | None = None) -> BuildRequest:
        """What the builder would know about the plugin layer: inputs in ``combo``'s types and formats."""
        return BuildRequest(self.name, self.input_ports(combo.inputs if combo else ()), time_tactics=False)

    def rule_with(
        self, adapter: PluginAdapter, input_types: Sequence[DataType], exprs: list[list[IDimensionExpr]] | None = None
    ) -> OutputRule:
        """Output types and shapes from ``adapter``'s build instance (symbolic input dims unless ``exprs``)."""
        types = adapter.output_types(list(input_types))
        builder = IExprBuilder("check")
        choices = [(t, TensorFormat.LINEAR) for t in input_types]
        request = BuildRequest(self.name, self.input_ports(choices, exprs))
        shapes = adapter.output_shapes(request, [], builder)
        return OutputRule(types, shapes, dict(builder.declared_size_tensors))

    def probe(self, plugin: Any) -> PluginAdapter:
        """An adapter whose build instance is ``plugin`` itself (to ask it build questions)."""
        adapter = self.adapter()
        adapter.use_build_instance(plugin)
        return adapter

    def rule(self, plugin: Any, input_types: Sequence[DataType], exprs: Any = None) -> OutputRule:
        """Ask ``plugin`` for output types and shapes."""
        return self.rule_with(self.probe(plugin), input_types, exprs)

    def output_types(self, plugin: Any, input_types: list[DataType]) -> list[DataType]:
        """``plugin``'s declared output types."""
        return self.probe(plugin).output_types(input_types)

    # --- formats -----------------------------------------------------------------
    def question_desc(self, pos: int, choice: IOChoice, rule: OutputRule) -> Any:
        """The descriptor shown at position ``pos`` during format questions."""
        ports = self.input_ports() + self.output_ports(rule)
        return self.adapter().format_desc(ports[pos], *choice)

    def supports(self, plugin: Any, pos: int, descs: list[Any], num_inputs: int) -> bool:
        """One format question."""
        return self.probe(plugin).format_question(pos, descs, num_inputs)

    def negotiate(self, plugin: Any, rule: OutputRule, input_types: Sequence[DataType]) -> Combination:
        """The first full combination ``plugin`` accepts, asked as the builder asks (inputs in ``input_types``)."""
        adapter = self.probe(plugin)
        choices = [(t, TensorFormat.LINEAR) for t in input_types]
        preferred: list[IOChoice | None] = [*choices, *((t, TensorFormat.LINEAR) for t in rule.types)]
        request = BuildRequest(self.name, self.input_ports(choices))
        chosen = adapter.choose_formats(request, self.output_ports(rule), preferred)
        count = len(self.ranges)
        return Combination(tuple(chosen[:count]), tuple(chosen[count:]))

    def ask_all(self, adapter: PluginAdapter, combo: Combination, rule: OutputRule) -> list[bool]:
        """The answer of ``adapter``'s build instance for every position of ``combo`` (all of them decided)."""
        descs = [self.question_desc(p, c, rule) for p, c in enumerate(combo.positions)]
        return [adapter.format_question(p, list(descs), len(combo.inputs)) for p in range(len(descs))]

    # --- plugin objects ------------------------------------------------------------
    def raw_identity(self, plugin: Any) -> tuple[Any, Any, Any]:
        """(name, version, namespace) as the plugin holds them, unchecked."""
        try:
            source = self.adapter_class.identity_source(plugin)
        except Exception as exc:
            raise HookError("get_capability_interface", f"get_capability_interface() raised {exc!r}") from exc
        return tuple(getattr(source, label, None) for label in self.adapter_class.identity_labels)  # type: ignore[return-value]

    def create(self, creator: Any, fields: Any) -> Any:
        """A new plugin from ``creator`` (for building), checked to be of this family."""
        args = (self.name, fields, TensorRTPhase.BUILD) if self.adapter_class.interface == "v3" else (self.name, fields)
        return checked_plugin(call(creator, "create_plugin", *args), self.adapter_class.expected_class)

    def clone(self, plugin: Any) -> Any:
        """``plugin.clone()``, checked."""
        adapter = self.adapter()
        return adapter.clone_of(adapter.caller(plugin), Phase.BUILD)

    def payload(self, plugin: Any) -> bytes:
        """What the plan would store for ``plugin``."""
        adapter = self.adapter()
        return adapter.serialized(adapter.caller(plugin))

    def declared_size(self, plugin: Any) -> int:
        """The serialization size an IPluginV2 plugin declares."""
        adapter = self.adapter()
        return adapter.declared_size(adapter.caller(plugin))[0]  # type: ignore[attr-defined,no-any-return]

    def destroy(self, plugin: Any) -> None:
        """Let ``plugin`` go (``destroy`` when its class defines one)."""
        if hasattr(plugin, "destroy"):
            self.adapter().caller(plugin)(Phase.TEARDOWN, "destroy")

    def revive(self, adapter: PluginAdapter, creator: Any, payload: bytes, tactic: int) -> Any:
        """The engine's plugin recreated through ``creator`` from ``payload`` (initialized, tactic set)."""
        name, version, namespace = adapter.identity_of_build
        return adapter.revive(name, version, namespace, payload, _OneCreator(creator), tactic)


def checked_plugin(plugin: Any, expected: type) -> Any:
    """``plugin`` as ``create_plugin`` returned it, if it is an ``expected``."""
    if not isinstance(plugin, expected):
        raise HookError(
            "create_plugin", f"create_plugin() returned {type(plugin).__name__}; expected an {expected.__name__}"
        )
    return plugin


def driver_for(plugin: Any, ranges: Sequence[InputRange], name: str = "check") -> PluginDriver:
    """The driver for ``plugin``'s family."""
    try:
        adapter = adapter_for_plugin(plugin, name, None)
    except Exception:
        raise CheckUsageError(
            f"{type(plugin).__name__} is not an IPluginV2, IPluginV2Ext, IPluginV2DynamicExt or IPluginV3 plugin"
        ) from None
    return PluginDriver(type(adapter), ranges, name)
