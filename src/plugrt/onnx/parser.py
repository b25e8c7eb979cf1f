"""``OnnxParser``: an ONNX model into an ``INetworkDefinition``, as TensorRT's parser does it.

>>> import plugrt as trt
>>> logger = trt.Logger(trt.Logger.WARNING)
>>> network = trt.Builder(logger).create_network(0)
>>> parser = trt.OnnxParser(network, logger)
>>> parser.parse(b"not a model"), parser.num_errors
(False, 1)

The model is checked first (opset, graph inputs and outputs, producers of every
node input, cycles). Initializers become constants whose values stay known to
importers (constant folding); graph inputs become network inputs, with -1 where
a dimension is symbolic or unknown (the optimization profile gives the range);
graph outputs are marked with their ONNX names, and every tensor is named as in
the model. Each node goes to its op's importer, or -- when there is none, or
the node asks for a plugin with a ``plugin_namespace`` attribute -- to the
plugin registry (:mod:`plugrt.onnx.plugin_fallback`); an op with neither that
ONNX defines as a function is expanded into its body (:mod:`plugrt.onnx.functions`).
The work of one parse is :class:`~plugrt.onnx.model_import.ModelImport`. Failures become
:class:`ParserError` records (``parse`` returns False), never exceptions; nodes
that depend on a failed node are skipped, so independent problems are all
reported at once.
"""

from __future__ import annotations

import os
from typing import Any

import onnx

from ..core.context_manager import DeprecatedContextManager
from ..core.enums import TrtEnum
from ..core.errors import PlugrtError, TypeMismatchError
from ..core.logger import ILogger, Severity
from ..network.definition import INetworkDefinition
from .errors import ErrorCode, ParserError
from .importers.base import importer_for, registered_ops
from .model_import import MIN_OPSET, ModelImport

__all__ = ["MIN_OPSET", "OnnxParser", "OnnxParserFlag"]


class OnnxParserFlag(TrtEnum):
    """Flags of :meth:`OnnxParser.set_flag` (TensorRT's values; plugrt's importers ignore them)."""

    NATIVE_INSTANCENORM = 0


class OnnxParser(DeprecatedContextManager):
    """Parses ONNX models into ``network`` (TensorRT's ``OnnxParser``).

    Beyond TensorRT, after a parse :attr:`input_types` and :attr:`output_types`
    hold the ONNX element type (``onnx.TensorProto`` values) that the model
    declares for each graph input and output.
    """

    def __init__(self, network: INetworkDefinition, logger: ILogger) -> None:
        if not isinstance(network, INetworkDefinition):
            raise TypeMismatchError(f"OnnxParser takes an INetworkDefinition, got {type(network).__name__}")
        if logger is not None and not isinstance(logger, ILogger):
            raise TypeMismatchError(f"OnnxParser takes an ILogger, got {type(logger).__name__}")
        self.network = network
        self.logger = logger
        self.flags = 0
        self.input_types: dict[str, int] = {}
        self.output_types: dict[str, int] = {}
        self._errors: list[ParserError] = []

    # --- errors --------------------------------------------------------------------------
    @property
    def num_errors(self) -> int:
        """Number of errors recorded by previous parses (until :meth:`clear_errors`)."""
        return len(self._errors)

    def get_error(self, index: int) -> ParserError:
        """Error ``index``."""
        if not isinstance(index, int) or not 0 <= index < len(self._errors):
            raise IndexError(f"the parser holds {len(self._errors)} errors; index {index!r} is out of range")
        return self._errors[index]

    def clear_errors(self) -> None:
        """Forget the recorded errors."""
        self._errors.clear()

    # --- flags ---------------------------------------------------------------------------
    def set_flag(self, flag: OnnxParserFlag) -> None:
        """Set a parser flag."""
        self.flags |= 1 << int(OnnxParserFlag(flag))

    def clear_flag(self, flag: OnnxParserFlag) -> None:
        """Clear a parser flag."""
        self.flags &= ~(1 << int(OnnxParserFlag(flag)))

    def get_flag(self, flag: OnnxParserFlag) -> bool:
        """Whether a parser flag is set."""
        return bool(self.flags & (1 << int(OnnxParserFlag(flag))))

    # --- queries ---------------------------------------------------------------------------
    def supports_operator(self, op_name: str) -> bool:
        """Whether op ``op_name`` has a built-in importer or a registered plugin creator of that name."""
        if not isinstance(op_name, str):
            return False
        if importer_for(op_name) is not None:
            return True
        from ..interfaces.registry import get_plugin_registry

        return any(c.name == op_name for c in get_plugin_registry().all_creators)

    @staticmethod
    def supported_operators() -> list[str]:
        """Op types of the default domain with a built-in importer (a plugrt extension)."""
        return registered_ops()

    def supports_model(self, model: Any, path: str | None = None) -> tuple[bool, list[tuple[list[int], bool]]]:
        """Whether ``model`` parses, and its nodes as one subgraph (plugrt does not partition graphs).

        Parses into a scratch network, so this parser's network is left unchanged.
        """
        scratch = OnnxParser(INetworkDefinition(self.network.flags), self.logger)
        ok = scratch.parse(model, path)
        self._errors.extend(scratch._errors)
        count = len(scratch._last_nodes)
        return ok, [(list(range(count)), ok)]

    # --- parsing ---------------------------------------------------------------------------
    def parse_from_file(self, model: str | os.PathLike[str]) -> bool:
        """Parse the ONNX file at ``model`` (external data is read from its folder)."""
        path = os.fspath(model)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            self._error(
                ErrorCode.MODEL_DESERIALIZE_FAILED, f"cannot read ONNX file {path!r}: {exc}", func="parseFromFile"
            )
            return False
        return self.parse(data, path)

    def parse(self, model: Any, path: str | None = None) -> bool:
        """Parse a serialized ONNX model (bytes; an ``onnx.ModelProto`` is accepted too) into the network.

        ``path`` is the model file's path (or the folder holding its external weights), needed only for
        external weights: without it, a model that keeps data in external files is refused (see
        :mod:`plugrt.onnx.external_data`).
        Returns False when anything failed; see :attr:`num_errors` and :meth:`get_error`.
        """
        self._last_nodes: list[Any] = []
        proto = self._deserialize(model)
        if proto is None:
            return False
        before = len(self._errors)
        try:
            ModelImport(self, proto, path).run()
        except PlugrtError as exc:
            self._error(ErrorCode.INVALID_GRAPH, str(exc), func="parseGraph")
        except RecursionError:
            self._error(ErrorCode.INVALID_GRAPH, "the model is nested too deeply to import", func="parseGraph")
        except Exception as exc:  # a safety net: parsing never raises anything else
            self._error(ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", func="parseGraph")
        return len(self._errors) == before

    def _deserialize(self, model: Any) -> Any:
        if isinstance(model, onnx.ModelProto):
            return model
        if isinstance(model, (str, os.PathLike)):
            self._error(
                ErrorCode.MODEL_DESERIALIZE_FAILED,
                f"parse takes the model's bytes, got a {type(model).__name__} ({str(model)[:80]!r}); "
                "use parse_from_file for a path",
                func="parse",
            )
            return None
        try:
            data = bytes(model)
        except TypeError:
            self._error(
                ErrorCode.MODEL_DESERIALIZE_FAILED,
                f"parse takes the model's bytes (bytes, bytearray, memoryview), got {type(model).__name__}",
                func="parse",
            )
            return None
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(data)
        except Exception as exc:
            self._error(
                ErrorCode.MODEL_DESERIALIZE_FAILED,
                f"the {len(data)} bytes are not a valid ONNX model (truncated or corrupt protobuf: {exc})",
                func="parse",
            )
            return None
        return proto

    def _error(
        self,
        code: ErrorCode,
        desc: str,
        index: int = -1,
        node: Any = None,
        func: str = "",
    ) -> None:
        error = ParserError(
            code,
            desc,
            index,
            node.name if node is not None else "",
            node.op_type if node is not None else "",
            func,
        )
        self._errors.append(error)
        if self.logger is not None:
            self.logger.emit(Severity.ERROR, str(error))
