"""``plugrt demo``: the README's main job — TensorRT-style plugins in real models, on the CPU.

1. A small detector generated in ONNX whose head is a ``BatchedNMSDynamic_TRT`` node: imported
   with ``OnnxParser`` (the node falls back to the built-in plugin), built, saved to a plan,
   reloaded, run; detections are printed and checked against ONNX's reference evaluator (the
   convolutional part) plus an independent NumPy NMS.
2. A transformer encoder block with ``LayerNorm`` plugin nodes, checked against ONNX's reference
   evaluator on the same block written with ONNX's LayerNormalization.
3. The example IPluginV2DynamicExt and IPluginV3 plugins chained in a network built with the
   TensorRT API, run at several shapes and checked against NumPy, with the full plugin call
   trace (every hook, in TensorRT's order, with its phase).

Timings are printed for each; the exit code is 1 if any result is wrong.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from .._version import __version__
from ..builder.builder import Builder
from ..core.errors import BuildError
from ..core.logger import ILogger, Logger
from ..core.types import DataType
from ..engine.engine import ICudaEngine
from ..engine.host_run import HostRun
from ..engine.runtime import Runtime
from ..interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType
from ..interfaces.recorder import trace_plugin_calls
from ..interfaces.registry import get_plugin_registry
from ..interfaces.v3 import TensorRTPhase
from ..network.definition import INetworkDefinition
from ..plugins import init_libnvinfer_plugins
from .demo_models import NMS_FIELDS, detector, transformer_block
from .demo_reference import batched_nms_reference

__all__ = ["HELP", "NAME", "add_arguments", "run", "run_demo"]

NAME = "demo"
HELP = "a detector with a BatchedNMS plugin head, a transformer block with LayerNorm plugins, and a traced plugin chain, on the CPU"

SHAPES = [(1, 3, 2), (2, 3, 8), (8, 3, 32), (3, 3, 5)]


def _median_us(fn: Callable[[], object], iterations: int) -> float:
    times = []
    for _ in range(max(iterations, 1)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _save_and_reload(plan: bytes, directory: str, name: str, logger: ILogger) -> tuple[ICudaEngine, str]:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(plan)
    with open(path, "rb") as f:
        return Runtime(logger).deserialize_cuda_engine(f.read()), path


def _build_onnx(
    model: Any, shapes: Mapping[str, tuple[Sequence[int], Sequence[int], Sequence[int]]], logger: ILogger
) -> tuple[bytes, float]:
    """OnnxParser → Builder with one profile → plan bytes, build seconds."""
    builder = Builder(logger)
    network = builder.create_network(0)
    from ..onnx.parser import OnnxParser  # onnx is imported only when the demo runs

    parser = OnnxParser(network, logger)
    if not parser.parse(model.SerializeToString()):
        raise BuildError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    for name, (lo, opt, hi) in shapes.items():
        profile.set_shape(name, lo, opt, hi)
    config.add_optimization_profile(profile)
    start = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    return bytes(plan), time.perf_counter() - start


def _bind(run: HostRun, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Bind ``arrays`` in place and new arrays for the other outputs; returns the outputs the engine writes."""
    run.bind_arrays(arrays)
    run.allocate([name for name in run.output_names if name not in arrays])
    return run.output_arrays()


def _reference_run(model: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """ONNX's own reference evaluator (ships with the onnx package, so the demo needs nothing else)."""
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, inputs)]


def _detector(out: TextIO, directory: str, iterations: int, logger: ILogger) -> int:
    model, reference_model = detector()
    plan, build_s = _build_onnx(model, {"image": ((1, 3, 32, 32), (2, 3, 32, 32), (4, 3, 32, 32))}, logger)
    engine, path = _save_and_reload(plan, directory, "detector.plan", logger)
    run = HostRun(engine)
    image = np.random.default_rng(7).random((2, 3, 32, 32), dtype=np.float32)
    outputs = _bind(run, {"image": image})
    latency = _median_us(run.execute, iterations)
    boxes, scores = _reference_run(reference_model, {"image": image})
    expected = batched_nms_reference(boxes, scores, NMS_FIELDS)
    failures = 0
    print(
        f"1. detector (ONNX, BatchedNMSDynamic_TRT head; synthetic random weights and image): build "
        f"{build_s * 1e3:.0f} ms, plan {len(plan)} bytes -> {path}",
        file=out,
    )
    print(f"   inference {latency:.0f} us (median of {iterations}, batch 2)", file=out)
    for b in range(image.shape[0]):
        count = int(outputs["num_detections"][b, 0])
        shown = f" ({min(count, 3)} of {count} shown)" if count > 3 else ""
        print(f"   image {b}: {count} detections{shown}", file=out)
        for k in range(min(count, 3)):
            box = ", ".join(f"{v:.3f}" for v in outputs["nmsed_boxes"][b, k])
            print(
                f"     class {int(outputs['nmsed_classes'][b, k])} score {outputs['nmsed_scores'][b, k]:.3f} box [{box}]",
                file=out,
            )
        want = expected[b]
        ok = count == len(want) and all(
            abs(outputs["nmsed_scores"][b, k] - s) < 1e-5
            and int(outputs["nmsed_classes"][b, k]) == c
            and np.allclose(outputs["nmsed_boxes"][b, k], box, atol=1e-5)
            for k, (s, c, box) in enumerate(want)
        )
        failures += not ok
    print(f"   {'matches the ONNX reference evaluator + NumPy NMS' if not failures else 'MISMATCH against the reference'}", file=out)
    return failures


def _transformer(out: TextIO, directory: str, iterations: int, logger: ILogger) -> int:
    model, reference_model = transformer_block()
    shapes = {"x": ((1, 1, 64), (1, 16, 64), (8, 64, 64))}
    plan, build_s = _build_onnx(model, shapes, logger)
    engine, path = _save_and_reload(plan, directory, "transformer.plan", logger)
    run = HostRun(engine)
    failures = 0
    print(f"2. transformer block (ONNX, 2 LayerNorm plugins): build {build_s * 1e3:.0f} ms -> {path}", file=out)
    for shape in ((1, 16, 64), (4, 48, 64)):
        x = np.random.default_rng(shape[1]).standard_normal(shape).astype(np.float32)
        outputs = _bind(run, {"x": x})
        latency = _median_us(run.execute, iterations)
        [expected] = _reference_run(reference_model, {"x": x})
        error = float(np.abs(outputs["y"] - expected).max())
        ok = error < 1e-4
        failures += not ok
        print(
            f"   x{shape}: inference {latency:.0f} us; max |plugrt - ONNX reference| = {error:.1e} "
            f"{'(ok)' if ok else '(MISMATCH)'}",
            file=out,
        )
    return failures


def _reference(x: np.ndarray) -> np.ndarray:
    padded = np.pad(x, [(0, 0), (0, 0), (1, 2)], mode="wrap")
    return np.pad(padded, [(0, 0), (1, 0), (0, 1)], mode="wrap")


def _plugin_network(builder: Builder) -> INetworkDefinition:
    registry = get_plugin_registry()
    network = builder.create_network(0)
    network.name = "circ_pad_demo"
    x = network.add_input("x", DataType.FLOAT, (-1, 3, -1))
    v2_creator = registry.get_plugin_creator("CircPadPlugin", "1", "")
    pads = PluginFieldCollection([PluginField("pads", np.array([1, 2], np.int32), PluginFieldType.INT32)])
    first = network.add_plugin_v2([x], v2_creator.create_plugin("pad_last", pads))
    first.name = "pad_last_dim (IPluginV2DynamicExt)"
    v3_creator = registry.get_creator("CircPadPluginV3", "1", "")
    pads3 = PluginFieldCollection(
        [PluginField("pads", np.array([0, 1, 1, 0], np.int32), PluginFieldType.INT32)]
    )
    second = network.add_plugin_v3(
        [first.get_output(0)], [], v3_creator.create_plugin("pad_two", pads3, TensorRTPhase.BUILD)
    )
    second.name = "pad_two_dims (IPluginV3)"
    second.get_output(0).name = "y"
    network.mark_output(second.get_output(0))
    return network


def _plugin_chain(out: TextIO, directory: str, iterations: int, logger: ILogger, trace: bool) -> int:
    from plugrt.examples import circ_pad_v2, circ_pad_v3  # the example plugins register only for the demo

    circ_pad_v2.register()
    circ_pad_v3.register()
    with trace_plugin_calls() as recorder:
        builder = Builder(logger)
        network = _plugin_network(builder)
        config = builder.create_builder_config()
        profile = builder.create_optimization_profile()
        profile.set_shape("x", SHAPES[0], SHAPES[1], SHAPES[2])
        config.add_optimization_profile(profile)
        start = time.perf_counter()
        plan = builder.build_serialized_network(network, config)
        build_ms = (time.perf_counter() - start) * 1e3
        engine, path = _save_and_reload(plan, directory, "circ_pad.plan", logger)
        run = HostRun(engine)
        rng = np.random.default_rng(0)
        cases = []
        for shape in SHAPES:  # the first run of each shape is traced
            x = rng.standard_normal(shape).astype(np.float32)
            outputs = _bind(run, {"x": x})
            run.execute()
            cases.append((shape, x, outputs["y"]))
    print(
        f"3. plugin chain (TensorRT API; IPluginV2DynamicExt -> IPluginV3): build {build_ms:.1f} ms -> {path}", file=out
    )
    failures = 0
    for shape, x, y in cases:
        _bind(run, {"x": x, "y": y})
        latency = _median_us(run.execute, iterations)
        ok = np.array_equal(y, _reference(x))
        failures += not ok
        print(
            f"   x{shape} -> y{y.shape}: {'matches NumPy' if ok else 'MISMATCH'}; {latency:.1f} us per inference",
            file=out,
        )
    with trace_plugin_calls() as teardown:
        del run, engine
    if trace:
        calls = [c for c in recorder.calls + teardown.calls if c.method != "get_capability_interface"]
        print(f"   plugin call trace ({len(calls)} calls; get_capability_interface omitted):", file=out)
        for call in calls:
            print(f"     {call}", file=out)
    return failures


def run_demo(out: TextIO, trace: bool = True, iterations: int = 20, plan_dir: str | None = None) -> int:
    """Run the three parts, printing to ``out``; returns the exit code (1 if any check failed)."""
    logger = Logger(Logger.ERROR)
    init_libnvinfer_plugins(logger, "")
    directory = plan_dir or tempfile.mkdtemp(prefix="plugrt-demo-")
    os.makedirs(directory, exist_ok=True)
    where = f"plans are written to {directory}" + ("" if plan_dir else " (a temporary folder, removed at the end)")
    print(f"plugrt {__version__} demo, on the CPU; {where}", file=out)
    try:
        failures = _detector(out, directory, iterations, logger)
        failures += _transformer(out, directory, iterations, logger)
        failures += _plugin_chain(out, directory, iterations, logger, trace)
    finally:
        if not plan_dir:  # keep only a folder the user named
            shutil.rmtree(directory, ignore_errors=True)
    print(
        "all results match their references" if not failures else f"{failures} result(s) differ from the references",
        file=out,
    )
    return 1 if failures else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``plugrt demo``."""
    parser.add_argument("--no-trace", action="store_true", help="do not print the plugin call trace")
    parser.add_argument("--iterations", type=int, default=20, help="timed runs per measurement (default 20)")
    parser.add_argument(
        "--plan-dir", metavar="DIR", help="where to write the plan files (default: a temporary directory)"
    )
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")


def run(args: argparse.Namespace) -> int:
    """Run ``plugrt demo``."""
    return run_demo(sys.stdout, trace=not args.no_trace, iterations=args.iterations, plan_dir=args.plan_dir)
