"""The one layer path: every layer of the network, standard or plugin, built through its node.

A layer becomes a node (:mod:`plugrt.nodes`): its operator, in its INT8 form where
it has one (``builder/int8.py``), or a :class:`~plugrt.interfaces.adapters.PluginNode`.
Then, in TensorRT's order: the inputs the node reads in fixed formats are converted;
the node's type and shape rules run (size tensors get their opt values; what the rules
could not decide is checked at every profile's min, opt and max); the formats are
chosen and the inputs converted to them; in-place outputs are asked for; the node is
configured (workspace); the outputs become engine tensors and the layer a plan record.
"""

from __future__ import annotations

import numpy as np

from ..core.enums import PreviewFeature
from ..core.errors import BuildError, PlugrtError
from ..core.logger import Severity
from ..core.types import DataType, TensorFormat
from ..engine.plan import LayerPlan
from ..interfaces.adapters import PluginNode
from ..network.layer import ILayer, IPluginV2Layer, IPluginV3Layer
from ..nodes.base import InferredShapes, Node
from ..nodes.ports import BuildRequest, IOChoice, Port
from ..nodes.shape_checks import check_at_points, profile_points
from .config import BuilderFlag, MemoryPoolType
from .int8 import int8_form, tensor_scale
from .precision import layer_precision, output_constraints, reduced_reads
from .state import BuildState

__all__ = ["add_layer"]


def add_layer(state: BuildState, layer: ILayer) -> None:
    """Build ``layer`` into ``state``: its outputs become tensors, the layer a plan record."""
    node, sources, reads, out_scale = _node_for(state, layer)
    declared_reads, precision = reads, None
    if reads is not None:  # an operator: it may compute in a reduced float type (builder/precision.py)
        precision = layer_precision(state, layer, node.kind, reads, sources)
        reads = reduced_reads(reads, precision)
    inputs = list(sources)
    if reads is not None:  # a node with fixed input formats sees the types it reads
        inputs = [state.converted(s, dtype, fmt, layer.name) for s, (dtype, fmt) in zip(sources, reads)]
    shape_inputs = [state.input_index(layer, i, t) for i, t in enumerate(getattr(layer, "shape_inputs", []))]
    request = BuildRequest(
        layer.name,
        [state.port(i) for i in inputs],
        fp16=state.config.get_flag(BuilderFlag.FP16),
        int8=state.config.get_flag(BuilderFlag.INT8),
        workspace_limit=state.config.get_memory_pool_limit(MemoryPoolType.WORKSPACE),
        extra={"timing_cache": state.timing_cache},
        backend=state.backend,
    )
    node.begin_build(request)
    state.begun.append(node)
    # a negotiating node's type rule sees the declared types; negotiation starts from the stored ones
    in_types = [t for t, _ in reads] if reads is not None else [state.declared(i) for i in inputs]
    types, inferred = _rules(node, layer.name, in_types, request, [state.port(i) for i in shape_inputs])
    for expr in inferred.sizes.values():
        for profile in state.profiles:
            profile.opt[expr.symbol] = expr.size_bounds[0].evaluate(profile.opt)
    check_at_points(inferred.checks, profile_points(state.profiles))
    outputs = [
        Port(s, [state.ranges(s, p) for p in range(len(state.profiles))], t, scale=_output_scale(state, layer, k))
        for k, (s, t) in enumerate(zip(inferred.shapes, types))
    ]
    preferred: list[IOChoice | None] = [(p.dtype, p.format) for p in request.inputs]
    preferred += [(t, TensorFormat.LINEAR) for t in types]
    choices = node.choose_formats(request, outputs, preferred)
    for i, (dtype, fmt) in enumerate(choices[: len(inputs)]):
        inputs[i] = state.converted(inputs[i], dtype, fmt, layer.name)
        request.inputs[i].dtype, request.inputs[i].format = dtype, fmt
        request.inputs[i].scale = state.scales.get(inputs[i], 1.0)
    for port, (dtype, fmt) in zip(outputs, choices[len(inputs) :]):
        port.dtype, port.format = dtype, fmt
    aliases = _in_place_outputs(state, layer.name, node, request, outputs)
    workspace = node.configure(request, outputs, len(state.profiles))
    if workspace > request.workspace_limit:
        raise BuildError(
            f"layer {layer.name!r} needs {workspace} bytes of workspace but MemoryPoolType.WORKSPACE is limited to "
            f"{request.workspace_limit}; raise it with config.set_memory_pool_limit"
        )
    # a layer computed only from constants is constant too: it runs once per context, not per inference
    # (when its node is pure; data-dependent sizes are left to the run)
    derived = node.pure and bool(inputs) and all(state.tensors[i].role == "constant" for i in inputs)
    role = "constant" if node.is_constant or (derived and not inferred.sizes) else "internal"
    if out_scale is not None:
        declared = [DataType.FLOAT]  # a requantized INT8 output is FLOAT outside
    elif precision is not None and declared_reads is not None:
        declared = node.output_types([t for t, _ in declared_reads])  # consumers see the network's types
    else:
        declared = types
    out_index = state.bind_outputs(
        layer, [p.dtype for p in outputs], [p.format for p in outputs], inferred.shapes, inferred.values, role, declared
    )
    for index, port in zip(out_index, outputs):
        if port.dtype == DataType.INT8 and index not in state.scales:
            state.scales[index] = port.scale
    plan = LayerPlan(
        layer.name,
        node.kind,
        inputs,
        out_index,
        params=dict(node.params),
        weights=_store_weights(state, node.weights),
        workspace=workspace,
        shape_inputs=shape_inputs,
        size_outputs={i: e.symbol for i, e in inferred.sizes.items()},
    )
    state.layers.append(plan)
    state.pending.append((plan, node, request, outputs))
    if reads is not None:
        _constrain_outputs(state, layer, out_index)
    if aliases:
        state.aliases[id(plan)] = aliases


def _constrain_outputs(state: BuildState, layer: ILayer, out_index: list[int]) -> None:
    """Convert outputs whose type ``set_output_type`` constrains (builder/precision.py) after the layer."""
    stored = [state.tensors[i].dtype for i in out_index]
    for position, dtype in enumerate(output_constraints(state, layer, stored)):
        if dtype != stored[position]:
            index = out_index[position]
            converted = state.converted(index, dtype, TensorFormat.LINEAR, layer.name)
            state.declared_types[converted] = state.declared(index)
            state.index[id(layer.get_output(position))] = converted


def _node_for(state: BuildState, layer: ILayer) -> tuple[Node, list[int], list[IOChoice] | None, float | None]:
    """(node, input tensors, the formats it reads them in when fixed, INT8 output scale) for ``layer``."""
    if isinstance(layer, (IPluginV2Layer, IPluginV3Layer)):
        node: Node = PluginNode.for_network(layer.plugin, layer.name, state.logger)
        sources = [state.input_index(layer, i, t) for i, t in enumerate(layer._inputs)]
        return node, sources, None, None
    op = layer.to_operator()
    op.name = layer.name
    op, tensors = state.explicit.form(layer, op)
    sources = [state.input_index(layer, i, t) for i, t in enumerate(tensors)]
    op, int8_inputs, out_scale = int8_form(state, layer, op, sources)
    reads = op.reads([state.declared(s) if op.reads_data else state.tensors[s].dtype for s in sources]) or []
    reads = [(DataType.INT8, fmt) if i in int8_inputs else (dtype, fmt) for i, (dtype, fmt) in enumerate(reads)]
    return op, sources, reads, out_scale


def _rules(
    node: Node, name: str, in_types: list[DataType], request: BuildRequest, shape_inputs: list[Port]
) -> tuple[list[DataType], InferredShapes]:
    try:
        types = node.output_types(in_types)
        inferred = node.infer_shapes(request, shape_inputs)
    except PlugrtError:
        raise
    except Exception as exc:
        raise BuildError(f"layer {name!r} ({node.kind}): {type(exc).__name__}: {exc}") from exc
    return types, inferred


def _store_weights(state: BuildState, weights: dict[str, np.ndarray]) -> dict[str, str]:
    """The plan's keys of a layer's weights (stored contiguous, once per layer)."""
    keys = {}
    for name, array in weights.items():
        key = f"{len(state.layers)}/{name}"
        state.weights[key] = np.ascontiguousarray(array)
        keys[name] = key
    return keys


def _output_scale(state: BuildState, layer: ILayer, position: int) -> float:
    """The INT8 scale of output ``position`` (1 when unknown)."""
    scale = tensor_scale(layer.get_output(position), state.calibrated)
    return 1.0 if scale is None else scale


def _in_place_outputs(
    state: BuildState, layer: str, node: Node, request: BuildRequest, outputs: list[Port]
) -> dict[int, int]:
    """The node's in-place outputs, honoured with PreviewFeature.ALIASED_PLUGIN_IO_10_03 on (as in TensorRT)."""
    if not state.config.get_preview_feature(PreviewFeature.ALIASED_PLUGIN_IO_10_03):
        if node.offers_aliasing():
            state.logger.emit(
                Severity.WARNING,
                f"layer {layer!r}: the plugin declares in-place outputs (get_aliased_input) but "
                "PreviewFeature.ALIASED_PLUGIN_IO_10_03 is off, so every output gets its own buffer and the "
                "plugin is not asked; turn it on with config.set_preview_feature(trt.PreviewFeature."
                "ALIASED_PLUGIN_IO_10_03, True)",
            )
        return {}
    aliases = node.aliased_inputs(request, outputs)
    for out, inp in aliases.items():
        source, target = request.inputs[inp], outputs[out]
        if (source.dtype, source.format) != (target.dtype, target.format) or source.ranges != target.ranges:
            raise BuildError(
                f"layer {layer!r}: output {out} aliases input {inp}, so both need one type, format and shape; "
                f"input {inp} is {source.dtype.name}/{source.format.name} with (min, opt, max) {source.ranges}, "
                f"output {out} is {target.dtype.name}/{target.format.name} with {target.ranges}"
            )
    return aliases


