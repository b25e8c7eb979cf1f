"""``Runtime``: turns plan bytes back into an engine."""

from __future__ import annotations

from typing import Any

from ..core.errors import PlanFormatError, PlugrtError, TypeMismatchError
from ..core.logger import ILogger, Logger, Severity
from ..plugin.registry import IPluginRegistry, get_plugin_registry
from .engine import ICudaEngine
from .plan import EnginePlan

__all__ = ["Runtime"]


class Runtime:
    """Deserializes engines (TensorRT's ``Runtime``).

    Plugins are recreated only through creators already in the registry: a plan
    cannot make plugrt import or evaluate anything.
    """

    def __init__(self, logger: ILogger | None = None, device: str = "cpu") -> None:
        if logger is not None and not isinstance(logger, ILogger):
            raise TypeMismatchError(f"Runtime takes an ILogger, got {type(logger).__name__}")
        self.logger: ILogger = logger or Logger()
        self.device = device
        self.plugin_registry: IPluginRegistry = get_plugin_registry()

    def _backend(self) -> Any:
        from ..backends.cpu import CpuBackend

        if self.device != "cpu":
            from ..core.errors import MissingBackendError

            raise MissingBackendError(f"device {self.device!r} is not available; this build of plugrt runs on 'cpu'")
        return CpuBackend()

    def deserialize_cuda_engine(self, serialized_engine: bytes | bytearray | memoryview) -> ICudaEngine:
        """The engine in ``serialized_engine``.

        Unlike TensorRT (which returns None), failures raise: a damaged plan
        :class:`~plugrt.PlanFormatError`, an unregistered plugin
        :class:`~plugrt.CreatorNotFoundError` naming it and what is registered.
        """
        if not isinstance(serialized_engine, (bytes, bytearray, memoryview)):
            raise TypeMismatchError(f"deserialize_cuda_engine takes bytes, got {type(serialized_engine).__name__}")
        try:
            plan = EnginePlan.from_bytes(serialized_engine)
            return ICudaEngine(plan, bytes(serialized_engine), self.plugin_registry, self.logger, self._backend())
        except PlugrtError as exc:
            self.logger.emit(Severity.ERROR, f"deserialize_cuda_engine failed: {exc}")
            raise
        except RecursionError:
            raise PlanFormatError("plan is nested too deeply to read") from None
        except Exception as exc:  # a safety net: a plan must never surface anything but PlugrtError
            self.logger.emit(Severity.ERROR, f"deserialize_cuda_engine failed: {type(exc).__name__}: {exc}")
            raise PlanFormatError(f"plan could not be loaded: {type(exc).__name__}: {exc}") from exc
