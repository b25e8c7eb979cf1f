"""CUDA graphs of a context's runs: replaying a run's launches in one call instead of launching each layer.

``IExecutionContext.use_cuda_graph`` (a plugrt extension) picks the mode. True captures the first run for the
current shapes and addresses and replays it afterwards (an error where the run cannot be captured). None, the
default, does the same without being asked where it is safe and repeats: the second run with unchanged shapes
and addresses on one non-default stream runs eagerly and then captures itself, and later runs replay. Plans
with plugins (an enqueue may do host work a replay would skip), control flow or data-dependent sizes (both read
values back during a run), a stream the caller is capturing, and a capture that failed once stay eager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..backends.base import Graph
from ..core.errors import ExecutionError
from ..core.logger import Severity

if TYPE_CHECKING:
    from .executor import Executor
    from .plan import EnginePlan

__all__ = ["GraphRuns"]

#: layer kinds that read values back to the host during a run (a graph would freeze their choice)
_READS_BACK = frozenset({"if", "loop", "scan"})


class GraphRuns:
    """The captured graph of one executor's current binding, and whether its runs may be captured at all. The
    executor is passed to each call, not kept (a reference back would make a cycle that keeps a released
    context's nodes, and its plugin clones, alive until the garbage collector runs)."""

    def __init__(self) -> None:
        #: why runs are not replayed automatically ("": they may be; None: not yet asked)
        self._refused: str | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the graph: the executor bound new shapes or addresses."""
        self.graph: Graph | None = None
        #: the stream the graph was captured on (a bind resets the graph; the launches are per stream)
        self._stream = -1
        #: (stream, eager runs on it since the last reset)
        self._runs = (-1, 0)

    def _replay(self, stream: int) -> bool:
        if self.graph is not None and self._stream == stream:
            self.graph.launch(stream)
            return True
        return False

    def _capture(self, executor: Executor, stream: int, warm: bool) -> None:
        self.graph = executor.backend.capture(lambda: executor.run_static(stream), stream, warm=warm)
        self._stream = stream

    def run(self, executor: Executor, stream: int) -> bool:
        """Replay the run (True), capturing it first for the current shapes and addresses (that call runs
        eagerly once, then captures: see :meth:`Backend.capture`; False)."""
        if executor.upper:
            raise ExecutionError("CUDA graphs cannot hold data-dependent shapes: the sizes must be read back")
        if self._replay(stream):
            return True
        self._capture(executor, stream, warm=True)
        return False

    def run_auto(self, executor: Executor, stream: int) -> bool:
        """Run, replaying where the module's note allows (True); each eager run's results are its own."""
        if executor.upper or not stream or self.refusal(executor.plan) or executor.backend.capturing(stream):
            executor.run(stream)
            return False
        if self._replay(stream):
            return True
        executor.run_static(stream)
        last, runs = self._runs
        self._runs = (stream, runs + 1 if last == stream else 1)
        if self._runs[1] >= 2:
            try:
                self._capture(executor, stream, warm=False)
            except Exception as exc:  # this run's results stand (it ran eagerly); later runs stay eager
                self.graph = None
                self._refused = f"its capture failed ({type(exc).__name__}: {exc})"
                executor.engine.logger.emit(
                    Severity.WARNING,
                    f"runs of this engine are not replayed as a CUDA graph: {self._refused}; "
                    "set use_cuda_graph = False to skip the attempt",
                )
        return False

    def refusal(self, plan: EnginePlan) -> str | None:
        """Why runs of ``plan`` (the executor's) are not replayed automatically (None: they may be)."""
        if self._refused is None:
            self._refused = ""
            for layer in plan.layers:
                if layer.is_plugin:
                    what = "a plugin"
                elif layer.size_outputs:
                    what = "data-dependent (it writes sizes)"
                elif layer.kind in _READS_BACK:
                    what = f"control flow ({layer.kind})"
                else:
                    continue
                self._refused = f"layer {layer.name!r} is {what}"
                break
        return self._refused or None
