"""``plugrt.compile``: an ONNX model as a callable engine (a Pythonic layer over the TensorRT-style API).

>>> import numpy as np, plugrt
>>> from onnx import TensorProto, helper
>>> graph = helper.make_graph(
...     [helper.make_node("Relu", ["x"], ["y"])], "g",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
>>> relu = plugrt.compile(helper.make_model(graph))
>>> relu({"x": np.array([-1.0, 2.0], dtype=np.float32)})["y"]
array([0., 2.], dtype=float32)

Underneath: ``Builder``, ``OnnxParser``, one optimization profile (from
``shapes={name: (min, opt, max)}``, else from the first call's shapes),
``Runtime`` and a :class:`~plugrt.engine.host_run.HostRun` (one execution
context; on the CPU driven by a :class:`~plugrt.engine.host_call.HostCall`,
which sets shapes and binds buffers only when a call's shapes differ from the
last call's, and returns new output arrays at every call). Arrays are
converted at the boundary between the types the model declares and the ones
plugrt computes in (DOUBLE inputs arrive as float64 and leave as float64,
computed as FLOAT in between).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ..backends.registry import DEFAULT_DEVICE, check_device
from ..core.errors import ExecutionError, ShapeError, TypeMismatchError
from ..core.logger import ILogger, RaisedErrorsLogger, Severity
from ..engine.host_call import HostCall
from ..engine.host_run import HostRun
from .fixed_dims import FixedDims, fixed_dims, graph_inputs, graph_of, with_fixed_dims
from .importers.base import OnnxImportError
from .parser import OnnxParser
from .types import onnx_numpy_dtype

__all__ = ["CompiledModel", "compile"]

ShapeRange = tuple[Sequence[int], Sequence[int], Sequence[int]]
_WIDEN_PROFILE = "pass shapes={name: (min, opt, max)} to plugrt.compile to cover it"


def compile(  # noqa: A001 - the public name mirrors torch.compile
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    device: str = DEFAULT_DEVICE,
    shapes: Mapping[str, ShapeRange] | None = None,
    logger: ILogger | None = None,
    external_data_dir: str | os.PathLike[str] | None = None,
) -> CompiledModel:
    """Compile an ONNX model (a path, bytes or ``onnx.ModelProto``) into a callable engine.

    ``shapes`` gives ``(min, opt, max)`` per dynamic input; without it the
    engine is built at the first call for that call's shapes. Parse errors
    raise :class:`~plugrt.onnx.importers.base.OnnxImportError` listing every problem.
    External weights are read from the model file's folder; a model given as
    bytes or a ``ModelProto`` reads them only from ``external_data_dir``. The weights are held once: the
    engine shares the network's arrays, except where its products on the CPU hold a weight packed in
    oneDNN's layout; the result's ``network`` is then released (None) once the engine is built.
    """
    return CompiledModel(model, device=device, shapes=shapes, logger=logger, external_data_dir=external_data_dir)


class CompiledModel:
    """An ONNX model built into an engine; call it with arrays (a dict, keywords or positionally)."""

    def __init__(
        self,
        model: str | os.PathLike[str] | bytes | onnx.ModelProto,
        device: str = DEFAULT_DEVICE,
        shapes: Mapping[str, ShapeRange] | None = None,
        logger: ILogger | None = None,
        external_data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        from ..builder.builder import Builder
        from ..engine.runtime import Runtime

        check_device(device, "compile")
        self.logger: ILogger = logger or RaisedErrorsLogger(Severity.WARNING)  # errors are raised, not printed
        self.device = device
        self._builder = Builder(self.logger, device)
        self._runtime = Runtime(self.logger, device)
        #: the imported network; None once an engine that holds weights packed is built (they are held once)
        self.network: Any = self._builder.create_network(0)
        self._parser: Any = OnnxParser(self.network, self.logger)
        if external_data_dir is not None and not os.path.isdir(external_data_dir):
            raise OnnxImportError(f"compile: external_data_dir must be a folder, got {os.fspath(external_data_dir)!r}")
        self._external_data_dir = None if external_data_dir is None else os.fspath(external_data_dir)
        self._lock = threading.Lock()
        self.engine: Any = None
        self._host_call: HostCall | None = None
        #: outputs whose engine type is not the model's declared one (converted when delivered); None: not known
        self._converted: list[str] | None = None
        self.context: Any = None
        #: the model, while its import waits for the first call's shapes (see :meth:`_import_at_first_call`)
        self._deferred: Any = None
        ok = self._parse(model, {})
        if not ok and fixed_dims(shapes):
            # again with the dimensions the profile fixes as constants: shape-only If conditions are then
            # decided at import (their branches may even differ in rank); the first errors stand otherwise
            ok = self._parse_again(model, fixed_dims(shapes))
        if not ok and shapes is None and self._decided_by_dimensions(model):
            # Without shapes= the engine is built for the first call's shapes: an If whose branches differ
            # in rank and whose condition follows from input dimensions (silero-vad's squeeze of a dimension
            # that is 1 for its chunk length) is decided once that call fixes them, as if given in shapes=.
            self._deferred = model
            graph = graph_of(model)
            assert graph is not None
            self.input_names = [v.name for v in graph_inputs(graph)]
            self.output_names = [v.name for v in graph.output]
            return
        if not ok:
            self._raise_import_errors()
        self._imported(shapes)

    def _parse_again(self, model: Any, fixed: FixedDims, keep_first: bool = True) -> bool:
        """Import ``model`` into a new network with the dimensions ``fixed`` as constants; where that fails
        too, the first import's errors stand (``keep_first``) or the new ones."""
        failed = self._parser
        self.network = self._builder.create_network(0)
        self._parser = OnnxParser(self.network, self.logger)
        ok = self._parse(model, fixed)
        if not ok and keep_first:
            self._parser = failed
        return ok

    def _raise_import_errors(self) -> None:
        errors = "\n  ".join(str(self._parser.get_error(i)) for i in range(self._parser.num_errors))
        raise OnnxImportError(f"the ONNX model could not be imported:\n  {errors}")

    def _decided_by_dimensions(self, model: Any) -> bool:
        """Whether the import failed on an If node that input dimensions decide (other errors may follow from
        it: its results are missing), in a model with dynamic input dimensions (those the first call fixes)."""
        from .importers.control_flow import DECIDED_BY_DIMENSIONS

        errors = [str(self._parser.get_error(i)) for i in range(self._parser.num_errors)]
        if not any(DECIDED_BY_DIMENSIONS in e for e in errors):
            return False
        graph = graph_of(model)
        return graph is not None and any(
            not d.HasField("dim_value") for v in graph_inputs(graph) for d in v.type.tensor_type.shape.dim
        )

    def _import_at_first_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Import the deferred model with every input dimension fixed to the first call's (the engine is
        built for those shapes, as for any model compiled without shapes=)."""
        with self._lock:
            model = self._deferred
            if model is None:
                return
            graph = graph_of(model)
            names = [v.name for v in graph_inputs(graph)] if graph is not None else []
            if len(args) == 1 and isinstance(args[0], Mapping) and not kwargs:
                given = dict(args[0])
            elif args and not kwargs:
                given = dict(zip(names, args))
            else:
                given = dict(kwargs)
            fixed = {}
            for name, value in given.items():
                shape = tuple(int(d) for d in getattr(value, "shape", np.shape(value)))
                fixed[name] = (len(shape), dict(enumerate(shape)))
            if not self._parse_again(model, fixed, keep_first=False):
                self._raise_import_errors()
            self._deferred = None
            self._imported(None)

    def _imported(self, shapes: Mapping[str, ShapeRange] | None) -> None:
        """Names and types from the imported network; the engine built where the shapes say enough."""
        self.input_names = [self.network.get_input(i).name for i in range(self.network.num_inputs)]
        self.output_names = [self.network.get_output(i).name for i in range(self.network.num_outputs)]
        self._declared = {
            t.name: tuple(t.shape) for t in (self.network.get_input(i) for i in range(self.network.num_inputs))
        }
        self._input_dtypes = {name: self._numpy_type(name, self._parser.input_types) for name in self.input_names}
        #: the NumPy type each input is computed in (looked up once, not at every call)
        self._engine_types = {
            t.name: np.dtype(t.dtype.nptype())
            for t in (self.network.get_input(i) for i in range(self.network.num_inputs))
        }
        self._output_dtypes = {name: self._numpy_type(name, self._parser.output_types) for name in self.output_names}
        #: the outputs whose type the model declares (the others are given as the engine computed them)
        self._typed_outputs = frozenset(self._parser.output_types)
        #: per input, the (type, shape) of the last array accepted as it is: the next one like it skips the checks
        self._accepted: list[tuple[np.dtype, tuple[int, ...]] | None] = [None] * len(self.input_names)
        if shapes is not None:
            self._build(self._check_ranges(shapes))
        elif all(-1 not in dims for dims in self._declared.values()):
            self._build({})

    # --- building ---------------------------------------------------------------------------
    def _parse(self, model: Any, fixed: FixedDims) -> bool:
        if isinstance(model, (str, os.PathLike)):
            if not fixed:
                return self._parser.parse_from_file(model)
            try:
                proto = onnx.load(os.fspath(model), load_external_data=False)
            except Exception:  # unreadable: the parser reports it, naming the file
                return self._parser.parse_from_file(model)
            return self._parser.parse(with_fixed_dims(proto, fixed), os.fspath(model))
        if fixed:
            if not isinstance(model, onnx.ModelProto):
                try:
                    model = onnx.load_from_string(bytes(model))
                except Exception:  # not a model: the parser reports it
                    return self._parser.parse(model, self._external_data_dir)
            model = with_fixed_dims(model, fixed)
        return self._parser.parse(model, self._external_data_dir)

    def _numpy_type(self, name: str, declared: Mapping[str, int]) -> np.dtype:
        tensor = next(
            t
            for t in (
                [self.network.get_input(i) for i in range(self.network.num_inputs)]
                + [self.network.get_output(i) for i in range(self.network.num_outputs)]
            )
            if t.name == name
        )
        onnx_type = onnx_numpy_dtype(declared[name]) if name in declared else None
        return onnx_type if onnx_type is not None else np.dtype(tensor.dtype.nptype())

    def _check_ranges(self, shapes: Mapping[str, ShapeRange]) -> dict[str, ShapeRange]:
        unknown = sorted(set(shapes) - set(self.input_names))
        if unknown:
            raise ShapeError(f"compile: shapes names {unknown}, which are not inputs; inputs: {self.input_names}")
        ranges: dict[str, ShapeRange] = {}
        for name, value in shapes.items():
            try:
                low, opt, high = (tuple(int(d) for d in s) for s in value)
            except (TypeError, ValueError):
                raise ShapeError(f"compile: shapes[{name!r}] must be (min, opt, max) shapes, got {value!r}") from None
            ranges[name] = (low, opt, high)
        return ranges

    def _build(self, ranges: Mapping[str, ShapeRange]) -> None:
        config = self._builder.create_builder_config()
        dynamic = [name for name, dims in self._declared.items() if -1 in dims]
        missing = [name for name in dynamic if name not in ranges]
        if missing:
            raise ShapeError(
                f"compile: inputs {missing} have dynamic dimensions; give their (min, opt, max) in shapes="
            )
        if dynamic or ranges:
            profile = self._builder.create_optimization_profile()
            for name, (low, opt, high) in ranges.items():
                profile.set_shape(name, low, opt, high)
            config.add_optimization_profile(profile)
        # in memory: the engine shares the network's weight arrays instead of copying them through plan bytes
        self.engine = self._runtime.engine_from_plan(self._builder.build_plan(self.network, config))
        self._host_run = HostRun(self.engine, profile_hint=_WIDEN_PROFILE)
        self.context = self._host_run.context
        self._host_call = None if self._runtime.backend.gpu else HostCall(self._host_run)
        self._converted = None
        if self.engine.packed_weights:
            # the engine holds those weights packed in oneDNN's layout instead of the network's arrays: the network
            # (and the parser, which refers to it) would keep a second copy of them alive
            self.network = None
            self._parser = None
            gc.collect()  # the network's layers refer to each other: freed by the collector, not by reference counts

    def serialize(self) -> bytes:
        """The engine's plan bytes (build first: call once, or pass ``shapes``)."""
        if self.engine is None:
            raise ExecutionError(
                "the engine is built at the first call (or give shapes= to compile); nothing to serialize yet"
            )
        return bytes(self.engine.serialize())

    # --- running ----------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, np.ndarray]:
        """Run on ``{name: array}`` (or keyword arrays, or arrays in input order); returns ``{name: array}``."""
        if self._deferred is not None:
            self._import_at_first_call(args, kwargs)
        return self._call(self._inputs(self._given(args, kwargs)), 0)

    run = __call__

    def execute(self, arrays: Mapping[str, Any], stream: int = 0) -> dict[str, Any]:
        """Run on ``{name: array}`` with the engine's work queued on ``stream`` (a CUDA stream handle on the GPU)."""
        if self._deferred is not None:
            self._import_at_first_call((arrays,), {})
        return self._call(self._inputs(self._given((arrays,), {})), stream)

    def _call(self, values: list[Any], stream: int) -> dict[str, np.ndarray]:
        with self._lock:
            if self.engine is None:  # built for this call's shapes
                given = zip(self.input_names, values)
                self._build({name: (a.shape,) * 3 for name, a in given if -1 in self._declared[name]})
            return self._run(values, stream)

    def _given(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The call's values in input order; wrong or missing names raise, naming the model's inputs."""
        names = self.input_names
        if len(args) == 1 and isinstance(args[0], Mapping) and not kwargs:
            given = args[0]
        elif args and not kwargs:
            if len(args) != len(names):
                raise TypeMismatchError(f"the model takes {len(names)} inputs {names}, got {len(args)} arrays")
            return list(args)
        elif not args:
            given = kwargs
        else:
            raise TypeMismatchError("pass the inputs as one dict, as keywords, or positionally; not mixed")
        if len(given) == len(names) and all(name in given for name in names):
            return [given[name] for name in names]
        unknown = sorted(set(given) - set(names))
        missing = [name for name in names if name not in given]
        parts = []
        if unknown:
            parts.append(f"unknown input name(s) {unknown}")
        if missing:
            parts.append(f"missing input(s) {missing}")
        raise TypeMismatchError(f"{'; '.join(parts)}; the model's inputs are {names}")

    def _inputs(self, values: list[Any]) -> list[Any]:
        """Each value checked and converted (:meth:`_convert`), except a contiguous array of the type the engine
        computes in and of the shape its input last accepted: the checks would pass again."""
        accepted = self._accepted
        out = []
        for k, (name, value) in enumerate(zip(self.input_names, values)):
            if type(value) is np.ndarray and value.flags.c_contiguous and accepted[k] == (value.dtype, value.shape):
                out.append(value)
                continue
            converted = self._convert(name, value)
            if converted is value and type(value) is np.ndarray:
                accepted[k] = (value.dtype, value.shape)
            out.append(converted)
        return out

    def _convert(self, name: str, value: Any) -> np.ndarray:
        declared = self._input_dtypes[name]
        engine_type = self._engine_types[name]
        if self._runtime.backend.gpu and _is_device_array(value):
            return self._convert_device(name, value, declared, engine_type)
        if not isinstance(value, np.ndarray):
            try:
                value = np.asarray(value, dtype=declared)
            except (TypeError, ValueError) as exc:
                raise TypeMismatchError(
                    f"input {name!r}: cannot make a {declared} array of {type(value).__name__}: {exc}"
                ) from None
        if value.dtype not in (declared, engine_type):
            raise TypeMismatchError(f"input {name!r} must be a {declared} array, got {value.dtype}")
        dims = self._declared[name]
        if value.ndim != len(dims) or any(d >= 0 and d != s for d, s in zip(dims, value.shape)):
            shown = tuple("?" if d < 0 else d for d in dims)
            raise ShapeError(f"input {name!r} must have shape {shown} ('?' is dynamic), got {value.shape}")
        converted = value.astype(engine_type, copy=False)
        return converted if converted.flags.c_contiguous else converted.copy(order="C")

    def network_input_type(self, name: str) -> type[np.generic]:
        """The NumPy type plugrt computes input ``name`` in."""
        if self.network is None:  # released after the build (see _build)
            if name in self._engine_types:
                return self._engine_types[name].type  # type: ignore[no-any-return]
            raise TypeMismatchError(f"{name!r} is not an input; inputs: {self.input_names}")
        for i in range(self.network.num_inputs):
            tensor = self.network.get_input(i)
            if tensor.name == name:
                return tensor.dtype.nptype()
        raise TypeMismatchError(f"{name!r} is not an input; inputs: {self.input_names}")

    def _convert_device(self, name: str, value: Any, declared: np.dtype, engine_type: np.dtype) -> Any:
        """A GPU array (CuPy, or anything with ``__cuda_array_interface__`` / DLPack) taken without a copy."""
        cp = self._runtime.backend.xp
        array = cp.asarray(value) if hasattr(value, "__cuda_array_interface__") else cp.from_dlpack(value)
        if array.dtype not in (declared, engine_type):
            raise TypeMismatchError(f"input {name!r} must be a {declared} array, got {array.dtype}")
        dims = self._declared[name]
        if array.ndim != len(dims) or any(d >= 0 and d != s for d, s in zip(dims, array.shape)):
            shown = tuple("?" if d < 0 else d for d in dims)
            raise ShapeError(f"input {name!r} must have shape {shown} ('?' is dynamic), got {array.shape}")
        return cp.ascontiguousarray(array.astype(engine_type, copy=False))

    def _run(self, values: list[Any], stream: int = 0) -> dict[str, Any]:
        if self._host_call is not None:  # the CPU: what the shapes decide is kept from call to call
            results = self._host_call(values, stream)
            delivered = dict(zip(self.output_names, results))
            if self._converted is None:  # the engine's output types: the same at every call
                self._converted = [n for n, a in delivered.items() if self._deliver(n, a) is not a]
            for name in self._converted:
                delivered[name] = self._deliver(name, delivered[name])
            return delivered
        run = self._host_run
        arrays = dict(zip(self.input_names, values))
        host_out = all(isinstance(a, np.ndarray) for a in arrays.values())  # host in, host out
        run.bind_arrays(arrays)  # host arrays are uploaded to a device; device arrays are used in place
        run.allocate(run.output_names)  # new arrays each call: they are handed to the caller
        run.execute(stream)
        outputs = run.output_arrays()
        if host_out:
            outputs = {name: run.backend.to_host(array) for name, array in outputs.items()}
        return {name: self._deliver(name, outputs[name]) for name in self.output_names}

    def _deliver(self, name: str, array: np.ndarray) -> np.ndarray:
        if name not in self._typed_outputs:  # the model declares no type: give what the engine computed
            return array
        wanted = self._output_dtypes[name]
        return array if array.dtype == wanted else array.astype(wanted)

    def __repr__(self) -> str:
        return f"CompiledModel(inputs={self.input_names}, outputs={self.output_names}, device={self.device!r})"


def _is_device_array(value: Any) -> bool:
    """True for GPU arrays: CuPy, or any object exposing ``__cuda_array_interface__`` (torch, JAX via DLPack)."""
    if hasattr(value, "__cuda_array_interface__"):
        return True
    device = getattr(value, "__dlpack_device__", None)
    try:
        return device is not None and device()[0] == 2  # kDLCUDA
    except Exception:
        return False
