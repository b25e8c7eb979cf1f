"""In-place outputs: a node's output that overwrites one of its inputs shares that input's memory.

The builder asks only with ``PreviewFeature.ALIASED_PLUGIN_IO_10_03`` on (``builder/layers.py``);
after fusion this pass gives each in-place output its input's memory, inserting copies where
the input must survive or the output is the caller's.
"""

from __future__ import annotations

from ..core.logger import Severity
from ..engine.plan import LayerPlan
from .state import BuildState

__all__ = ["resolve_in_place"]


def resolve_in_place(state: BuildState) -> None:
    """Give each in-place output its input's memory, copying the input first where it must survive.

    The input is copied (as TensorRT does) when anyone reads it after the plugin, when it
    is a network input (the caller's memory is never overwritten; logged) or a constant;
    an in-place output that is a network output is computed in the arena and copied out.
    """
    if not state.aliases:
        return
    layers: list[LayerPlan] = []
    for step, layer in enumerate(state.layers):
        aliases = state.aliases.get(id(layer), {})
        copies_after: list[LayerPlan] = []
        for out, inp in sorted(aliases.items()):
            source = layer.inputs[inp]
            read_later = any(
                source in later.inputs or source in later.shape_inputs for later in state.layers[step + 1 :]
            ) or [i for i, t in enumerate(layer.inputs) if t == source] != [inp] or source in layer.shape_inputs
            role = state.tensors[source].role
            if read_later or role in ("input", "constant", "output"):
                why = (
                    "it is a network input the caller owns"
                    if role == "input"
                    else "it is a constant"
                    if role == "constant"
                    else "it is read after the plugin"
                )
                state.logger.emit(
                    Severity.INFO if role == "input" else Severity.VERBOSE,
                    f"layer {layer.name!r} writes output {out} in place of input {inp} "
                    f"({state.tensors[source].name!r}); {why}, so the plugin gets a copy",
                )
                copy = _copy_of(state, source, f"{state.tensors[source].name} [copy for {layer.name}]")
                layers.append(LayerPlan(f"Copy {state.tensors[source].name} for {layer.name}", "identity", [source], [copy]))
                layer.inputs[inp] = source = copy
            target = layer.outputs[out]
            if state.tensors[target].role == "output":
                private = _copy_of(state, target, f"{state.tensors[target].name} [in place]")
                layer.outputs[out] = private
                copies_after.append(
                    LayerPlan(f"Copy {state.tensors[target].name} to the output", "identity", [private], [target])
                )
                target = private
            state.shares[target] = source
        layers.append(layer)
        layers.extend(copies_after)
    state.layers = layers

def _copy_of(state: BuildState, index: int, name: str) -> int:
    t = state.tensors[index]  # (after fusion renumbered the tensors; build-time values are no longer needed)
    return state.add_tensor(name, t.dtype, t.format, list(t.shape), "internal")

