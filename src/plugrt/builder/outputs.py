"""The engine's outputs, and every tensor's shape checked at each profile's min, opt and max."""

from __future__ import annotations

from ..core.errors import BuildError, ShapeError
from ..core.types import TensorFormat
from ..engine.plan import LayerPlan
from .state import BuildState

__all__ = ["check_profile_shapes", "mark_outputs"]


def mark_outputs(state: BuildState) -> list[int]:
    """The engine's IO tensors: the network inputs, then its outputs (converted to their declared type and a linear
    layout, copied out of the arena where they are constants)."""
    inputs = [state.index[id(t)] for t in state.network._inputs]
    outputs = []
    for tensor in state.network._outputs:
        if id(tensor) not in state.index:
            raise BuildError(f"output {tensor.name!r} is not produced by any layer")
        index = state.index[id(tensor)]
        if index in inputs:
            raise BuildError(f"tensor {tensor.name!r} is both a network input and output; add an identity layer")
        declared = state.declared(index)
        if (state.tensors[index].dtype, state.tensors[index].format) != (declared, TensorFormat.LINEAR):
            # the caller gets the declared type and a linear layout, whatever the plugin chose inside
            stored = state.tensors[index]
            stored.name = f"{tensor.name} [{stored.dtype.name}/{stored.format.name}]"
            index = state.converted(index, declared, TensorFormat.LINEAR, "network output")
            state.tensors[index].name = tensor.name
        if state.tensors[index].role == "constant":
            # constants are computed once into the arena; an output lives in the caller's memory, so copy
            source = state.tensors[index]
            source.name = f"{tensor.name} [constant]"
            copy = state.add_tensor(tensor.name, source.dtype, source.format, source.shape, "internal", state.values[index])
            state.layers.append(LayerPlan(f"Copy {tensor.name} to the output", "identity", [index], [copy]))
            index = copy
        state.tensors[index].role = "output"
        outputs.append(index)
    return inputs + outputs

def check_profile_shapes(state: BuildState) -> None:
    """Every tensor's dims at each profile's min, opt and max are computable and >= 0."""
    producers = {o: layer.name for layer in state.layers for o in layer.outputs}
    for p, env in enumerate(state.profiles):
        for index, tensor in enumerate(state.tensors):
            for label, values in (("min", env.low), ("opt", env.opt), ("max", env.high)):
                if label != "opt" and any(d.symbols() - set(values) for d in tensor.shape):
                    continue
                try:
                    dims = [d.evaluate(values) for d in tensor.shape]
                except ShapeError as exc:
                    raise BuildError(
                        f"tensor {tensor.name!r} (layer {producers.get(index, 'input')!r}) at profile {p} {label}: {exc}"
                    ) from exc
                if any(d < 0 for d in dims):
                    raise BuildError(
                        f"tensor {tensor.name!r} produced by layer {producers.get(index, 'input')!r} has shape {dims} "
                        f"at profile {p} {label} shapes; dimensions must be >= 0"
                    )

