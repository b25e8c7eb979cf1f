"""Layer precision, as TensorRT chooses it: reduced float types where the flags allow them and they pay.

With ``BuilderFlag.FP16`` (or ``BF16``) the builder may run a standard layer of an FP32
network in the reduced type: its FLOAT inputs are read in that type (reformat layers
convert where the producer stored FLOAT), its outputs are stored in it, and every
consumer and network output still sees the type the network declares (a reformat
back where one needs FLOAT). Which layers:

- **compute** layers (matrix products, convolutions, normalisations, softmax, elementwise,
  activations, pooling …) run reduced wherever the backend computes that type faster
  (``Backend.fast_types``; the CPU computes FP16 through NumPy, which is slower, so it keeps FP32).
  Their kernels accumulate in FP32 where it matters (products through the vendor libraries,
  normalisations, softmax).
- **data movement** (shuffles, slices, concatenation, gathers, padding …) follows its input:
  reduced when a float input is already stored reduced, so no reformat is added for it.
- everything else (reductions, recurrences, casts, sorting, indices …) keeps FLOAT.

``ILayer.precision`` and ``ILayer.set_output_type`` are constraints under
``BuilderFlag.OBEY_PRECISION_CONSTRAINTS`` (the layer runs in that type, an error where its
operator cannot) and preferences under ``PREFER_PRECISION_CONSTRAINTS`` (a warning, and the
builder's choice, where it cannot); without either flag they are ignored, as in TensorRT.
A network created with ``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` runs every layer in
the types the network states: the reduced-precision flags are refused for it.

A FLOAT constant converted to HALF saturates: finite values beyond the half range become
±65504 (TensorRT clamps weights the same way), so an attention mask built from
``finfo(float32).min`` stays finite instead of turning into ``-inf`` and then NaN.
"""

from __future__ import annotations

from ..core.errors import BuildError
from ..core.logger import Severity
from ..core.types import DataType
from ..network.definition import NetworkDefinitionCreationFlag
from ..network.layer import ILayer
from ..nodes.ports import IOChoice
from .config import BuilderFlag
from .state import BuildState

__all__ = ["COMPUTE_KINDS", "FOLLOW_KINDS", "check_flags", "layer_precision", "output_constraints", "reduced_reads"]

#: operator kinds that compute in a reduced float type where it is faster
COMPUTE_KINDS = frozenset(
    {
        "matrix_multiply",
        "gemm",
        "convolution",
        "deconvolution",
        "normalization",
        "batch_normalization",
        "softmax",
        "elementwise",
        "activation",
        "unary",
        "pooling",
        "global_pooling",
        "prelu",
        "resize",
    }
)
#: operator kinds that only move data: they run in whatever float type their input is stored in
FOLLOW_KINDS = frozenset(
    {
        "shuffle",
        "concatenation",
        "slice",
        "gather",
        "gather_elements",
        "gather_nd",
        "pad",
        "squeeze",
        "unsqueeze",
        "flatten",
        "expand",
        "tile",
        "split",
        "identity",
        "where",
        "depth_to_space",
        "space_to_depth",
        "trilu",
        "reverse_sequence",
    }
)
_REDUCED = (DataType.HALF, DataType.BF16)
_FLAGS = {DataType.HALF: BuilderFlag.FP16, DataType.BF16: BuilderFlag.BF16}


def check_flags(state: BuildState) -> None:
    """Refuse reduced-precision flags on a strongly typed network (TensorRT refuses them too)."""
    if not state.network.get_flag(NetworkDefinitionCreationFlag.STRONGLY_TYPED):
        return
    for flag in (BuilderFlag.FP16, BuilderFlag.BF16, BuilderFlag.INT8):
        if state.config.get_flag(flag):
            raise BuildError(
                f"BuilderFlag.{flag.name} is set for a strongly typed network; a strongly typed network runs in the "
                "types it states (cast where another type is wanted): clear the flag or create the network without "
                "NetworkDefinitionCreationFlag.STRONGLY_TYPED"
            )


def _fast_types(state: BuildState) -> frozenset[DataType]:
    """The reduced types the build's backend computes faster than FLOAT (none for the CPU)."""
    return state.backend.fast_types if state.backend is not None else frozenset()


def _fast(state: BuildState) -> list[DataType]:
    """The reduced types the flags allow and the build's backend computes faster, best first."""
    fast = _fast_types(state)
    return [t for t in _REDUCED if state.config.get_flag(_FLAGS[t]) and t in fast]


def _constraints(state: BuildState) -> tuple[bool, bool]:
    """(obey, prefer): whether layer precisions and output types are constraints or preferences."""
    return (
        state.config.get_flag(BuilderFlag.OBEY_PRECISION_CONSTRAINTS),
        state.config.get_flag(BuilderFlag.PREFER_PRECISION_CONSTRAINTS),
    )


def layer_precision(
    state: BuildState, layer: ILayer, kind: str, reads: list[IOChoice], sources: list[int]
) -> DataType | None:
    """The float type ``layer`` (an operator of ``kind`` reading engine tensors ``sources`` as ``reads``)
    computes in, or None to keep the types it reads."""
    if state.network.get_flag(NetworkDefinitionCreationFlag.STRONGLY_TYPED):
        return None
    if not any(dtype == DataType.FLOAT for dtype, _ in reads):
        return None
    obey, prefer = _constraints(state)
    asked = layer.precision
    if asked is not None and (obey or prefer) and asked in (DataType.FLOAT, *_REDUCED):
        computable = {DataType.FLOAT, DataType.HALF, *_fast_types(state)}
        if asked == DataType.FLOAT or (kind in COMPUTE_KINDS | FOLLOW_KINDS and asked in computable):
            return asked
        message = (
            f"layer {layer.name!r} ({kind}) has precision {asked.name}, but its operator does not compute in "
            f"{asked.name} on this backend"
        )
        if obey:
            raise BuildError(message + "; clear the layer's precision or BuilderFlag.OBEY_PRECISION_CONSTRAINTS")
        state.logger.emit(Severity.WARNING, message + "; it keeps FLOAT")
        return None
    fast = _fast(state)
    if not fast:
        return None
    if kind in COMPUTE_KINDS:
        return fast[0]
    if kind in FOLLOW_KINDS:
        reduced = [state.tensors[i].dtype for i in sources if state.tensors[i].dtype in fast]
        return reduced[0] if reduced else None
    return None


def reduced_reads(reads: list[IOChoice], precision: DataType | None) -> list[IOChoice]:
    """``reads`` with every FLOAT input read in ``precision`` (or as they are, for None)."""
    if precision is None:
        return reads
    return [(precision if dtype == DataType.FLOAT else dtype, fmt) for dtype, fmt in reads]


def output_constraints(state: BuildState, layer: ILayer, stored: list[DataType]) -> list[DataType]:
    """The types ``layer``'s outputs are stored in: ``set_output_type`` where precision constraints are on
    and the type is a float type the output can be converted to; ``stored`` otherwise."""
    obey, prefer = _constraints(state)
    if not (obey or prefer) or state.network.get_flag(NetworkDefinitionCreationFlag.STRONGLY_TYPED):
        return stored
    result = list(stored)
    for index, dtype in layer._output_types.items():
        if dtype == stored[index]:
            continue
        if stored[index] in (DataType.FLOAT, *_REDUCED) and dtype in (DataType.FLOAT, DataType.HALF):
            result[index] = dtype
            continue
        message = (
            f"layer {layer.name!r} output {index} has output type {dtype.name}, but it computes "
            f"{stored[index].name} and plugrt converts only between FLOAT and HALF here"
        )
        if obey:
            raise BuildError(message + "; clear it with BuilderFlag.OBEY_PRECISION_CONSTRAINTS off")
        state.logger.emit(Severity.WARNING, message + "; it keeps " + stored[index].name)
    return result
