"""Latency statistics and the trtexec-style performance summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Timing", "format_summary", "summarize"]


@dataclass(frozen=True)
class Timing:
    """One inference: host start and end (ms since the first) and latency (ms)."""

    start_ms: float
    end_ms: float

    @property
    def latency_ms(self) -> float:
        """End minus start."""
        return self.end_ms - self.start_ms


def summarize(timings: Sequence[Timing]) -> dict[str, float]:
    """min, max, mean, median, p90, p95, p99 latency (ms), throughput (qps) and total time (s)."""
    latencies = np.array([t.latency_ms for t in timings], dtype=np.float64)
    total_s = (timings[-1].end_ms - timings[0].start_ms) / 1e3 if timings else 0.0
    return {
        "count": float(len(latencies)),
        "min": float(latencies.min()),
        "max": float(latencies.max()),
        "mean": float(latencies.mean()),
        "median": float(np.median(latencies)),
        "p90": float(np.percentile(latencies, 90)),
        "p95": float(np.percentile(latencies, 95)),
        "p99": float(np.percentile(latencies, 99)),
        "throughput_qps": float(len(latencies) / total_s) if total_s > 0 else float("inf"),
        "total_s": total_s,
    }


def format_summary(stats: dict[str, float], timings: Sequence[Timing], avg_runs: int) -> list[str]:
    """trtexec's summary lines, after the averages over ``avg_runs`` consecutive runs (none when 0)."""
    lines = []
    latencies = [t.latency_ms for t in timings]
    for start in range(0, len(latencies), avg_runs) if avg_runs > 0 else ():
        group = latencies[start : start + avg_runs]
        lines.append(f"[I] Average on {len(group)} runs - Host latency: {np.mean(group):.4f} ms")
    lines += [
        "[I] === Performance summary ===",
        f"[I] Throughput: {stats['throughput_qps']:.2f} qps",
        f"[I] Latency: min = {stats['min']:.4f} ms, max = {stats['max']:.4f} ms, mean = {stats['mean']:.4f} ms, "
        f"median = {stats['median']:.4f} ms, percentile(90%) = {stats['p90']:.4f} ms, "
        f"percentile(95%) = {stats['p95']:.4f} ms, percentile(99%) = {stats['p99']:.4f} ms",
        f"[I] Total Host Walltime: {stats['total_s']:.4f} s ({int(stats['count'])} inferences)",
    ]
    return lines
