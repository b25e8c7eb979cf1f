"""ONNX's backend API over plugrt, so ONNX's own test suite runs on it.

>>> import onnx.backend.test  # doctest: +SKIP
>>> import plugrt.onnx.backend
>>> suite = onnx.backend.test.BackendTest(plugrt.onnx.backend, __name__)  # doctest: +SKIP

``prepare`` imports the model (unsupported models fail there, listing every
problem); ``BackendRep.run`` builds an engine per input-shape signature, with
the graph inputs fixed to the given shapes (min = opt = max), and caches it.

plugrt (like TensorRT) needs some values when the engine is built: Reshape's
shape, reduction axes and the like. TensorRT takes them through shape-tensor
inputs; when a model feeds them from graph inputs (as many of ONNX's node
tests do) and so does not import as it is, this backend folds the inputs of
rank 0 or 1 into the engine as constants, building one engine per distinct value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.base import Backend, BackendRep, namedtupledict

from ..backends.registry import DEVICES, get_backend
from ..core.errors import TypeMismatchError
from ..core.logger import ILogger, Logger, Severity
from .compile import CompiledModel
from .importers.base import OnnxImportError
from .parser import OnnxParser
from .types import onnx_numpy_dtype

__all__ = ["PlugrtBackend", "PlugrtBackendRep", "prepare", "run_model", "run_node", "supports_device"]

Signature = tuple[tuple[tuple[int, ...], str], ...]


def _device(device: str) -> str:
    name = str(device).split(":")[0].lower()
    if name not in DEVICES:
        choices = " and ".join(repr(d.upper()) for d in DEVICES)
        raise TypeMismatchError(f"unknown ONNX backend device {device!r}; plugrt runs on {choices}")
    return name


class PlugrtBackendRep(BackendRep):
    """A prepared model: call :meth:`run` with the inputs (a list in graph order, or a dict)."""

    def __init__(self, model: onnx.ModelProto, device: str = "CPU", logger: ILogger | None = None) -> None:
        self.model = model
        self.device = _device(device)
        # Errors reach the caller as exceptions; the logger only shows what is worse.
        self.logger: ILogger = logger or Logger(Severity.INTERNAL_ERROR)
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [v.name for v in model.graph.input if v.name not in initializers]
        self.output_names = [v.name for v in model.graph.output]
        self._engines: dict[Signature, CompiledModel] = {}
        #: small int inputs whose values the model needs at build time (folded in, one engine per value)
        self.baked: list[str] = []
        try:
            declared = self._declared_signature()
            if declared is not None:
                # Static inputs: build now (this also checks that the model imports).
                self._engines[declared] = CompiledModel(self.model, device=self.device, logger=self.logger)
            else:
                self._check_imports()
        except OnnxImportError:
            self.baked = self._value_candidates()
            if not self.baked:
                raise

    def _value_candidates(self) -> list[str]:
        """Graph inputs that may hold build-time values, as TensorRT's shape tensors do.

        Those of rank 0 or 1 from which a parameter position of a node is computed
        (any input but the first; every input of Range and ConstantOfShape).
        """
        nodes = list(self.model.graph.node)
        parameters: set[str] = set()
        for node in nodes:
            parameters.update(node.input[0 if node.op_type in ("Range", "ConstantOfShape") else 1 :])
        grown = True
        while grown:
            grown = False
            for node in nodes:
                if any(out in parameters for out in node.output) and not set(node.input) <= parameters:
                    parameters.update(node.input)
                    grown = True
        by_name = {v.name: v for v in self.model.graph.input}
        found = []
        for name in self.input_names:
            tensor_type = by_name[name].type.tensor_type
            if name in parameters and tensor_type.HasField("shape") and len(tensor_type.shape.dim) <= 1:
                found.append(name)
        return found

    def _declared_signature(self) -> Signature | None:
        by_name = {v.name: v for v in self.model.graph.input}
        signature = []
        for name in self.input_names:
            tensor_type = by_name[name].type.tensor_type
            dims = tensor_type.shape.dim
            dtype = onnx_numpy_dtype(tensor_type.elem_type)
            if not tensor_type.HasField("shape") or dtype is None or any(not d.HasField("dim_value") for d in dims):
                return None
            signature.append((tuple(int(d.dim_value) for d in dims), dtype.str))
        return tuple(signature)

    def _check_imports(self) -> None:
        from ..builder.builder import Builder

        builder = Builder(self.logger)
        parser = OnnxParser(builder.create_network(0), self.logger)
        if not parser.parse(self.model):
            errors = "\n  ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise OnnxImportError(f"the ONNX model could not be imported:\n  {errors}")

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on ``inputs``; returns the outputs in graph order (a named tuple)."""
        arrays = self._arrays(inputs)
        signature: Signature = tuple(
            (a.shape, a.dtype.str + (a.tobytes().hex() if name in self.baked else ""))
            for name, a in zip(self.input_names, arrays)
        )
        compiled = self._engines.get(signature)
        if compiled is None:
            compiled = CompiledModel(self._fixed(arrays), device=self.device, logger=self.logger)
            self._engines[signature] = compiled
        results = compiled({n: a for n, a in zip(self.input_names, arrays) if n not in self.baked})
        return namedtupledict("Outputs", self.output_names)(*[results[name] for name in self.output_names])  # type: ignore[no-any-return]

    def _arrays(self, inputs: Any) -> list[np.ndarray]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, Mapping):
            missing = [name for name in self.input_names if name not in inputs]
            if missing:
                raise TypeMismatchError(f"missing inputs {missing}; the model's inputs are {self.input_names}")
            inputs = [inputs[name] for name in self.input_names]
        if not isinstance(inputs, Sequence) or len(inputs) != len(self.input_names):
            count = len(inputs) if isinstance(inputs, Sequence) else 1
            raise TypeMismatchError(f"the model takes {len(self.input_names)} inputs {self.input_names}, got {count}")
        arrays = []
        for name, value in zip(self.input_names, inputs):
            try:
                arrays.append(np.asarray(value))
            except ValueError as exc:
                raise TypeMismatchError(
                    f"input {name!r} is not a tensor (sequences are not supported): {exc}"
                ) from None
        return arrays

    def _fixed(self, arrays: list[np.ndarray]) -> onnx.ModelProto:
        """The model with its graph inputs' shapes set to the arrays' (one engine per signature)."""
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        by_name = {v.name: v for v in model.graph.input}
        for name, array in zip(self.input_names, arrays):
            if name in self.baked:
                model.graph.input.remove(by_name[name])
                model.graph.initializer.append(numpy_helper.from_array(array, name))
                continue
            shape = by_name[name].type.tensor_type.shape
            del shape.dim[:]
            for size in array.shape:
                shape.dim.add().dim_value = int(size)
        return model


class PlugrtBackend(Backend):
    """ONNX's ``Backend`` for plugrt (CPU; CUDA where plugrt's CUDA backend is usable)."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        """Whether the model imports."""
        try:
            PlugrtBackendRep(model, device)
        except Exception:
            return False
        return True

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> PlugrtBackendRep:
        """Import ``model`` (raising on unsupported parts); engines are built at ``run``."""
        return PlugrtBackendRep(model, device, kwargs.get("logger"))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        """Prepare and run once."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: onnx.NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node on ``inputs`` (in the node's input order)."""
        arrays = [np.asarray(a) for a in (inputs.values() if isinstance(inputs, Mapping) else inputs)]
        names = [n for n in node.input if n]
        graph_inputs = [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for name, a in zip(names, arrays)
        ]
        outputs = []
        for index, name in enumerate(n for n in node.output if n):
            elem = TensorProto.UNDEFINED
            if outputs_info is not None and index < len(outputs_info):
                elem = helper.np_dtype_to_tensor_dtype(np.dtype(outputs_info[index][0]))
            outputs.append(helper.make_tensor_value_info(name, elem, None))
        opset = int(kwargs.get("opset_version", onnx.defs.onnx_opset_version()))
        graph = helper.make_graph([node], "run_node", graph_inputs, outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """CPU always; CUDA when plugrt's CUDA backend (CuPy and a GPU) is usable."""
        try:
            get_backend(_device(device))
        except Exception:  # an unknown device, or CUDA without CuPy or a GPU
            return False
        return True


prepare = PlugrtBackend.prepare
run_model = PlugrtBackend.run_model
run_node = PlugrtBackend.run_node
supports_device = PlugrtBackend.supports_device
is_compatible = PlugrtBackend.is_compatible
