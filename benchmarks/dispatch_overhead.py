"""Per-layer dispatch overhead of the CPU executor, and build time, on a chain of trivial plugins.

A network of N IPluginV2DynamicExt layers is built; each plugin's enqueue either does nothing
("noop": pure dispatch cost) or copies its input to its output through `trt.as_array`
("copy": what a minimal real plugin does). Reported in the same run, as ratios:

- per-layer time of `execute_async_v3` for each variant;
- the floor: a plain Python loop calling N bound methods with the same six arguments;
- the same copies done directly with NumPy (`np.copyto` on N preallocated arrays).

Usage: python benchmarks/dispatch_overhead.py [--layers 1000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable

import numpy as np

import plugrt as trt


class TrivialPlugin(trt.IPluginV2DynamicExt):
    """Identity-shaped plugin; enqueue does nothing or copies."""

    def __init__(self, copy: bool = False) -> None:
        trt.IPluginV2DynamicExt.__init__(self)
        self.num_outputs = 1
        self.plugin_type = "BenchTrivial"
        self.plugin_version = "1"
        self.copy = copy

    def get_output_dimensions(self, output_index, inputs, exprBuilder):  # type: ignore[no-untyped-def]
        return trt.DimsExprs(inputs[0])

    def supports_format_combination(self, pos, in_out, num_inputs):  # type: ignore[no-untyped-def]
        return in_out[pos].type == trt.float32 and in_out[pos].format == trt.TensorFormat.LINEAR

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):  # type: ignore[no-untyped-def]
        if self.copy:
            np.copyto(trt.as_array(outputs[0], output_desc[0]), trt.as_array(inputs[0], input_desc[0]))
        return 0

    def serialize(self) -> bytes:
        return b"\x01" if self.copy else b"\x00"

    def clone(self) -> TrivialPlugin:
        return TrivialPlugin(self.copy)


class TrivialCreator(trt.IPluginCreator):
    """Creator for TrivialPlugin."""

    def __init__(self) -> None:
        trt.IPluginCreator.__init__(self)
        self.name = "BenchTrivial"
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection()

    def create_plugin(self, name, fc):  # type: ignore[no-untyped-def]
        return TrivialPlugin()

    def deserialize_plugin(self, name, data):  # type: ignore[no-untyped-def]
        return TrivialPlugin(copy=data == b"\x01")


def build_chain(layers: int, copy: bool) -> tuple[bytes, float]:
    """Plan bytes of a chain of ``layers`` trivial plugins, and the build time in seconds."""
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    tensor = network.add_input("x", trt.float32, (-1, 16))
    for _ in range(layers):
        tensor = network.add_plugin_v2([tensor], TrivialPlugin(copy)).get_output(0)
    tensor.name = "y"
    network.mark_output(tensor)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 16), (4, 16), (64, 16))
    config.add_optimization_profile(profile)
    start = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    return plan, time.perf_counter() - start


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``fn`` over ``repeats`` calls (after two warm-up calls).

    The minimum, not the median: on a shared 2-core machine the other process's
    load only ever adds time, so the minimum is the most repeatable estimate.
    """
    fn()
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    registry = trt.get_plugin_registry()
    creator = TrivialCreator()
    registry.register_creator(creator, "")
    n = args.layers
    x = np.random.rand(4, 16).astype(np.float32)
    results: dict[str, float] = {}
    try:
        for variant, copy in (("noop", False), ("copy", True)):
            plan, build_s = build_chain(n, copy)
            start = time.perf_counter()
            engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan)
            context = engine.create_execution_context()
            load_s = time.perf_counter() - start
            y = np.empty_like(x)
            context.set_input_shape("x", x.shape)
            context.set_tensor_address("x", x.ctypes.data)
            context.set_tensor_address("y", y.ctypes.data)
            results[f"{variant}_run"] = best_time(lambda ctx=context: ctx.execute_async_v3(0), args.repeats)
            results[f"{variant}_build"] = build_s
            results[f"{variant}_load"] = load_s
            if copy:
                assert np.array_equal(x, y)
    finally:
        registry.deregister_creator(creator)

    plugin = TrivialPlugin()
    descs = [trt.PluginTensorDesc(trt.Dims(x.shape), trt.float32)]
    calls = [plugin.enqueue] * n

    def python_floor() -> None:
        for call in calls:
            call(descs, descs, [0], [0], 0, 0)

    buffers = [np.empty_like(x) for _ in range(n + 1)]

    def numpy_copies() -> None:
        for i in range(n):
            np.copyto(buffers[i + 1], buffers[i])

    results["python_floor"] = best_time(python_floor, args.repeats)
    results["numpy_copies"] = best_time(numpy_copies, args.repeats)

    per_layer = {
        k: v / n * 1e6 for k, v in results.items() if k.endswith("_run") or k in ("python_floor", "numpy_copies")
    }
    print(
        f"{time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()} Python {platform.python_version()} "
        f"NumPy {np.__version__}; {n} layers, best of {args.repeats}"
    )
    print(f"{'measure':<34}{'per layer (us)':>16}{'ratio to floor':>16}")
    for key, label in (
        ("python_floor", "Python loop of no-op calls (floor)"),
        ("noop_run", "plugrt, no-op enqueue"),
        ("numpy_copies", "NumPy copies, direct"),
        ("copy_run", "plugrt, copying enqueue"),
    ):
        print(f"{label:<34}{per_layer[key]:>16.2f}{per_layer[key] / per_layer['python_floor']:>16.1f}")
    print(
        f"plugrt overhead per layer over the floor: {per_layer['noop_run'] - per_layer['python_floor']:.2f} us; "
        f"copying plugin vs direct NumPy: {per_layer['copy_run'] / per_layer['numpy_copies']:.2f}x"
    )
    print(
        f"build of {n} layers: {results['noop_build'] * 1e3:.0f} ms ({results['noop_build'] / n * 1e6:.0f} us/layer); "
        f"deserialize + context: {results['noop_load'] * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
