"""``Runtime``: turns plan bytes back into an engine."""

from __future__ import annotations

from collections.abc import Callable

from ..backends.base import Backend
from ..backends.registry import DEFAULT_DEVICE, get_backend, using_backend
from ..core.context_manager import DeprecatedContextManager
from ..core.errors import PlanFormatError, PlugrtError, TypeMismatchError
from ..core.finalizers import run_pending
from ..core.logger import ILogger, Logger, Severity
from ..interfaces.registry import IPluginRegistry, get_plugin_registry
from .engine import ICudaEngine
from .plan import EnginePlan

__all__ = ["Runtime"]


class Runtime(DeprecatedContextManager):
    """Deserializes engines (TensorRT's ``Runtime``).

    Plugins are recreated only through creators already in the registry: a plan
    cannot make plugrt import or evaluate anything.
    """

    def __init__(self, logger: ILogger | None = None, device: str = DEFAULT_DEVICE) -> None:
        """``device`` is 'cpu' (NumPy, the default) or 'cuda' (CuPy; a plugrt extension)."""
        if logger is not None and not isinstance(logger, ILogger):
            raise TypeMismatchError(f"Runtime takes an ILogger, got {type(logger).__name__}")
        self.logger: ILogger = logger or Logger()
        self.device = device
        self.backend = get_backend(device)  # fails now, not at the first plan, when the device is unusable
        self.plugin_registry: IPluginRegistry = get_plugin_registry()

    def _backend(self) -> Backend:
        return self.backend

    def engine_from_plan(self, plan: EnginePlan) -> ICudaEngine:
        """An engine from a plan built in this process (:meth:`Builder.build_plan`), as
        :meth:`deserialize_cuda_engine` makes it from the plan's bytes (the same header checks and plugin
        revival) but sharing the plan's weight arrays instead of copying them into bytes and back: the
        weights are then in memory once. The plan's bytes are written only if the engine is serialized."""
        run_pending()
        if not isinstance(plan, EnginePlan):
            raise TypeMismatchError(f"engine_from_plan takes an EnginePlan, got {type(plan).__name__}")
        return self._engine(lambda: (plan.reloaded(), None))

    def deserialize_cuda_engine(self, serialized_engine: bytes | bytearray | memoryview) -> ICudaEngine:
        """The engine in ``serialized_engine``.

        Unlike TensorRT (which returns None), failures raise: a damaged plan
        :class:`~plugrt.PlanFormatError`, an unregistered plugin
        :class:`~plugrt.CreatorNotFoundError` naming it and what is registered.
        """
        run_pending()
        if not isinstance(serialized_engine, (bytes, bytearray, memoryview)):
            raise TypeMismatchError(f"deserialize_cuda_engine takes bytes, got {type(serialized_engine).__name__}")
        return self._engine(lambda: (EnginePlan.from_bytes(serialized_engine), bytes(serialized_engine)))

    def _engine(self, load: Callable[[], tuple[EnginePlan, bytes | None]]) -> ICudaEngine:
        try:
            plan, data = load()
            backend = self._backend()
            with using_backend(backend):
                return ICudaEngine(plan, data, self.plugin_registry, self.logger, backend)
        except PlugrtError as exc:
            self.logger.emit(Severity.ERROR, f"deserialize_cuda_engine failed: {exc}")
            raise
        except RecursionError:
            raise PlanFormatError("plan is nested too deeply to read") from None
        except Exception as exc:  # a safety net: a plan must never surface anything but PlugrtError
            self.logger.emit(Severity.ERROR, f"deserialize_cuda_engine failed: {type(exc).__name__}: {exc}")
            raise PlanFormatError(f"plan could not be loaded: {type(exc).__name__}: {exc}") from exc
