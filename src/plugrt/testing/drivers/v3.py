"""Driver for IPluginV3: capability interfaces, fields as the serialized form, on_shape_change."""

from __future__ import annotations

from typing import Any

from ...core.dims import Dims
from ...core.types import DataType
from ...interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ...interfaces.field_codec import decode_fields, encode_fields
from ...interfaces.fields import PluginFieldCollection
from ...interfaces.v3 import IPluginV3, PluginCapabilityType, TensorRTPhase
from ...shape.builder import DimsExprs, IExprBuilder
from ...shape.expr import IDimensionExpr
from ..hooks import HookError, call, check_status
from .base import Combination, Driver, OutputRule, as_dims_exprs, resource_context
from .v2_dynamic import _dtype, _workspace

__all__ = ["V3Driver"]


def capability(plugin: Any, kind: PluginCapabilityType) -> Any:
    """``plugin.get_capability_interface(kind)``; None is an error."""
    found = call(plugin, "get_capability_interface", kind)
    if found is None:
        raise HookError("get_capability_interface", f"get_capability_interface({kind}) returned None")
    return found


class V3Driver(Driver):
    """Build: get_output_data_types, get_output_shapes, supports_format_combination,
    configure_plugin, get_workspace_size, get_valid_tactics. Serialize:
    get_fields_to_serialize. Run: create_plugin(RUNTIME), set_tactic,
    attach_to_context, on_shape_change, enqueue."""

    family = "IPluginV3"
    shape_hooks = ("get_output_data_types", "get_output_shapes")
    serializes_bytes = False
    has_initialize = False

    def identity(self, plugin: Any) -> tuple[str, str, str]:
        core = capability(plugin, PluginCapabilityType.CORE)
        return (
            getattr(core, "plugin_name", None),
            getattr(core, "plugin_version", None),
            getattr(core, "plugin_namespace", None),
        )  # type: ignore[return-value]

    def _expect(self, hook: str, value: Any, source: Any = None) -> Any:
        if not isinstance(value, IPluginV3):
            raise HookError(hook, f"{hook}() returned {type(value).__name__}; expected an IPluginV3")
        if source is not None and value is source:
            raise HookError(hook, f"{hook}() returned the plugin itself; it must return a new object (self.clone())")
        return value

    def create(self, creator: Any, name: str, fields: Any) -> Any:
        return self._expect("create_plugin", call(creator, "create_plugin", name, fields, TensorRTPhase.BUILD))

    def clone(self, plugin: Any) -> Any:
        return self._expect("clone", call(plugin, "clone"), plugin)

    def output_types(self, plugin: Any, input_types: list[DataType]) -> list[DataType]:
        build = capability(plugin, PluginCapabilityType.BUILD)
        result = call(build, "get_output_data_types", list(input_types))
        count = int(build.num_outputs)
        if not isinstance(result, (list, tuple)) or len(result) != count:
            raise HookError("get_output_data_types", f"get_output_data_types() returned {result!r}; expected {count}")
        return [_dtype("get_output_data_types", t) for t in result]

    def output_exprs(self, plugin: Any, inputs: list[list[IDimensionExpr]], builder: IExprBuilder) -> list[Any]:
        build = capability(plugin, PluginCapabilityType.BUILD)
        result = call(build, "get_output_shapes", [DimsExprs(d) for d in inputs], [], builder)
        count = int(build.num_outputs)
        if not isinstance(result, (list, tuple)) or len(result) != count:
            raise HookError("get_output_shapes", f"get_output_shapes() returned {result!r}; expected {count} DimsExprs")
        shapes = [as_dims_exprs("get_output_shapes", r) for r in result]
        for index in builder.declared_size_tensors:
            if not 0 <= index < count or shapes[index]:
                raise HookError("get_output_shapes", f"size tensor output {index} must exist and be 0-d")
        return shapes

    def supports(self, plugin: Any, pos: int, descs: list[Any], num_inputs: int) -> bool:
        build = capability(plugin, PluginCapabilityType.BUILD)
        return bool(call(build, "supports_format_combination", pos, descs, num_inputs))

    def question_desc(self, pos: int, choice: Any, rule: OutputRule) -> Any:
        desc = super().question_desc(pos, choice, rule)
        lo, mid, hi = self._ranges(rule)[pos]
        return DynamicPluginTensorDesc(desc, lo, hi, mid)

    def _ranges(self, rule: OutputRule) -> list[tuple[Dims, Dims, Dims]]:
        inputs = [(Dims(r.min), Dims(r.opt), Dims(r.max)) for r in self.ranges]
        return inputs + rule.ranges(self.profile_envs())

    def configure_build(self, plugin: Any, combo: Combination, rule: OutputRule) -> tuple[int, int]:
        build = capability(plugin, PluginCapabilityType.BUILD)
        descs = [self.question_desc(p, c, rule) for p, c in enumerate(combo.positions)]
        ins, outs = descs[: len(combo.inputs)], descs[len(combo.inputs) :]
        call(build, "configure_plugin", ins, outs)
        workspace = _workspace("get_workspace_size", call(build, "get_workspace_size", ins, outs))
        tactics = list(call(build, "get_valid_tactics") or [])
        if any(not isinstance(t, int) or t <= 0 for t in tactics):
            raise HookError("get_valid_tactics", f"get_valid_tactics() returned {tactics!r}; tactics are positive ints")
        return workspace, (tactics[0] if tactics else 0)

    def set_tactic(self, plugin: Any, tactic: int) -> None:
        call(capability(plugin, PluginCapabilityType.RUNTIME), "set_tactic", tactic)

    def attach(self, engine_plugin: Any) -> Any:
        runtime = capability(engine_plugin, PluginCapabilityType.RUNTIME)
        return self._expect("attach_to_context", call(runtime, "attach_to_context", resource_context()), engine_plugin)

    def detach(self, plugin: Any) -> None:
        self.destroy(plugin)

    def shape_change(
        self, plugin: Any, in_descs: list[PluginTensorDesc], out_descs: list[PluginTensorDesc], rule: OutputRule
    ) -> None:
        runtime = capability(plugin, PluginCapabilityType.RUNTIME)
        call(runtime, "on_shape_change", list(in_descs), list(out_descs))

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
        runtime = capability(plugin, PluginCapabilityType.RUNTIME)
        check_status("enqueue", call(runtime, "enqueue", in_descs, out_descs, inputs, outputs, workspace, stream))

    def fields(self, plugin: Any) -> PluginFieldCollection:
        """``get_fields_to_serialize()``, validated."""
        runtime = capability(plugin, PluginCapabilityType.RUNTIME)
        fields = call(runtime, "get_fields_to_serialize")
        if not isinstance(fields, PluginFieldCollection):
            raise HookError(
                "get_fields_to_serialize",
                f"get_fields_to_serialize() returned {type(fields).__name__}; expected a PluginFieldCollection",
            )
        return fields

    def payload(self, plugin: Any) -> bytes:
        return encode_fields(self.fields(plugin))

    def revive(self, creator: Any, name: str, payload: bytes) -> Any:
        fields = decode_fields(payload)
        try:
            plugin = call(creator, "create_plugin", name, fields, TensorRTPhase.RUNTIME)
        except HookError as exc:
            exc.owner = "serialization-roundtrip"
            raise
        if plugin is None:
            raise HookError(
                "create_plugin", "create_plugin(..., RUNTIME) returned None", owner="serialization-roundtrip"
            )
        if not isinstance(plugin, IPluginV3):
            raise HookError(
                "create_plugin",
                f"create_plugin(..., RUNTIME) returned {type(plugin).__name__}; expected an IPluginV3",
                owner="serialization-roundtrip",
            )
        return plugin
