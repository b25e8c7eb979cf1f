"""Adapter for ``IPluginV2DynamicExt`` plugins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.dims import Dims
from ...core.errors import BuildError, PluginError, TypeMismatchError
from ...core.types import DataType
from ...shape.builder import DimsExprs, IExprBuilder
from ...shape.expr import IDimensionExpr
from ..descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..recorder import Phase, PluginCaller
from ..v2 import IPluginV2DynamicExt
from .base import BuildRequest, IOChoice, Port
from .v2_common import V2Common

__all__ = ["V2DynamicAdapter"]


class V2DynamicAdapter(V2Common):
    """Build: clone, output types, output dimensions, incremental
    supports_format_combination, configure_plugin per profile, get_workspace_size,
    initialize; serialize: get_serialization_size, serialize, terminate, destroy.
    Run: deserialize_plugin, initialize; per context clone, attach_to_context,
    configure_plugin on shape change, enqueue; teardown detach/destroy (clone),
    terminate/destroy (engine's plugin)."""

    family = "v2_dynamic"
    shape_hook = "get_output_dimensions"
    type_hook = "get_output_datatype"

    def output_types(self, input_types: list[DataType]) -> list[DataType]:
        caller = self._build()
        plugin = caller.plugin
        return [
            _as_type(caller, "get_output_datatype", caller(Phase.BUILD, "get_output_datatype", i, list(input_types)))
            for i in range(plugin.num_outputs)
        ]

    def output_shapes(
        self, request: BuildRequest, shape_inputs: list[Port], eb: IExprBuilder
    ) -> list[list[IDimensionExpr]]:
        caller = self._build()
        inputs = [DimsExprs(port.shape) for port in request.inputs]
        shapes = []
        for i in range(caller.plugin.num_outputs):
            result = caller(Phase.BUILD, "get_output_dimensions", i, [DimsExprs(d) for d in inputs], eb)
            shapes.append(_as_shape(caller, "get_output_dimensions", result, i))
        return shapes

    def choose_formats(
        self, request: BuildRequest, outputs: list[Port], preferred: list[IOChoice | None]
    ) -> list[IOChoice]:
        return self._negotiate_formats(request, outputs, preferred)

    def configure_build(self, request: BuildRequest, outputs: list[Port], num_profiles: int) -> int:
        caller = self._build()
        workspace = 0
        for profile in range(num_profiles):
            caller(
                Phase.BUILD,
                "configure_plugin",
                [p.dynamic_desc(profile) for p in request.inputs],
                [p.dynamic_desc(profile) for p in outputs],
            )
        for profile in range(num_profiles):
            size = caller(
                Phase.BUILD,
                "get_workspace_size",
                [_max_desc(p, profile) for p in request.inputs],
                [_max_desc(p, profile) for p in outputs],
            )
            workspace = max(workspace, _as_size(caller, "get_workspace_size", size))
        return workspace

    def shape_change(
        self,
        plugin: Any,
        inputs: Sequence[PluginTensorDesc],
        outputs: Sequence[PluginTensorDesc],
        input_ranges: Sequence[tuple[Dims, Dims, Dims]],
        output_ranges: Sequence[tuple[Dims, Dims, Dims]],
    ) -> None:
        """``configure_plugin`` when the shapes (or the profile's ranges) differ from the last ones the plugin was
        told: TensorRT configures an IPluginV2DynamicExt after ``set_input_shape`` or a profile change, not
        when only tensor addresses moved (IPluginV3's ``on_shape_change`` is called then too)."""
        told = (
            [(tuple(d.dims), d.type, d.format, d.scale) for d in (*inputs, *outputs)],
            [tuple(tuple(dims) for dims in r) for r in (*input_ranges, *output_ranges)],
        )
        if self.told.get(id(plugin)) == told:
            return
        caller = self.run_caller(plugin)
        caller(
            Phase.SHAPE_CHANGE,
            "configure_plugin",
            [DynamicPluginTensorDesc(d, r[0], r[2], r[1]) for d, r in zip(inputs, input_ranges)],
            [DynamicPluginTensorDesc(d, r[0], r[2], r[1]) for d, r in zip(outputs, output_ranges)],
        )
        self.told[id(plugin)] = told

    def enqueue_hook(self, plugin: Any) -> tuple[PluginCaller, str]:
        return self.run_caller(plugin), "enqueue"

    expected_class = IPluginV2DynamicExt
    required_hooks = ("clone", "get_output_dimensions", "supports_format_combination", "enqueue")


def _max_desc(port: Port, profile: int) -> PluginTensorDesc:
    return PluginTensorDesc(Dims(port.ranges[profile][2]), port.dtype, port.format, port.scale)


def _as_type(caller: Any, method: str, value: Any) -> DataType:
    if not isinstance(value, DataType):
        raise caller.fail(method, f" returned {value!r}; expected a DataType", TypeMismatchError)
    return value


def _as_size(caller: Any, method: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise caller.fail(method, f" returned {value!r}; expected a non-negative int", PluginError)
    return value


def _as_shape(caller: Any, hook: str, value: Any, output: int) -> list[IDimensionExpr]:
    """``value``, the shape ``hook`` gave for ``output``, as a complete DimsExprs."""
    if not isinstance(value, DimsExprs):
        if isinstance(value, (list, tuple)) and all(isinstance(v, IDimensionExpr) for v in value):
            value = DimsExprs(value)
        else:
            raise caller.fail(
                hook, f" returned {type(value).__name__} for output {output}; expected DimsExprs", TypeMismatchError
            )
    unset = value.unset_positions()
    if unset:
        raise caller.fail(hook, f" left dimension(s) {unset} of output {output}'s DimsExprs unset", BuildError)
    return list(value)
