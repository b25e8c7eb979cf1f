"""Channels-last runs through concatenations and average pooling: ONNX's light CNNs built twice in one process,
with and without the channels-last kernels of ``Concat`` (along the channels) and ``AveragePool``, timed in
alternation on the calling thread's CPU time (one thread: steady on a shared machine).

"Without" builds with both kernels declined (their ``channels_last_supports`` answering no), as the engine was
before they existed; the rest of each build is the same. Prints each model's fastest run of each and the ratio.

Usage: python benchmarks/channels_last_joins_cpu.py [densenet121 squeezenet inception_v1 inception_v2 shufflenet]
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # (read when NumPy and torch load)

import numpy as np  # noqa: E402
import onnx  # noqa: E402

MODELS = ["densenet121", "squeezenet", "inception_v1", "inception_v2", "shufflenet"]


def _light(name: str) -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")


def _engines(name: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The model built without the two kernels, then with them, each as a call on a fixed input."""
    from plugrt.onnx.compile import compile as compile_model
    from plugrt.ops.concatenation import ConcatenationOperator
    from plugrt.ops.pooling import PoolingOperator

    path = _light(name)
    model = onnx.load(path, load_external_data=False)
    constants = {i.name for i in model.graph.initializer}
    feed = next(i for i in model.graph.input if i.name not in constants)
    shape = tuple(d.dim_value for d in feed.type.tensor_type.shape.dim)
    feeds = {feed.name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    joins, pools = ConcatenationOperator.channels_last_supports, PoolingOperator.channels_last_supports
    ConcatenationOperator.channels_last_supports = lambda self, *args: False  # type: ignore[method-assign]
    PoolingOperator.channels_last_supports = (  # type: ignore[method-assign]
        lambda self, types, shapes, constant: self.mode == "MAX" and pools(self, types, shapes, constant)
    )
    try:
        before = compile_model(path)
        before(**feeds)  # bound now, with the kernels declined
    finally:
        ConcatenationOperator.channels_last_supports = joins  # type: ignore[method-assign]
        PoolingOperator.channels_last_supports = pools  # type: ignore[method-assign]
    after = compile_model(path)
    after(**feeds)
    return (lambda: before(**feeds)), (lambda: after(**feeds))


def main() -> None:
    print(
        f"# one thread, thread CPU time, load {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print("| model | without (ms) | with (ms) | ratio |")
    print("|---|---:|---:|---:|")
    for name in sys.argv[1:] or MODELS:
        calls = _engines(name)
        best = [float("inf")] * 2
        for _ in range(5):
            for k, call in enumerate(calls):
                for _ in range(3):
                    start = time.thread_time()
                    call()
                    best[k] = min(best[k], time.thread_time() - start)
        print(f"| {name} | {best[0] * 1e3:.1f} | {best[1] * 1e3:.1f} | {best[1] / best[0]:.2f} |", flush=True)
    print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
