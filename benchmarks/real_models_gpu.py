"""Real exported models on the GPU: plugrt (eager, CUDA graph) against PyTorch eager and torch.compile.

Each model of ``_gpu_models.py`` (random weights), at fp32 and fp16 (``model.half()``), is exported
by ``torch.onnx.export`` (opset 17, dynamic batch; cached in ``--cache``) and built by plugrt with a
batch profile 1..32: the fp32 model without and with ``BuilderFlag.FP16``, and the fp16 model. In one
process, interleaved, the script times plugrt eager (``context.use_cuda_graph = False``: every layer launched
at every run), plugrt graph (the default ``execute_async_v3``, which replays a CUDA graph from its second run
with unchanged shapes and addresses; a row says so where it did not),
PyTorch eager and ``torch.compile(mode="reduce-overhead")`` (dynamo reset per batch: a static graph
each). Every timed call starts on an idle device and is timed by CUDA events; the table has medians.
Both engines compute FLOAT products and convolutions in strict FP32 (``BuilderFlag.TF32`` cleared, PyTorch's
cuBLAS and cuDNN TF32 switches off), or with ``--tf32`` both may use TF32 (the flag kept, as a TensorRT
builder config has it, the switches on; the precisions then read ``tf32``). plugrt's outputs are checked
against PyTorch eager in true FP32 (TF32 off): max |diff| / max |reference| within 1e-3 (fp32) or 2e-2 (FP16 builds, fp16 model),
NaN named. A failing step (export, build, bind, capture, run) puts its exception in its cell.
``--device cpu`` (plugrt's CPU backend, torch on the CPU, wall clock, torch.compile only with
``--compile on``) with ``--small`` (2 layers, narrow) checks the script on any machine.

Usage: python benchmarks/real_models_gpu.py [--models block,bert] [--batches 1,32] [--precisions fp32,fp16flag,fp16]
       [--tf32] [--repeats 50] [--warmup 10] [--profile] [--json out.json] [--device cuda|cpu] [--small]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _gpu_models import MODELS, ModelSpec, export_onnx, make_inputs, weights_digest

#: label, dtype of the torch model, BuilderFlag.FP16, tolerance
PRECISIONS = {"fp32": ("fp32", "float32", False, 1e-3), "fp16flag": ("fp32 +FP16", "float32", True, 2e-2),
              "fp16": ("fp16", "float16", True, 2e-2)}  # fmt: skip
# The fp16 export is built with BuilderFlag.FP16, as ``trtexec --fp16`` would: weakly typed, its HALF tensors are
# only hints (without the flag its layers compute in FP32), and the exporter leaves FLOAT islands in it (Casts to
# FLOAT and FLOAT weights in BERT's and ViT's exports) that a strongly typed build would run in FP32.
COLUMNS = ["plugrt eager", "plugrt graph", "torch eager", "torch.compile"]


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--models", default=",".join(MODELS), help=f"comma-separated, of {','.join(MODELS)} (default all)")
    add("--batches", default="1,32", help="comma-separated batch sizes (default 1,32; the profile covers 1..32)")
    add("--precisions", default=",".join(PRECISIONS), help="comma-separated, of fp32,fp16flag,fp16 (default all)")
    add("--repeats", type=int, default=50, help="timed calls per engine, interleaved (default 50)")
    add("--warmup", type=int, default=10, help="untimed calls per engine first (default 10)")
    add("--device", choices=("cuda", "cpu"), default="cuda")
    add("--compile", choices=("auto", "on", "off", "child"), default="auto",
        help="torch.compile (auto: on for cuda only; child: timed in a child process of this script, run first, "
             "with plugrt absent from it)")  # fmt: skip
    add("--torch-only", action="store_true", help=argparse.SUPPRESS)  # the child of --compile child
    add("--exporter", choices=("torchscript", "dynamo"), default="torchscript", help="torch.onnx.export's dynamo=")
    add("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models-gpu"), help="where exports are kept")
    add("--tf32", action="store_true",
        help="FLOAT products and convolutions may use TF32 in both engines (BuilderFlag.TF32 kept, as TensorRT's "
             "default; PyTorch's cuBLAS and cuDNN switches on); default: strict FP32 in both (the flag cleared, "
             "the switches off)")  # fmt: skip
    add("--small", action="store_true", help="shrunk configs (2 layers, narrow, 64x64 images) for quick checks")
    add("--profile", action="store_true", help="print the 15 slowest layers of each plugrt eager engine (IProfiler)")
    add("--threads", type=int, default=2, help="CPU threads of NumPy and torch with --device cpu (default 2)")
    add("--json", metavar="PATH", help="also write the rows (and profiles) as JSON here")
    args = parser.parse_args(argv)
    args.models, args.precisions = args.models.split(","), args.precisions.split(",")
    args.batches = [int(b) for b in args.batches.split(",")]
    for kind, given, known in (("model", args.models, MODELS), ("precision", args.precisions, PRECISIONS)):
        if unknown := [g for g in given if g not in known]:
            parser.error(f"unknown {kind}(s) {unknown}; choose from {','.join(known)}")
    if min(args.batches) < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--batches must be >= 1, --repeats >= 1 and --warmup >= 0")
    return args


def describe(exc: BaseException, stage: str) -> str:
    """``stage: ExceptionType: first line of the message`` (shortened), for a table cell."""
    lines = str(exc).strip().splitlines()
    text = f"{stage}: {type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= 140 else text[:137] + "..."


@dataclass
class Runner:
    """One way of running a model: a no-argument call on ``stream``, its samples (ms) or its error."""

    key: str
    call: Callable[[], Any] | None
    stream: Any = None
    samples: list[float] = field(default_factory=list)
    error: str | None = None
    context: Any = None  # plugrt's: the execution context and its bound tensors
    tensors: dict[str, Any] | None = None

    def result(self) -> float | str | None:
        """The median in ms, the error, or None when it never ran."""
        return self.error if self.error else (statistics.median(self.samples) if self.samples else None)


class Bench:
    """Everything a run shares: arguments, torch, plugrt, the runtime and the plugrt stream."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        import plugrt as trt

        self.args, self.torch, self.trt = args, torch, trt
        self.cuda = args.device == "cuda"
        self.compile = args.compile == "on" or (args.compile == "auto" and self.cuda) or args.torch_only
        self.child_compile: dict[tuple[str, str, int], Any] = {}  # --compile child: its torch.compile cells
        self.logger = trt.Logger(trt.Logger.ERROR)
        trt.init_libnvinfer_plugins(self.logger, "")
        self.runtime = trt.Runtime(self.logger, device=args.device)
        self.stream = torch.cuda.Stream() if self.cuda else None  # plugrt's: graphs cannot capture the legacy stream
        self.handle = int(self.stream.cuda_stream) if self.stream is not None else 0
        self.rows: list[dict[str, Any]] = []
        self.meta: dict[str, Any] = {}
        self.profiles: list[dict[str, Any]] = []

    def label(self, variant: str) -> str:
        """A precision's name in the table: ``fp32`` reads ``tf32`` where ``--tf32`` lets both engines use it."""
        name = PRECISIONS[variant][0]
        return name.replace("fp32", "tf32") if self.args.tf32 else name

    def build(self, path: str, spec: ModelSpec, fp16: bool) -> tuple[Any, str]:
        """The engine of the ONNX file (batch profile 1..32, opt at the largest batch asked) and a note."""
        trt, started = self.trt, time.perf_counter()
        builder = trt.Builder(self.logger, self.args.device)
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, self.logger)
        if not parser.parse_from_file(path):
            raise RuntimeError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
        config = builder.create_builder_config()
        if fp16:
            config.set_flag(trt.BuilderFlag.FP16)
        if not self.args.tf32:
            config.clear_flag(trt.BuilderFlag.TF32)
        profile = builder.create_optimization_profile()
        top = max(self.args.batches)
        shapes = [{n: s for n, s, _ in spec.inputs(b, self.args.small)} for b in (1, top, max(32, top))]
        for name in (network.get_input(i).name for i in range(network.num_inputs)):
            profile.set_shape(name, *(s[name] for s in shapes))
        config.add_optimization_profile(profile)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise RuntimeError("build_serialized_network returned None")
        engine = self.runtime.deserialize_cuda_engine(plan)
        return engine, f"build {time.perf_counter() - started:.1f} s, {engine.num_layers} layers"

    def plugrt_runner(self, key: str, engine: Any, inputs: dict[str, Any], graph: bool) -> Runner:
        """A context of ``engine`` bound to ``inputs`` (converted to the engine's types) and new outputs."""
        torch, trt = self.torch, self.trt
        context = engine.create_execution_context()
        context.use_cuda_graph = None if graph else False  # None: the default, graphs from the second run
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        tensors: dict[str, Any] = {}

        def dtype(name: str) -> Any:  # NumPy's scalar type of the tensor, as torch's: float32, bool_ -> bool ...
            return getattr(torch, engine.get_tensor_dtype(name).nptype().__name__.rstrip("_"))

        for name in (n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT):
            if name not in inputs:
                raise KeyError(f"engine input {name!r} is not among the model's inputs {list(inputs)}")
            tensors[name] = inputs[name].to(dtype(name)).contiguous()
            if not context.set_input_shape(name, tuple(tensors[name].shape)):
                raise ValueError(f"set_input_shape({name!r}, {tuple(tensors[name].shape)}) was refused")
        for name in (n for n in names if n not in tensors):
            shape = tuple(context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise ValueError(f"output {name!r} has a data-dependent shape {shape}")
            tensors[name] = torch.empty(shape, dtype=dtype(name), device=self.args.device)
        for name, tensor in tensors.items():
            context.set_tensor_address(name, tensor.data_ptr())
        return Runner(key, lambda: context.execute_async_v3(self.handle), self.stream, context=context, tensors=tensors)

    def _measure(self, runner: Runner) -> float:
        assert runner.call is not None
        if not self.cuda:
            started = time.perf_counter()
            runner.call()
            return (time.perf_counter() - started) * 1e3
        torch = self.torch
        stream = runner.stream or torch.cuda.current_stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()  # an idle device: the events time the call's whole latency, launches included
        start.record(stream)
        runner.call()
        end.record(stream)
        end.synchronize()
        return float(start.elapsed_time(end))

    def time_interleaved(self, runners: list[Runner]) -> None:
        """Warm each runner up, then time one call of each in turn, ``--repeats`` rounds."""
        for runner in runners:
            for i in range(self.args.warmup if runner.call is not None else 0):
                try:
                    runner.call()  # type: ignore[misc]
                except Exception as exc:
                    first_graph_call = i <= 1 and runner.key == "plugrt graph"  # (the default captures at its second call)
                    runner.error = describe(exc, "capture" if first_graph_call else "run")
                    break
        for _ in range(self.args.repeats):
            for runner in (r for r in runners if r.call is not None and r.error is None):
                try:
                    runner.samples.append(self._measure(runner))
                except Exception as exc:
                    runner.error = describe(exc, "run")
        if self.cuda:
            try:
                self.torch.cuda.synchronize()
            except Exception as exc:  # a failed capture can poison the device; the cells say what failed
                print(f"synchronize after timing: {describe(exc, 'run')}", file=sys.stderr)

    def reference(self, module: Any, values: tuple[Any, ...]) -> Any:
        """PyTorch eager's output in true FP32 (TF32 off for cuDNN and cuBLAS, whatever the timed runs used)."""
        backends = self.torch.backends
        saved = backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32
        backends.cudnn.allow_tf32 = backends.cuda.matmul.allow_tf32 = False
        try:
            return module(*values)
        finally:
            backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32 = saved

    def run_model(self, spec: ModelSpec) -> None:
        """Every precision asked of ``spec``: export, build, then each batch timed and checked."""
        for dtype_name in ("float32", "float16"):
            variants = [p for p in self.args.precisions if PRECISIONS[p][1] == dtype_name]
            if variants:
                self._run_precision(spec, dtype_name, variants)
                gc.collect()
                if self.cuda:
                    self.torch.cuda.empty_cache()

    def _run_precision(self, spec: ModelSpec, dtype_name: str, variants: list[str]) -> None:
        torch, args = self.torch, self.args
        dtype = getattr(torch, dtype_name)
        torch.manual_seed(0)
        module = spec.make(args.small).eval()
        digest = weights_digest(module)
        module = module.to(device=args.device, dtype=dtype)
        engines: dict[str, tuple[Any, str]] = {v: (None, "torch only") for v in variants} if args.torch_only else {}
        name = f"{spec.name}{'-small' if args.small else ''}-{dtype_name}-{args.exporter}-{args.device}-{digest}.onnx"
        try:
            path = export_onnx(module, make_inputs(spec, 2, args.small, dtype, args.device),
                               os.path.join(args.cache, name), args.exporter)  # fmt: skip
        except Exception as exc:
            path, failed = "", describe(exc, "export")
            engines = {v: (None, failed) for v in variants}
        for variant in variants if path and not args.torch_only else []:
            try:
                engines[variant] = self.build(path, spec, PRECISIONS[variant][2])
            except Exception as exc:
                engines[variant] = (None, describe(exc, "build"))
        for batch in args.batches:
            self._run_batch(spec, module, engines, batch, dtype)

    def _run_batch(self, spec: ModelSpec, module: Any, engines: dict[str, Any], batch: int, dtype: Any) -> None:
        torch, args = self.torch, self.args
        inputs = make_inputs(spec, batch, args.small, dtype, args.device)
        values = tuple(inputs.values())
        plugrt: dict[str, list[Runner]] = {}
        for variant, (engine, note) in engines.items():
            plugrt[variant] = []
            for key, graph in (("plugrt eager", False), ("plugrt graph", True)):
                if engine is None or (graph and not self.cuda):
                    plugrt[variant].append(Runner(key, None, error=note if engine is None else "n/a on cpu"))
                    continue
                try:
                    plugrt[variant].append(self.plugrt_runner(key, engine, inputs, graph))
                except Exception as exc:
                    plugrt[variant].append(Runner(key, None, error=describe(exc, "bind")))
        with torch.no_grad():
            torch._dynamo.reset()  # torch.compile makes a static graph for this batch, whatever ran before
            compiled = torch.compile(module, mode="reduce-overhead")  # compiles at its first call
            torch_runners = [Runner("torch eager", lambda: module(*values)),
                             Runner("torch.compile", lambda: compiled(*values))]  # fmt: skip
            if not self.compile:
                torch_runners[1].call, torch_runners[1].error = None, "off"
            self.time_interleaved([r for rs in plugrt.values() for r in rs] + torch_runners)
            reference = self.reference(module, values)
        for variant, runners in plugrt.items():
            self._row(spec, variant, batch, runners + torch_runners, reference, engines[variant][1])
            if args.profile and runners[0].context is not None and runners[0].error is None:
                self._profile(spec, variant, batch, runners[0])

    def _row(self, spec: ModelSpec, variant: str, batch: int, runners: list[Runner], reference: Any, note: str) -> None:
        label, tolerance = self.label(variant), PRECISIONS[variant][3]
        cells = {r.key: r.result() for r in runners}
        notes = [note] if not note.startswith(("export:", "build:")) else []
        worst: float | None = None
        for runner in runners[:2]:
            if runner.tensors is None or runner.error or not runner.samples:
                continue
            out, ref = runner.tensors["output"].float(), reference.float()
            if out.shape != ref.shape:
                notes.append(f"{runner.key}: shape {tuple(out.shape)}, torch {tuple(ref.shape)}")
                continue
            if bool(self.torch.isnan(out).any()):
                notes.append(f"{runner.key}: NaN in output" + (" (and in torch's)" * bool(self.torch.isnan(ref).any())))
                worst = float("nan")
                continue
            diff = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
            worst = diff if worst is None else max(worst, diff)
        default = runners[1].context
        if default is not None and runners[1].samples and not default.replayed_graph:
            notes.append(f"plugrt graph: no replay ({default._executor.graphs.refusal(default.engine.plan)})")
        if worst is not None and not worst <= tolerance:
            notes.append(f"over tolerance {tolerance:g}")
        if (spec.name, label, batch) in self.child_compile:
            cells["torch.compile"] = self.child_compile[(spec.name, label, batch)]
        graph, compiled, eager = cells["plugrt graph"], cells["torch.compile"], cells["torch eager"]
        ratio = graph / compiled if isinstance(graph, float) and isinstance(compiled, float) else None
        if variant == "fp16flag" and isinstance(graph, float) and isinstance(eager, float):
            notes.append(f"graph/torch eager {graph / eager:.2f}")
        self.add_row({"model": spec.name, "precision": label, "batch": batch, **cells,
                      "graph/compile": ratio, "max rel diff": worst, "notes": "; ".join(notes)})  # fmt: skip

    def add_row(self, row: dict[str, Any]) -> None:
        """Keep ``row``, echo it on stderr and rewrite ``--json`` (a run cut short keeps what it measured)."""
        self.rows.append(row)
        print("  " + table([row]).splitlines()[-1], file=sys.stderr, flush=True)
        self.write_json()

    def note_row(self, model: str, note: str) -> None:
        """A row of ``model`` with only a note (skipped, or failed outside any cell)."""
        self.add_row({"model": model, "precision": "—", "batch": "—", "graph/compile": None, "max rel diff": None,
                      "notes": note})  # fmt: skip

    def write_json(self) -> None:
        """Write meta, rows and profiles to ``--json`` (when given)."""
        if self.args.json:
            with open(self.args.json, "w", encoding="utf-8") as f:
                json.dump({"meta": self.meta, "rows": self.rows, "profiles": self.profiles}, f, indent=1)

    def _profile(self, spec: ModelSpec, variant: str, batch: int, runner: Runner) -> None:
        from plugrt.cli.profile_report import LayerTimes

        times, context, runs = LayerTimes(), runner.context, min(self.args.repeats, 10)
        context.profiler = times
        try:
            for _ in range(runs):
                context.execute_async_v3(self.handle)
            if self.cuda:
                self.torch.cuda.synchronize()
        except Exception as exc:
            print(f"profile {spec.name} {variant} B={batch}: {describe(exc, 'run')}")
            return
        finally:
            context.profiler = None
        layers = sorted(times.to_json(), key=lambda r: -r["timeMs"])
        total = sum(r["timeMs"] for r in layers) / runs
        print(f"\nplugrt eager {spec.name} {self.label(variant)} B={batch}: {len(layers)} layers, "
              f"{total:.3f} ms per run in layers (synchronised per layer); the 15 slowest:")  # fmt: skip
        for r in layers[:15]:
            print(f"  {r['averageMs'] * 1e3:10.1f} us {r['percentage']:5.1f}%  {r['name']}")
        self.profiles.append({"model": spec.name, "precision": self.label(variant), "batch": batch,
                              "ms_per_run": total, "layers": layers})  # fmt: skip


def _cell(value: Any, digits: str = ".3f", unit: str = " ms") -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return "NaN" if value != value else f"{value:{digits}}{unit}"
    return f"`{value}`".replace("|", "\\|")


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as one Markdown table."""
    head = ["model", "precision", "B", *COLUMNS, "graph/compile", "max rel diff", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["model"], row["precision"], str(row["batch"]), *(_cell(row.get(c)) for c in COLUMNS),
                 _cell(row["graph/compile"], ".2f", ""), _cell(row["max rel diff"], ".1e", ""), row["notes"]]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _compile_in_child(argv: list[str]) -> dict[tuple[str, str, int], Any]:
    """Run this script with ``--torch-only`` (torch eager and torch.compile, no plugrt engine) in a child process
    and return its torch.compile cells by (model, precision label, batch); an error text where it failed."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "child.json")
        rest = [a for a in argv if not a.startswith("--compile") and a != "child"]
        done = subprocess.run([sys.executable, __file__, *rest, "--compile", "on", "--torch-only", "--json", out],
                              capture_output=True, text=True)  # fmt: skip
        if not os.path.exists(out):
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            print(f"torch.compile child failed ({done.returncode}): {tail[0]}", file=sys.stderr)
            return {}
        with open(out, encoding="utf-8") as f:
            rows = json.load(f)["rows"]
    return {(r["model"], r["precision"], r["batch"]): r.get("torch.compile") for r in rows if "torch.compile" in r}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints the table (and writes ``--json``)."""
    args = _parse(argv)
    if args.device == "cpu":
        for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(variable, str(args.threads))
    bench = Bench(args)
    torch = bench.torch
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    else:  # PyTorch's FLOAT kernels at the precision plugrt's builds get (see --tf32)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = args.tf32
    where = torch.cuda.get_device_name() if bench.cuda else f"CPU ({platform.processor() or platform.machine()})"
    meta = bench.meta
    meta.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), device=where, torch=torch.__version__,
                plugrt=bench.trt.__version__, load=os.getloadavg(), command=" ".join(sys.argv), repeats=args.repeats,
                warmup=args.warmup, exporter=args.exporter, small=args.small, tf32=args.tf32)  # fmt: skip
    print(f"{meta['date']}, {where}, torch {meta['torch']}, plugrt {meta['plugrt']}, load {meta['load'][0]:.2f}; "
          f"medians of {args.repeats} interleaved calls after {args.warmup} warm-up")  # fmt: skip
    started = time.perf_counter()
    if args.compile == "child":
        bench.child_compile = _compile_in_child(argv if argv is not None else sys.argv[1:])
    for name in args.models:
        spec = MODELS[name]
        try:
            importlib.import_module(spec.needs)
        except Exception as exc:
            reason = f"skipped: {spec.needs} is not importable ({type(exc).__name__}: {str(exc).splitlines()[0]})"
            print(f"{name}: {reason}", file=sys.stderr)
            bench.note_row(name, reason)
            continue
        print(f"{name} ...", file=sys.stderr, flush=True)
        try:
            bench.run_model(spec)
        except Exception as exc:  # outside any cell (torch eager itself, the reference): the model's row says so
            bench.note_row(name, describe(exc, "failed"))
    meta["seconds"] = round(time.perf_counter() - started, 1)
    print(f"\n{table(bench.rows)}\n\n({meta['seconds']} s)")
    bench.write_json()
    return 0


if __name__ == "__main__":
    sys.exit(main())
