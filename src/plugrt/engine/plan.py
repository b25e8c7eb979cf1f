"""The engine plan in memory, and its mapping to and from the plan file's header.

The builder produces an :class:`EnginePlan`; the runtime reads one back. Every
field read from a file is type-checked here, so a hostile header raises
:class:`~plugrt.PlanFormatError` instead of reaching the executor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._version import __version__
from ..core.dims import Dims
from ..core.errors import PlanFormatError
from ..core.types import DataType, TensorFormat
from ..shape.expr import IDimensionExpr
from .plan_exprs import MAX_EXPR_DEPTH, MAX_EXPR_NODES, ExprTable, decode_expr, decode_expr_table, encode_expr
from .plan_format import WEIGHT_DTYPES, PlanContents, PluginRecord, decode_plan, encode_plan

__all__ = [
    "MAX_EXPR_DEPTH",
    "MAX_EXPR_NODES",
    "PLUGIN_KIND",
    "EnginePlan",
    "ExprTable",
    "LayerPlan",
    "ProfilePlan",
    "TensorPlan",
    "decode_expr",
    "encode_expr",
    "holds_shape_values",
    "host_computed",
    "is_shape_tensor_type",
]

ProfileShapes = dict[str, tuple[Dims, Dims, Dims]]
#: The layer kind of plugin layers.
PLUGIN_KIND = "plugin"


@dataclass
class TensorPlan:
    """One tensor of the engine: type, format, shape expressions and role."""

    name: str
    dtype: DataType
    format: TensorFormat
    shape: list[IDimensionExpr]
    role: str  # "input", "output", "internal" or "constant"
    #: the values of a shape tensor (an integer tensor of rank 0 or 1 whose values depend on
    #: input shapes only), one expression per element; None for other tensors
    values: list[IDimensionExpr] | None = None


@dataclass
class LayerPlan:
    """One step of the engine: a node's kind, params and weights, and the tensors it reads and writes.

    ``kind`` is an operator kind, or ``"plugin"``: then ``params`` holds ``plugin`` (the
    index of its plugin record), ``family`` (the adapter that drives it) and, with INT8
    ports, ``io_scales``.
    """

    name: str
    kind: str
    inputs: list[int]
    outputs: list[int]
    params: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, str] = field(default_factory=dict)
    workspace: int = 0
    tactic: int = 0
    shape_inputs: list[int] = field(default_factory=list)
    #: output index -> size-tensor symbol it defines (data-dependent shapes)
    size_outputs: dict[int, str] = field(default_factory=dict)

    @property
    def is_plugin(self) -> bool:
        """True for plugin layers."""
        return self.kind == PLUGIN_KIND

    @property
    def plugin(self) -> int:
        """The index of a plugin layer's record in the plan."""
        return int(self.params["plugin"])

    @property
    def family(self) -> str:
        """The interface family of a plugin layer (the adapter that drives it)."""
        return str(self.params["family"])


@dataclass
class ProfilePlan:
    """An optimization profile and its memory plan."""

    shapes: ProfileShapes
    arena_size: int = 0
    offsets: dict[int, int] = field(default_factory=dict)
    workspace_offsets: dict[int, int] = field(default_factory=dict)


@dataclass
class EnginePlan:
    """Everything an engine is: tensors, layers, profiles, weights and plugin records."""

    name: str
    tensors: list[TensorPlan]
    io: list[int]
    layers: list[LayerPlan]
    profiles: list[ProfilePlan]
    symbols: dict[str, tuple[str, int]]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    plugins: list[PluginRecord] = field(default_factory=list)
    io_shapes: dict[str, Dims] = field(default_factory=dict)
    #: FLOAT products and convolutions may use TF32 on a GPU (``BuilderFlag.TF32`` at build, ``backends/tf32.py``)
    tf32: bool = False

    def to_bytes(self) -> bytes:
        """The plan file (weights an engine packed are written as they were given)."""
        from ..ops.linear_weights import stored_weights

        return encode_plan(self._contents(stored_weights(self.weights)))

    def reloaded(self) -> EnginePlan:
        """This plan as loading its file gives it back (the header through JSON, with every check a load makes),
        except that the weights are not copied: the result holds read-only views of this plan's arrays (those
        that are not C-contiguous and native-endian, as a load makes them, are converted)."""
        from ..ops.linear_weights import packed_matrix

        weights: dict[str, np.ndarray] = {}
        for name, array in self.weights.items():
            if packed_matrix(array) is not None:  # held packed (read-only, no elements of its own)
                weights[name] = array
                continue
            if not isinstance(array, np.ndarray) or array.dtype.name not in WEIGHT_DTYPES:
                encode_plan(self._contents({name: array}))  # raises the error a file would
            view = np.ascontiguousarray(array, array.dtype.newbyteorder("="))
            view = view.view()
            view.flags.writeable = False
            weights[name] = view
        loaded = decode_plan(encode_plan(self._contents({})))
        return _checked_decode(PlanContents(loaded.header, weights, loaded.plugins))

    def _contents(self, weights: dict[str, np.ndarray]) -> PlanContents:
        dims = ExprTable()
        header = {
            "producer": f"plugrt {__version__}",
            "name": self.name,
            "tensors": [
                {
                    "name": t.name,
                    "dtype": t.dtype.name,
                    "format": t.format.name,
                    "shape": [dims.encode(d) for d in t.shape],
                    "role": t.role,
                    **({} if t.values is None else {"values": [dims.encode(v) for v in t.values]}),
                }
                for t in self.tensors
            ],
            "dims": dims.entries,
            "io": list(self.io),
            "io_shapes": {k: list(v) for k, v in self.io_shapes.items()},
            "layers": [_encode_layer(layer) for layer in self.layers],
            "profiles": [
                {
                    "shapes": {k: [list(d) for d in v] for k, v in p.shapes.items()},
                    "arena_size": p.arena_size,
                    "offsets": [[k, v] for k, v in sorted(p.offsets.items())],
                    "workspace_offsets": [[k, v] for k, v in sorted(p.workspace_offsets.items())],
                }
                for p in self.profiles
            ],
            "symbols": {k: [v[0], v[1]] for k, v in self.symbols.items()},
            "tf32": self.tf32,
        }
        return PlanContents(header, weights, list(self.plugins))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> EnginePlan:
        """Read a plan file; anything malformed raises :class:`PlanFormatError`."""
        return _checked_decode(decode_plan(data))


def _checked_decode(contents: PlanContents) -> EnginePlan:
    try:
        return _decode(contents)
    except PlanFormatError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise PlanFormatError(f"plan header is malformed: {type(exc).__name__}: {exc}") from None


def _encode_layer(layer: LayerPlan) -> dict[str, Any]:
    return {
        "name": layer.name,
        "kind": layer.kind,
        "inputs": layer.inputs,
        "outputs": layer.outputs,
        "params": _encode_params(layer.params),
        "weights": layer.weights,
        "workspace": layer.workspace,
        "tactic": layer.tactic,
        "shape_inputs": layer.shape_inputs,
        "size_outputs": [[k, v] for k, v in sorted(layer.size_outputs.items())],
    }


_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _encode_params(value: Any) -> Any:
    """Params as strict JSON: non-finite floats become ``{"$float": "inf"}`` (JSON has no inf/nan)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, dict):
        return {k: _encode_params(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode_params(v) for v in value]
    return value


def _decode_params(value: Any) -> Any:
    """Inverse of :func:`_encode_params`."""
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            if value["$float"] not in _NONFINITE:
                raise PlanFormatError(f"plan holds a malformed float {value['$float']!r}")
            return _NONFINITE[value["$float"]]
        return {k: _decode_params(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_params(v) for v in value]
    return value


def _enum(enum_type: Any, name: Any, what: str) -> Any:
    if not isinstance(name, str) or name not in enum_type.__members__:
        raise PlanFormatError(f"plan {what} {name!r} is not a {enum_type.__name__}")
    return enum_type[name]


def _index(value: Any, count: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < count:
        raise PlanFormatError(f"plan {what} {value!r} is out of range (0..{count - 1})")
    return value


def _check_plugin_params(layer: LayerPlan, records: int) -> None:
    """A plugin layer's params name a plugin record and a family."""
    plugin, family = layer.params.get("plugin"), layer.params.get("family")
    if not isinstance(plugin, int) or isinstance(plugin, bool):
        raise PlanFormatError(f"plan plugin layer {layer.name!r} has no plugin record index in its params")
    _index(plugin, records, "plugin record index")
    if not isinstance(family, str):
        raise PlanFormatError(f"plan plugin layer {layer.name!r} has no plugin family in its params")


def holds_shape_values(dtype: DataType, fmt: TensorFormat, shape: list[IDimensionExpr], count: int) -> bool:
    """True when a tensor of this type, format and shape can be a shape tensor of ``count`` values: linear
    INT32/INT64, rank 0 (one value) or rank 1 of a constant length ``count``."""
    if not is_shape_tensor_type(dtype) or fmt != TensorFormat.LINEAR or len(shape) > 1:
        return False
    return count == (1 if not shape else (shape[0].get_constant_value() if shape[0].is_constant() else -1))


def _checked_values(tensor: TensorPlan) -> TensorPlan:
    """A loaded tensor's shape-tensor values must fit it (see :func:`holds_shape_values`)."""
    values = tensor.values
    if values is None or holds_shape_values(tensor.dtype, tensor.format, tensor.shape, len(values)):
        return tensor
    if not is_shape_tensor_type(tensor.dtype) or tensor.format != TensorFormat.LINEAR:
        raise PlanFormatError(
            f"plan tensor {tensor.name!r} holds shape values but is {tensor.dtype.name}/{tensor.format.name}; "
            "shape tensors are linear INT32 or INT64"
        )
    raise PlanFormatError(
        f"plan tensor {tensor.name!r} of shape {[str(d) for d in tensor.shape]} holds {len(values)} shape values"
    )


def is_shape_tensor_type(dtype: DataType) -> bool:
    """True for the types a shape tensor has (INT32, INT64)."""
    return dtype in (DataType.INT32, DataType.INT64)


def host_computed(layer: LayerPlan, tensors: list[TensorPlan], size_symbols: set[str]) -> bool:
    """True when every output of ``layer`` is a shape tensor computed on the host when shapes change.

    Such a layer (Shape, Size, their integer arithmetic, Concat/Gather/Slice of shape values …)
    never runs per inference: the executor writes the values of its outputs once per shape
    change, and the memory plan keeps them for the whole run. Plugin layers, engine outputs,
    and values that depend on data (size tensors) are left to their kernels.
    """
    if layer.is_plugin or not layer.outputs:
        return False
    for index in layer.outputs:
        tensor = tensors[index]
        if tensor.values is None or tensor.role != "internal" or not is_shape_tensor_type(tensor.dtype):
            return False
        if tensor.format != TensorFormat.LINEAR or any(v.symbols() & size_symbols for v in tensor.values):
            return False
    return True


def _decode(contents: PlanContents) -> EnginePlan:
    h = contents.header
    dims = decode_expr_table(h.get("dims", []))
    tensors = [
        _checked_values(
            TensorPlan(
                str(t["name"]),
                _enum(DataType, t["dtype"], "dtype"),
                _enum(TensorFormat, t["format"], "format"),
                [decode_expr(d, table=dims) for d in t["shape"]],
                str(t["role"]),
                None if t.get("values") is None else [decode_expr(v, table=dims) for v in t["values"]],
            )
        )
        for t in h["tensors"]
    ]
    n = len(tensors)
    layers = []
    for entry in h["layers"]:
        layer = LayerPlan(
            name=str(entry["name"]),
            kind=str(entry["kind"]),
            inputs=[_index(i, n, "tensor index") for i in entry["inputs"]],
            outputs=[_index(i, n, "tensor index") for i in entry["outputs"]],
            params=_decode_params(dict(entry["params"])),
            weights={str(k): str(v) for k, v in dict(entry["weights"]).items()},
            workspace=int(entry["workspace"]),
            tactic=int(entry["tactic"]),
            shape_inputs=[_index(i, n, "tensor index") for i in entry["shape_inputs"]],
            size_outputs={int(k): str(v) for k, v in entry["size_outputs"]},
        )
        if layer.is_plugin:
            _check_plugin_params(layer, len(contents.plugins))
        for key in layer.weights.values():
            if key not in contents.weights:
                raise PlanFormatError(f"plan layer {layer.name!r} refers to missing weights {key!r}")
        if layer.workspace < 0:
            raise PlanFormatError(f"plan layer {layer.name!r} has a negative workspace size")
        layers.append(layer)
    profiles = []
    for p in h["profiles"]:
        shapes = {str(k): tuple(Dims(d) for d in v) for k, v in dict(p["shapes"]).items()}
        if any(len(v) != 3 for v in shapes.values()):
            raise PlanFormatError("plan profile entry must hold min, opt and max shapes")
        arena = int(p["arena_size"])
        offsets = {_index(k, n, "tensor index"): int(v) for k, v in p["offsets"]}
        ws = {_index(k, len(layers), "layer index"): int(v) for k, v in p["workspace_offsets"]}
        if arena < 0 or any(not 0 <= v <= arena for v in [*offsets.values(), *ws.values()]):
            raise PlanFormatError("plan memory plan places a buffer outside its arena")
        profiles.append(ProfilePlan(shapes, arena, offsets, ws))  # type: ignore[arg-type]
    if not profiles:
        raise PlanFormatError("plan has no optimization profile")
    symbols = {str(k): (str(v[0]), int(v[1])) for k, v in dict(h["symbols"]).items()}
    io = [_index(i, n, "io tensor index") for i in h["io"]]
    io_shapes = {str(k): Dims(v) for k, v in dict(h["io_shapes"]).items()}
    tf32 = h.get("tf32", False)  # absent in plans written before the flag was recorded: strict FP32, as they ran
    if not isinstance(tf32, bool):
        raise PlanFormatError(f"plan header's tf32 must be true or false, got {tf32!r}")
    return EnginePlan(
        str(h["name"]),
        tensors,
        io,
        layers,
        profiles,
        symbols,
        dict(contents.weights),
        list(contents.plugins),
        io_shapes,
        tf32,
    )


def profile_envs(plan: EnginePlan, profile: int) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """(min, opt, max) values of every input symbol in ``profile``."""
    shapes = plan.profiles[profile].shapes
    low, opt, high = {}, {}, {}
    for sym, (name, axis) in plan.symbols.items():
        entry = shapes.get(name)
        if entry is None or axis >= len(entry[0]):
            raise PlanFormatError(f"plan profile {profile} has no shape for symbol {sym!r}")
        low[sym], opt[sym], high[sym] = entry[0][axis], entry[1][axis], entry[2][axis]
    return low, opt, high


def tensor_max_bytes(tensor: TensorPlan, low: dict[str, int], high: dict[str, int]) -> int:
    """Bytes of ``tensor`` at the largest shape allowed by [low, high]."""
    from ..core.layouts import storage_shape

    dims = [max(d.bounds(low, high)[1], 0) for d in tensor.shape]
    count = 1
    for d in storage_shape(dims, tensor.format):
        count *= d
    return int(-(-count * tensor.dtype.itemsize // 1))
