"""Real models on the CPU: plugrt against onnxruntime, interleaved in one process.

Transformer, CNN and RNN architectures are exported with ``torch.onnx.export`` (torch's
default exporter, opset 18) from configs with seeded random weights -- nothing is
downloaded -- and the pretrained ONNX models that PyPI packages ship are loaded from
the installed packages (rapidocr-onnxruntime's PP-OCR models, magika, silero-vad).
Each model is built by plugrt with a dynamic profile (batch, sequence or H/W) and run
at batch 1 and at a larger batch. Timing alternates blocks of runs of the two engines
(same thread count; onnxruntime's thread spinning off, which otherwise distorts
interleaved timing) and reports the fastest run of each, their ratio (plugrt /
onnxruntime, lower is better), the geometric mean, and the largest output difference
relative to the output's largest value.

Needs: onnxruntime; torch and transformers for the exported models (skipped without
them); ``pip install --no-deps rapidocr-onnxruntime magika silero-vad`` for the
pretrained ones (skipped when absent). Exports are cached in ``--cache``.

``--busy N`` starts N processes that each keep one core busy (pure Python spinning) while
measuring, and stops them at the end: the under-load measurement (with ``--clock wall``, the
latency a caller sees).

Usage: python benchmarks/real_models_cpu.py [--models bert gpt2 ...] [--threads 2] [--blocks 3] [--runs 3] [--busy 1]
"""

from __future__ import annotations

import argparse
import os
import sys


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None, help="model names (default: all)")
    parser.add_argument("--threads", type=int, default=2, help="threads of both engines")
    parser.add_argument("--blocks", type=int, default=3, help="alternating timing blocks per engine")
    parser.add_argument("--runs", type=int, default=3, help="runs per block")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/plugrt-real-models"), help="export cache")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument(
        "--clock",
        choices=("wall", "thread"),
        default="wall",
        help="wall time, or the calling thread's CPU time (with --threads 1: steady on a loaded machine)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="per-layer profile of plugrt at batch 1 (by layer kind), and onnxruntime's by node type, instead of timing (with --busy, under load)",
    )
    parser.add_argument("--busy", type=int, default=0, help="processes keeping one core busy each while measuring")
    parser.add_argument(
        "--unfused",
        action="store_true",
        help="also build each model with PLUGRT_DISABLE_PASSES=all and time it in the same alternation",
    )
    parser.add_argument(
        "--variant",
        default="",
        metavar="VAR=VALUE",
        help="also build each model with this environment setting (set again for the variant's first call at each "
        "batch, when it binds) and time it in the same alternation, e.g. PLUGRT_NUMBA=0; --unfused is "
        "PLUGRT_DISABLE_PASSES=all",
    )
    args = parser.parse_args()
    if args.unfused:
        args.variant = "PLUGRT_DISABLE_PASSES=all"
    if args.variant and "=" not in args.variant:
        parser.error(f"--variant {args.variant!r}: expected VAR=VALUE")
    return args


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(ARGS.threads)
    from plugrt.ops.torch_cpu import torch_module

    torch_module()  # torch imported as plugrt imports it (its OpenMP settings), before an export imports it

import contextlib  # noqa: E402
import glob  # noqa: E402
import importlib.util  # noqa: E402
import math  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402

Inputs = dict[str, np.ndarray]


@dataclass
class Model:
    """A model: where its ONNX comes from, its profile, and inputs at batch 1 and the larger batch."""

    name: str
    source: Callable[[str], str]  # cache dir -> path of the .onnx
    shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]
    inputs: Callable[[int], Inputs]  # batch -> feeds
    batch: int  # the larger batch


# --- exported models ---------------------------------------------------------------------------------


def _export(name: str, build: Callable[[], tuple[Any, tuple[Any, ...], list[str], Any]]) -> Callable[[str], str]:
    def source(cache: str) -> str:
        path = os.path.join(cache, f"{name}.onnx")
        if os.path.exists(path):
            return path
        import torch

        torch.manual_seed(0)
        module, args, names, dynamic = build()
        os.makedirs(cache, exist_ok=True)
        with torch.no_grad():
            try:
                torch.onnx.export(
                    module.eval(), args, path, input_names=names, dynamic_shapes=dynamic, opset_version=18
                )
            except Exception as exc:  # some exports refuse a dynamic dimension: fall back to the example's shapes
                print(
                    f"  {name}: dynamic export failed ({type(exc).__name__}); exporting static shapes", file=sys.stderr
                )
                torch.onnx.export(module.eval(), args, path, input_names=names, opset_version=18)
        return path

    return source


def _dim(name: str, low: int, high: int) -> Any:
    import torch

    return torch.export.Dim(name, min=low, max=high)


def _text(
    model_factory: Callable[[], Any], vocab: int = 1000
) -> Callable[[], tuple[Any, tuple[Any, ...], list[str], Any]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str], Any]:
        import torch

        ids = torch.randint(0, vocab, (1, 16))
        return model_factory(), (ids,), ["input_ids"], ({0: _dim("batch", 1, 16), 1: _dim("seq", 2, 512)},)

    return build


def _images(
    model_factory: Callable[[], Any], size: int = 224
) -> Callable[[], tuple[Any, tuple[Any, ...], list[str], Any]]:
    def build() -> tuple[Any, tuple[Any, ...], list[str], Any]:
        import torch

        return model_factory(), (torch.randn(2, 3, size, size),), ["pixel_values"], ({0: _dim("batch", 1, 16)},)

    return build


def _transformers(cls: str, config: str, **kwargs: Any) -> Callable[[], Any]:
    def make() -> Any:
        import transformers

        model = getattr(transformers, cls)(getattr(transformers, config)(**kwargs))
        return model

    return make


def _t5_encoder() -> Any:
    import transformers

    return transformers.T5EncoderModel(transformers.T5Config())  # t5-small's sizes


def _whisper_encoder() -> Any:
    import transformers

    config = transformers.WhisperConfig(
        d_model=384,
        encoder_layers=4,
        decoder_layers=4,
        encoder_attention_heads=6,
        decoder_attention_heads=6,
        encoder_ffn_dim=1536,
        decoder_ffn_dim=1536,
        num_mel_bins=80,
    )  # whisper-tiny's sizes
    return transformers.WhisperModel(config).get_encoder()


def _bilstm() -> Any:
    import torch

    class BiLSTM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10000, 128)
            self.lstm = torch.nn.LSTM(128, 256, num_layers=2, bidirectional=True, batch_first=True)
            self.head = torch.nn.Linear(512, 16)

        def forward(self, ids: Any) -> Any:
            return self.head(self.lstm(self.embed(ids))[0])

    return BiLSTM()


def _crnn() -> Any:
    from torch import nn

    class CRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 32, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(64, 128, 3, padding=1),
                nn.BatchNorm2d(128),
                nn.ReLU(),
                nn.MaxPool2d((2, 1)),
            )
            self.rnn = nn.LSTM(128 * 4, 128, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(256, 40)

        def forward(self, x: Any) -> Any:
            f = self.cnn(x)
            b, c, h, w = f.shape
            return self.fc(self.rnn(f.permute(0, 3, 1, 2).reshape(b, w, c * h))[0])

    return CRNN()


def _ids(batch: int, seq: int = 128) -> Inputs:
    return {"input_ids": np.random.default_rng(batch).integers(0, 1000, (batch, seq)).astype(np.int64)}


def _pixels(batch: int, size: int = 224) -> Inputs:
    return {"pixel_values": np.random.default_rng(batch).standard_normal((batch, 3, size, size)).astype(np.float32)}


def _exported_models() -> list[Model]:
    text = {"input_ids": ((1, 2), (1, 128), (16, 512))}
    image = {"pixel_values": ((1, 3, 224, 224), (1, 3, 224, 224), (16, 3, 224, 224))}
    models = [
        Model("bert", _export("bert", _text(_transformers("BertModel", "BertConfig"))), text, _ids, 4),
        Model(
            "distilbert",
            _export("distilbert", _text(_transformers("DistilBertModel", "DistilBertConfig"))),
            text,
            _ids,
            4,
        ),
        # use_cache=False: with the key/value cache torch.export fails (dynamic or static shapes)
        Model("gpt2", _export("gpt2", _text(_transformers("GPT2Model", "GPT2Config", use_cache=False))), text, _ids, 4),
        Model("t5-encoder", _export("t5-encoder", _text(_t5_encoder)), text, _ids, 4),
        Model("vit", _export("vit", _images(_transformers("ViTModel", "ViTConfig"))), image, _pixels, 4),
        Model(
            "resnet18",
            _export(
                "resnet18",
                _images(
                    _transformers(
                        "ResNetModel",
                        "ResNetConfig",
                        depths=[2, 2, 2, 2],
                        hidden_sizes=[64, 128, 256, 512],
                        layer_type="basic",
                    )
                ),
            ),
            image,
            _pixels,
            8,
        ),
        Model(
            "mobilenetv2",
            _export("mobilenetv2", _images(_transformers("MobileNetV2Model", "MobileNetV2Config"))),
            image,
            _pixels,
            8,
        ),
    ]

    def whisper() -> tuple[Any, tuple[Any, ...], list[str], Any]:
        import torch

        return _whisper_encoder(), (torch.randn(2, 80, 3000),), ["input_features"], ({0: _dim("batch", 1, 8)},)

    def wav2vec2() -> tuple[Any, tuple[Any, ...], list[str], Any]:
        import torch

        model = _transformers("Wav2Vec2Model", "Wav2Vec2Config")()
        return model, (torch.randn(1, 16000),), ["audio"], ({0: _dim("batch", 1, 8), 1: _dim("samples", 1000, 64000)},)

    def bilstm() -> tuple[Any, tuple[Any, ...], list[str], Any]:
        import torch

        return (
            _bilstm(),
            (torch.randint(0, 10000, (2, 64)),),
            ["input_ids"],
            ({0: _dim("batch", 1, 32), 1: _dim("seq", 2, 256)},),
        )

    def crnn() -> tuple[Any, tuple[Any, ...], list[str], Any]:
        import torch

        return _crnn(), (torch.randn(1, 1, 32, 128),), ["x"], ({3: _dim("width", 32, 1024)},)

    rng = np.random.default_rng(0)
    models += [
        Model(
            "whisper-encoder",
            _export("whisper-encoder", whisper),
            {"input_features": ((1, 80, 3000),) * 2 + ((8, 80, 3000),)},
            lambda b: {"input_features": rng.standard_normal((b, 80, 3000)).astype(np.float32)},
            2,
        ),
        Model(
            "wav2vec2",
            _export("wav2vec2", wav2vec2),
            {"audio": ((1, 1000), (1, 16000), (8, 64000))},
            lambda b: {"audio": rng.standard_normal((b, 16000)).astype(np.float32)},
            4,
        ),
        Model(
            "bilstm",
            _export("bilstm", bilstm),
            {"input_ids": ((1, 2), (1, 64), (32, 256))},
            lambda b: {"input_ids": rng.integers(0, 10000, (b, 64)).astype(np.int64)},
            16,
        ),
        Model(
            "crnn",
            _export("crnn", crnn),
            {"x": ((1, 1, 32, 32), (1, 1, 32, 128), (1, 1, 32, 1024))},
            lambda b: {"x": rng.standard_normal((1, 1, 32, 128 * b)).astype(np.float32)},
            4,
        ),
    ]
    return models


# --- pretrained models shipped in PyPI packages --------------------------------------------------------


def _packaged(package: str, pattern: str) -> Callable[[str], str]:
    def source(cache: str) -> str:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise FileNotFoundError(f"pip install --no-deps {package.replace('_', '-')}")
        found = sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), pattern), recursive=True))
        if not found:
            raise FileNotFoundError(f"{package} holds no {pattern}")
        return found[0]

    return source


def _packaged_models() -> list[Model]:
    rng = np.random.default_rng(1)

    def image(h: int, w: int) -> Callable[[int], Inputs]:
        return lambda b: {"x": rng.random((b, 3, h, w), dtype=np.float32)}

    return [
        Model(
            "ppocr-det",
            _packaged("rapidocr_onnxruntime", "models/*det*.onnx"),
            {"x": ((1, 3, 32, 32), (1, 3, 480, 480), (4, 3, 960, 960))},
            image(480, 480),
            2,
        ),
        Model(
            "ppocr-rec",
            _packaged("rapidocr_onnxruntime", "models/*rec*.onnx"),
            {"x": ((1, 3, 48, 32), (1, 3, 48, 320), (16, 3, 48, 1280))},
            image(48, 320),
            8,
        ),
        Model(
            "ppocr-cls",
            _packaged("rapidocr_onnxruntime", "models/*cls*.onnx"),
            {"x": ((1, 3, 48, 48), (1, 3, 48, 192), (32, 3, 48, 640))},
            image(48, 192),
            16,
        ),
        Model(
            "magika",
            _packaged("magika", "models/**/model.onnx"),
            {"bytes": ((1, 2048), (1, 2048), (16, 2048))},
            lambda b: {"bytes": rng.integers(0, 256, (b, 2048)).astype(np.int32)},
            8,
        ),
    ] + [
        # both packaged exports; the profile fixes the chunk length, which decides their shape-only If nodes
        Model(
            name,
            _packaged("silero_vad", f"data/{file}"),
            {"input": ((1, 512), (1, 512), (8, 512)), "state": ((2, 1, 128), (2, 1, 128), (2, 8, 128))},
            lambda b: {
                "input": rng.standard_normal((b, 512)).astype(np.float32) * 0.1,
                "state": np.zeros((2, b, 128), np.float32),
                "sr": np.array(16000, np.int64),
            },
            4,
        )
        for name, file in (("silero-vad", "silero_vad.onnx"), ("silero-vad-op15", "silero_vad_16k_op15.onnx"))
    ]


# --- running -------------------------------------------------------------------------------------------------


def _feeds_for(model: Model, path: str, batch: int) -> Inputs:
    feeds = model.inputs(batch)
    if feeds:
        return feeds
    # packaged models with their own input names: random data of the declared shape, batch where dynamic
    proto = onnx.load(path, load_external_data=False)
    initializers = {t.name for t in proto.graph.initializer}
    rng = np.random.default_rng(batch)
    made: Inputs = {}
    for value in proto.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else (batch if k == 0 else 1) for k, d in enumerate(tensor.shape.dim)]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        made[value.name] = (rng.random(dims) * 2 - 1).astype(dtype) if dtype.kind == "f" else np.zeros(dims, dtype)
    return made


def _fit_profile(path: str, shapes: dict[str, Any]) -> dict[str, Any]:
    """The profile, with every dimension the export made static fixed at its value."""
    proto = onnx.load(path, load_external_data=False)
    declared = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in proto.graph.input}
    fitted = {}
    for name, ranges in shapes.items():
        dims = declared.get(name, [])
        fitted[name] = tuple(
            tuple(dims[k] if k < len(dims) and dims[k] > 0 else d for k, d in enumerate(shape)) for shape in ranges
        )
    return fitted


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """``count`` processes spinning in pure Python (one core each) for the duration of the block."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for process in spinners:
        process.start()
    try:
        time.sleep(1.0 if spinners else 0.0)
        yield
    finally:
        for process in spinners:
            process.terminate()
            process.join()


def _fastest(run: Callable[[], Any], runs: int) -> float:
    clock = time.thread_time if ARGS is not None and ARGS.clock == "thread" else time.perf_counter
    best = math.inf
    for _ in range(runs):
        start = clock()
        run()
        best = min(best, clock() - start)
    return best


def measure(model: Model, cache: str, threads: int, blocks: int, runs: int) -> dict[str, Any]:
    """Import, build and time one model at batch 1 and its larger batch."""
    import onnxruntime as ort

    from plugrt.onnx.compile import compile as compile_model

    row: dict[str, Any] = {"model": model.name}
    path = model.source(cache)
    row["nodes"] = len(onnx.load(path, load_external_data=False).graph.node)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    start = time.perf_counter()
    try:
        compiled = compile_model(path, shapes=_fit_profile(path, model.shapes) or None)
    except Exception as exc:  # the point of the table: what does not import, and why
        row["imports"] = f"no: {type(exc).__name__}: {str(exc).splitlines()[-1][:90]}"
        return row
    row["imports"] = "yes"
    row["build_s"] = time.perf_counter() - start
    row["layers"] = len(compiled.engine.plan.layers)
    unfused = None
    variant = ARGS.variant.split("=", 1) if ARGS is not None and ARGS.variant else None
    if variant is not None:  # the same model built (and bound) with the variant's setting, timed alongside
        with _setting(*variant):
            unfused = compile_model(path, shapes=_fit_profile(path, model.shapes) or None)
        row["layers"] = f"{len(unfused.engine.plan.layers)} -> {row['layers']}"
    fitted = _fit_profile(path, model.shapes)
    for label, batch in (("b1", 1), ("bN", model.batch)):
        feeds = _feeds_for(model, path, batch)
        outside = [
            name
            for name, array in feeds.items()
            if name in fitted
            and any(not lo <= d <= hi for d, lo, hi in zip(array.shape, fitted[name][0], fitted[name][2]))
        ]
        if outside:
            row[label] = f"the export fixed {outside[0]} at {fitted[outside[0]][0]}"
            continue
        try:
            ours = compiled(**feeds)
        except Exception as exc:
            row[label] = f"run failed: {type(exc).__name__}: {str(exc)[:80]}"
            continue
        theirs = session.run(None, feeds)
        if unfused is not None and variant is not None:
            with _setting(*variant):
                unfused(**feeds)  # binds for this batch's shapes with the variant's setting
        first = next(iter(ours.values())) if isinstance(ours, dict) else ours
        scale = max(float(np.abs(theirs[0]).max()), 1e-30)
        row[f"{label}_diff"] = float(np.abs(np.asarray(first, np.float64) - theirs[0]).max()) / scale
        plugrt_best = ort_best = variant_best = math.inf
        for _ in range(blocks):
            plugrt_best = min(plugrt_best, _fastest(lambda f=feeds: compiled(**f), runs))
            ort_best = min(ort_best, _fastest(lambda f=feeds: session.run(None, f), runs))
            if unfused is not None:
                variant_best = min(variant_best, _fastest(lambda f=feeds: unfused(**f), runs))
        row[label] = (plugrt_best * 1e3, ort_best * 1e3)
        if unfused is not None:
            row[f"{label}_variant"] = (variant_best * 1e3, ort_best * 1e3)
    return row


def _layer_kind(info: dict[str, Any]) -> str:
    kind = str(info.get("kind", "?"))
    params = info.get("params") or {}
    if kind == "convolution":
        group, maps = int(params.get("group", 1)), int(params.get("num_output_maps", 0))
        shape = "x".join(str(k) for k in params.get("kernel_shape", ()))
        flavour = "depthwise" if group > 1 and group == maps else ("grouped" if group > 1 else "dense")
        return f"convolution {flavour} {shape}"
    return kind


def profile(model: Model, cache: str, runs: int) -> None:
    """Print where plugrt's time goes at batch 1: milliseconds per run by layer kind, and the slowest layers."""
    from plugrt import IProfiler
    from plugrt.onnx.compile import compile as compile_model

    path = model.source(cache)
    compiled = compile_model(path, shapes=_fit_profile(path, model.shapes) or None)
    inspector = compiled.engine.create_engine_inspector()
    kinds = {}
    for index in range(compiled.engine.num_layers):
        info = inspector.layer_info(index)
        kinds[info["name"]] = _layer_kind(info)

    class Totals(IProfiler):
        def __init__(self) -> None:
            super().__init__()
            self.layers: dict[str, float] = {}

        def report_layer_time(self, layer_name: str, ms: float) -> None:
            self.layers[layer_name] = self.layers.get(layer_name, 0.0) + ms

    feeds = _feeds_for(model, path, 1)
    compiled(**feeds)
    totals = Totals()
    compiled.context.profiler = totals
    start = time.perf_counter()
    for _ in range(runs):
        compiled(**feeds)
    wall = (time.perf_counter() - start) * 1e3 / runs
    compiled.context.profiler = None
    by_kind: dict[str, list[float]] = {}
    for name, ms in totals.layers.items():
        entry = by_kind.setdefault(kinds.get(name, "?"), [0.0, 0])
        entry[0] += ms / runs
        entry[1] += 1
    layered = sum(v[0] for v in by_kind.values())
    print(f"## {model.name}: {wall:.1f} ms a run, {layered:.1f} ms in layers ({len(totals.layers)} layers)")
    for kind, (ms, count) in sorted(by_kind.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"  {ms:8.2f} ms {100 * ms / max(layered, 1e-9):5.1f}%  {count:4d}x  {kind}")
    slowest = sorted(totals.layers.items(), key=lambda kv: -kv[1])[:5]
    print("  slowest: " + ", ".join(f"{name} [{kinds.get(name, '?')}] {ms / runs:.2f} ms" for name, ms in slowest))
    _profile_onnxruntime(path, feeds, runs)


def _profile_onnxruntime(path: str, feeds: Inputs, runs: int) -> None:
    """onnxruntime's own node profile of the same run: milliseconds per run by operator type (its fused and
    layout nodes, e.g. ``ReorderInput``/``ReorderOutput`` of its NCHWc layout, under their own names)."""
    import json
    import tempfile

    import onnxruntime as ort

    threads = ARGS.threads if ARGS is not None else 1
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = os.path.join(folder, "ort")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        session.run(None, feeds)
        for _ in range(runs):
            session.run(None, feeds)
        with open(session.end_profiling()) as handle:
            events = json.load(handle)
    nodes: dict[str, list[tuple[float, str]]] = {}
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            nodes.setdefault(event["name"], []).append((event["dur"] / 1e3, event["args"].get("op_name", "?")))
    by_type: dict[str, list[float]] = {}
    for timings in nodes.values():
        entry = by_type.setdefault(timings[0][1], [0.0, 0])
        entry[0] += min(ms for ms, _ in timings)  # each node's fastest run
        entry[1] += 1
    total = sum(v[0] for v in by_type.values())
    print(f"  onnxruntime: {total:.1f} ms in {len(nodes)} nodes (fastest run of each)")
    for op, (ms, count) in sorted(by_type.items(), key=lambda kv: -kv[1][0])[:8]:
        print(f"  {ms:8.2f} ms {100 * ms / max(total, 1e-9):5.1f}%  {count:4d}x  {op}")


@contextlib.contextmanager
def _setting(name: str, value: str) -> Iterator[None]:
    """Environment variable ``name`` set to ``value`` inside the block, as it was after it."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _cell(row: dict[str, Any], label: str) -> str:
    value = row.get(label)
    if not isinstance(value, tuple):
        return str(value or "-")
    ours, theirs = value
    digits = 3 if theirs < 1 else 2 if theirs < 10 else 1  # sub-millisecond models readable too
    return f"{ours:.{digits}f} / {theirs:.{digits}f} ms = {ours / theirs:.2f}x"


def main() -> None:
    assert ARGS is not None
    models = _exported_models() + _packaged_models()
    if ARGS.list:
        print(" ".join(m.name for m in models))
        return
    chosen = [m for m in models if ARGS.models is None or m.name in ARGS.models]
    if ARGS.profile:
        with busy_cores(ARGS.busy):  # (a profile under load with --busy)
            for model in chosen:
                profile(model, ARGS.cache, ARGS.runs)
        return
    rows = []
    with busy_cores(ARGS.busy):
        print(
            f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"threads {ARGS.threads}, clock {ARGS.clock}, busy processes {ARGS.busy}, load {os.getloadavg()[0]:.2f}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        )
        for model in chosen:
            try:
                row = measure(model, ARGS.cache, ARGS.threads, ARGS.blocks, ARGS.runs)
            except Exception as exc:
                row = {"model": model.name, "imports": f"skipped: {type(exc).__name__}: {str(exc)[:80]}"}
                if not isinstance(exc, (ImportError, FileNotFoundError)):
                    traceback.print_exc(limit=2)
            rows.append(row)
            print(
                f"  {model.name}: {row.get('imports')} {_cell(row, 'b1')} {_cell(row, 'bN')}",
                file=sys.stderr,
                flush=True,
            )
        print(f"# load at the end {os.getloadavg()[0]:.2f}")
    if ARGS.variant:  # the setting's effect (the optimizer's with --unfused), measured in the same alternation
        print(f"| model | layers variant -> default | batch 1 {ARGS.variant} / ORT | batch 1 default / ORT ", end="")
        print(f"| larger {ARGS.variant} | larger default |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            cells = [_cell(row, k) for k in ("b1_variant", "b1", "bN_variant", "bN")]
            print(f"| {row['model']} | {row.get('layers', '-')} | " + " | ".join(cells) + " |")
    print("| model | nodes | imports | build s | batch 1: plugrt / ORT | larger batch | max rel. diff |")
    print("|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {"b1": [], "bN": []}
    if ARGS.variant:
        ratios.update({"b1_variant": [], "bN_variant": []})
    for row in rows:
        for label in ratios:
            if isinstance(row.get(label), tuple):
                ratios[label].append(row[label][0] / row[label][1])
        diffs = [row[k] for k in ("b1_diff", "bN_diff") if k in row]
        build = f"{row['build_s']:.1f}" if "build_s" in row else "-"
        print(
            f"| {row['model']} | {row.get('nodes', '-')} | {row['imports']} | {build} | {_cell(row, 'b1')} | "
            f"{_cell(row, 'bN')} | {max(diffs):.1e} |"
            if diffs
            else f"| {row['model']} | {row.get('nodes', '-')} | {row['imports']} | {build} | {_cell(row, 'b1')} | "
            f"{_cell(row, 'bN')} | - |"
        )
    for label, values in ratios.items():
        if values:
            mean = math.exp(sum(math.log(v) for v in values) / len(values))
            print(f"geometric mean {label}: {mean:.2f}x over {len(values)} models")


if __name__ == "__main__":
    main()
