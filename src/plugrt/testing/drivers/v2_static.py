"""Driver for IPluginV2 / IPluginV2Ext: static dims, implicit batch (dim 0 of every input).

The plugin sees input dims without the batch, gets one type and format for all
inputs through ``supports_format``, is configured once at build time and gets the
batch size in ``execute_async``. The runtime plugin is never configured again:
what ``configure_plugin`` told it must travel through ``serialize``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.dims import Dims
from ...core.layouts import SUPPORTED_FORMATS, format_min_rank
from ...core.types import DataType, TensorFormat
from ...interfaces.adapters.base import CANDIDATE_TYPES
from ...interfaces.descriptors import PluginTensorDesc
from ...interfaces.v2 import IPluginV2, IPluginV2Ext
from ...shape.builder import IExprBuilder, constant
from ...shape.expr import IDimensionExpr
from ..hooks import HookError, call, check_status
from ..spec import CheckUsageError, InputRange
from .base import Combination, OutputRule
from .v2_common import V2CommonDriver
from .v2_dynamic import _dtype, _workspace

__all__ = ["V2StaticDriver"]


class V2StaticDriver(V2CommonDriver):
    """Build: get_output_data_type, get_output_shape, supports_format, configure_plugin
    (or configure_with_format), get_workspace_size(max_batch), initialize. Run: execute_async."""

    family = "IPluginV2Ext"
    expected = IPluginV2
    format_hook = "supports_format"
    shape_hooks = ("get_output_data_type", "get_output_shape")

    def __init__(self, ranges: Sequence[InputRange]) -> None:
        for i, r in enumerate(ranges):
            if r.rank == 0:
                raise CheckUsageError(f"input {i}: an IPluginV2/IPluginV2Ext input needs a batch dimension (dim 0)")
            if r.min[1:] != r.max[1:]:
                raise CheckUsageError(
                    f"input {i} ({r}): an IPluginV2/IPluginV2Ext plugin sees static dims; only dim 0 "
                    "(the implicit batch) may vary between min and max"
                )
        super().__init__(ranges)

    def static_dims(self) -> list[Dims]:
        """Input dims without the batch, as the plugin sees them."""
        return [Dims(r.min[1:]) for r in self.ranges]

    def max_batch(self) -> int:
        """The largest batch of the profile."""
        return self.ranges[0].max[0] if self.ranges else 1

    def output_types(self, plugin: Any, input_types: list[DataType]) -> list[DataType]:
        count = int(plugin.num_outputs)
        if not isinstance(plugin, IPluginV2Ext):
            return [input_types[0] if input_types else DataType.FLOAT] * count
        return [
            _dtype("get_output_data_type", call(plugin, "get_output_data_type", i, list(input_types)))
            for i in range(count)
        ]

    def output_exprs(self, plugin: Any, inputs: list[list[IDimensionExpr]], builder: IExprBuilder) -> list[Any]:
        batch = inputs[0][0] if inputs and inputs[0] else constant(1)
        static = [Dims([d.get_constant_value() for d in dims[1:]]) for dims in inputs]
        shapes = []
        for i in range(int(plugin.num_outputs)):
            result = call(plugin, "get_output_shape", i, [Dims(d) for d in static])
            try:
                dims = Dims(result)
            except Exception:
                raise HookError("get_output_shape", f"get_output_shape() returned {result!r}; expected Dims") from None
            if not dims.is_static():
                raise HookError("get_output_shape", f"get_output_shape() returned {dims}; every dim must be known")
            shapes.append([batch] + [constant(d) for d in dims])
        return shapes

    def supports(self, plugin: Any, pos: int, descs: list[Any], num_inputs: int) -> bool:
        return bool(call(plugin, "supports_format", descs[pos].type, descs[pos].format))

    def negotiate(self, plugin: Any, rule: OutputRule, input_types: Sequence[DataType]) -> Combination:
        ranks = [r.rank for r in self.ranges] + [len(e) for e in rule.exprs]
        first = (input_types[0] if input_types else DataType.FLOAT, TensorFormat.LINEAR)
        candidates = [first] + [(t, f) for f in SUPPORTED_FORMATS for t in CANDIDATE_TYPES if (t, f) != first]
        tried = []
        for dtype, fmt in candidates:
            if any(rank < format_min_rank(fmt) for rank in ranks):
                continue
            tried.append(f"{dtype.name}/{fmt.name}")
            if not call(plugin, "supports_format", dtype, fmt):
                continue
            out_types = rule.types if isinstance(plugin, IPluginV2Ext) else [dtype] * len(rule.types)
            if all(t == dtype or call(plugin, "supports_format", t, fmt) for t in out_types):
                return Combination(((dtype, fmt),) * len(self.ranges), tuple((t, fmt) for t in out_types))
        raise HookError("supports_format", f"supports_format accepted no type/format; tried {', '.join(tried[:12])}")

    def configure_build(self, plugin: Any, combo: Combination, rule: OutputRule) -> tuple[int, int]:
        input_dims = self.static_dims()
        output_dims = [Dims(d[1:]) for d in rule.build_dims()]
        fmt = combo.positions[0][1] if combo.positions else TensorFormat.LINEAR
        if isinstance(plugin, IPluginV2Ext):
            call(
                plugin,
                "configure_plugin",
                input_dims,
                output_dims,
                [t for t, _ in combo.inputs],
                [t for t, _ in combo.outputs],
                [False] * len(input_dims),
                [False] * len(output_dims),
                fmt,
                self.max_batch(),
            )
        else:
            dtype = combo.inputs[0][0] if combo.inputs else DataType.FLOAT
            call(plugin, "configure_with_format", input_dims, output_dims, dtype, fmt, self.max_batch())
        return _workspace("get_workspace_size", call(plugin, "get_workspace_size", self.max_batch())), 0

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
        descs = in_descs or out_descs
        batch = descs[0].dims[0] if descs and len(descs[0].dims) else 1
        status = call(plugin, "execute_async", batch, inputs, outputs, workspace, stream)
        check_status("execute_async", status)
