"""INT8 calibration: the range algorithms against NumPy references, TensorRT's cache format, calibrators."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt
from plugrt.builder.calibration import (
    BINS,
    HistogramCollector,
    IInt8EntropyCalibrator2,
    IInt8LegacyCalibrator,
    IInt8MinMaxCalibrator,
    calibrate_network,
    entropy_amax,
    format_cache,
    parse_cache,
)
from plugrt.core.errors import BuildError


def reference_entropy(counts: np.ndarray, width: float, levels: int = 128) -> float:
    """The divergence search written out loop by loop."""
    best, best_kl = None, np.inf
    counts = counts.astype(np.float64)
    counts[0] = counts[1]  # bin 0 (a ReLU's zeros) weighed as bin 1
    for size in range(levels, len(counts) + 1):
        p = counts[:size].astype(np.float64).copy()
        p[-1] += counts[size:].sum()
        q = np.zeros(size)
        for j in range(levels):
            lo, hi = j * size // levels, (j + 1) * size // levels
            nonzero = [k for k in range(lo, hi) if counts[k] > 0]
            for k in nonzero:
                q[k] = counts[lo:hi].sum() / len(nonzero)
        p, q = p / p.sum(), q / q.sum()
        if any(q[k] == 0 for k in range(size) if p[k] > 0):
            continue
        kl = sum(p[k] * np.log(p[k] / q[k]) for k in range(size) if p[k] > 0)
        if kl < best_kl:
            best, best_kl = size, kl
    return (best + 0.5) * width


def test_entropy_threshold_matches_the_reference():
    samples = np.abs(np.random.default_rng(0).laplace(size=20000))
    counts, edges = np.histogram(samples, bins=300, range=(0, samples.max()))
    width = edges[1] - edges[0]
    assert entropy_amax(counts, width) == pytest.approx(reference_entropy(counts, width))
    # the long tail is clipped: the threshold sits well inside the largest magnitude
    assert entropy_amax(counts, width) < 0.9 * samples.max()


def test_entropy_ignores_the_zero_spike_of_a_relu():
    samples = np.maximum(np.random.default_rng(2).standard_normal(50000), 0)  # half the values are 0
    counts, edges = np.histogram(samples, bins=BINS, range=(0, 2 ** np.ceil(np.log2(samples.max()))))
    amax = entropy_amax(counts, edges[1] - edges[0])
    assert 0.5 * samples.max() < amax <= samples.max() + (edges[1] - edges[0])


def test_histogram_grows_by_exact_merges():
    collector = HistogramCollector()
    first = np.linspace(0, 1, 1000)
    second = np.linspace(0, 3.5, 700)
    collector.add(first)
    collector.add(-second)
    assert collector.top == 4.0 and collector.amax == 3.5
    direct, _ = np.histogram(np.concatenate([first, second]), bins=BINS, range=(0, 4.0))
    np.testing.assert_array_equal(collector.counts, direct)


def _network():
    nodes = [helper.make_node("Mul", ["x", "two"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])],
    )
    builder = plugrt.Builder(plugrt.Logger(plugrt.Logger.ERROR))
    network = builder.create_network(0)
    parser = plugrt.OnnxParser(network, plugrt.Logger(plugrt.Logger.ERROR))
    assert parser.parse(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return network


class Batches:
    def __init__(self, arrays, cache=None):
        self.arrays, self.cache, self.written, self.calls = list(arrays), cache, None, 0

    def get_batch(self, names):
        self.calls += 1
        if not self.arrays:
            return None
        self.current = self.arrays.pop(0)
        return [self.current.ctypes.data]

    def read_calibration_cache(self):
        return self.cache

    def write_calibration_cache(self, cache):
        self.written = bytes(cache)


class MinMax(Batches, IInt8MinMaxCalibrator):
    pass


class Entropy(Batches, IInt8EntropyCalibrator2):
    pass


class Legacy(Batches, IInt8LegacyCalibrator):
    pass


def _batches():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)]


def test_minmax_calibration_sets_ranges_and_writes_the_cache():
    network = _network()
    data = _batches()
    calibrator = MinMax(data)
    amax = calibrate_network(network, calibrator)
    x_max = max(float(np.abs(b).max()) for b in data)
    assert amax["x"] == pytest.approx(x_max)
    assert amax["y"] == pytest.approx(2 * max(float(b.max()) for b in data))
    assert network.get_input(0).dynamic_range == pytest.approx((-x_max, x_max))
    header, cached = parse_cache(calibrator.written)
    assert header == "MinMaxCalibration"
    assert calibrator.written.decode().splitlines()[0] == "TRT-100000-MinMaxCalibration"
    assert cached["x"] == pytest.approx(x_max, rel=1e-6)


def test_entropy_and_legacy_ranges_are_within_the_observed_magnitude():
    for kind in (Entropy, Legacy):
        data = _batches()
        amax = calibrate_network(_network(), kind(data))
        assert 0 < amax["x"] <= max(float(np.abs(b).max()) for b in data)


def test_a_cache_skips_the_batches():
    cache = format_cache(IInt8EntropyCalibrator2().get_algorithm(), {"x": 1.5, "h": 3.0, "y": 3.0})
    calibrator = Entropy([], cache=cache)
    network = _network()
    assert calibrate_network(network, calibrator)["x"] == pytest.approx(1.5)
    assert calibrator.calls == 0 and network.get_input(0).dynamic_range == pytest.approx((-1.5, 1.5))


def test_cache_round_trip_and_its_hex_encoding():
    cache = format_cache(IInt8MinMaxCalibrator().get_algorithm(), {"conv1": 127.0})
    assert cache.decode().splitlines()[1] == "conv1: 3f800000"  # scale 1.0 as big-endian float32
    assert parse_cache(cache) == ("MinMaxCalibration", {"conv1": 127.0})


def test_misuse_is_reported():
    with pytest.raises(BuildError, match="first line must name the calibrator"):
        parse_cache(b"conv1: 3f800000\n")
    with pytest.raises(BuildError, match=r"line 2: expected 'tensor: 8 hex digits'"):
        parse_cache(b"TRT-100000-MinMaxCalibration\nconv1 3f80\n")
    cache = format_cache(IInt8MinMaxCalibrator().get_algorithm(), {"x": 1.0})
    with pytest.raises(BuildError, match=r"written by 'MinMaxCalibration'.*'EntropyCalibration2'"):
        calibrate_network(_network(), Entropy([], cache=cache))
    with pytest.raises(BuildError, match="get_batch returned None at once"):
        calibrate_network(_network(), MinMax([]))
