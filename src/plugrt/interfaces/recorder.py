"""The plugin call recorder: every hook call with its phase, in order.

>>> import plugrt as trt
>>> with trt.trace_plugin_calls() as trace:
...     pass  # build, deserialize and run engines here
>>> trace.calls
[]

The same lines go to the logger at VERBOSE severity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..core.errors import PluginError, PlugrtError
from ..core.finalizers import run_pending
from ..core.logger import ILogger, Severity

__all__ = ["ENGINE_ERRORS", "CallRecorder", "ErrorPolicy", "Phase", "PluginCall", "PluginCaller", "trace_plugin_calls"]


class Phase:
    """Names of the phases a plugin call can happen in."""

    BUILD = "build"
    SERIALIZE = "serialize"
    DESERIALIZE = "deserialize"
    CONTEXT = "context"
    SHAPE_CHANGE = "shape_change"
    INFERENCE = "inference"
    TEARDOWN = "teardown"
    #: plugrt's own check when a plan loads, not a TensorRT call: a throwaway clone of each revived plugin
    #: is asked its output shapes, which must match the plan's (``docs/safety.md``)
    LOAD_CHECK = "load_check"


@dataclass(frozen=True)
class PluginCall:
    """One recorded hook call."""

    phase: str
    layer: str
    plugin: str
    method: str

    def __str__(self) -> str:
        return f"[{self.phase:>12}] {self.layer}: {self.plugin}.{self.method}"


class CallRecorder:
    """Collects :class:`PluginCall` records (thread-safe)."""

    def __init__(self) -> None:
        self.calls: list[PluginCall] = []
        self._lock = threading.Lock()

    def add(self, call: PluginCall) -> None:
        """Record one call."""
        with self._lock:
            self.calls.append(call)

    def methods(self, layer: str | None = None, phase: str | None = None) -> list[str]:
        """Method names in call order, optionally for one layer and/or phase."""
        return [
            c.method
            for c in list(self.calls)
            if (layer is None or c.layer == layer) and (phase is None or c.phase == phase)
        ]

    def format(self) -> str:
        """The trace as text, one call per line."""
        return "\n".join(str(c) for c in list(self.calls))


_ACTIVE: list[CallRecorder] = []
_ACTIVE_LOCK = threading.Lock()


@contextmanager
def trace_plugin_calls() -> Iterator[CallRecorder]:
    """Record every plugin hook call made inside the ``with`` block.

    Releases of engines and contexts the garbage collector queued earlier run first
    (:func:`~plugrt.core.finalizers.run_pending`): their teardown calls belong before the block.
    """
    run_pending()
    recorder = CallRecorder()
    with _ACTIVE_LOCK:
        _ACTIVE.append(recorder)
    try:
        yield recorder
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.remove(recorder)


def _context_error(exc: BaseException, context: str) -> PlugrtError:
    if isinstance(exc, PlugrtError):
        try:
            return type(exc)(f"{context}: {exc}")
        except TypeError:
            return PluginError(f"{context}: {exc}")
    return PluginError(f"{context} raised {type(exc).__name__}: {exc}")


class ErrorPolicy:
    """What a :class:`PluginCaller` raises when a hook fails.

    ``raised``: the hook raised ``exc``; ``rejected``: the hook returned something the
    adapter does not accept (``detail`` follows the hook's name, e.g. ``" returned -1;
    expected a non-negative int"``). This default is the engine's: a :class:`PlugrtError`
    naming the layer, the plugin and the hook. The conformance checker passes its own
    policy, which attributes the failure to the check that owns the hook.
    """

    def raised(self, caller: PluginCaller, phase: str, method: str, exc: Exception) -> Exception:
        """The error for a hook that raised ``exc``."""
        return _context_error(exc, caller.describe(method))

    def rejected(
        self, caller: PluginCaller, phase: str, method: str, detail: str, kind: type[PlugrtError]
    ) -> Exception:
        """The error for a hook whose answer is refused: a ``kind`` naming layer, plugin and hook."""
        return kind(f"{caller.describe(method)}{detail}")


#: The engine's policy (builder, runtime, executor).
ENGINE_ERRORS = ErrorPolicy()


class PluginCaller:
    """Calls a plugin's hooks: records, logs and turns exceptions into errors by its :class:`ErrorPolicy`.

    With the engine's policy every message names the layer, the plugin (type, version,
    namespace) and the hook.
    """

    def __init__(
        self, plugin: Any, layer: str, label: str, logger: ILogger | None, policy: ErrorPolicy | None = None
    ) -> None:
        self.plugin = plugin
        self.layer = layer
        self.label = label
        self.logger = logger
        self.policy = policy or ENGINE_ERRORS
        self._verbose = logger is not None and logger.enabled(Severity.VERBOSE)

    def describe(self, method: str) -> str:
        """'layer 'x' plugin Foo v1 (namespace '') hook enqueue'."""
        return f"layer {self.layer!r}, plugin {self.label}, {method}()"

    def fail(
        self, method: str, detail: str, kind: type[PlugrtError] = PluginError, phase: str = Phase.BUILD
    ) -> Exception:
        """The error to raise when ``method``'s answer is refused (``detail`` follows the hook's name)."""
        return self.policy.rejected(self, phase, method, detail, kind)

    def with_plugin(self, plugin: Any) -> PluginCaller:
        """A caller for another object of the same plugin (a capability interface) in the same layer."""
        return PluginCaller(plugin, self.layer, self.label, self.logger, self.policy)

    def __call__(self, phase: str, method: str, *args: Any) -> Any:
        """Call ``plugin.method(*args)`` in ``phase``."""
        self.note(phase, method)
        try:
            hook: Callable[..., Any] = getattr(self.plugin, method)
            return hook(*args)
        except Exception as exc:
            raise self.policy.raised(self, phase, method, exc) from exc

    def bound(self, phase: str, method: str) -> Callable[..., Any]:
        """A fast callable for one hook, used on the inference path."""
        hook: Callable[..., Any] = getattr(self.plugin, method)
        note = self.note
        verbose = self._verbose
        raised = self.policy.raised

        def call(*args: Any) -> Any:
            if _ACTIVE or verbose:
                note(phase, method)
            try:
                return hook(*args)
            except Exception as exc:
                raise raised(self, phase, method, exc) from exc

        return call

    def note(self, phase: str, method: str) -> None:
        """Record and log a call without making it."""
        if _ACTIVE:
            call = PluginCall(phase, self.layer, self.label, method)
            for recorder in list(_ACTIVE):
                recorder.add(call)
        if self._verbose:
            assert self.logger is not None
            self.logger.log(Severity.VERBOSE, f"[plugin] {PluginCall(phase, self.layer, self.label, method)}")
