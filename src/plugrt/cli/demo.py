"""``plugrt demo``: a TensorRT-style plugin built, serialized, reloaded and run on the CPU.

The network chains the example IPluginV2DynamicExt and IPluginV3 plugins
(circular padding). The demo builds it for a dynamic profile, writes the plan
to a file, deserializes it through the plugin registry, runs it at several
shapes, checks every output against NumPy and prints the plugin call trace and
timings. It returns a non-zero exit code if any output is wrong.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import TextIO

import numpy as np

import plugrt as trt
from plugrt.examples import circ_pad_v2, circ_pad_v3

__all__ = ["HELP", "NAME", "add_arguments", "run", "run_demo"]

NAME = "demo"
HELP = "build, serialize, reload and run a network of TensorRT-style plugins on the CPU"

SHAPES = [(1, 3, 2), (2, 3, 8), (8, 3, 32), (3, 3, 5)]


def _reference(x: np.ndarray) -> np.ndarray:
    padded = np.pad(x, [(0, 0), (0, 0), (1, 2)], mode="wrap")
    return np.pad(padded, [(0, 0), (1, 0), (0, 1)], mode="wrap")


def _network(builder: trt.Builder) -> trt.INetworkDefinition:
    registry = trt.get_plugin_registry()
    network = builder.create_network(0)
    network.name = "circ_pad_demo"
    x = network.add_input("x", trt.float32, (-1, 3, -1))
    v2_creator = registry.get_plugin_creator("CircPadPlugin", "1", "")
    pads = trt.PluginFieldCollection([trt.PluginField("pads", np.array([1, 2], np.int32), trt.PluginFieldType.INT32)])
    first = network.add_plugin_v2([x], v2_creator.create_plugin("pad_last", pads))
    first.name = "pad_last_dim (IPluginV2DynamicExt)"
    v3_creator = registry.get_creator("CircPadPluginV3", "1", "")
    pads3 = trt.PluginFieldCollection(
        [trt.PluginField("pads", np.array([0, 1, 1, 0], np.int32), trt.PluginFieldType.INT32)]
    )
    second = network.add_plugin_v3(
        [first.get_output(0)], [], v3_creator.create_plugin("pad_two", pads3, trt.TensorRTPhase.BUILD)
    )
    second.name = "pad_two_dims (IPluginV3)"
    second.get_output(0).name = "y"
    network.mark_output(second.get_output(0))
    return network


def run_demo(out: TextIO, trace: bool = True, iterations: int = 50, plan_path: str | None = None) -> int:
    """Run the demo, printing to ``out``; returns the process exit code."""
    circ_pad_v2.register()
    circ_pad_v3.register()
    logger = trt.Logger(trt.Logger.WARNING)
    with trt.trace_plugin_calls() as recorder:
        builder = trt.Builder(logger)
        network = _network(builder)
        config = builder.create_builder_config()
        profile = builder.create_optimization_profile()
        profile.set_shape("x", SHAPES[0], SHAPES[1], SHAPES[2])
        config.add_optimization_profile(profile)
        start = time.perf_counter()
        plan = builder.build_serialized_network(network, config)
        build_ms = (time.perf_counter() - start) * 1e3

        path = plan_path or os.path.join(tempfile.mkdtemp(prefix="plugrt-demo-"), "circ_pad.plan")
        with open(path, "wb") as f:
            f.write(plan)
        with open(path, "rb") as f:
            data = f.read()
        start = time.perf_counter()
        engine = trt.Runtime(logger).deserialize_cuda_engine(data)
        context = engine.create_execution_context()
        load_ms = (time.perf_counter() - start) * 1e3

        print(
            f"plugrt {trt.__version__} demo: {network.num_layers} plugin layers, plan {len(plan)} bytes -> {path}",
            file=out,
        )
        print(f"build {build_ms:.1f} ms, deserialize + context {load_ms:.1f} ms", file=out)
        failures = 0
        rng = np.random.default_rng(0)
        cases = []
        for shape in SHAPES:  # the first run of each shape is traced
            x = rng.standard_normal(shape).astype(np.float32)
            context.set_input_shape("x", shape)
            y = np.empty(tuple(context.get_tensor_shape("y")), np.float32)
            context.set_tensor_address("x", x.ctypes.data)
            context.set_tensor_address("y", y.ctypes.data)
            context.execute_async_v3(0)
            cases.append((shape, x, y))
    for shape, x, y in cases:
        context.set_input_shape("x", shape)
        context.set_tensor_address("x", x.ctypes.data)
        context.set_tensor_address("y", y.ctypes.data)
        times = []
        for _ in range(max(iterations, 1)):
            start = time.perf_counter()
            context.execute_async_v3(0)
            times.append((time.perf_counter() - start) * 1e6)
        ok = np.array_equal(y, _reference(x))
        failures += not ok
        print(
            f"  x{shape} -> y{y.shape}: {'matches NumPy' if ok else 'MISMATCH'}; "
            f"median {statistics.median(times):.1f} us per inference over {len(times)} runs",
            file=out,
        )
    with trt.trace_plugin_calls() as teardown:
        del context, engine
    if trace:
        calls = [c for c in recorder.calls + teardown.calls if c.method != "get_capability_interface"]
        print(f"plugin call trace ({len(calls)} calls; get_capability_interface omitted):", file=out)
        for call in calls:
            print(f"  {call}", file=out)
    print("all outputs match NumPy" if not failures else f"{failures} output(s) differ from NumPy", file=out)
    return 1 if failures else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``plugrt demo``."""
    parser.add_argument("--no-trace", action="store_true", help="do not print the plugin call trace")
    parser.add_argument("--iterations", type=int, default=50, help="timed runs per shape (default 50)")
    parser.add_argument(
        "--save-plan", metavar="PATH", help="where to write the plan file (default: a temporary directory)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``plugrt demo``."""
    return run_demo(sys.stdout, trace=not args.no_trace, iterations=args.iterations, plan_path=args.save_plan)
