"""Ahead-of-time kernels of decorator-API plugins: what ``aot_impl`` returns, stored and launched.

``aot_impl`` returns a kernel name, its PTX (from ``triton.compile``, say), symbolic
launch parameters and symbolic scalar arguments. The build stores them in the plan
(one kernel per tactic) as expressions over the plugin's own input dimensions
(``in0[1]`` is dimension 1 of input 0); at shape change they are evaluated once, and
each run is one launch on the stream: input pointers, the scalars, output pointers.
The module is loaded once per kernel, on first use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import ExecutionError, PluginDefinitionError, SerializationError
from ..shape.builder import symbol
from ..shape.expr import IDimensionExpr
from ._expr import SymExprs, SymInt8, SymInt16, SymInt32, SymIntExpr

__all__ = [
    "AOTKernel",
    "KernelLaunchParams",
    "decode_kernels",
    "encode_kernels",
    "input_symbol",
    "kernel_from_aot_impl",
]


class KernelLaunchParams:
    """Grid and block extents and dynamic shared memory of an AOT kernel, symbolically.

    Each field is a :class:`SymInt32` (ints are taken as constants); they are evaluated
    for the concrete shapes whenever shapes change.
    """

    _FIELDS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shared_mem")

    def __init__(
        self,
        grid_x: SymIntExpr | int = 1,
        grid_y: SymIntExpr | int = 1,
        grid_z: SymIntExpr | int = 1,
        block_x: SymIntExpr | int = 1,
        block_y: SymIntExpr | int = 1,
        block_z: SymIntExpr | int = 1,
        shared_mem: SymIntExpr | int = 0,
    ) -> None:
        for name, value in zip(self._FIELDS, (grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem)):
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._FIELDS:
            raise AttributeError(f"KernelLaunchParams has no field {name!r}; its fields: {', '.join(self._FIELDS)}")
        if isinstance(value, bool) or not isinstance(value, (int, SymIntExpr)):
            raise PluginDefinitionError(f"KernelLaunchParams.{name} takes an int or a symbolic integer, got {value!r}")
        object.__setattr__(self, name, SymInt32(value))

    grid_x: SymInt32
    grid_y: SymInt32
    grid_z: SymInt32
    block_x: SymInt32
    block_y: SymInt32
    block_z: SymInt32
    shared_mem: SymInt32

    def __repr__(self) -> str:
        return "KernelLaunchParams(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS) + ")"


_LAUNCH_FIELDS = KernelLaunchParams._FIELDS
_SCALAR_TYPES = {"i32": np.int32, "i16": np.int16, "i8": np.int8}


def input_symbol(index: int, axis: int) -> IDimensionExpr:
    """The plugin-local symbol for dimension ``axis`` of input ``index``."""
    return symbol(f"in{index}[{axis}]")


@dataclass
class AOTKernel:
    """One compiled kernel with its launch rule."""

    name: str
    ptx: bytes
    launch: dict[str, IDimensionExpr]
    scalars: list[tuple[str, IDimensionExpr]]
    _function: Any = field(default=None, repr=False, compare=False)
    _padding: int = field(default=0, repr=False, compare=False)

    # --- resolving for concrete shapes ---------------------------------------------------
    def resolve(
        self, input_dims: Sequence[Sequence[int]], who: str
    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int, list[Any]]:
        """(grid, block, shared memory, scalar arguments) for these input shapes."""
        env = {f"in{i}[{j}]": int(d) for i, dims in enumerate(input_dims) for j, d in enumerate(dims)}
        try:
            values = {k: e.evaluate(env) for k, e in self.launch.items()}
            scalars = [_SCALAR_TYPES[kind](e.evaluate(env)) for kind, e in self.scalars]
        except Exception as exc:
            raise ExecutionError(f"{who}: the AOT launch parameters cannot be evaluated: {exc}") from exc
        grid = (values["grid_x"], values["grid_y"], values["grid_z"])
        block = (values["block_x"], values["block_y"], values["block_z"])
        if min(grid + block) < 1 or values["shared_mem"] < 0:
            raise ExecutionError(
                f"{who}: AOT kernel {self.name!r} resolved to grid {grid}, block {block}, shared memory "
                f"{values['shared_mem']}; extents must be >= 1 and shared memory >= 0"
            )
        return grid, block, values["shared_mem"], scalars

    # --- launching ---------------------------------------------------------------------------
    def load(self, explicit_params: int) -> Any:
        """The CUDA function (the module is loaded on first use and kept).

        Compilers may declare hidden parameters after the explicit ones (Triton's scratch
        pointers); those get null pointers.
        """
        if self._function is None:
            from ..backends.cuda import load_ptx_kernel

            self._function = load_ptx_kernel(self.ptx, self.name)
            self._padding = max(0, _ptx_param_count(self.ptx, self.name) - explicit_params)
        return self._function

    def launch_on(
        self, resolved: tuple[Any, Any, int, list[Any]], inputs: Sequence[int], outputs: Sequence[int], stream: int
    ) -> None:
        """Launch on ``stream``: input pointers, scalars, output pointers (and zeros for hidden parameters)."""
        grid, block, shared, scalars = resolved
        function = self.load(len(inputs) + len(scalars) + len(outputs))
        args = [np.uint64(p) for p in inputs] + list(scalars) + [np.uint64(p) for p in outputs]
        args += [np.uint64(0)] * self._padding
        function(grid, block, tuple(args), int(shared), stream)

    # --- plan storage ------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        from ..engine.plan import encode_expr

        return {
            "name": self.name,
            "ptx": self.ptx.decode("utf-8", "replace"),
            "launch": {k: encode_expr(v) for k, v in self.launch.items()},
            "scalars": [[kind, encode_expr(e)] for kind, e in self.scalars],
        }

    @classmethod
    def from_json(cls, value: Any) -> AOTKernel:
        from ..engine.plan import decode_expr

        try:
            launch = {k: decode_expr(value["launch"][k]) for k in _LAUNCH_FIELDS}
            scalars = [(str(kind), decode_expr(e)) for kind, e in value["scalars"]]
            if any(kind not in _SCALAR_TYPES for kind, _ in scalars):
                raise SerializationError(f"unknown scalar kinds in {[k for k, _ in scalars]}")
            return cls(str(value["name"]), str(value["ptx"]).encode("utf-8"), launch, scalars)
        except (KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"a stored AOT kernel is malformed: {type(exc).__name__}: {exc}") from None


def encode_kernels(kernels: dict[int, AOTKernel]) -> bytes:
    """The AOT kernels of a plugin, per tactic, as bytes for a plugin field."""
    return json.dumps({str(t): k.to_json() for t, k in kernels.items()}, sort_keys=True).encode("utf-8")


def decode_kernels(data: bytes) -> dict[int, AOTKernel]:
    """Inverse of :func:`encode_kernels`."""
    try:
        stored = json.loads(data.decode("utf-8"))
        return {int(t): AOTKernel.from_json(k) for t, k in stored.items()}
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError, AttributeError) as exc:
        raise SerializationError(f"the stored AOT kernels are malformed: {exc}") from None


def kernel_from_aot_impl(result: Any, who: str) -> AOTKernel:
    """Check what an ``aot_impl`` function returned and make the kernel record."""
    if not isinstance(result, tuple) or len(result) != 4:
        raise PluginDefinitionError(
            f"{who} returned {type(result).__name__}; expected (kernel_name, ptx, KernelLaunchParams, SymIntExprs)"
        )
    name, ptx, launch, extra = result
    for label, value in (("kernel name", name), ("PTX", ptx)):
        if not isinstance(value, (str, bytes)):
            raise PluginDefinitionError(f"{who}: the {label} must be a str or bytes, got {type(value).__name__}")
    if not isinstance(launch, KernelLaunchParams):
        raise PluginDefinitionError(
            f"{who}: the launch parameters must be a trtp.KernelLaunchParams, got {type(launch).__name__}"
        )
    if not isinstance(extra, SymExprs):
        raise PluginDefinitionError(
            f"{who}: the scalar arguments must be a trtp.SymIntExprs, got {type(extra).__name__}"
        )
    scalars = []
    for i, arg in enumerate(extra):
        kind = {SymInt32: "i32", SymInt16: "i16", SymInt8: "i8"}.get(type(arg)) if arg is not None else None
        if kind is None and isinstance(arg, SymInt32):
            kind = "i32"  # ShapeExpr is a SymInt32
        if kind is None:
            raise PluginDefinitionError(
                f"{who}: scalar argument {i} is {type(arg).__name__}; wrap it as trtp.SymInt32(expr) (or SymInt16/SymInt8)"
            )
        scalars.append((kind, arg._expr))
    text = name.decode("utf-8") if isinstance(name, bytes) else name
    code = ptx.encode("utf-8") if isinstance(ptx, str) else ptx
    return AOTKernel(text, code, {k: getattr(launch, k)._expr for k in _LAUNCH_FIELDS}, scalars)


def _ptx_param_count(ptx: bytes, name: str) -> int:
    """How many parameters the PTX entry ``name`` declares (compilers may add hidden ones)."""
    text = ptx.decode("utf-8", "replace")
    match = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", text, re.S)
    return match.group(1).count(".param") if match else 0
