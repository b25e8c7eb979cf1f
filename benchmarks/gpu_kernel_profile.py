"""Where a GPU engine's time goes, kernel by kernel: PyTorch's profiler over CUDA graph replays of one model.

Exports a model of ``_gpu_models.py`` (random weights, as ``real_models_gpu.py`` does; ``--half-model``: the
model in fp16, built with ``BuilderFlag.FP16`` as that script builds it), builds it with plugrt for the GPU in
strict FP32 (``BuilderFlag.TF32`` cleared unless ``--tf32``; ``--fp16`` sets ``BuilderFlag.FP16``), captures a CUDA
graph and profiles ``--replays`` replays; prints the kernels by total device time (name, count, total, share) and
the replay's device time against its wall time; ``--layers`` lists the engine's layers first (kind, tactic, name);
``--per-layer`` then launches each layer once on its own and lists the kernels it ran (where a layer's time goes);
``--eager`` then times eager runs (no graph: every layer launched from Python) and profiles them with cProfile: the
host's time a run and a layer, and the functions it goes to (where eager runs lose to PyTorch eager).

Usage: python benchmarks/gpu_kernel_profile.py [--model bert] [--batch 1] [--fp16 | --half-model] [--tf32]
       [--layers] [--per-layer] [--eager] [--replays 20] [--top 25]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _gpu_models import MODELS, export_onnx, make_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert", choices=sorted(MODELS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--fp16", action="store_true", help="build with BuilderFlag.FP16")
    parser.add_argument("--half-model", action="store_true", help="the fp16 model's export, built with FP16")
    parser.add_argument("--tf32", action="store_true", help="keep BuilderFlag.TF32 (default: strict FP32)")
    parser.add_argument("--layers", action="store_true", help="list the engine's layers")
    parser.add_argument("--per-layer", action="store_true", help="each layer launched alone: its kernels and time")
    parser.add_argument("--eager", action="store_true", help="time and cProfile eager runs (no CUDA graph)")
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models-gpu"))
    args = parser.parse_args()

    import torch

    import plugrt as trt

    spec = MODELS[args.model]
    torch.manual_seed(0)
    dtype = torch.float16 if args.half_model else torch.float32
    where = "cuda" if args.half_model else "cpu"  # (fp16 kernels to trace the export with: the GPU's)
    module = spec.make(False).eval().to(device=where, dtype=dtype)
    inputs = make_inputs(spec, args.batch, False, dtype, where)
    kind = "fp16" if args.half_model else "fp32"
    path = export_onnx(module, inputs, os.path.join(args.cache, f"{args.model}_{kind}_torchscript.onnx"), "torchscript")
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger, "cuda")
    network = builder.create_network(0)
    parser_ = trt.OnnxParser(network, logger)
    with open(path, "rb") as handle:
        assert parser_.parse(handle.read()), "parse failed"
    config = builder.create_builder_config()
    if args.fp16 or args.half_model:
        config.set_flag(trt.BuilderFlag.FP16)
    if not args.tf32:
        config.clear_flag(trt.BuilderFlag.TF32)
    profile = builder.create_optimization_profile()
    for name, tensor in inputs.items():
        shape = tuple(tensor.shape)
        profile.set_shape(name, (1, *shape[1:]), shape, shape)
    config.add_optimization_profile(profile)
    engine = trt.Runtime(logger, device="cuda").deserialize_cuda_engine(builder.build_serialized_network(network, config))
    if args.layers:
        for layer in engine.plan.layers:
            print(f"  {layer.kind:18s} t{layer.tactic} {layer.name[:100]}")
    context = engine.create_execution_context()
    context.use_cuda_graph = True
    device_inputs = {name: tensor.cuda().contiguous() for name, tensor in inputs.items()}
    outputs = {}
    for name, tensor in device_inputs.items():
        context.set_input_shape(name, tuple(tensor.shape))
        context.set_tensor_address(name, tensor.data_ptr())
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            element = getattr(torch, engine.get_tensor_dtype(name).nptype().__name__.rstrip("_"))
            outputs[name] = torch.empty(shape, dtype=element, device="cuda")
            context.set_tensor_address(name, outputs[name].data_ptr())
    stream = torch.cuda.Stream()
    for _ in range(3):  # capture, then replays
        context.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        start.record(stream)
        for _ in range(args.replays):
            context.execute_async_v3(stream.cuda_stream)
        stop.record(stream)
        stream.synchronize()
    wall = start.elapsed_time(stop) / args.replays
    totals: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals.setdefault(event.name, [0, 0.0])
            entry[0] += 1
            entry[1] += event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time_total
    device = sum(t for _, t in totals.values()) / args.replays / 1e3
    label = "fp16 model +FP16" if args.half_model else "+FP16" if args.fp16 else "fp32" + (" TF32" * args.tf32)
    print(f"{args.model} B={args.batch} {label}: replay {wall:.3f} ms (events), kernels "
          f"{device:.3f} ms, {sum(c for c, _ in totals.values()) / args.replays:.0f} kernels a replay")
    for name, (count, total) in sorted(totals.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"{total / args.replays / 1e3:8.3f} ms {100 * total / max(device * args.replays * 1e3, 1e-9):5.1f}% "
              f"{count // args.replays:4d}x  {name[:110]}")
    if args.per_layer:
        _per_layer(torch, context, stream)
    if args.eager:
        _eager(torch, context, stream, engine.num_layers, args.replays, args.top)


def _eager(torch: object, context: object, stream: object, layers: int, runs: int, top: int) -> None:
    """Eager runs (every layer launched from Python): the host's time a run (launches returned) and the device's
    (events), then cProfile's functions by their own time over ``runs`` runs."""
    import cProfile
    import pstats
    import time

    context.use_cuda_graph = False
    for _ in range(5):
        context.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    host, device = [], []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        began = time.perf_counter()
        start.record(stream)
        context.execute_async_v3(stream.cuda_stream)
        host.append((time.perf_counter() - began) * 1e3)
        stop.record(stream)
        stream.synchronize()
        device.append(start.elapsed_time(stop))
    host.sort()
    device.sort()
    print(f"eager: host {host[len(host) // 2]:.3f} ms a run ({1e3 * host[len(host) // 2] / max(layers, 1):.1f} us a "
          f"layer, {layers} layers), events {device[len(device) // 2]:.3f} ms (medians of {runs})")
    _launch_times(context, stream, runs, host[len(host) // 2], top)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        context.execute_async_v3(stream.cuda_stream)
    profiler.disable()
    stream.synchronize()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def _launch_times(context: object, stream: object, runs: int, run_ms: float, top: int) -> None:
    """The host's time of each prepared launch of an eager run (no synchronisation between them; medians of
    ``runs``), the run's frame (what ``execute_async_v3`` takes besides its launches) and the scopes it enters."""
    import statistics
    import time

    calls = context._executor._calls  # the flat list of prepared launches (the engine's internals: a diagnostic)
    if not calls:
        print("eager: no flat list of launches (data-dependent shapes)")
        return
    backend, tf32 = context.engine.backend, context.engine.plan.tf32
    times: list[list[float]] = [[] for _ in calls]
    scopes = []
    for _ in range(runs):
        began = time.perf_counter()
        with backend.stream_scope(stream.cuda_stream), backend.math_scope(tf32):
            entered = time.perf_counter()
            for k, (_, launch, args) in enumerate(calls):
                t = time.perf_counter()
                launch(*args)
                times[k].append(time.perf_counter() - t)
            left = time.perf_counter()
        scopes.append((entered - began) + (time.perf_counter() - left))
        stream.synchronize()
    medians = [1e6 * statistics.median(t) for t in times]
    total = sum(medians)
    print(
        f"eager launches: {len(calls)} a run, {total:.1f} us in launches; the scopes {1e6 * statistics.median(scopes):.1f}"
        f" us; the rest of a run (context, executor loop) {1e3 * run_ms - total:.1f} us"
    )
    order = sorted(range(len(calls)), key=lambda k: -medians[k])
    for k in order[:top]:
        step, launch, _ = calls[k]
        name = getattr(launch, "__qualname__", type(launch).__name__)
        print(
            f"  {medians[k]:7.1f} us  {step.layer.kind:18s} t{step.layer.tactic}  {name[:50]:50s} {step.layer.name[:60]}"
        )


def _per_layer(torch: object, context: object, stream: object) -> None:
    """Each layer's prepared launch run alone under the profiler: its kernels, by name, and their device time."""
    import cupy as cp

    cuda = torch.autograd.DeviceType.CUDA
    print("per layer (kind, tactic, device ms, kernels: name):")
    with torch.cuda.stream(stream), cp.cuda.ExternalStream(stream.cuda_stream):
        for step in context._executor.steps:  # (the engine's internals: a diagnostic)
            if step.constant or step.view or step.host:
                continue
            launch, arguments = step.node.prepared_launch(stream.cuda_stream)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                launch(*arguments)
                stream.synchronize()
            kernels = [(e.name, e.device_time_total) for e in prof.events() if e.device_type == cuda]
            names = "; ".join(name.removeprefix("void ")[:48] for name, _ in kernels)
            total = sum(t for _, t in kernels) / 1e3
            print(f"  {step.layer.kind[:14]:14s} t{step.layer.tactic} {total:7.3f} {len(kernels)}: {names}"
                  f"  [{step.layer.name[:70]}]")


if __name__ == "__main__":
    main()
