"""Per-layer times collected through ``IProfiler`` for ``--dumpProfile`` / ``--exportProfile``."""

from __future__ import annotations

from typing import Any

from ..engine.profiler import IProfiler

__all__ = ["LayerTimes"]


class LayerTimes(IProfiler):
    """Accumulates each layer's time over runs, in first-seen order."""

    def __init__(self) -> None:
        super().__init__()
        self.total_ms: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def report_layer_time(self, layer_name: str, ms: float) -> None:
        self.total_ms[layer_name] = self.total_ms.get(layer_name, 0.0) + ms
        self.count[layer_name] = self.count.get(layer_name, 0) + 1

    def to_json(self) -> list[dict[str, Any]]:
        """trtexec's profile layout: name, total time, average, percentage."""
        total = sum(self.total_ms.values()) or 1.0
        return [
            {"name": name, "timeMs": ms, "averageMs": ms / self.count[name], "percentage": 100 * ms / total}
            for name, ms in self.total_ms.items()
        ]

    def format(self) -> str:
        """A table, one line per layer."""
        rows = self.to_json()
        lines = [f"[I] {'Time(ms)':>10} {'Avg(ms)':>10} {'Time(%)':>8}   Layer"]
        lines += [
            f"[I] {r['timeMs']:>10.4f} {r['averageMs']:>10.4f} {r['percentage']:>8.1f}   {r['name']}" for r in rows
        ]
        return "\n".join(lines)
