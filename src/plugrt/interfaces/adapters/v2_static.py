"""Adapter for ``IPluginV2`` and ``IPluginV2Ext``: static shapes, implicit batch.

The first dimension of every input is the batch dimension. The plugin sees the
other dimensions (which must be the same in every profile) and gets the batch
size in ``execute_async``. One type and format is chosen for all inputs with
``supports_format``; outputs use the same format.
"""

from __future__ import annotations

from typing import Any

from ...core.dims import Dims
from ...core.errors import BuildError, TypeMismatchError
from ...core.layouts import SUPPORTED_FORMATS, format_min_rank
from ...core.types import DataType
from ...shape.builder import IExprBuilder, constant
from ...shape.expr import IDimensionExpr
from ..recorder import Phase
from ..v2 import IPluginV2, IPluginV2Ext
from .base import CANDIDATE_TYPES, BuildRequest, IOChoice, Port, check_status, checked_enqueue
from .v2_common import V2Common
from .v2_dynamic import _as_size, _as_type

__all__ = ["V2StaticAdapter"]


class V2StaticAdapter(V2Common):
    """Build: clone, get_output_data_type (V2Ext), get_output_shape, supports_format,
    configure_plugin (V2Ext) or configure_with_format (V2), get_workspace_size,
    initialize; then the V2 serialize/teardown order. Run: execute_async."""

    family = "v2_static"
    shape_hook = "get_output_shape"
    expected_class = IPluginV2
    required_hooks = ("clone", "get_output_shape", "execute_async")

    def output_types(self, input_types: list[DataType]) -> list[DataType]:
        caller = self._build()
        plugin = caller.plugin
        if not isinstance(plugin, IPluginV2Ext):
            return [input_types[0] if input_types else DataType.FLOAT] * plugin.num_outputs
        return [
            _as_type(caller, "get_output_data_type", caller(Phase.BUILD, "get_output_data_type", i, list(input_types)))
            for i in range(plugin.num_outputs)
        ]

    def _static_dims(self, request: BuildRequest) -> tuple[IDimensionExpr, list[Dims]]:
        caller = self._build()
        batch = constant(1)
        dims: list[Dims] = []
        for i, port in enumerate(request.inputs):
            if not port.shape:
                raise BuildError(
                    f"{caller.describe('get_output_shape')}: input {i} is 0-d; an IPluginV2 input needs a batch dimension"
                )
            if i == 0:
                batch = port.shape[0]
            elif any(
                r[0][0] != request.inputs[0].ranges[p][0][0] or r[2][0] != request.inputs[0].ranges[p][2][0]
                for p, r in enumerate(port.ranges)
            ):
                raise BuildError(
                    f"{caller.describe('get_output_shape')}: input {i} has a different batch range than input 0"
                )
            rest = port.shape[1:]
            dynamic = [k + 1 for k, d in enumerate(rest) if not d.is_constant()]
            if dynamic:
                raise BuildError(
                    f"{caller.describe('get_output_shape')}: input {i} has dynamic dimension(s) {dynamic}; an IPluginV2/"
                    "IPluginV2Ext plugin only allows a dynamic batch dimension (dim 0). Use IPluginV2DynamicExt for "
                    "dynamic shapes"
                )
            dims.append(Dims([d.get_constant_value() for d in rest]))
        return batch, dims

    def output_shapes(
        self, request: BuildRequest, shape_inputs: list[Port], eb: IExprBuilder
    ) -> list[list[IDimensionExpr]]:
        caller = self._build()
        batch, input_dims = self._static_dims(request)
        shapes = []
        for i in range(caller.plugin.num_outputs):
            result = caller(Phase.BUILD, "get_output_shape", i, [Dims(d) for d in input_dims])
            try:
                out = Dims(result)
            except Exception as exc:
                raise TypeMismatchError(
                    f"{caller.describe('get_output_shape')} returned {result!r}; expected Dims"
                ) from exc
            if not out.is_static():
                raise BuildError(f"{caller.describe('get_output_shape')} returned {out}; dims must be known (no -1)")
            shapes.append([batch] + [constant(d) for d in out])
        return shapes

    def choose_formats(
        self, request: BuildRequest, outputs: list[Port], preferred: list[IOChoice | None]
    ) -> list[IOChoice]:
        caller = self._build()
        ranks = [len(p.shape) for p in request.inputs + outputs]
        first = preferred[0] if request.inputs and preferred[0] is not None else (DataType.FLOAT, SUPPORTED_FORMATS[0])
        candidates = [first] + [(t, f) for f in SUPPORTED_FORMATS for t in CANDIDATE_TYPES if (t, f) != first]
        declared = [p.dtype for p in outputs]
        tried = []
        for dtype, fmt in candidates:
            if any(rank < format_min_rank(fmt) for rank in ranks):
                continue
            tried.append(f"{dtype.name}/{fmt.name}")
            if not caller(Phase.BUILD, "supports_format", dtype, fmt):
                continue
            options = [declared if isinstance(caller.plugin, IPluginV2Ext) else [dtype] * len(outputs)]
            if dtype == DataType.INT8 and isinstance(caller.plugin, IPluginV2Ext):
                # INT8 inputs: the outputs the plugin declares for INT8 inputs (TensorRT asks get_output_data_type)
                options.append(self.output_types([dtype] * len(request.inputs)))
            for out_types in options:
                if all(t == dtype or caller(Phase.BUILD, "supports_format", t, fmt) for t in out_types):
                    return [(dtype, fmt)] * len(request.inputs) + [(t, fmt) for t in out_types]
        raise BuildError(
            f"{caller.describe('supports_format')} accepted no type/format; tried {', '.join(tried[:12])}"
            + (f" and {len(tried) - 12} more" if len(tried) > 12 else "")
        )

    def configure(self, request: BuildRequest, outputs: list[Port], num_profiles: int) -> int:
        caller = self._build()
        _, input_dims = self._static_dims(request)
        output_dims = [Dims([d.get_constant_value() for d in p.shape[1:]]) for p in outputs]
        ports = request.inputs or outputs
        max_batch = max((port.ranges[p][2][0] for port in ports[:1] for p in range(num_profiles)), default=1)
        fmt = (request.inputs + outputs)[0].format if (request.inputs or outputs) else SUPPORTED_FORMATS[0]
        if isinstance(caller.plugin, IPluginV2Ext):
            caller(
                Phase.BUILD,
                "configure_plugin",
                input_dims,
                output_dims,
                [p.dtype for p in request.inputs],
                [p.dtype for p in outputs],
                [False] * len(input_dims),
                [False] * len(output_dims),
                fmt,
                max_batch,
            )
        else:
            dtype = request.inputs[0].dtype if request.inputs else DataType.FLOAT
            caller(Phase.BUILD, "configure_with_format", input_dims, output_dims, dtype, fmt, max_batch)
        workspace = _as_size(caller, "get_workspace_size", caller(Phase.BUILD, "get_workspace_size", max_batch))
        check_status(caller, "initialize", caller(Phase.BUILD, "initialize"))
        self._initialized = True
        return workspace

    def make_enqueue(self, plugin: Any) -> Any:
        execute = checked_enqueue(self.context_callers[id(plugin)], "execute_async")

        def run(
            in_descs: list[Any],
            out_descs: list[Any],
            inputs: list[int],
            outputs: list[int],
            workspace: int,
            stream: int,
        ) -> None:
            descs = in_descs or out_descs
            batch = descs[0].dims[0] if descs and len(descs[0].dims) else 1
            execute(batch, inputs, outputs, workspace, stream)

        return run
