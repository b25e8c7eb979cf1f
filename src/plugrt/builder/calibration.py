"""INT8 calibration, TensorRT's way: calibrators, the range algorithms and TensorRT's cache format.

A calibrator hands out input batches (``get_batch(names)`` returns one address per input, or
None at the end); :func:`calibrate_network` runs the network in FP32 on every batch, collects
each tensor's values and picks its dynamic range with the calibrator's algorithm:

* MinMax (:class:`IInt8MinMaxCalibrator`): the largest magnitude seen.
* Entropy (:class:`IInt8EntropyCalibrator2`, :class:`IInt8EntropyCalibrator`): a 2048-bin
  histogram of magnitudes (bin 0 weighed as bin 1, so the zeros of a ReLU do not dominate);
  for each candidate threshold of 128 to 2048 bins, the clipped
  distribution P (outliers folded into the last bin) is compared with its quantization Q onto
  128 levels by the Kullback-Leibler divergence; the threshold of least divergence wins
  (as NVIDIA describes for TensorRT's entropy calibration).
* Legacy (:class:`IInt8LegacyCalibrator`): the ``get_quantile()`` quantile of the magnitudes.

The result is set on each tensor (``ITensor.set_dynamic_range(-amax, amax)``) and written as
TensorRT's calibration cache: a header line naming the calibrator, then ``name: hex`` per
tensor, the hex being the big-endian IEEE float32 of the INT8 scale ``amax / 127``; so caches
move between plugrt and TensorRT. A cache the calibrator returns from
``read_calibration_cache`` is used instead of running batches.

The ranges are what TensorRT's implicit INT8 needs; plugrt's layers still compute in FP32.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends.base import Backend
from ..backends.registry import DEFAULT_DEVICE
from ..core.enums import TrtEnum
from ..core.errors import BuildError

__all__ = [
    "CalibrationAlgoType",
    "HistogramCollector",
    "IInt8Calibrator",
    "IInt8EntropyCalibrator",
    "IInt8EntropyCalibrator2",
    "IInt8LegacyCalibrator",
    "IInt8MinMaxCalibrator",
    "calibrate_network",
    "entropy_amax",
    "format_cache",
    "parse_cache",
]

BINS = 2048
LEVELS = 128


class CalibrationAlgoType(TrtEnum):
    """TensorRT's calibration algorithms (same values)."""

    LEGACY_CALIBRATION = 0
    ENTROPY_CALIBRATION = 1
    ENTROPY_CALIBRATION_2 = 2
    MINMAX_CALIBRATION = 3


_CACHE_NAMES = {
    CalibrationAlgoType.LEGACY_CALIBRATION: "LegacyCalibration",
    CalibrationAlgoType.ENTROPY_CALIBRATION: "EntropyCalibration",
    CalibrationAlgoType.ENTROPY_CALIBRATION_2: "EntropyCalibration2",
    CalibrationAlgoType.MINMAX_CALIBRATION: "MinMaxCalibration",
}
_CACHE_VERSION = "TRT-100000"


class IInt8Calibrator:
    """Base of the calibrators: subclass one of the algorithm classes and implement the hooks."""

    def get_batch_size(self) -> int:
        """The batch size of each ``get_batch`` (TensorRT 10 ignores it for explicit-batch networks)."""
        return 1

    def get_batch(self, names: Sequence[str]) -> list[int] | None:
        """Addresses of the next batch of each input in ``names`` (host addresses on the CPU), or None at the end."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_batch")

    def read_calibration_cache(self) -> bytes | None:
        """A cache written before, to skip calibration, or None."""
        return None

    def write_calibration_cache(self, cache: bytes) -> None:
        """Keep ``cache`` (TensorRT's text format) for later builds."""

    def get_algorithm(self) -> CalibrationAlgoType:
        """The algorithm this calibrator uses."""
        return CalibrationAlgoType.ENTROPY_CALIBRATION_2


class IInt8EntropyCalibrator2(IInt8Calibrator):
    """Entropy calibration (the one TensorRT recommends for CNNs)."""


class IInt8EntropyCalibrator(IInt8Calibrator):
    """Entropy calibration, TensorRT's original variant (the same divergence search here)."""

    def get_algorithm(self) -> CalibrationAlgoType:
        return CalibrationAlgoType.ENTROPY_CALIBRATION


class IInt8MinMaxCalibrator(IInt8Calibrator):
    """The largest magnitude seen (suits NLP models, as TensorRT notes)."""

    def get_algorithm(self) -> CalibrationAlgoType:
        return CalibrationAlgoType.MINMAX_CALIBRATION


class IInt8LegacyCalibrator(IInt8Calibrator):
    """A quantile of the magnitudes (``get_quantile``); the regression cutoff and histogram cache are kept
    for API compatibility."""

    def get_algorithm(self) -> CalibrationAlgoType:
        return CalibrationAlgoType.LEGACY_CALIBRATION

    def get_quantile(self) -> float:
        """The quantile of magnitudes taken as the range (TensorRT's default is 0.9999)."""
        return 0.9999

    def get_regression_cutoff(self) -> float:
        """Kept for compatibility (TensorRT's default 1.0); plugrt uses the quantile alone."""
        return 1.0

    def read_histogram_cache(self, length: int) -> bytes | None:
        """Kept for compatibility; plugrt keeps no histogram cache."""
        return None

    def write_histogram_cache(self, data: bytes) -> None:
        """Kept for compatibility; plugrt keeps no histogram cache."""


class HistogramCollector:
    """A histogram of magnitudes over [0, top) in :data:`BINS` bins; ``top`` is a power of two and doubles as
    larger values come (adjacent bins merge, exactly, since the edges stay aligned at 0)."""

    def __init__(self) -> None:
        self.counts = np.zeros(BINS, dtype=np.float64)
        self.top = 0.0
        self.amax = 0.0

    def add(self, values: np.ndarray) -> None:
        magnitudes = np.abs(np.asarray(values, dtype=np.float64)).reshape(-1)
        magnitudes = magnitudes[np.isfinite(magnitudes)]
        if magnitudes.size == 0:
            return
        largest = float(magnitudes.max())
        self.amax = max(self.amax, largest)
        if self.top == 0.0:  # a power of two above every value: no value sits on the top edge
            self.top = 2.0 ** np.floor(np.log2(largest)) if largest > 0 else 1.0
        while largest >= self.top:
            self.counts = np.concatenate([self.counts.reshape(-1, 2).sum(axis=1), np.zeros(BINS // 2)])
            self.top *= 2
        index = np.minimum((magnitudes / self.top * BINS).astype(np.int64), BINS - 1)
        self.counts += np.bincount(index, minlength=BINS)

    @property
    def bin_width(self) -> float:
        return self.top / BINS


def _quantized(reference: np.ndarray, levels: int) -> np.ndarray:
    """``reference`` merged into ``levels`` groups and spread back evenly over each group's non-empty bins."""
    size = reference.size
    starts = np.array([j * size // levels for j in range(levels)], dtype=np.int64)
    lengths = np.diff(np.append(starts, size))
    filled = reference > 0
    sums = np.add.reduceat(reference, starts)
    counts = np.add.reduceat(filled.astype(np.float64), starts)
    per_bin = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    return np.where(filled, np.repeat(per_bin, lengths), 0.0)


def entropy_amax(counts: np.ndarray, bin_width: float) -> float:
    """The threshold of least KL divergence between clipped and 128-level histograms (see the module note)."""
    counts = np.array(counts, dtype=np.float64)
    if counts.sum() == 0:
        return 0.0
    if counts.size > 1:  # the zeros of a ReLU would dominate every candidate: weigh bin 0 as bin 1 (as NVIDIA's
        counts[0] = counts[1]  # reference calibrator does)
    best, best_divergence = counts.size, np.inf
    for size in range(LEVELS, counts.size + 1):
        reference = counts[:size].copy()
        reference[-1] += counts[size:].sum()
        candidate = _quantized(counts[:size], LEVELS)
        if reference.sum() == 0 or candidate.sum() == 0:
            continue
        p = reference / reference.sum()
        q = candidate / candidate.sum()
        mask = p > 0
        if np.any(q[mask] == 0):
            continue
        divergence = float(np.sum(p[mask] * np.log(p[mask] / q[mask])))
        if divergence < best_divergence:
            best, best_divergence = size, divergence
    return (best + 0.5) * bin_width


def _amax(algorithm: CalibrationAlgoType, collector: HistogramCollector, quantile: float) -> float:
    if algorithm == CalibrationAlgoType.MINMAX_CALIBRATION:
        return collector.amax
    if algorithm == CalibrationAlgoType.LEGACY_CALIBRATION:
        cumulative = np.cumsum(collector.counts)
        if cumulative[-1] == 0:
            return 0.0
        index = int(np.searchsorted(cumulative, quantile * cumulative[-1]))
        return min((index + 1) * collector.bin_width, collector.amax)
    return min(entropy_amax(collector.counts, collector.bin_width), collector.amax)


def format_cache(algorithm: CalibrationAlgoType, amax: dict[str, float]) -> bytes:
    """TensorRT's calibration cache text for these ranges."""
    lines = [f"{_CACHE_VERSION}-{_CACHE_NAMES[algorithm]}"]
    for name, value in amax.items():
        lines.append(f"{name}: {struct.pack('>f', value / 127.0).hex()}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def parse_cache(cache: bytes | str) -> tuple[str, dict[str, float]]:
    """(calibrator name of the header, {tensor: amax}) from TensorRT's cache text; bad text raises."""
    text = cache.decode("utf-8") if isinstance(cache, (bytes, bytearray)) else str(cache)
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("TRT-"):
        raise BuildError("calibration cache: the first line must name the calibrator (e.g. 'TRT-100000-EntropyCalibration2')")
    header = lines[0].split("-", 2)
    ranges: dict[str, float] = {}
    for number, line in enumerate(lines[1:], start=2):
        name, sep, value = line.rpartition(":")
        try:
            scale = struct.unpack(">f", bytes.fromhex(value.strip()))[0]
        except ValueError:
            scale = None
        if not sep or not name or scale is None:
            raise BuildError(f"calibration cache line {number}: expected 'tensor: 8 hex digits', got {line!r}")
        ranges[name.strip()] = float(scale) * 127.0
    return header[-1], ranges


def calibrate_network(
    network: Any,
    calibrator: IInt8Calibrator,
    device: str = DEFAULT_DEVICE,
    profile: Any = None,
    apply: bool = True,
) -> dict[str, float]:
    """Calibrate ``network`` with ``calibrator``; with ``apply``, sets every tensor's dynamic range.

    Returns ``{tensor name: amax}``. Inputs with dynamic dimensions take the opt shapes of
    ``profile`` (an ``IOptimizationProfile``, TensorRT's calibration profile). Uses the calibrator's
    cache when it has one (its header must name the calibrator's algorithm) and writes the cache
    after calibrating.
    """
    if not isinstance(calibrator, IInt8Calibrator):
        raise BuildError(f"calibration needs an IInt8Calibrator, got {type(calibrator).__name__}")
    algorithm = calibrator.get_algorithm()
    if algorithm not in _CACHE_NAMES:
        raise BuildError(f"{type(calibrator).__name__}.get_algorithm() returned {algorithm!r}, not a CalibrationAlgoType")
    tensors = _all_tensors(network)
    cached = calibrator.read_calibration_cache()
    if cached:
        name, amax = parse_cache(cached)
        if name != _CACHE_NAMES[algorithm]:
            raise BuildError(
                f"calibration cache was written by {name!r}, but the calibrator uses {_CACHE_NAMES[algorithm]!r}"
            )
    else:
        amax = _run_batches(network, calibrator, tensors, algorithm, device, profile)
        calibrator.write_calibration_cache(format_cache(algorithm, amax))
    if not apply:
        return amax
    for tensor in tensors:
        if tensor.name in amax:
            tensor.set_dynamic_range(-amax[tensor.name], amax[tensor.name])
    return amax


def _all_tensors(network: Any) -> list[Any]:
    seen: dict[int, Any] = {}
    for i in range(network.num_inputs):
        seen[id(network.get_input(i))] = network.get_input(i)
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for k in range(layer.num_outputs):
            tensor = layer.get_output(k)
            if tensor is not None and tensor.dtype.name in ("FLOAT", "HALF"):
                seen[id(tensor)] = tensor
    return [t for t in seen.values() if t.dtype.name in ("FLOAT", "HALF")]


def _run_batches(
    network: Any,
    calibrator: IInt8Calibrator,
    tensors: list[Any],
    algorithm: CalibrationAlgoType,
    device: str,
    profile: Any = None,
) -> dict[str, float]:
    from ..engine.runtime import Runtime
    from .builder import Builder

    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    shapes: dict[str, tuple[int, ...]] = {}
    for tensor in inputs:
        shape = tuple(tensor.shape)
        if any(d < 0 for d in shape):
            ranges = profile.get_shape(tensor.name) if profile is not None else []
            if not ranges:
                raise BuildError(
                    f"calibration needs static input shapes or a calibration profile; {tensor.name!r} has shape "
                    f"{shape} (config.set_calibration_profile gives the shapes)"
                )
            shape = tuple(ranges[1])
        shapes[tensor.name] = shape
    added = [t for t in tensors if not t.is_network_output and not t.is_network_input]
    for tensor in added:
        network.mark_output(tensor)
    try:
        builder = Builder(None)
        config = builder.create_builder_config()
        if any(any(d < 0 for d in t.shape) for t in inputs):
            fixed = builder.create_optimization_profile()
            for name, shape in shapes.items():
                if any(d < 0 for d in network_input(network, name).shape):
                    fixed.set_shape(name, shape, shape, shape)
            config.add_optimization_profile(fixed)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise BuildError("calibration: the FP32 calibration engine could not be built")
        engine = Runtime(None, device).deserialize_cuda_engine(plan)
    finally:
        for tensor in added:
            network.unmark_output(tensor)
    context = engine.create_execution_context()
    for name, shape in shapes.items():
        context.set_input_shape(name, shape)
    backend = engine.backend
    watched = [t.name for t in tensors if not t.is_network_input]
    buffers = {n: backend.xp.empty(tuple(context.get_tensor_shape(n)), np.dtype(engine.get_tensor_dtype(n).nptype()))
               for n in watched}
    for name, buffer in buffers.items():
        context.set_tensor_address(name, backend.address_of(buffer))
    collectors = {t.name: HistogramCollector() for t in tensors}
    names = [t.name for t in inputs]
    quantile = calibrator.get_quantile() if isinstance(calibrator, IInt8LegacyCalibrator) else 1.0
    batches = 0
    while True:
        addresses = calibrator.get_batch(names)
        if addresses is None:
            break
        if len(addresses) != len(names):
            raise BuildError(f"get_batch returned {len(addresses)} addresses for the {len(names)} inputs {names}")
        for tensor, address in zip(inputs, addresses):
            shape = shapes[tensor.name]
            context.set_tensor_address(tensor.name, int(address))
            if tensor.name in collectors:
                view = backend.view(int(address), shape, np.dtype(tensor.dtype.nptype()))
                collectors[tensor.name].add(_host(backend, view))
        context.execute_async_v3(0)
        backend.synchronize(0)
        for name, buffer in buffers.items():
            collectors[name].add(_host(backend, buffer))
        batches += 1
    if not batches:
        raise BuildError("calibration: get_batch returned None at once; give at least one batch")
    return {name: _amax(algorithm, collector, quantile) for name, collector in collectors.items()}


def network_input(network: Any, name: str) -> Any:
    """The network input called ``name``."""
    for i in range(network.num_inputs):
        if network.get_input(i).name == name:
            return network.get_input(i)
    raise BuildError(f"the network has no input {name!r}")


def _host(backend: Backend, array: Any) -> np.ndarray:
    convert: Callable[[Any], np.ndarray] | None = getattr(backend.xp, "asnumpy", None)
    return convert(array) if convert is not None else np.asarray(array)
