"""The build pass: network definition → :class:`~plugrt.engine.plan.EnginePlan`, in data-flow order.

Check the profiles and make the input tensors; walk the layers in topological
order, each through its node (``builder/layers.py``: type and shape rules,
formats with reformat layers where they differ, configuration, workspace);
mark the outputs (``builder/outputs.py``); fuse pairs of standard layers
(``builder/fusion.py``); time the operators' tactics (``builder/tactics.py``); store the tensors
between channels-last kernels channels-last (``builder/layouts.py``); give in-place outputs their inputs' memory
(``builder/in_place.py``) and reshapes their inputs' (``builder/views.py``); check every shape at each profile's min, opt and
max; finish the nodes (plugins serialize into records); plan activation memory
per profile (``builder/memory.py``).
"""

from __future__ import annotations

from ..backends.base import Backend
from ..core.dims import Dims
from ..core.errors import BuildError
from ..core.logger import ILogger, Severity
from ..core.types import TensorFormat
from ..engine.plan import EnginePlan
from ..engine.plan_format import PluginRecord
from ..network.definition import INetworkDefinition
from ..ops.heap import return_freed_memory
from ..shape.builder import constant, symbol
from .config import BuilderFlag, IBuilderConfig
from .control_flow import LoweredLayer, lower_control_flow
from .fusion import fuse_layers
from .graph import topological_layers
from .in_place import resolve_in_place
from .layers import add_layer
from .layouts import channels_last_layouts
from .memory import memory_plans
from .outputs import check_profile_shapes, mark_outputs
from .precision import check_flags
from .profiles import resolve_profiles
from .qdq import explicit_int8
from .state import BuildState
from .tactics import choose_tactics
from .views import share_views

__all__ = ["build_plan"]


def build_plan(
    network: INetworkDefinition,
    config: IBuilderConfig,
    logger: ILogger,
    backend: Backend | None = None,
    calibrated: dict[str, float] | None = None,
) -> EnginePlan:
    """Build ``network`` with ``config`` into an in-memory plan, timing plugin tactics on ``backend`` (None: CPU);
    ``calibrated`` maps tensor names to the amax the INT8 calibrator found (see :mod:`plugrt.builder.int8`)."""
    if network.num_outputs == 0:
        raise BuildError("the network has no outputs; mark at least one with network.mark_output(tensor)")
    state = BuildState(network, config, logger, backend, calibrated)
    check_flags(state)
    state.profiles, symbols = resolve_profiles(
        network._inputs, [config.get_optimization_profile(i) for i in range(config.num_optimization_profiles)]
    )
    for tensor in network._inputs:
        shape = [symbol(f"{tensor.name}[{k}]") if d < 0 else constant(d) for k, d in enumerate(tensor.shape)]
        state.index[id(tensor)] = state.add_tensor(tensor.name, tensor.dtype, TensorFormat.LINEAR, shape, "input")
        state.note_scale(state.index[id(tensor)], tensor)
    lowering = lower_control_flow(network)
    lowering.check(network)
    order = topological_layers(network, lowering.producers)
    state.explicit = explicit_int8(order, network._outputs, logger)
    order = [layer for layer in order if id(layer) not in state.explicit.skipped]
    monitor = config.progress_monitor
    if monitor is not None:
        monitor.phase_start("Building engine", None, len(order))
    try:
        for step, layer in enumerate(order):
            if isinstance(layer, LoweredLayer):
                layer.resolve(state)
            add_layer(state, layer)
            if monitor is not None and monitor.step_complete("Building engine", step) is False:
                raise BuildError(f"the build was cancelled by the progress monitor after layer {layer.name!r}")
        io = mark_outputs(state)
        state.layers, state.tensors, io, fused = fuse_layers(
            state.layers, state.tensors, io, state.weights, gpu=state.backend is not None and state.backend.gpu
        )
        for name in fused:
            logger.emit(Severity.VERBOSE, f"fused layers into {name!r}")
        choose_tactics(state)
        channels_last_layouts(state)
        resolve_in_place(state)
        views = share_views(state)
        if views:
            logger.emit(Severity.VERBOSE, f"{views} reshaping layers share their input's memory (no launch)")
        check_profile_shapes(state)
        plugins = _finish_nodes(state)
    except BaseException:
        for node in state.begun:
            node.abort_build()
        raise
    finally:
        if monitor is not None:
            monitor.phase_finish("Building engine")
    io_shapes = {
        state.tensors[i].name: Dims([d.get_constant_value() if d.is_constant() else -1 for d in state.tensors[i].shape])
        for i in io
    }
    plan = EnginePlan(
        network.name,
        state.tensors,
        io,
        state.layers,
        memory_plans(state),
        symbols,
        state.weights,
        plugins,
        io_shapes,
        config.get_flag(BuilderFlag.TF32),
    )
    return_freed_memory()  # what the build's passes freed (glibc's heap would keep it)
    return plan


def _finish_nodes(state: BuildState) -> list[PluginRecord]:
    """Finish every node in build order; a plugin's record goes into the plan, its index into the layer's params."""
    records: list[PluginRecord] = []
    for plan, node, request, outputs in state.pending:
        serialized = node.finish_build(request, outputs)
        if serialized is None:
            continue
        plan.params["plugin"] = len(records)
        plan.tactic = serialized.tactic
        records.append(
            PluginRecord(
                serialized.namespace, serialized.name, serialized.version, serialized.interface, serialized.payload
            )
        )
    return records
