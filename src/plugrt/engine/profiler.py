"""``IProfiler``: per-layer times of each run, as TensorRT reports them."""

from __future__ import annotations

from ..interfaces.hooks import missing_hook

__all__ = ["IProfiler"]


class IProfiler:
    """Set ``context.profiler`` to receive ``report_layer_time(layer_name, ms)`` for every layer run.

    On the GPU each layer is synchronised to time it, so profiled runs are slower.
    """

    def __init__(self) -> None:
        pass

    def report_layer_time(self, layer_name: str, ms: float) -> None:
        """One layer's time in milliseconds. Required."""
        missing_hook(self, "report_layer_time", "IProfiler")
