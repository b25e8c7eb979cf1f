"""Driver for IPluginV2DynamicExt: expression shapes, per-position formats, reconfigure on shape change."""

from __future__ import annotations

from typing import Any

from ...core.dims import Dims
from ...core.types import DataType
from ...interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ...interfaces.v2 import IPluginV2DynamicExt
from ...shape.builder import DimsExprs, IExprBuilder
from ...shape.expr import IDimensionExpr
from ..hooks import HookError, call, check_status
from .base import Combination, OutputRule, as_dims_exprs
from .v2_common import V2CommonDriver

__all__ = ["V2DynamicDriver"]


def _workspace(hook: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HookError(hook, f"{hook}() returned {value!r}; expected a non-negative int")
    return value


def _dtype(hook: str, value: Any) -> DataType:
    if not isinstance(value, DataType):
        raise HookError(hook, f"{hook}() returned {value!r}; expected a DataType")
    return value


class V2DynamicDriver(V2CommonDriver):
    """Build: get_output_datatype, get_output_dimensions, supports_format_combination,
    configure_plugin (dims -1 plus min/opt/max), get_workspace_size, initialize.
    Run: clone, attach_to_context, configure_plugin with concrete dims, enqueue."""

    family = "IPluginV2DynamicExt"
    expected = IPluginV2DynamicExt
    shape_hooks = ("get_output_datatype", "get_output_dimensions")

    def output_types(self, plugin: Any, input_types: list[DataType]) -> list[DataType]:
        return [
            _dtype("get_output_datatype", call(plugin, "get_output_datatype", i, list(input_types)))
            for i in range(int(plugin.num_outputs))
        ]

    def output_exprs(self, plugin: Any, inputs: list[list[IDimensionExpr]], builder: IExprBuilder) -> list[Any]:
        return [
            as_dims_exprs(
                "get_output_dimensions",
                call(plugin, "get_output_dimensions", i, [DimsExprs(d) for d in inputs], builder),
            )
            for i in range(int(plugin.num_outputs))
        ]

    def supports(self, plugin: Any, pos: int, descs: list[Any], num_inputs: int) -> bool:
        return bool(call(plugin, "supports_format_combination", pos, descs, num_inputs))

    def _dynamic(self, combo: Combination, rule: OutputRule, concrete: list[Any] | None = None) -> tuple[list, list]:
        envs = self.profile_envs()
        in_ranges = [(Dims(r.min), Dims(r.max), Dims(r.opt)) for r in self.ranges]
        out_ranges = [(lo, hi, mid) for lo, mid, hi in rule.ranges(envs)]
        dims = self.input_build_dims() + rule.build_dims()
        descs = []
        for pos, (dtype, fmt) in enumerate(combo.positions):
            desc = concrete[pos] if concrete is not None else PluginTensorDesc(dims[pos], dtype, fmt, 1.0)
            lo, hi, mid = (in_ranges + out_ranges)[pos]
            descs.append(DynamicPluginTensorDesc(desc, lo, hi, mid))
        count = len(combo.inputs)
        return descs[:count], descs[count:]

    def configure_build(self, plugin: Any, combo: Combination, rule: OutputRule) -> tuple[int, int]:
        ins, outs = self._dynamic(combo, rule)
        call(plugin, "configure_plugin", ins, outs)
        maxima = [PluginTensorDesc(d.max, d.desc.type, d.desc.format, 1.0) for d in ins + outs]
        size = call(plugin, "get_workspace_size", maxima[: len(ins)], maxima[len(ins) :])
        return _workspace("get_workspace_size", size), 0

    def shape_change(
        self, plugin: Any, in_descs: list[PluginTensorDesc], out_descs: list[PluginTensorDesc], rule: OutputRule
    ) -> None:
        combo = Combination(tuple((d.type, d.format) for d in in_descs), tuple((d.type, d.format) for d in out_descs))
        ins, outs = self._dynamic(combo, rule, list(in_descs) + list(out_descs))
        call(plugin, "configure_plugin", ins, outs)

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
        status = call(plugin, "enqueue", in_descs, out_descs, inputs, outputs, workspace, stream)
        check_status("enqueue", status)
