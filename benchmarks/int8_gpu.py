"""INT8 ResNet-50 on the GPU: plugrt's INT8 engine (calibrated) against its FP16 and FP32 engines, same process.

torchvision's ResNet-50 with random weights (seeded) is exported once (``real_models_gpu.py``'s export,
opset 17, dynamic batch, cached) and built three ways with a batch profile 1..32: FP32, ``BuilderFlag.FP16``,
and ``BuilderFlag.INT8`` + ``FP16`` with an ``IInt8MinMaxCalibrator`` (or ``--calibrator entropy``:
``IInt8EntropyCalibrator2``) fed ``--calib-batches`` batches of random images (device addresses, as
TensorRT's calibrators hand them). Each engine runs eager and as a CUDA graph replay, interleaved, timed by
CUDA events on an idle device (medians); outputs are compared with PyTorch's FP32 eager output (max |diff| /
max |reference|, and how often the top-1 class agrees: random weights and random data, so this checks the
arithmetic, not accuracy on a task). Also prints how many layers run in INT8.

Usage: python benchmarks/int8_gpu.py [--batches 1,32] [--repeats 30] [--calib-batches 4] [--calibrator minmax|entropy]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from _gpu_models import MODELS, export_onnx, make_inputs, weights_digest


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--calib-batches", type=int, default=4, help="calibration batches of 8 images (default 4)")
    parser.add_argument("--calibrator", choices=("minmax", "entropy"), default="minmax")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models-gpu"))
    args = parser.parse_args(argv)
    args.batches = [int(b) for b in args.batches.split(",")]
    if min(args.batches) < 1 or max(args.batches) > 32 or args.repeats < 1 or args.calib_batches < 1:
        parser.error("--batches within 1..32, --repeats >= 1, --calib-batches >= 1")
    return args


def _calibrator(trt: Any, torch: Any, kind: str, batches: int) -> Any:
    base = trt.IInt8MinMaxCalibrator if kind == "minmax" else trt.IInt8EntropyCalibrator2

    class Random(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            generator = torch.Generator(device="cuda").manual_seed(1)
            self.data = [torch.randn(8, 3, 224, 224, device="cuda", generator=generator) for _ in range(batches)]
            self.index = 0

        def get_batch_size(self) -> int:
            return 8

        def get_batch(self, names: Any) -> Any:
            if self.index >= len(self.data):
                return None
            self.index += 1
            torch.cuda.synchronize()
            return [int(self.data[self.index - 1].data_ptr())]

        def read_calibration_cache(self) -> Any:
            return None

        def write_calibration_cache(self, cache: bytes) -> None:
            pass

    return Random()


def _build(trt: Any, logger: Any, path: str, flags: list[Any], calibrator: Any = None) -> tuple[Any, float]:
    started = time.perf_counter()
    builder = trt.Builder(logger, "cuda")
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(path):
        raise RuntimeError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    for flag in flags:
        config.set_flag(flag)
    profile = builder.create_optimization_profile()
    name = network.get_input(0).name
    profile.set_shape(name, (1, 3, 224, 224), (32, 3, 224, 224), (32, 3, 224, 224))
    config.add_optimization_profile(profile)
    if calibrator is not None:  # the calibration engine runs at the calibration profile's opt shape: 8 images
        calibration = builder.create_optimization_profile()
        calibration.set_shape(name, *[(8, 3, 224, 224)] * 3)
        config.int8_calibrator = calibrator
        config.set_calibration_profile(calibration)
    plan = builder.build_serialized_network(network, config)
    engine = trt.Runtime(logger, "cuda").deserialize_cuda_engine(plan)
    return engine, time.perf_counter() - started


def _runner(trt: Any, torch: Any, engine: Any, x: Any, graph: bool, stream: Any) -> tuple[Any, Any]:
    context = engine.create_execution_context()
    context.use_cuda_graph = graph
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    context.set_input_shape(names[0], tuple(x.shape))
    out = torch.empty(tuple(context.get_tensor_shape(names[1])), device="cuda")
    context.set_tensor_address(names[0], x.data_ptr())
    context.set_tensor_address(names[1], out.data_ptr())
    handle = int(stream.cuda_stream)
    return (lambda: context.execute_async_v3(handle)), out


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import torch

    import plugrt as trt

    logger = trt.Logger(trt.Logger.ERROR)
    spec = MODELS["resnet50"]
    torch.manual_seed(0)
    module = spec.make(False).eval()
    digest = weights_digest(module)
    module = module.cuda()
    path = export_onnx(module, make_inputs(spec, 2, False, torch.float32, "cuda"),
                       os.path.join(args.cache, f"resnet50-float32-torchscript-cuda-{digest}.onnx"), "torchscript")  # fmt: skip
    flags = trt.BuilderFlag
    engines = {}
    for label, chosen, calibrator in (
        ("fp32", [], None),
        ("fp16", [flags.FP16], None),
        (
            f"int8+fp16 ({args.calibrator})",
            [flags.INT8, flags.FP16],
            _calibrator(trt, torch, args.calibrator, args.calib_batches),
        ),
    ):
        engine, seconds = _build(trt, logger, path, chosen, calibrator)
        kinds = [layer.kind for layer in engine.plan.layers]
        int8 = sum(k.startswith("int8_") for k in kinds)
        engines[label] = engine
        print(f"{label}: built in {seconds:.1f} s, {len(kinds)} layers, {int8} in INT8", file=sys.stderr, flush=True)
    stream = torch.cuda.Stream()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"load {os.getloadavg()[0]:.2f}; medians of {args.repeats} interleaved calls (ms)")  # fmt: skip
    print(
        "| engine | B | eager ms | graph ms | max rel diff vs torch fp32 | top-1 agreement |\n|---|---|---|---|---|---|"
    )
    for batch in args.batches:
        x = torch.randn(batch, 3, 224, 224, device="cuda", generator=torch.Generator(device="cuda").manual_seed(batch))
        with torch.no_grad():
            torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
            reference = module(x)
        runs = {}
        for label, engine in engines.items():
            for graph in (False, True):
                runs[(label, graph)] = _runner(trt, torch, engine, x, graph, stream)
        samples: dict[Any, list[float]] = {key: [] for key in runs}
        for call, _ in runs.values():
            for _ in range(args.warmup):
                call()
        torch.cuda.synchronize()
        for _ in range(args.repeats):
            for key, (call, _) in runs.items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record(stream)
                call()
                end.record(stream)
                end.synchronize()
                samples[key].append(start.elapsed_time(end))
        for label in engines:
            out = runs[(label, True)][1]
            diff = float((out - reference).abs().max() / reference.abs().max())
            agree = float((out.argmax(1) == reference.argmax(1)).float().mean())
            eager, graph = (statistics.median(samples[(label, g)]) for g in (False, True))
            print(f"| {label} | {batch} | {eager:.3f} | {graph:.3f} | {diff:.1e} | {agree:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
