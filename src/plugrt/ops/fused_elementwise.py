"""A chain of elementwise steps as one operator, evaluated block by block in the output's memory.

The builder's elementwise-chain rule (``builder/passes/chains.py``) makes it from a run of
elementwise, unary and activation layers where each result feeds only the next. Input 0 is
the chain's input; the other inputs are the steps' second operands (constants, biases, or
any tensor that broadcasts to input 0's shape without enlarging it). ``params["steps"]``
lists the steps, each a dict:

- ``{"binary": "SUB", "left": a, "right": b}``: an ElementWiseOperation (SUM, SUB, PROD,
  DIV, MAX, MIN, POW) of two operands, where an operand is ``-1`` for the running value
  (input 0 at the first step), an input index, or ``-2 - k`` for the layer's constant weight ``"c<k>"`` (a
  batch normalization's scale and shift shaped ``[1, C, 1, ...]``, which broadcast like an input);
- ``{"unary": "EXP"}``: a UnaryOperation of the running value;
- ``{"activation": "GELU_ERF", "alpha": 0.0, "beta": 0.0}``: an ActivationType.

Each step is the very kernel the layer it replaces runs (same ufunc, same type, HALF
activations computed in FLOAT and rounded once), so results are bit-identical to the
unfused layers. On the CPU the output is cut into blocks of about ``BLOCK`` elements that
stay in the cache; every step runs over one block before the next block starts, written in
place in the output, so memory is read and written once instead of once per layer. Large
outputs split their blocks between two threads (``host_threads.py``). On a GPU the chain is one
generated CUDA kernel (``fused_elementwise_cuda.py``), computing in FLOAT (not bit-identical:
CUDA's transcendental functions, HALF rounded once).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError, TypeMismatchError
from ..core.types import DataType
from .activation import activation_kernel
from .base import InputShapes, InputValues, Operator, ShapeExprs, register_operator
from .elementwise import ARITHMETIC_UFUNCS, FLOAT_TYPES, label
from .fused_elementwise_cuda import chain_kernel
from .host_threads import in_two_parts
from .params import param
from .unary import UFUNCS, erf

__all__ = ["BINARY_OPS", "BLOCK", "UNARY_OPS", "FusedElementwiseOperator", "block_indices", "describe_steps"]

#: elements per block: 256 KiB of float32, so a step's operands and result stay in the L2 cache; smaller
#: blocks cost more in per-call overhead than they gain (and two threads then contend for the
#: interpreter: bias + hard-swish over [8, 96, 56, 56] took 11.4 ms in 16 K blocks, 4.8 ms in 64 K,
#: against 11.4 ms unfused)
BLOCK = 1 << 16

#: ElementWiseOperation names a step may use (float in, same float out), and their ufuncs: the
#: elementwise layer's arithmetic but floor division
BINARY_OPS = {k: v for k, v in ARITHMETIC_UFUNCS.items() if k != "FLOOR_DIV"}
#: UnaryOperation names a step may use (float in, same float out), and their ufuncs ("" = erf): the
#: unary layer's but the logical and classifying ones
UNARY_OPS = {k: v for k, v in UFUNCS.items() if k not in ("NOT", "ISINF", "ISNAN")}


def _steps(value: Any) -> list[dict[str, Any]]:
    """The ``steps`` parameter, checked (a malformed step raises :class:`NetworkError` naming it)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise NetworkError(f"fused_elementwise: steps must be a non-empty list, got {value!r}")
    steps = []
    for number, step in enumerate(value):
        if not isinstance(step, dict):
            raise NetworkError(f"fused_elementwise: step {number} must be a dict, got {step!r}")
        if "binary" in step:
            if step["binary"] not in BINARY_OPS:
                raise NetworkError(f"fused_elementwise: step {number}: unknown binary op {step['binary']!r}")
            steps.append({"binary": step["binary"], "left": int(step["left"]), "right": int(step["right"])})
        elif "unary" in step:
            if step["unary"] not in UNARY_OPS:
                raise NetworkError(f"fused_elementwise: step {number}: unknown unary op {step['unary']!r}")
            steps.append({"unary": step["unary"]})
        elif "activation" in step:
            activation_kernel(str(step["activation"]))  # raises for an unknown type
            steps.append(
                {
                    "activation": str(step["activation"]),
                    "alpha": float(step.get("alpha", 0.0)),
                    "beta": float(step.get("beta", 0.0)),
                }
            )
        else:
            raise NetworkError(f"fused_elementwise: step {number} has none of binary, unary, activation: {step!r}")
    return steps


def block_indices(shape: tuple[int, ...], block: int) -> list[tuple[Any, ...]]:
    """Row-major blocks of at most ``block`` elements (at least one innermost row) covering ``shape``."""
    inner, axis = 1, len(shape)
    while axis > 0 and inner * shape[axis - 1] <= block:
        inner *= shape[axis - 1]
        axis -= 1
    if axis == 0:
        return [()]
    split = axis - 1
    chunk = max(1, block // inner)
    return [
        (*outer, slice(low, min(low + chunk, shape[split])))
        for outer in np.ndindex(*shape[:split])
        for low in range(0, shape[split], chunk)
    ]


def _operand_index(index: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The block ``index`` of the output, for an operand of ``shape`` (same rank) that broadcasts."""
    return tuple((0 if isinstance(part, int) else slice(None)) if d == 1 else part for part, d in zip(index, shape))


@register_operator
class FusedElementwiseOperator(Operator):
    """``out = step_n(...step_1(x))``; params: ``steps`` (see the module docstring)."""

    kind = "fused_elementwise"
    steps: list[dict[str, Any]] = param(_steps)

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        refs = [ref for s in self.steps if "binary" in s for ref in (s["left"], s["right"])]
        #: input 0 and every input a step names (-1, the running value, is no input; -2 - k a constant)
        self._inputs = 1 + max([0, *refs])
        #: the constant weights the steps name, in order (operands after the inputs)
        self._constants = [f"c{k}" for k in range(max([0, *(-1 - ref for ref in refs)]))]
        missing = [name for name in self._constants if name not in self.weights]
        if missing:
            raise NetworkError(f"fused_elementwise: the steps name constants {missing} that are not weights")
        #: the steps with each operand an index into the inputs then the constants (-1: the running value)
        self._operand_steps = [
            {**s, **{side: self._operand(s[side]) for side in ("left", "right")}} if "binary" in s else s
            for s in self.steps
        ]
        #: on a GPU, the constants in the type of each output (cast once)
        self._typed: dict[Any, list[Any]] = {}
        self._blocks: list[tuple[tuple[Any, ...], list[tuple[Any, ...]]]] = []
        self._shapes: tuple[tuple[int, ...], ...] = ()
        #: on a GPU, the chain's generated kernel per output type (None: a step has no CUDA form)
        self._kernels: dict[Any, Any] = {}

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        if len(input_types) != self._inputs:
            raise NetworkError(f"{label(self)}: the steps read {self._inputs} input(s), got {len(input_types)}")
        for index, dtype in enumerate(input_types):
            if dtype != input_types[0] or dtype not in FLOAT_TYPES:
                raise TypeMismatchError(
                    f"{label(self)}: every input must be FLOAT or HALF of one type; input {index} is {dtype.name}, "
                    f"input 0 {input_types[0].name}"
                )
        return [input_types[0]]

    def _operand(self, ref: int) -> int:
        """A step's operand ``ref`` as an index into the inputs then the constants (-1 stays the running value)."""
        return self._inputs + (-2 - ref) if ref <= -2 else ref

    def _operands(self, inputs: Sequence[Any], xp: Any, dtype: Any) -> list[Any]:
        """The inputs the steps read, then the constants (as ``xp`` arrays; on a GPU in ``dtype``)."""
        if not self._constants:
            return list(inputs[: self._inputs])
        if xp is np:
            constants = [self.weights[name] for name in self._constants]
        else:
            key = np.dtype(dtype)
            if key not in self._typed:
                self._typed[key] = [xp.asarray(self.weights[name], dtype=key) for name in self._constants]
            constants = self._typed[key]
        return [*inputs[: self._inputs], *constants]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x = list(input_shapes[0])
        for name in self._constants:
            held = self.weights[name].shape
            fits = len(held) == len(x) and all(
                d == 1 or (full.is_constant() and full.get_constant_value() == d) for d, full in zip(held, x)
            )
            if not fits:
                raise ShapeError(
                    f"{label(self)}: constant {name} of shape {list(held)} does not broadcast into input 0's "
                    f"{[str(d) for d in x]} (each dimension 1 or input 0's, same rank)"
                )
        for index, shape in enumerate(input_shapes[1:], start=1):
            if len(shape) != len(x):
                raise ShapeError(f"{label(self)}: input {index} has rank {len(shape)}, input 0 rank {len(x)}")
            for axis, (d, full) in enumerate(zip(shape, x)):
                if d != full and not (d.is_constant() and d.get_constant_value() == 1):
                    raise ShapeError(
                        f"{label(self)}: input {index} dimension {axis} is {d}; it must be input 0's ({full}) or 1"
                    )
        return [x]

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        shapes = tuple(tuple(s) for s in input_shapes[: self._inputs]) + tuple(
            self.weights[name].shape for name in self._constants
        )
        if shapes == self._shapes:
            return
        self._shapes = shapes
        out = tuple(output_shapes[0])
        self._blocks = [(index, [_operand_index(index, s) for s in shapes]) for index in block_indices(out, BLOCK)]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        out = outputs[0]
        operands = self._operands(inputs, xp, out.dtype)
        if xp is not np:
            kernel = self._chain_kernel(xp, out.dtype)
            if kernel is not None:
                kernel(*operands, out)
                return
        if xp is not np or out.size <= BLOCK:
            self._evaluate(xp, operands, out)
            return
        if tuple(tuple(a.shape) for a in operands) != self._shapes:
            self.prepare([a.shape for a in inputs], [out.shape])
        blocks = self._blocks

        def part(_: int, first: int, stop: int) -> None:
            for index, operand_indices in blocks[first:stop]:
                self._evaluate(np, [a[i] for a, i in zip(operands, operand_indices)], out[index])

        in_two_parts(len(blocks), out.size, part)

    def _evaluate(self, xp: Any, inputs: Sequence[Any], out: Any) -> None:
        """Every step over ``inputs`` (the operands: one block of each), the running value kept in ``out``."""
        for number, step in enumerate(self._operand_steps):
            value = inputs[0] if number == 0 else out
            if "binary" in step:
                left = value if step["left"] < 0 else inputs[step["left"]]
                right = value if step["right"] < 0 else inputs[step["right"]]
                getattr(xp, BINARY_OPS[step["binary"]])(left, right, out=out)
            elif "unary" in step:
                if step["unary"] == "ERF":
                    erf(xp, value, out)
                else:
                    getattr(xp, UNARY_OPS[step["unary"]])(value, out=out)
            else:
                kind = step["activation"]
                if value.dtype == np.float16 and kind != "RELU":  # as the activation layer: FLOAT, rounded once
                    value = value.astype(np.float32)
                activation_kernel(kind)(xp, value, out, step["alpha"], step["beta"])

    def _chain_kernel(self, xp: Any, dtype: Any) -> Any:
        """On a GPU, the chain's generated kernel for ``dtype`` (made once per type), or None."""
        if dtype not in self._kernels:
            self._kernels[dtype] = chain_kernel(xp, self._operand_steps, self._inputs + len(self._constants), dtype)
        return self._kernels[dtype]

    def direct_launch(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """On a GPU, the generated kernel with the bound arrays; a chain whose output is one block, on NumPy:
        every step resolved at bind to its function and the bound arrays it reads and writes (what
        :meth:`_evaluate` looks up per step at every run)."""
        out = outputs[0]
        inputs = self._operands(inputs, xp, out.dtype)
        if xp is not np:
            kernel = self._chain_kernel(xp, out.dtype)
            return None if kernel is None else (kernel, (*inputs, out))
        if out.size > BLOCK or out.dtype == np.float16:
            return None
        calls: list[tuple[Any, tuple[Any, ...]]] = []
        for number, step in enumerate(self._operand_steps):
            value = inputs[0] if number == 0 else out
            if "binary" in step:
                left = value if step["left"] < 0 else inputs[step["left"]]
                right = value if step["right"] < 0 else inputs[step["right"]]
                ufunc = getattr(np, BINARY_OPS[step["binary"]])
                if ufunc in (np.maximum, np.minimum):  # NumPy 2.4 deprecates their output by position
                    calls.append((functools.partial(ufunc, out=out), (left, right)))
                else:
                    calls.append((ufunc, (left, right, out)))
            elif "unary" in step:
                if step["unary"] == "ERF":
                    calls.append((erf, (np, value, out)))
                else:
                    calls.append((getattr(np, UNARY_OPS[step["unary"]]), (value, out)))
            else:
                calls.append((activation_kernel(step["activation"]), (np, value, out, step["alpha"], step["beta"])))
        return _run_calls, (calls,)

    def describe(self) -> str:
        """One line for inspectors: the steps as a formula of ``x`` (input 0) and ``in1``, ``in2``, ..."""
        return f"fused_elementwise({describe_steps(self.steps)})"


def _run_calls(calls: Sequence[tuple[Any, tuple[Any, ...]]]) -> None:
    for function, args in calls:
        function(*args)


def describe_steps(steps: Sequence[dict[str, Any]]) -> str:
    """The steps as one formula of ``x`` (input 0), ``in1``, ``in2``, ... and the constants ``c0``, ``c1``, ...,
    e.g. ``TANH(PROD(x, in1))``."""
    text = "x"

    def operand(ref: int, current: str) -> str:
        return current if ref == -1 else f"c{-2 - ref}" if ref <= -2 else f"in{ref}"

    for number, step in enumerate(steps):
        current = "x" if number == 0 else text
        if "binary" in step:
            text = f"{step['binary']}({operand(step['left'], current)}, {operand(step['right'], current)})"
        elif "unary" in step:
            text = f"{step['unary']}({current})"
        else:
            text = f"{step['activation']}({current})"
    return text
