"""``plugrt exec``: trtexec's flags with trtexec's meaning, plus Python plugins, ``--device`` and ``--trace``."""

from __future__ import annotations

import argparse
import json
import os
import time
from contextlib import nullcontext
from typing import Any

import numpy as np

from ..backends.registry import DEFAULT_DEVICE, DEVICES
from ..core.errors import ShapeError
from ..core.logger import RaisedErrorsLogger, Severity
from ..engine.host_run import HostRun
from ..engine.runtime import Runtime
from ..interfaces.recorder import trace_plugin_calls
from .errors import UsageError, check_writable
from .exec_build import build_from_onnx
from .libraries import load_libraries
from .profile_report import LayerTimes
from .shapes_arg import load_input, parse_input_files, parse_shapes
from .timing import Timing, format_summary, summarize

__all__ = ["HELP", "NAME", "add_arguments", "run"]

NAME = "exec"
HELP = "build and/or load an engine and benchmark it, with trtexec's flags (--onnx, --loadEngine, --shapes …)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """trtexec's flags (see docs/cli.md for the mapping)."""
    add = parser.add_argument
    add("--onnx", metavar="FILE", help="build an engine from this ONNX model")
    add("--saveEngine", metavar="FILE", help="write the built plan here")
    add("--loadEngine", metavar="FILE", help="load a plan instead of building")
    for flag in ("--shapes", "--minShapes", "--optShapes", "--maxShapes"):
        add(flag, action="append", default=[], metavar="NAME:DxDx..", help=f"{flag[2:]} of inputs (comma-separated)")
    add("--fp16", action="store_true", help="allow FP16 (plugins are offered HALF first)")
    add("--int8", action="store_true", help="allow INT8 where plugins accept it")
    add("--iterations", type=int, default=10, help="run at least this many inferences (default 10)")
    add("--warmUp", type=float, default=200.0, metavar="MS", help="warm up for this many milliseconds (default 200)")
    add("--duration", type=float, default=3.0, metavar="S", help="run for at least this many seconds (default 3)")
    add("--avgRuns", type=int, default=None, metavar="N",
        help="also print 'Average on N runs' lines (averages of N consecutive runs; with --verbose, N is 10 by default)")
    add("--useCudaGraph", action="store_true", help="replay inferences as a CUDA graph (cuda device)")
    add("--noDataTransfers", action="store_true", help="do not copy inputs/outputs between host and device per run")
    add("--verbose", action="store_true", help="verbose logging and tracebacks")
    add("--dumpLayerInfo", action="store_true", help="print each layer of the engine")
    add("--dumpProfile", action="store_true", help="print per-layer times (averaged over the runs)")
    add("--exportTimes", metavar="FILE", help="write per-inference times as JSON")
    add("--exportOutput", metavar="FILE", help="write the outputs of the last inference as JSON")
    add("--exportProfile", metavar="FILE", help="write per-layer times as JSON")
    add("--loadInputs", action="append", default=[], metavar="NAME:FILE", help="inputs from .npy or raw binary files")
    add("--staticPlugins", action="append", default=[], metavar="FILE", help="Python files/modules registering plugins")
    add("--dynamicPlugins", action="append", default=[], metavar="FILE", help="same as --staticPlugins")
    add("--device", choices=DEVICES, default=DEFAULT_DEVICE, help=f"where to run (default {DEFAULT_DEVICE})")
    add("--trace", action="store_true", help="print every plugin call with its phase (build, load, first run)")
    add("--skipInference", action="store_true", help="build (and save) only")
    add("--seed", type=int, default=0, help="seed of the random inputs")


def _validate(args: argparse.Namespace) -> None:
    """Everything that can be checked before a build: flags, input files, output paths."""
    if bool(args.onnx) == bool(args.loadEngine):
        raise UsageError("give exactly one of --onnx FILE or --loadEngine FILE")
    if args.avgRuns is None:
        args.avgRuns = 10 if args.verbose else 0  # 0: the summary only
    elif args.avgRuns < 1:
        raise UsageError("--iterations and --avgRuns must be >= 1; --duration and --warmUp >= 0")
    if args.iterations < 1 or args.duration < 0 or args.warmUp < 0:
        raise UsageError("--iterations and --avgRuns must be >= 1; --duration and --warmUp >= 0")
    for flag in ("onnx", "loadEngine"):
        path = getattr(args, flag)
        if path and not os.path.isfile(path):
            raise UsageError(f"--{flag}: cannot read {path!r}: the file does not exist")
    for flag in ("saveEngine", "exportTimes", "exportOutput", "exportProfile"):
        check_writable(getattr(args, flag), f"--{flag}")
    parse_input_files(args.loadInputs)  # missing files are usage errors now, not after the build


def run(args: argparse.Namespace) -> int:
    """Run ``plugrt exec``."""
    _validate(args)
    logger = RaisedErrorsLogger(Severity.VERBOSE if args.verbose else Severity.WARNING)
    load_libraries(["builtin", *args.staticPlugins, *args.dynamicPlugins])
    shapes = {
        key: parse_shapes(getattr(args, flag), f"--{flag}")
        for key, flag in (("shapes", "shapes"), ("min", "minShapes"), ("opt", "optShapes"), ("max", "maxShapes"))
    }
    runtime = None if args.skipInference else Runtime(logger, device=args.device)  # a missing CuPy: before the build
    recorder_scope = trace_plugin_calls() if args.trace else nullcontext()
    with recorder_scope as recorder:
        if args.onnx:
            plan, build_s = build_from_onnx(args, logger, shapes)
            print(f"[I] Engine built in {build_s * 1e3:.1f} ms ({len(plan)} bytes)")  # as the builder logs it
            if args.saveEngine:
                with open(args.saveEngine, "wb") as f:
                    f.write(plan)
                print(f"[I] Engine saved to {args.saveEngine}")
        else:
            try:
                with open(args.loadEngine, "rb") as f:
                    plan = f.read()
            except OSError as exc:
                raise UsageError(f"cannot read {args.loadEngine!r}: {exc.strerror}") from exc
        if args.skipInference:
            _print_trace(recorder)
            return 0
        assert runtime is not None
        engine = runtime.deserialize_cuda_engine(plan)
        if args.dumpLayerInfo:
            inspector = engine.create_engine_inspector()
            print("[I] Layers:")
            for i in range(engine.num_layers):
                print(f"[I]   {inspector.get_layer_information(i)}")
        session = _Session(engine, args, shapes["shapes"])
        session.infer_once()
    _print_trace(recorder)
    timings = session.benchmark()
    stats = summarize(timings)
    for line in format_summary(stats, timings, args.avgRuns):
        print(line)
    if args.dumpProfile or args.exportProfile:
        times = session.profile()
        if args.dumpProfile:
            print(times.format())
        if args.exportProfile:
            with open(args.exportProfile, "w", encoding="utf-8") as f:
                json.dump(times.to_json(), f, indent=2)
    if args.exportTimes:
        with open(args.exportTimes, "w", encoding="utf-8") as f:
            json.dump(
                [{"startHostMs": t.start_ms, "endHostMs": t.end_ms, "latencyMs": t.latency_ms} for t in timings], f
            )
    if args.exportOutput:
        with open(args.exportOutput, "w", encoding="utf-8") as f:
            json.dump(
                [
                    {"name": n, "dimensions": "x".join(map(str, v.shape)), "values": v.reshape(-1).tolist()}
                    for n, v in session.host_outputs().items()
                ],
                f,
            )
    return 0


def _print_trace(recorder: Any) -> None:
    if recorder is None:
        return
    print(f"[I] Plugin calls ({len(recorder.calls)}):")
    for call in recorder.calls:
        print(f"[I]   {call}")


class _Session:
    """The engine run over host arrays (on the GPU: device buffers, copied to and from them per inference)."""

    def __init__(self, engine: Any, args: argparse.Namespace, shapes: dict[str, tuple[int, ...]]) -> None:
        self.args = args
        self.run = HostRun(engine)
        #: buffers are device memory: inputs and outputs are copied between them and the host
        self.copies = not engine.backend.host_memory
        # as trtexec: every inference launches its layers unless --useCudaGraph asks for a graph (a context's
        # default would replay one from the second inference on)
        self.run.context.use_cuda_graph = bool(args.useCudaGraph and engine.backend.gpu)
        if args.useCudaGraph and not engine.backend.gpu:
            print("[W] --useCudaGraph needs --device cuda; running without graphs")
        files = parse_input_files(args.loadInputs)
        self.inputs, self.outputs = self.run.input_names, self.run.output_names
        unknown = sorted((set(shapes) | set(files)) - set(self.inputs))
        if unknown:
            raise UsageError(f"{unknown} are not inputs of the engine; its inputs are {self.inputs}")
        rng = np.random.default_rng(args.seed)
        self.host: dict[str, np.ndarray] = {}
        for name in self.inputs:
            low, opt, _ = engine.get_tensor_profile_shape(name, 0)
            shape = shapes.get(name) or tuple(opt)
            if len(shape) != len(low):
                raise UsageError(
                    f"--shapes {name}: {'x'.join(map(str, shape))} has rank {len(shape)}; {name!r} has rank {len(low)} "
                    f"{list(engine.get_tensor_shape(name))}"
                )
            try:
                self.run.set_shapes({name: shape})
            except ShapeError as exc:
                raise UsageError(str(exc)) from None
            dtype = self.run.dtype(name)
            if name in files:
                self.host[name] = load_input(files[name], tuple(shape), dtype)
            elif dtype.kind == "f":
                self.host[name] = rng.standard_normal(shape).astype(dtype)
            else:
                self.host[name] = rng.integers(0, 2, size=shape).astype(dtype)
        if unsized := self.run.data_dependent:
            raise UsageError(f"output {unsized[0]!r} has a data-dependent shape; plugrt exec cannot size it yet")
        self.host.update({name: np.zeros(self.run.shape(name), self.run.dtype(name)) for name in self.outputs})
        if self.copies:
            self.run.allocate()
            self.run.upload(self.host)
        else:
            self.run.bind_arrays(self.host)  # the host arrays themselves: no copies
        self._stream_owner, self.stream = engine.backend.create_stream()

    def infer_once(self) -> None:
        """One inference, transfers included unless --noDataTransfers."""
        transfers = self.copies and not self.args.noDataTransfers
        if transfers:
            self.run.upload({name: self.host[name] for name in self.inputs}, self.stream)
        self.run.execute(self.stream)
        if transfers:
            self.run.results(self.stream, into=self.host)
        self.run.backend.synchronize(self.stream)

    def benchmark(self) -> list[Timing]:
        """Warm up, then run for --iterations and --duration, timing each inference."""
        deadline = time.perf_counter() + self.args.warmUp / 1e3
        while time.perf_counter() < deadline:
            self.infer_once()
        timings: list[Timing] = []
        origin = time.perf_counter()
        end = origin + self.args.duration
        while len(timings) < self.args.iterations or time.perf_counter() < end:
            start = time.perf_counter()
            self.infer_once()
            stop = time.perf_counter()
            timings.append(Timing((start - origin) * 1e3, (stop - origin) * 1e3))
        return timings

    def profile(self) -> LayerTimes:
        """Per-layer times over --iterations profiled runs."""
        times = LayerTimes()
        self.run.context.profiler = times
        try:
            for _ in range(self.args.iterations):
                self.infer_once()
        finally:
            self.run.context.profiler = None
        return times

    def host_outputs(self) -> dict[str, np.ndarray]:
        """Outputs of the last inference, on the host."""
        if self.copies and self.args.noDataTransfers:
            return self.run.results(self.stream)
        return {n: self.host[n] for n in self.outputs}
