"""Adapter for ``IPluginV2`` and ``IPluginV2Ext``: static shapes, implicit batch.

The first dimension of every input is the batch dimension. The plugin sees the
other dimensions (which must be the same in every profile) and gets the batch
size in ``execute_async``. One type and format is chosen for all inputs with
``supports_format``; outputs use the same format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.dims import Dims
from ...core.errors import BuildError, TypeMismatchError
from ...core.layouts import SUPPORTED_FORMATS, format_min_rank
from ...core.types import DataType, TensorFormat
from ...shape.builder import IExprBuilder, constant
from ...shape.expr import IDimensionExpr
from ..recorder import Phase, PluginCaller
from ..v2 import IPluginV2, IPluginV2Ext
from .base import CANDIDATE_TYPES, BuildRequest, IOChoice, Port
from .family import Descs
from .v2_common import V2Common
from .v2_dynamic import _as_size, _as_type

__all__ = ["V2StaticAdapter", "implicit_batch_problem"]


def implicit_batch_problem(inputs: list[Port]) -> str | None:
    """What breaks IPluginV2's implicit batch rule for these inputs, or None.

    Dim 0 of every input is the batch, with the same range in every input; the plugin
    sees the other dimensions, which must be build-time constants.
    """
    for i, port in enumerate(inputs):
        if not port.shape:
            return f"input {i} is 0-d; an IPluginV2 input needs a batch dimension (dim 0)"
        if i and any(
            r[0][0] != inputs[0].ranges[p][0][0] or r[2][0] != inputs[0].ranges[p][2][0]
            for p, r in enumerate(port.ranges)
        ):
            return f"input {i} has a different batch range than input 0"
        dynamic = [k + 1 for k, d in enumerate(port.shape[1:]) if not d.is_constant()]
        if dynamic:
            return (
                f"input {i} has dynamic dimension(s) {dynamic}; an IPluginV2/IPluginV2Ext plugin sees static dims: "
                "only dim 0 (the implicit batch) may vary. Use IPluginV2DynamicExt for dynamic shapes"
            )
    return None


class V2StaticAdapter(V2Common):
    """Build: clone, get_output_data_type (V2Ext), get_output_shape, supports_format,
    configure_plugin (V2Ext) or configure_with_format (V2), get_workspace_size,
    initialize; then the V2 serialize/teardown order. Run: execute_async."""

    family = "v2_static"
    shape_hook = "get_output_shape"
    type_hook = "get_output_data_type"
    format_hook = "supports_format"
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
        """The batch expression and the dims the plugin sees (without the batch)."""
        problem = implicit_batch_problem(request.inputs)
        if problem:
            raise self._build().fail("get_output_shape", f": {problem}", BuildError)
        batch = request.inputs[0].shape[0] if request.inputs else constant(1)
        return batch, [Dims([d.get_constant_value() for d in port.shape[1:]]) for port in request.inputs]

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
                raise caller.fail("get_output_shape", f" returned {result!r}; expected Dims", TypeMismatchError) from exc
            if not out.is_static():
                raise caller.fail("get_output_shape", f" returned {out}; dims must be known (no -1)", BuildError)
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
            if not self._supports(dtype, fmt):
                continue
            options = [declared if isinstance(caller.plugin, IPluginV2Ext) else [dtype] * len(outputs)]
            if dtype == DataType.INT8 and isinstance(caller.plugin, IPluginV2Ext):
                # INT8 inputs: the outputs the plugin declares for INT8 inputs (TensorRT asks get_output_data_type)
                options.append(self.output_types([dtype] * len(request.inputs)))
            for out_types in options:
                if all(t == dtype or self._supports(t, fmt) for t in out_types):
                    return [(dtype, fmt)] * len(request.inputs) + [(t, fmt) for t in out_types]
        raise caller.fail(
            "supports_format",
            f" accepted no type/format; tried {', '.join(tried[:12])}"
            + (f" and {len(tried) - 12} more" if len(tried) > 12 else ""),
            BuildError,
        )

    def _supports(self, dtype: DataType, fmt: TensorFormat) -> bool:
        caller = self._build()
        return bool(caller(Phase.BUILD, "supports_format", dtype, fmt))

    def format_question(self, pos: int, descs: list[Any], num_inputs: int) -> bool:
        """``supports_format`` sees one position's type and format."""
        return self._supports(descs[pos].type, descs[pos].format)

    def configure_build(self, request: BuildRequest, outputs: list[Port], num_profiles: int) -> int:
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
        return workspace

    def enqueue_hook(self, plugin: Any) -> tuple[PluginCaller, str]:
        return self.run_caller(plugin), "execute_async"

    def enqueue_args(
        self, inputs: Descs, outputs: Descs, in_addresses: Sequence[int], out_addresses: Sequence[int], workspace: int
    ) -> tuple[Any, ...]:
        """``execute_async(batch_size, inputs, outputs, workspace, stream)``: the batch is dim 0 of the first tensor."""
        descs = inputs or outputs
        batch = descs[0].dims[0] if descs and len(descs[0].dims) else 1
        return (batch, in_addresses, out_addresses, workspace)
