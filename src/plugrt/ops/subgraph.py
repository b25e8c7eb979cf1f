"""Subgraphs of control-flow operators: an ONNX graph built into engines when first run at given shapes.

A ``Loop``, ``If`` or ``Scan`` node is one operator of the outer engine; its
body is stored in the plan as ONNX bytes (a weight) and built, like any model,
into an engine for each distinct set of input shapes and types it is run with
(kept for later runs). Outer-scope values the body reads are explicit inputs
of the stored graph, so a body is a self-contained model.

Output shapes of the operator are *templates* computed at import: JSON lists
saying per dimension where its size comes from (see :func:`template_dim`).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..backends.registry import backend_for, using_backend
from ..core.errors import ExecutionError, NetworkError, PlugrtError, ShapeError
from ..core.types import DataType
from ..nodes.base import Binding
from ..shape import DimensionOperation, constant, operation
from ..shape.expr import IDimensionExpr
from .base import InputShapes, InputValues, Operator, ShapeExprs
from .elementwise import quiet

__all__ = ["BodyOperator", "BoundSubgraph", "ControlFlowOperator", "SubgraphEngine", "template_dim"]


class SubgraphEngine:
    """One ONNX subgraph (a serialized ``ModelProto`` whose inputs are all explicit), run on arrays.

    ``run`` takes arrays in the model's input order and returns its outputs in
    order; an engine is built per input signature (shapes and types) and device.
    """

    def __init__(self, model_bytes: bytes, owner: str) -> None:
        import onnx

        self.owner = owner
        self.model = onnx.load_from_string(model_bytes)
        self.input_names = [v.name for v in self.model.graph.input]
        self.output_names = [v.name for v in self.model.graph.output]
        self._engines: dict[tuple[Any, ...], Any] = {}

    def run(self, arrays: Sequence[Any], xp: Any) -> list[Any]:
        """The outputs for ``arrays`` (NumPy, or CuPy on the GPU; the same module comes back)."""
        bound = self._bound(arrays, xp)
        stream = bound.stream()
        results = bound.run(dict(zip(self.input_names, arrays)), stream)
        return [results[name] for name in self.output_names]

    def bound(self, arrays: Sequence[Any], xp: Any) -> BoundSubgraph | None:
        """The engine for arrays of these shapes and types, with buffers of its own (None when its result
        shapes depend on data): write :attr:`BoundSubgraph.input_buffers`, ``launch``, read
        :attr:`BoundSubgraph.output_buffers`, as often as needed."""
        found = self._bound(arrays, xp)
        return found if found.direct else None

    def _bound(self, arrays: Sequence[Any], xp: Any) -> BoundSubgraph:
        backend = backend_for(xp)
        signature = (backend.name, *((tuple(a.shape), np.dtype(a.dtype)) for a in arrays))
        bound = self._engines.get(signature)
        if bound is None:
            bound = BoundSubgraph(self._build(arrays, backend.name), xp, arrays, self.input_names, self.output_names)
            self._engines[signature] = bound
        return bound

    def _build(self, arrays: Sequence[Any], device: str) -> Any:
        import onnx

        from ..core.logger import Logger, Severity
        from ..onnx.compile import CompiledModel
        from ..onnx.importers.base import OnnxImportError
        from ..onnx.importers.operator_nodes import ensure_operator_importers

        ensure_operator_importers()  # bodies of the network API's loops are written in plugrt's operator domain

        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        for value, array in zip(model.graph.input, arrays):
            shape = value.type.tensor_type.shape
            del shape.dim[:]
            for size in array.shape:
                shape.dim.add().dim_value = int(size)
        try:
            return CompiledModel(model, device=device, logger=Logger(Severity.INTERNAL_ERROR))
        except OnnxImportError as exc:
            raise ExecutionError(f"{self.owner}: its subgraph cannot be built for these shapes: {exc}") from None


class BoundSubgraph:
    """One built subgraph with input and output buffers of its own, bound to its context once.

    Runs write the inputs into its buffers and read the results from its own, so the addresses never
    change and the context is prepared only once (a loop body runs many times at the same shapes).
    The inputs lie in one block of memory in their order, as do the outputs (each buffer at a multiple of
    :data:`ALIGNMENT` bytes), so that values carried from the results to the inputs of the next iteration
    are one copy (:meth:`carry`). Bodies with data-dependent result shapes (``direct`` False) go through
    :meth:`CompiledModel.execute` instead.
    """

    def __init__(
        self, compiled: Any, xp: Any, arrays: Sequence[Any], input_names: Sequence[str], output_names: Sequence[str]
    ) -> None:
        self.compiled = compiled
        self.xp = xp
        engine, context = compiled.engine, compiled.context
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        self.direct = True
        backend = engine.backend
        read = set(compiled.input_names)
        specs = []
        for name, array in zip(input_names, arrays):
            if name in read:  # static: the subgraph is built per shape
                specs.append((tuple(context.get_tensor_shape(name)), np.dtype(engine.get_tensor_dtype(name).nptype())))
            else:  # scratch for an input the engine does not read
                specs.append((tuple(array.shape), np.dtype(array.dtype)))
        self._input_block, self._input_offsets, buffers = _carve(xp, specs)
        #: one buffer per subgraph input, in its order
        self.input_buffers = buffers
        for name, buffer in zip(input_names, buffers):
            if name in read:
                context.set_input_shape(name, buffer.shape)
                context.set_tensor_address(name, backend.address_of(buffer))
                self.inputs[name] = buffer
        self.output_buffers: list[Any] = []
        specs = []
        for name in output_names:
            shape = tuple(context.get_tensor_shape(name))
            if -1 in shape:
                self.direct = False
                return
            specs.append((shape, np.dtype(engine.get_tensor_dtype(name).nptype())))
        self._output_block, self._output_offsets, self.output_buffers = _carve(xp, specs)
        for name, buffer in zip(output_names, self.output_buffers):
            if name not in self.outputs:
                context.set_tensor_address(name, backend.address_of(buffer))
                self.outputs[name] = buffer
        self._laid_out = len(self.outputs) == len(output_names)  # each output in its own place of the block
        self.output_buffers = [self.outputs[n] for n in output_names]  # a name given twice is one engine output

    def stream(self) -> int:
        """The stream the caller's work is queued on (work of the body goes on it too)."""
        return int(backend_for(self.xp).current_stream())

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The backend and error state the body's runs need, entered once around many :meth:`launch` calls."""
        with using_backend(self.compiled.engine.backend), quiet(self.xp):
            yield

    def launch(self, stream: int) -> None:
        """Run once on the current contents of :attr:`input_buffers` (results in :attr:`output_buffers`);
        call it inside :meth:`running`, or from a kernel of the engine that owns the subgraph (its run has
        entered them)."""
        self.compiled.context.execute_nested(stream)

    def launcher(self, stream: int) -> Callable[[], None]:
        """:meth:`launch` as a call without arguments, its per-run checks done now: the body's kernels
        in a row (valid while the body is bound as it is, which it stays)."""
        return self.compiled.context.nested_launcher(stream)

    def carry(self, first_input: int, first_output: int, count: int) -> Callable[[], None] | None:
        """A call copying outputs ``first_output ...`` into inputs ``first_input ...`` (``count`` of them: the
        values an iteration hands to the next), as one copy of their block where both lie alike; None for none."""
        if count <= 0:
            return None
        ins = self.input_buffers[first_input : first_input + count]
        outs = self.output_buffers[first_output : first_output + count]
        if len(ins) != count or len(outs) != count:
            raise ExecutionError(
                f"carry: {count} values from output {first_output} to input {first_input} do not exist"
            )
        alike = all(a.shape == b.shape and a.dtype == b.dtype for a, b in zip(ins, outs))
        in_offsets = self._input_offsets[first_input : first_input + count]
        out_offsets = self._output_offsets[first_output : first_output + count]
        if (
            alike
            and self._laid_out
            and [o - in_offsets[0] for o in in_offsets] == [o - out_offsets[0] for o in out_offsets]
        ):
            size = in_offsets[-1] - in_offsets[0] + ins[-1].nbytes
            if size == 0:
                return None
            target = self._input_block[in_offsets[0] : in_offsets[0] + size]
            source = self._output_block[out_offsets[0] : out_offsets[0] + size]
            return functools.partial(self.xp.copyto, target, source)
        pairs = list(zip(ins, outs))

        def copy() -> None:
            for target, source in pairs:
                target[...] = source

        return copy

    def run(self, arrays: dict[str, Any], stream: int) -> dict[str, Any]:
        if not self.direct:
            return dict(self.compiled.execute({n: a for n, a in arrays.items() if n in self.inputs}, stream))
        for name, buffer in self.inputs.items():
            buffer[...] = arrays[name]
        self.compiled.context.execute_async_v3(stream)
        return {name: buffer.copy() for name, buffer in self.outputs.items()}


#: where buffers of a :class:`BoundSubgraph` start in their block: a multiple of this many bytes
ALIGNMENT = 64


def _carve(xp: Any, specs: Sequence[tuple[tuple[int, ...], np.dtype]]) -> tuple[Any, list[int], list[Any]]:
    """Arrays of these shapes and types, zeroed, in one block of ``xp``'s memory, each at a multiple of
    :data:`ALIGNMENT` bytes: the block (bytes), each array's offset in it, the arrays."""
    offsets, end = [], 0
    for shape, dtype in specs:
        offsets.append(end)
        end += -(-math.prod(shape) * dtype.itemsize // ALIGNMENT) * ALIGNMENT
    block = xp.zeros(max(end, 1), dtype=np.uint8)
    arrays = []
    for (shape, dtype), offset in zip(specs, offsets):
        nbytes = math.prod(shape) * dtype.itemsize
        arrays.append(block[offset : offset + nbytes].view(dtype).reshape(shape))
    return block, offsets, arrays


def template_dim(
    template: Any,
    input_shapes: Sequence[ShapeExprs],
    input_values: Sequence[ShapeExprs | None],
    sizes: dict[int, IDimensionExpr],
    op: ControlFlowOperator,
) -> IDimensionExpr:
    """One output dimension from its template.

    ``["c", n]``: the constant n; ``["i", k, a]``: dimension a of input k;
    ``["v", k]``: the value of 0-d shape tensor input k; ``["op", NAME, t1, t2]``:
    a :class:`DimensionOperation` of two templates; ``["s", j, upper]``: the
    data-dependent size j (written by the kernel to size output j), at most ``upper``.
    """
    tag = template[0]
    if tag == "c":
        return constant(int(template[1]))
    if tag == "i":
        return input_shapes[template[1]][template[2]]
    if tag == "v":
        values = input_values[template[1]]
        if not values:
            raise ShapeError(f"{op.label}: input {template[1]} is not a shape tensor known at build time")
        return values[0]
    if tag == "op":
        first = template_dim(template[2], input_shapes, input_values, sizes, op)
        second = template_dim(template[3], input_shapes, input_values, sizes, op)
        return operation(DimensionOperation[template[1]], first, second)
    if tag == "s":
        index = int(template[1])
        if index not in sizes:
            upper = template_dim(template[2], input_shapes, input_values, sizes, op)
            sizes[index] = op.declare_size(op.num_results + index, upper, upper)
        return sizes[index]
    raise NetworkError(f"{op.label}: unknown shape template {template!r}")


class ControlFlowOperator(Operator):
    """What ``loop``, ``if`` and ``scan`` share: output templates, types, size outputs, writing results.

    Params: ``types`` (DataType names of the results), ``shapes`` (one template
    list per result), ``num_sizes`` (data-dependent sizes, each a 0-d INT64
    output after the results). Weights hold the subgraphs' ONNX bytes.
    """

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._subgraphs: dict[str, SubgraphEngine] = {}

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name!r}" if self.name else self.kind

    @property
    def num_results(self) -> int:
        return len(self.param("types"))

    @property
    def num_outputs(self) -> int:
        return self.num_results + int(self.params.get("num_sizes", 0))

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        return [DataType[name] for name in self.param("types")] + [DataType.INT64] * int(
            self.params.get("num_sizes", 0)
        )

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        sizes: dict[int, IDimensionExpr] = {}
        shapes = [
            [template_dim(d, input_shapes, input_values, sizes, self) for d in result]
            for result in self.param("shapes")
        ]
        return shapes + [[] for _ in range(int(self.params.get("num_sizes", 0)))]

    def subgraph(self, name: str) -> SubgraphEngine:
        """The subgraph stored as weight ``name`` (loaded once per operator instance)."""
        found = self._subgraphs.get(name)
        if found is None:
            found = SubgraphEngine(self.weights[name].tobytes(), self.label)
            self._subgraphs[name] = found
        return found

    def write_results(self, results: Sequence[Any], outputs: Sequence[Any], xp: Any) -> None:
        """Write each result into its output; results with data-dependent sizes also write those sizes."""
        sizes: dict[int, int] = {}
        for index, (result, out, template) in enumerate(zip(results, outputs, self.param("shapes"))):
            result = xp.asarray(result)
            if result.ndim != len(template):
                raise ExecutionError(
                    f"{self.label}: result {index} has rank {result.ndim}, but its shape was inferred as rank "
                    f"{len(template)} at build time"
                )
            dynamic = False
            for axis, dim in enumerate(template):
                if dim[0] == "s":
                    dynamic = True
                    sizes[int(dim[1])] = int(result.shape[axis])
            if not dynamic:
                if tuple(result.shape) != tuple(out.shape):
                    raise ExecutionError(
                        f"{self.label}: result {index} has shape {tuple(result.shape)}, but shape "
                        f"{tuple(out.shape)} was inferred at build time (does the body change a shape per iteration?)"
                    )
                out[...] = result
                continue
            if result.size > out.size:
                raise ExecutionError(
                    f"{self.label}: result {index} has shape {tuple(result.shape)}, larger than the bound "
                    f"{tuple(out.shape)} its buffer was planned for"
                )
            out.reshape(-1)[: result.size] = result.reshape(-1).astype(out.dtype, copy=False)
        self.write_sizes(sizes, outputs)

    def write_sizes(self, sizes: dict[int, int], outputs: Sequence[Any]) -> None:
        """Write data-dependent size ``index`` (its output follows the results) for each ``index: value``."""
        for index, value in sizes.items():
            outputs[self.num_results + index][...] = value


class BodyOperator(ControlFlowOperator):
    """A control-flow operator whose body is bound when the operator is (``loop``, ``scan``): :meth:`bind`
    keeps :meth:`bind_body`'s result for the bound arrays; :meth:`bound_body` gives it to a run on them
    (or binds again for other arrays). Subclasses implement :meth:`bind_body`."""

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._body: Any = None

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """Keep the arrays and bind the body for these shapes (built now where it was not yet)."""
        super().bind(inputs, outputs, workspace)
        try:
            self._body = self.bind_body(*self._bound_args)
        except PlugrtError:
            self._body = None  # the run binds it again and reports why it cannot

    def bound_body(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """The body bound for these arrays (the one made at bind where they are the bound arrays); None where
        the body's results depend on data or do not fit."""
        body = self._body
        if body is None or body.inputs is not inputs or body.outputs is not outputs:
            body = self.bind_body(inputs, outputs, xp)
        return body

    def bind_body(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any) -> Any:
        """The body bound for these arrays: an object with ``inputs`` and ``outputs`` (the arrays), or None."""
        raise NotImplementedError(f"{type(self).__name__} does not implement bind_body")
