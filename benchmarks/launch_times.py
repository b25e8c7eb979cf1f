"""Each launch of a compiled model's run list timed alone, descending into the branches an ``If`` has bound.

silero-vad (``compile_call_overhead.silero_model``) is compiled with ``plugrt.compile`` and called a
few times with its state fed back (as a stream is processed); then every entry of the context's flat
run list (what
``execute_async_v3`` calls per run) is called ``--calls`` times in a row on the calling thread's CPU
clock, the fastest of ``--repeats`` blocks reported. The branches of an ``If`` are listed under it with
their own launches and sum. A launch timed alone runs with warm caches: the sum is a lower bound of the
run.

Usage: python benchmarks/launch_times.py [--batch 1] [--calls 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import collections
import os
import time
from typing import Any

from compile_call_overhead import silero_model

import plugrt


def _time(call: Any, args: tuple[Any, ...], calls: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time_ns()
        for _ in range(calls):
            call(*args)
        best = min(best, (time.thread_time_ns() - start) / calls / 1000)
    return best


def report(executor: Any, calls: int, repeats: int, depth: int = 0) -> list[tuple[float, str]]:
    """Print and return (microseconds, layer kind) of each launch of ``executor``'s run list."""
    rows = []
    pad = "  " * depth
    for step, call, args in executor._calls or []:
        us = _time(call, args, calls, repeats)
        name = getattr(call, "__qualname__", type(call).__name__)
        rows.append((us, step.layer.kind))
        print(f"{pad}{us:8.2f} us  {step.layer.kind:18s} {name[:44]:44s} {step.layer.name[-60:]}")
        for branch, plan in getattr(step.node, "_branches", {}).items():
            if plan is None:
                continue
            print(f"{pad}  {branch} branch:")
            inner = report(plan.bound.compiled.context._executor, calls, repeats, depth + 2)
            kinds: collections.defaultdict[str, float] = collections.defaultdict(float)
            for value, kind in inner:
                kinds[kind] += value
            total = sum(value for value, _ in inner)
            print(f"{pad}  {branch} branch: {total:.1f} us over {len(inner)} launches; by kind: ", end="")
            print(", ".join(f"{kind} {value:.1f}" for kind, value in sorted(kinds.items(), key=lambda kv: -kv[1])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1, help="silero-vad's batch")
    parser.add_argument("--calls", type=int, default=2000, help="calls of each launch per timed block")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks (the fastest is reported)")
    args = parser.parse_args()
    path, shapes, feeds = silero_model(args.batch)
    compiled = plugrt.compile(path, shapes=shapes)
    for _ in range(3):
        feeds["state"] = compiled(feeds)["stateN"]
    print(f"# {os.path.basename(path)} batch {args.batch}, load {os.getloadavg()[0]:.2f}, thread CPU time")
    rows = report(compiled.context._executor, args.calls, args.repeats)
    print(f"# {len(rows)} launches in the outer run list")


if __name__ == "__main__":
    main()
