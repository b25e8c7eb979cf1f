"""INT8 on something real: a small CNN trained on scikit-learn's digits, calibrated with each calibrator.

Trains a CNN (two 3x3 convolutions, max pooling, two fully connected layers) on the CPU on
scikit-learn's bundled 8x8 digits (no download), exports it to ONNX with a dynamic batch,
then compares on the held-out images:

* plugrt FP32 and plugrt INT8 with each TensorRT calibrator (entropy 2, entropy, MinMax,
  legacy), calibrated on training images through ``IBuilderConfig.int8_calibrator``;
* onnxruntime FP32 and its static quantization (``onnxruntime.quantization.quantize_static``,
  QDQ format, symmetric INT8 activations and per-channel weights; MinMax and entropy
  calibration) on the same calibration images, and that QDQ model run by plugrt.

Prints accuracy and CPU latency per batch (median of interleaved runs, in one process; both
engines single-threaded: OpenBLAS and onnxruntime's intra-op pool at one thread). Needs
scikit-learn, torch and onnxruntime (benchmark-only dependencies).

    PYTHONPATH=src python benchmarks/int8_digits_cpu.py [--epochs 30] [--batch 64] [--repeats 30]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads: one thread, as onnxruntime below
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np


def train(epochs: int, seed: int = 0):  # type: ignore[no-untyped-def]
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.manual_seed(seed)
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=seed, stratify=y)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(32 * 4 * 4, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    data = torch.from_numpy(x_train)
    labels = torch.from_numpy(y_train)
    for _ in range(epochs):
        order = torch.randperm(len(data))
        for start in range(0, len(data), 64):
            index = order[start : start + 64]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(data[index]), labels[index])
            loss.backward()
            optimizer.step()
    model.eval()
    buffer = io.BytesIO()
    torch.onnx.export(
        model, (torch.zeros(1, 1, 8, 8),), buffer, input_names=["x"], output_names=["logits"],
        dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}}, opset_version=17, dynamo=False,
    )
    return buffer.getvalue(), (x_train, y_train, x_test, y_test)


def plugrt_engine(model: bytes, batch: int, calibrator=None):  # type: ignore[no-untyped-def]
    import plugrt

    logger = plugrt.Logger(plugrt.Logger.ERROR)
    builder = plugrt.Builder(logger)
    network = builder.create_network(0)
    parser = plugrt.OnnxParser(network, logger)
    if not parser.parse(model):
        raise RuntimeError([parser.get_error(i) for i in range(parser.num_errors)])
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 1, 8, 8), (batch, 1, 8, 8), (1024, 1, 8, 8))
    config.add_optimization_profile(profile)
    if calibrator is not None:
        config.set_flag(plugrt.BuilderFlag.INT8)
        config.int8_calibrator = calibrator
        calibration = builder.create_optimization_profile()
        shape = (calibrator.batch_size, 1, 8, 8)
        calibration.set_shape("x", shape, shape, shape)
        config.set_calibration_profile(calibration)
    engine = plugrt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    context = engine.create_execution_context()

    def run(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x)
        context.set_input_shape("x", x.shape)
        out = np.empty((x.shape[0], 10), np.float32)
        context.set_tensor_address("x", x.ctypes.data)
        context.set_tensor_address("logits", out.ctypes.data)
        context.execute_async_v3(0)
        return out

    return run


def calibrators(images: np.ndarray, batch_size: int):  # type: ignore[no-untyped-def]
    import plugrt

    class Feeder:
        def __init__(self) -> None:
            self.batch_size = batch_size
            self.batches = [np.ascontiguousarray(images[i : i + batch_size])
                            for i in range(0, len(images) - batch_size + 1, batch_size)]
            self.current: np.ndarray | None = None

        def get_batch_size(self) -> int:
            return self.batch_size

        def get_batch(self, names):  # type: ignore[no-untyped-def]
            if not self.batches:
                return None
            self.current = self.batches.pop(0)
            return [self.current.ctypes.data]

        def read_calibration_cache(self):  # type: ignore[no-untyped-def]
            return None

        def write_calibration_cache(self, cache) -> None:  # type: ignore[no-untyped-def]
            self.cache = bytes(cache)

    kinds = {
        "EntropyCalibrator2": plugrt.IInt8EntropyCalibrator2,
        "EntropyCalibrator": plugrt.IInt8EntropyCalibrator,
        "MinMaxCalibrator": plugrt.IInt8MinMaxCalibrator,
        "LegacyCalibrator": plugrt.IInt8LegacyCalibrator,
    }
    return {name: type(name, (Feeder, base), {})() for name, base in kinds.items()}


def ort_quantized(model: bytes, images: np.ndarray, batch_size: int, method: str) -> bytes:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"x": images[i : i + batch_size]} for i in range(0, len(images), batch_size)])

        def get_next(self):  # type: ignore[no-untyped-def]
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as folder:
        source, target = os.path.join(folder, "fp32.onnx"), os.path.join(folder, "int8.onnx")
        with open(source, "wb") as f:
            f.write(model)
        quantize_static(
            source, target, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax if method == "minmax" else CalibrationMethod.Entropy,
            extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
        )
        with open(target, "rb") as f:
            return f.read()


def ort_runner(model: bytes) -> Callable[[np.ndarray], np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64, help="batch of the latency runs")
    parser.add_argument("--calibration-batches", type=int, default=8, help="batches of 32 training images")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    model, (x_train, _, x_test, y_test) = train(args.epochs)
    calibration_images = x_train[: 32 * args.calibration_batches]
    runners: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "plugrt FP32": plugrt_engine(model, args.batch),
        "onnxruntime FP32": ort_runner(model),
    }
    for name, calibrator in calibrators(calibration_images, 32).items():
        runners[f"plugrt INT8 {name}"] = plugrt_engine(model, args.batch, calibrator)
    for method in ("minmax", "entropy"):
        qdq = ort_quantized(model, calibration_images, 32, method)
        runners[f"onnxruntime INT8 static ({method})"] = ort_runner(qdq)
        if method == "minmax":
            runners["plugrt on onnxruntime's QDQ model (minmax)"] = plugrt_engine(qdq, args.batch)

    accuracy = {name: float((run(x_test).argmax(axis=1) == y_test).mean()) for name, run in runners.items()}
    batch = np.ascontiguousarray(x_test[: args.batch])
    times: dict[str, list[float]] = {name: [] for name in runners}
    for run in runners.values():
        run(batch)
    for _ in range(args.repeats):  # interleaved, so load changes hit every runner alike
        for name, run in runners.items():
            start = time.perf_counter()
            run(batch)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["plugrt FP32"])
    print(f"test images: {len(y_test)}, calibration images: {len(calibration_images)}, latency batch {args.batch}")
    print(f"{'engine':48s} {'accuracy %':>10s} {'vs FP32 pts':>11s} {'ms/batch':>9s} {'x plugrt FP32':>13s}")
    for name in runners:
        median = statistics.median(times[name])
        delta = 100 * (accuracy[name] - accuracy["plugrt FP32"])
        print(f"{name:48s} {100 * accuracy[name]:10.2f} {delta:+11.2f} {median * 1e3:9.3f} {median / base:13.2f}")


if __name__ == "__main__":
    main()
