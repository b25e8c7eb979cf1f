"""INT8 execution: the builder's choice of INT8 layers, their arithmetic against a NumPy reference,
requantized chains, reformats and calibrators set on the config."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import build, conv_model, kinds, parse, tensors_of

import plugrt
from plugrt.builder.calibration import IInt8EntropyCalibrator2, IInt8MinMaxCalibrator, parse_cache
from plugrt.core.errors import BuildError, NetworkError, TypeMismatchError
from plugrt.ops.int8 import EXACT_BLOCK, Int8MatrixMultiplyOperator, quantize_weights

RANGE = 4.0


def _ranges(value: float = RANGE):
    def configure(builder, network, config):
        config.set_flag(plugrt.BuilderFlag.INT8)
        for tensor in tensors_of(network).values():
            tensor.set_dynamic_range(-value, value)

    return configure


def _q(x, scale):
    return np.clip(np.rint(x / scale), -128, 127)


def _reference(x: np.ndarray, model_seed: int = 0) -> np.ndarray:
    """The INT8 network written out in NumPy: per-tensor activations, per-channel weights, exact sums."""
    rng = np.random.default_rng(model_seed)
    w1 = rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(6).astype(np.float32) * 0.1
    w2 = rng.standard_normal((4, 6, 1, 1)).astype(np.float32) * 0.3
    wf = rng.standard_normal((4 * 64, 10)).astype(np.float32) * 0.1
    bf = rng.standard_normal(10).astype(np.float32) * 0.1
    s = RANGE / 127

    def conv(q_in, w, b, pad):
        qw, sw = quantize_weights(w.reshape(w.shape[0], -1), axis=0)
        qw = qw.reshape(w.shape).astype(np.int64)
        padded = np.pad(q_in.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        k = w.shape[2]
        out = np.zeros((q_in.shape[0], w.shape[0], 8, 8), np.int64)
        for i in range(k):
            for j in range(k):
                out += np.einsum("nchw,mc->nmhw", padded[:, :, i : i + 8, j : j + 8], qw[:, :, i, j])
        return out * (s * sw)[None, :, None, None] + (0 if b is None else b[None, :, None, None])

    c1 = _q(conv(_q(x, s), w1, b1, 1), s)  # requantized: the next conv reads INT8
    c2 = conv(c1, w2, None, 0)
    f = np.maximum(c2, 0).reshape(x.shape[0], -1)
    qf, sf = quantize_weights(wf, axis=1)
    return (_q(f, s).astype(np.int64) @ qf.astype(np.int64)) * (s * sf) + bf


def test_int8_layers_match_the_numpy_reference_and_chain_without_reformats():
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    plan, run = build(conv_model(), _ranges())
    assert kinds(plan) == [
        "reformat", "int8_convolution", "int8_convolution", "activation", "flatten", "reformat", "int8_gemm"
    ]
    c1 = next(t for t in plan.tensors if t.name == "c1")
    assert c1.dtype == plugrt.DataType.INT8  # requantized in the first conv's epilogue, read as INT8 by the next
    np.testing.assert_allclose(run(x), _reference(x), rtol=1e-5, atol=1e-5)


def test_without_the_flag_or_without_scales_layers_stay_float():
    float_plan, _ = build(conv_model(), lambda b, n, c: [t.set_dynamic_range(-1, 1) for t in tensors_of(n).values()])
    assert "int8_convolution" not in kinds(float_plan)
    plan, _ = build(conv_model(), lambda b, n, c: c.set_flag(plugrt.BuilderFlag.INT8))
    assert kinds(plan) == kinds(float_plan)


def test_a_layer_whose_input_has_no_range_stays_float():
    def configure(builder, network, config):
        _ranges()(builder, network, config)
        tensors_of(network)["f"].dynamic_range = None

    plan, _ = build(conv_model(), configure)
    assert kinds(plan)[-1] == "gemm" and "int8_convolution" in kinds(plan)


def test_int8_output_of_the_last_int8_layer_is_dequantized_for_float_readers():
    plan, _ = build(conv_model(), _ranges())
    c2 = next(t for t in plan.tensors if t.name == "c2")
    assert c2.dtype == plugrt.DataType.FLOAT  # its reader (Relu) is a FLOAT layer


def test_long_reductions_are_exact():
    rng = np.random.default_rng(0)
    k = 3 * EXACT_BLOCK + 17
    a = rng.integers(-128, 128, (3, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, 5)).astype(np.int8)
    op = Int8MatrixMultiplyOperator({"op0": "NONE", "op1": "NONE", "input_scale": 1.0, "other_scale": 1.0})
    out = np.empty((3, 5), np.float32)
    op.prepare([a.shape, b.shape], [out.shape])
    op.run([a, b], [out])
    np.testing.assert_array_equal(out, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))


def test_weights_quantize_per_channel():
    w = np.array([[1.0, -2.0], [0.0, 0.0], [0.5, 0.25]], np.float32)
    q, scales = quantize_weights(w, axis=0)
    np.testing.assert_allclose(scales, [2 / 127, 1.0, 0.5 / 127])
    assert q.tolist() == [[64, -127], [0, 0], [127, 64]]


class _Batches:
    def __init__(self, batches, cache=None):
        self.batches, self.cache, self.written = list(batches), cache, None

    def get_batch_size(self):
        return 2

    def get_batch(self, names):
        if not self.batches:
            return None
        self.current = np.ascontiguousarray(self.batches.pop(0))
        return [self.current.ctypes.data]

    def read_calibration_cache(self):
        return self.cache

    def write_calibration_cache(self, cache):
        self.written = bytes(cache)


class _Entropy(_Batches, IInt8EntropyCalibrator2):
    pass


class _MinMax(_Batches, IInt8MinMaxCalibrator):
    pass


def _data(n=4, batch=2):
    rng = np.random.default_rng(7)
    return [rng.standard_normal((batch, 3, 8, 8)).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("kind", [_Entropy, _MinMax])
def test_a_calibrator_on_the_config_gives_the_scales(kind):
    calibrator = kind(_data())

    def configure(builder, network, config):
        config.set_flag(plugrt.BuilderFlag.INT8)
        config.int8_calibrator = calibrator
        assert config.int8_calibrator is calibrator

    plan, run = build(conv_model(), configure)
    assert "int8_convolution" in kinds(plan) and "int8_gemm" in kinds(plan)
    header, ranges = parse_cache(calibrator.written)
    assert header == ("EntropyCalibration2" if kind is _Entropy else "MinMaxCalibration")
    reformat = next(layer for layer in plan.layers if layer.kind == "reformat")
    assert reformat.params["scale"] == pytest.approx(ranges["x"] / 127, rel=1e-6)
    x = _data(1)[0]
    _, run32 = build(conv_model(), lambda b, n, c: None)
    ref = run32(x)
    assert np.abs(run(x) - ref).max() < 0.05 * np.abs(ref).max()
    # the calibrated ranges are the builder's, not set on the network's tensors
    _, network = parse(conv_model())
    assert network.get_input(0).dynamic_range is None


def test_a_cache_moves_between_builds_and_user_ranges_win():
    first = _MinMax(_data())
    build(conv_model(), lambda b, n, c: (c.set_flag(plugrt.BuilderFlag.INT8), setattr(c, "int8_calibrator", first)))
    second = _MinMax([], cache=first.written)

    def configure(builder, network, config):
        config.set_flag(plugrt.BuilderFlag.INT8)
        config.int8_calibrator = second
        network.get_input(0).set_dynamic_range(-10, 10)

    plan, _ = build(conv_model(), configure)
    reformat = next(layer for layer in plan.layers if layer.kind == "reformat")
    assert reformat.params["scale"] == pytest.approx(10 / 127)
    assert second.written is None  # read from the cache, not calibrated again


def test_the_calibration_profile_gives_dynamic_shapes():
    calibrator = _Entropy(_data(batch=3))

    def configure(builder, network, config):
        config.set_flag(plugrt.BuilderFlag.INT8)
        profile = builder.create_optimization_profile()
        profile.set_shape("x", (1, 3, 8, 8), (4, 3, 8, 8), (8, 3, 8, 8))
        config.add_optimization_profile(profile)
        calibration = builder.create_optimization_profile()
        calibration.set_shape("x", (3, 3, 8, 8), (3, 3, 8, 8), (3, 3, 8, 8))
        assert config.set_calibration_profile(calibration)
        assert config.get_calibration_profile() is calibration
        config.int8_calibrator = calibrator

    plan, run = build(conv_model(batch="N"), configure)
    assert "int8_convolution" in kinds(plan)
    assert run(np.zeros((5, 3, 8, 8), np.float32)).shape == (5, 10)


def test_misuse_is_reported():
    config = plugrt.Builder(None).create_builder_config()
    with pytest.raises(TypeMismatchError, match="int8_calibrator must be an IInt8Calibrator"):
        config.int8_calibrator = object()
    with pytest.raises(TypeMismatchError, match="set_calibration_profile takes an IOptimizationProfile"):
        config.set_calibration_profile("x")  # type: ignore[arg-type]

    def dynamic_without_profile(builder, network, config):
        config.set_flag(plugrt.BuilderFlag.INT8)
        config.int8_calibrator = _Entropy(_data())

    with pytest.raises(BuildError, match=r"'x' has shape \(-1, 3, 8, 8\).*set_calibration_profile"):
        build(conv_model(batch="N"), dynamic_without_profile)
    with pytest.raises(NetworkError, match="input_scale must be a positive finite scale"):
        Int8MatrixMultiplyOperator({"op0": "NONE", "op1": "NONE", "input_scale": -1.0, "other_scale": 1.0})
    op = Int8MatrixMultiplyOperator({"op0": "NONE", "op1": "NONE", "input_scale": 1.0, "other_scale": 1.0})
    with pytest.raises(TypeMismatchError, match="input 1 must be INT8, got FLOAT"):
        op.output_types([plugrt.DataType.INT8, plugrt.DataType.FLOAT])
