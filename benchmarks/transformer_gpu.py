"""A transformer encoder block (ONNX, LayerNorm as plugin) on the GPU: plugrt vs PyTorch.

The block comes from ``plugrt.cli.demo_models.transformer_block`` (pre-norm attention + MLP,
two ``LayerNorm`` plugin nodes). plugrt imports it with OnnxParser and runs it on the CUDA
backend, eagerly and replayed as a CUDA graph; PyTorch runs the same weights eagerly and under
``torch.compile(mode="reduce-overhead")``. Latency at batch 1 and throughput at batch 32, all
in one run; outputs are checked against each other.

Usage: python benchmarks/transformer_gpu.py [--dim 256] [--heads 8] [--seq 128]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from onnx import numpy_helper

import plugrt as trt
from plugrt.cli.demo_models import transformer_block


def torch_block(model: Any, dim: int, heads: int) -> Any:
    """The same block in PyTorch, with the ONNX model's weights."""
    import torch

    weights = {t.name: torch.tensor(numpy_helper.to_array(t), device="cuda") for t in model.graph.initializer}
    norms = [n for n in model.graph.node if n.op_type == "LayerNorm"]
    ln = []
    for node in norms:
        attrs = {a.name: a for a in node.attribute}
        ln.append(
            (
                torch.tensor(list(attrs["gamma"].floats), device="cuda"),
                torch.tensor(list(attrs["beta"].floats), device="cuda"),
            )
        )
    head = dim // heads

    def block(x: Any) -> Any:
        b, s, _ = x.shape
        h1 = torch.nn.functional.layer_norm(x, (dim,), ln[0][0], ln[0][1], 1e-5)
        q, k, v = (h1 @ weights[f"{n}_w"] + weights[f"{n}_b"] for n in "qkv")
        q, k, v = (t.reshape(b, s, heads, head).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax((q @ k.transpose(-1, -2)) * (1 / head**0.5), dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, dim)
        h = x + ctx @ weights["o_w"] + weights["o_b"]
        h2 = torch.nn.functional.layer_norm(h, (dim,), ln[1][0], ln[1][1], 1e-5)
        return h + torch.relu(h2 @ weights["up_w"] + weights["up_b"]) @ weights["down_w"] + weights["down_b"]

    return block


def timed(fn: Any, sync: Any, repeats: int) -> float:
    """Best wall time of ``fn`` (synchronised) over ``repeats`` runs after warm-up, in seconds."""
    for _ in range(5):
        fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def _profile(engine: Any, x: Any, y: Any, stream: Any) -> None:
    """Per-layer times (synchronised per layer) of one eager run, largest first."""
    from plugrt.cli.profile_report import LayerTimes

    context = engine.create_execution_context()
    context.set_input_shape("x", tuple(x.shape))
    context.set_tensor_address("x", x.data_ptr())
    context.set_tensor_address("y", y.data_ptr())
    context.execute_async_v3(stream.ptr)
    times = LayerTimes()
    context.profiler = times
    for _ in range(10):
        context.execute_async_v3(stream.ptr)
    rows = sorted(times.to_json(), key=lambda r: -r["timeMs"])
    for row in rows[:12]:
        print(f"    {row['averageMs'] * 1e3:8.1f} us  {row['percentage']:5.1f}%  {row['name']}")


def main() -> None:
    import cupy as cp
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="also print plugrt's per-layer times at batch 32")
    args = parser.parse_args()
    logger = trt.Logger(trt.Logger.ERROR)
    trt.init_libnvinfer_plugins(logger, "")
    model, _ = transformer_block(dim=args.dim, heads=args.heads)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    onnx_parser = trt.OnnxParser(network, logger)
    assert onnx_parser.parse(model.SerializeToString()), [
        str(onnx_parser.get_error(i)) for i in range(onnx_parser.num_errors)
    ]
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, args.seq, args.dim), (1, args.seq, args.dim), (32, args.seq, args.dim))
    config.add_optimization_profile(profile)
    engine = trt.Runtime(logger, device="cuda").deserialize_cuda_engine(
        builder.build_serialized_network(network, config)
    )
    block = torch_block(model, args.dim, args.heads)
    compiled = torch.compile(block, mode="reduce-overhead")
    stream = cp.cuda.Stream(non_blocking=True)
    torch_stream = torch.cuda.ExternalStream(stream.ptr)
    print(
        f"{time.strftime('%Y-%m-%d')} {torch.cuda.get_device_name()} torch {torch.__version__}; "
        f"dim {args.dim}, heads {args.heads}, seq {args.seq}; best of {args.repeats}"
    )
    print(
        f"{'batch':>5} {'plugrt eager':>14} {'plugrt graph':>14} {'torch eager':>13} {'torch.compile':>14} "
        f"{'graph/eager':>12} {'graph/compile':>14} {'max err':>9}"
    )
    for batch in (1, 32):
        x = torch.randn(batch, args.seq, args.dim, device="cuda")
        y = torch.empty_like(x)
        times = {}
        for mode in ("eager", "graph"):
            context = engine.create_execution_context()
            context.use_cuda_graph = mode == "graph"
            context.set_input_shape("x", tuple(x.shape))
            context.set_tensor_address("x", x.data_ptr())
            context.set_tensor_address("y", y.data_ptr())
            times[mode] = timed(lambda c=context: c.execute_async_v3(stream.ptr), stream.synchronize, args.repeats)
        with torch.cuda.stream(torch_stream), torch.no_grad():
            times["torch"] = timed(lambda x=x: block(x), stream.synchronize, args.repeats)
            times["compile"] = timed(lambda x=x: compiled(x), torch.cuda.synchronize, args.repeats)
            reference = block(x)
        torch.cuda.synchronize()
        error = (y - reference).abs().max().item()
        if args.profile and batch == 32:
            _profile(engine, x, y, stream)
        ms = {k: v * 1e3 for k, v in times.items()}
        print(
            f"{batch:>5} {ms['eager']:>11.3f} ms {ms['graph']:>11.3f} ms {ms['torch']:>10.3f} ms {ms['compile']:>11.3f} ms "
            f"{times['graph'] / times['torch']:>12.2f} {times['graph'] / times['compile']:>14.2f} {error:>9.1e}"
        )


if __name__ == "__main__":
    main()
