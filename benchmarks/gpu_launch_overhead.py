"""Per-layer launch overhead on the GPU, with and without CUDA graph replay.

A chain of N small standard layers (tanh then add, on a [4, 16] tensor) runs
on the CUDA backend eagerly and through a captured CUDA graph; the same chain
written directly in CuPy and in PyTorch eager gives the baselines, all in one run.

Usage: python benchmarks/gpu_launch_overhead.py [--layers 200] [--repeats 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import plugrt as trt


def build_chain(layers: int) -> bytes:
    """Plan bytes of ``layers`` (tanh, add) pairs."""
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    net = builder.create_network(0)
    x = net.add_input("x", trt.float32, (4, 16))
    t = x
    for _ in range(layers // 2):
        t = net.add_activation(t, trt.ActivationType.TANH).get_output(0)
        t = net.add_elementwise(t, x, trt.ElementWiseOperation.SUM).get_output(0)
    t.name = "y"
    net.mark_output(t)
    return builder.build_serialized_network(net, builder.create_builder_config())


def timed(fn, stream, repeats: int) -> float:  # type: ignore[no-untyped-def]
    """Best time of ``fn`` (stream-synchronised) over ``repeats``, in seconds."""
    for _ in range(3):
        fn()
    stream.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        stream.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    import cupy as cp

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    n = args.layers
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR), device="cuda").deserialize_cuda_engine(build_chain(n))
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.asarray(np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
    y = cp.zeros_like(x)
    results = {}
    for mode in ("eager", "graph"):
        context = engine.create_execution_context()
        context.use_cuda_graph = mode == "graph"
        context.set_tensor_address("x", x.data.ptr)
        context.set_tensor_address("y", y.data.ptr)
        results[mode] = timed(lambda c=context: c.execute_async_v3(stream.ptr), stream, args.repeats)

    def cupy_chain() -> None:
        with stream:
            t = x
            for _ in range(n // 2):
                t = cp.tanh(t)
                t = t + x

    results["cupy"] = timed(cupy_chain, stream, args.repeats)
    try:
        import torch

        tx = torch.as_tensor(x, device="cuda")
        tstream = torch.cuda.ExternalStream(stream.ptr)

        def torch_chain() -> None:
            with torch.cuda.stream(tstream):
                t = tx
                for _ in range(n // 2):
                    t = torch.tanh(t)
                    t = t + tx

        results["torch eager"] = timed(torch_chain, stream, args.repeats)
    except ImportError:
        pass
    print(
        f"{time.strftime('%Y-%m-%d')} {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; {n} layers, best of {args.repeats}"
    )
    print(f"{'':<24}{'per layer (us)':>16}{'ratio to graph':>16}")
    for key, seconds in results.items():
        print(
            f"{'plugrt ' + key if key in ('eager', 'graph') else key:<24}{seconds / n * 1e6:>16.2f}{seconds / results['graph']:>16.1f}"
        )


if __name__ == "__main__":
    main()
