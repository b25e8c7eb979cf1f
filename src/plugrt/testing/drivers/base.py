"""The driver interface: one object per plugin family calls the hooks in TensorRT's order.

The checker owns the buffers and never builds an engine: a driver turns
"configure for this profile", "run these buffers", "serialize" into the hook
calls of its family (IPluginV2/V2Ext, IPluginV2DynamicExt or IPluginV3).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...backends.registry import DEFAULT_DEVICE
from ...core.dims import Dims
from ...core.errors import FormatNegotiationError
from ...core.types import DataType, TensorFormat
from ...interfaces.adapters.base import candidate_list, negotiate_combination
from ...interfaces.descriptors import PluginTensorDesc
from ...interfaces.v3 import IPluginResourceContext
from ...shape.builder import DimsExprs, IExprBuilder, constant, symbol
from ...shape.expr import IDimensionExpr
from ..hooks import HookError
from ..spec import InputRange

__all__ = ["Combination", "Driver", "OutputRule", "as_dims_exprs", "resource_context"]

IOChoice = tuple[DataType, TensorFormat]
Shapes = Sequence[Sequence[int]]


def resource_context() -> IPluginResourceContext:
    """What ``attach_to_context`` receives from the checker (the CPU backend)."""
    return IPluginResourceContext(DEFAULT_DEVICE)


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

    def build_dims(self) -> list[Dims]:
        """Output dims as the builder shows them: -1 where not a constant."""
        return [Dims([e.get_constant_value() if e.is_constant() else -1 for e in dims]) for dims in self.exprs]


def as_dims_exprs(hook: str, value: Any) -> list[IDimensionExpr]:
    """Validate a shape hook's answer: a DimsExprs (or list of expressions) with every entry set."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, IDimensionExpr) for v in value):
        value = DimsExprs(value)
    if not isinstance(value, DimsExprs):
        raise HookError(hook, f"{hook}() returned {type(value).__name__}; expected a DimsExprs")
    unset = value.unset_positions()
    if unset:
        raise HookError(hook, f"{hook}() left dimension(s) {unset} of its DimsExprs unset")
    return list(value)


class Driver(ABC):
    """Calls one plugin family's hooks. Subclasses implement the family-specific hooks."""

    family: ClassVar[str] = ""
    #: The hook answering format questions ("supports_format_combination" or "supports_format").
    format_hook: ClassVar[str] = "supports_format_combination"
    #: The hooks that describe shapes and types (must be pure).
    shape_hooks: ClassVar[tuple[str, ...]] = ()
    serializes_bytes: ClassVar[bool] = True
    has_initialize: ClassVar[bool] = True

    def __init__(self, ranges: Sequence[InputRange]) -> None:
        self.ranges = list(ranges)
        self.input_exprs = self.make_input_exprs()

    # --- shapes ------------------------------------------------------------------
    def make_input_exprs(self) -> list[list[IDimensionExpr]]:
        """Input dims as the builder shows them: constants where min == max, symbols elsewhere."""
        return [
            [constant(r.min[a]) if r.is_static(a) else symbol(f"input{i}[{a}]") for a in range(r.rank)]
            for i, r in enumerate(self.ranges)
        ]

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

    def input_build_dims(self) -> list[Dims]:
        """Input dims with -1 for dynamic dimensions."""
        return [Dims([r.min[a] if r.is_static(a) else -1 for a in range(r.rank)]) for r in self.ranges]

    def rule(self, plugin: Any, input_types: Sequence[DataType], exprs: Any = None) -> OutputRule:
        """Ask the plugin for output types and shapes (symbolic input dims unless ``exprs``)."""
        types = self.output_types(plugin, list(input_types))
        builder = IExprBuilder("check")
        shapes = self.output_exprs(plugin, self.input_exprs if exprs is None else exprs, builder)
        return OutputRule(types, shapes, dict(builder.declared_size_tensors))

    # --- formats -----------------------------------------------------------------
    def question_desc(self, pos: int, choice: IOChoice, rule: OutputRule) -> Any:
        """The descriptor shown at position ``pos`` during format questions."""
        dims = (self.input_build_dims() + rule.build_dims())[pos]
        return PluginTensorDesc(dims, choice[0], choice[1], 1.0)

    def negotiate(self, plugin: Any, rule: OutputRule, input_types: Sequence[DataType]) -> Combination:
        """The first full combination the plugin accepts, asking position by position."""
        count = len(self.ranges)
        preferred: list[IOChoice] = [(t, TensorFormat.LINEAR) for t in input_types]
        preferred += [(t, TensorFormat.LINEAR) for t in rule.types]
        ranks = [r.rank for r in self.ranges] + [len(e) for e in rule.exprs]
        candidates = [candidate_list(p, rank, False) for p, rank in zip(preferred, ranks)]
        try:
            chosen = negotiate_combination(
                lambda pos, descs, n: self.supports(plugin, pos, descs, n),
                candidates,
                lambda pos, choice: self.question_desc(pos, choice, rule),
                count,
                f"{type(plugin).__name__}",
            )
        except FormatNegotiationError as exc:
            raise HookError(self.format_hook, str(exc)) from None
        return Combination(tuple(chosen[:count]), tuple(chosen[count:]))

    def ask_all(self, plugin: Any, combo: Combination, rule: OutputRule) -> list[bool]:
        """The answer for every position of ``combo`` (earlier positions decided, later ones too)."""
        descs = [self.question_desc(p, c, rule) for p, c in enumerate(combo.positions)]
        return [self.supports(plugin, p, list(descs), len(combo.inputs)) for p in range(len(descs))]

    # --- hooks every family implements --------------------------------------------
    @abstractmethod
    def identity(self, plugin: Any) -> tuple[str, str, str]:
        """(name, version, namespace) as the plugin reports them."""
        raise NotImplementedError

    @abstractmethod
    def create(self, creator: Any, name: str, fields: Any) -> Any:
        """A new plugin from the creator (for building)."""
        raise NotImplementedError

    @abstractmethod
    def clone(self, plugin: Any) -> Any:
        """``plugin.clone()``, validated."""
        raise NotImplementedError

    @abstractmethod
    def output_types(self, plugin: Any, input_types: list[DataType]) -> list[DataType]:
        """Declared output types."""
        raise NotImplementedError

    @abstractmethod
    def output_exprs(self, plugin: Any, inputs: list[list[IDimensionExpr]], builder: IExprBuilder) -> list[Any]:
        """Declared output shapes."""
        raise NotImplementedError

    @abstractmethod
    def supports(self, plugin: Any, pos: int, descs: list[Any], num_inputs: int) -> bool:
        """One format question."""
        raise NotImplementedError

    @abstractmethod
    def configure_build(self, plugin: Any, combo: Combination, rule: OutputRule) -> tuple[int, int]:
        """Build-time configuration; returns (workspace bytes, tactic)."""
        raise NotImplementedError

    def initialize(self, plugin: Any) -> None:
        """Acquire resources (V2 families)."""

    def terminate(self, plugin: Any) -> None:
        """Release what initialize acquired (V2 families)."""

    def set_tactic(self, plugin: Any, tactic: int) -> None:
        """Tell a runtime plugin its tactic (V3)."""

    def destroy(self, plugin: Any) -> None:
        """Let the plugin go (``destroy`` when the class defines one)."""
        if hasattr(plugin, "destroy"):
            from ..hooks import call

            call(plugin, "destroy")

    @abstractmethod
    def attach(self, engine_plugin: Any) -> Any:
        """The plugin an execution context uses (a clone, attached)."""
        raise NotImplementedError

    @abstractmethod
    def detach(self, plugin: Any) -> None:
        """Release a context's plugin."""
        raise NotImplementedError

    def shape_change(
        self, plugin: Any, in_descs: list[PluginTensorDesc], out_descs: list[PluginTensorDesc], rule: OutputRule
    ) -> None:
        """Tell a context's plugin about new concrete shapes."""

    @abstractmethod
    def enqueue(
        self,
        plugin: Any,
        in_descs: list[PluginTensorDesc],
        out_descs: list[PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> None:
        """Run the plugin on buffer addresses."""
        raise NotImplementedError

    @abstractmethod
    def payload(self, plugin: Any) -> bytes:
        """What the plan would store for this plugin."""
        raise NotImplementedError

    def declared_size(self, plugin: Any) -> int | None:
        """The serialization size the plugin declares (None when the family has none)."""
        return None

    @abstractmethod
    def revive(self, creator: Any, name: str, payload: bytes) -> Any:
        """The runtime plugin recreated from a payload (not initialized yet)."""
        raise NotImplementedError
