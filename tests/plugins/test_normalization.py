"""LayerNorm, InstanceNormalization_TRT and GroupNormalizationPlugin: engines, references, device weights."""

from __future__ import annotations

import gc

import numpy as np
import plugin_references as ref
import pytest
from library_helpers import OnePluginEngine, creator, fc

import plugrt as trt


def _new_allocations(before: list) -> list:
    known = {id(b) for b in before}
    return [b for b in trt.live_allocations() if id(b) not in known]


@pytest.mark.parametrize(("axis", "half"), [(-1, False), (1, False), (-2, True)])
def test_layer_norm_matches_reference(axis: int, half: bool) -> None:
    rng = np.random.default_rng(axis + 2 + 10 * half)
    shape_tail = (3, 5, 8)
    normalized = shape_tail[axis % 4 - 1 :]
    gamma = rng.normal(1, 0.2, int(np.prod(normalized))).astype(np.float32)
    beta = rng.normal(0, 0.2, gamma.size).astype(np.float32)
    plugin = creator("LayerNorm").create_plugin("ln", fc(gamma=gamma, beta=beta, epsilon=1e-3, axis=axis))
    dtype = trt.float16 if half else trt.float32
    engine = OnePluginEngine(
        plugin, [("x", dtype, (-1, *shape_tail))], ["y"], {"x": ((1, *shape_tail), (2, *shape_tail), (4, *shape_tail))}
    )
    for batch in (1, 4, 2):
        x = rng.normal(2, 3, (batch, *shape_tail)).astype(np.float16 if half else np.float32)
        want = ref.layer_norm(x, gamma, beta, 1e-3, axis)
        np.testing.assert_allclose(engine(x=x)["y"].astype(np.float32), want, atol=5e-3 if half else 1e-5, rtol=1e-3)


def test_layer_norm_weights_live_in_backend_memory_between_initialize_and_terminate() -> None:
    gc.collect()
    before = trt.live_allocations()
    gamma, beta = np.linspace(0.5, 1.5, 6, dtype=np.float32), np.linspace(-1, 1, 6, dtype=np.float32)
    plugin = creator("LayerNorm").create_plugin("ln", fc(gamma=gamma, beta=beta))
    assert _new_allocations(before) == []  # creation allocates nothing
    engine = OnePluginEngine(plugin, [("x", trt.float32, (2, 6))], ["y"])
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_allclose(engine(x=x)["y"], ref.layer_norm(x, gamma, beta, 1e-5, -1), atol=1e-5)
    live = _new_allocations(before)
    # the engine's plugin and the context's clone each hold their own gamma and beta
    assert len(live) == 4 and sorted(b.nbytes for b in live) == [24] * 4
    plain = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(engine.plan)
    assert len(_new_allocations(before)) == 6  # deserializing initializes: two more
    del plain
    gc.collect()
    assert len(_new_allocations(before)) == 4
    del engine
    gc.collect()
    assert _new_allocations(before) == []


def test_layer_norm_clone_after_initialize_has_its_own_copies() -> None:
    gc.collect()
    before = trt.live_allocations()
    plugin = creator("LayerNorm").create_plugin("ln", fc(gamma=np.ones(3, np.float32), beta=np.zeros(3, np.float32)))
    assert plugin.clone().device_gamma is None  # not initialized: nothing to copy
    plugin.initialize()
    copy = plugin.clone()
    assert copy.device_gamma is not None and copy.device_gamma.ptr != plugin.device_gamma.ptr
    plugin.terminate()
    assert len(_new_allocations(before)) == 2 and not copy.device_gamma.freed
    copy.destroy()
    plugin.terminate()  # idempotent
    assert _new_allocations(before) == []


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"gamma": np.ones(3, np.float32), "beta": np.ones(4, np.float32)}, trt.FieldError, "same non-zero number"),
        (
            {"gamma": np.ones(3, np.float32)},
            trt.FieldError,
            r"required field 'beta' \(PluginFieldType.FLOAT32\) is missing",
        ),
        (
            {"gamma": np.ones(3, np.int32), "beta": np.ones(3, np.float32)},
            trt.TypeMismatchError,
            "'gamma' must be PluginFieldType.FLOAT32",
        ),
        (
            {"gamma": np.ones(3, np.float32), "beta": np.ones(3, np.float32), "epsilon": -1.0},
            trt.FieldError,
            "'epsilon' must be a value >= 0.0",
        ),
    ],
)
def test_layer_norm_bad_fields(fields: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=f"LayerNorm: .*{message}"):
        creator("LayerNorm").create_plugin("bad", fc(**fields))


def test_layer_norm_shape_mismatch() -> None:
    plugin = creator("LayerNorm").create_plugin("ln", fc(gamma=np.ones(5, np.float32), beta=np.ones(5, np.float32)))
    with pytest.raises(trt.PlugrtError, match=r"gamma/beta hold 5 values but the normalized dims \[6\]"):
        OnePluginEngine(plugin, [("x", trt.float32, (2, 6))], ["y"])


@pytest.mark.parametrize(
    ("version", "rank", "relu", "half"), [("1", 4, 0, False), ("2", 4, 1, False), ("1", 5, 1, True), ("2", 3, 0, True)]
)
def test_instance_norm_matches_reference(version: str, rank: int, relu: int, half: bool) -> None:
    rng = np.random.default_rng(rank + relu)
    channels, spatial = 3, (4, 5, 2)[: rank - 2]
    scales = rng.normal(1, 0.3, channels).astype(np.float32)
    bias = rng.normal(0, 0.5, channels).astype(np.float32)
    fields = fc(epsilon=1e-4, scales=scales, bias=bias, relu=relu, alpha=0.1)
    plugin = creator("InstanceNormalization_TRT", version).create_plugin("in", fields)
    assert plugin.plugin_version == version
    dtype = trt.float16 if half else trt.float32
    tail = (channels, *spatial)
    engine = OnePluginEngine(plugin, [("x", dtype, (-1, *tail))], ["y"], {"x": ((1, *tail), (2, *tail), (3, *tail))})
    for batch in (1, 3):
        x = rng.normal(1, 2, (batch, *tail)).astype(np.float16 if half else np.float32)
        want = ref.instance_norm(x, scales, bias, 1e-4, relu, 0.1)
        np.testing.assert_allclose(engine(x=x)["y"].astype(np.float32), want, atol=5e-3 if half else 1e-5, rtol=1e-3)


def test_instance_norm_weights_and_errors() -> None:
    gc.collect()
    before = trt.live_allocations()
    fields = fc(scales=np.ones(2, np.float32), bias=np.zeros(2, np.float32))
    plugin = creator("InstanceNormalization_TRT").create_plugin("in", fields)
    engine = OnePluginEngine(plugin, [("x", trt.float32, (1, 2, 3, 3))], ["y"])
    assert len(_new_allocations(before)) == 4
    del engine
    gc.collect()
    assert _new_allocations(before) == []
    bad = creator("InstanceNormalization_TRT").create_plugin(
        "in", fc(scales=np.ones(3, np.float32), bias=np.zeros(3, np.float32))
    )
    with pytest.raises(trt.PlugrtError, match=r"input dim 1 \(channels = len\(scales\)\) must be 3, got 2"):
        OnePluginEngine(bad, [("x", trt.float32, (1, 2, 3, 3))], ["y"])
    with pytest.raises(
        trt.FieldError, match="'scales' and 'bias' must hold the same non-zero number of values, got 2 and 1"
    ):
        creator("InstanceNormalization_TRT", "2").create_plugin(
            "x", fc(scales=np.ones(2, np.float32), bias=np.zeros(1, np.float32))
        )
    with pytest.raises(
        trt.TypeMismatchError, match=r"field 'relu' must be PluginFieldType\.INT32, got PluginFieldType\.FLOAT32"
    ):
        creator("InstanceNormalization_TRT").create_plugin(
            "x", fc(scales=np.ones(2, np.float32), bias=np.zeros(2, np.float32), relu=1.0)
        )


@pytest.mark.parametrize(("groups", "half"), [(1, False), (2, False), (6, True)])
def test_group_norm_matches_reference(groups: int, half: bool) -> None:
    rng = np.random.default_rng(groups)
    plugin = creator("GroupNormalizationPlugin").create_plugin("gn", fc(eps=1e-5, num_groups=groups))
    dtype = trt.float16 if half else trt.float32
    engine = OnePluginEngine(
        plugin,
        [("x", dtype, (-1, 6, 4, 3)), ("scale", dtype, (6,)), ("bias", dtype, (6,))],
        ["y"],
        {"x": ((1, 6, 4, 3), (2, 6, 4, 3), (3, 6, 4, 3))},
    )
    np_type = np.float16 if half else np.float32
    scale, bias = rng.normal(1, 0.3, 6).astype(np_type), rng.normal(0, 0.3, 6).astype(np_type)
    for batch in (1, 3):
        x = rng.normal(0, 2, (batch, 6, 4, 3)).astype(np_type)
        want = ref.group_norm(x, scale.astype(np.float64), bias.astype(np.float64), 1e-5, groups)
        got = engine(x=x, scale=scale, bias=bias)["y"].astype(np.float32)
        np.testing.assert_allclose(got, want, atol=5e-3 if half else 1e-5, rtol=1e-3)


def test_group_norm_errors() -> None:
    plugin = creator("GroupNormalizationPlugin").create_plugin("gn", fc(num_groups=4))
    with pytest.raises(trt.PlugrtError, match=r"num_groups \(4\) must divide the channel count, got 6 channels"):
        OnePluginEngine(
            plugin, [("x", trt.float32, (1, 6, 2, 2)), ("s", trt.float32, (6,)), ("b", trt.float32, (6,))], ["y"]
        )
    with pytest.raises(trt.FieldError, match="'num_groups' must be a value >= 1, got 0"):
        creator("GroupNormalizationPlugin").create_plugin("gn", fc(num_groups=0))
    assert creator("GroupNormalizationPlugin").create_plugin("gn", trt.PluginFieldCollection()).params == {
        "eps": 1e-5,
        "num_groups": 1,
    }


def test_instance_norm_bytes_carry_their_version() -> None:
    fields = fc(scales=np.ones(2, np.float32), bias=np.zeros(2, np.float32))
    data = creator("InstanceNormalization_TRT", "1").create_plugin("in", fields).serialize()
    revived = creator("InstanceNormalization_TRT", "1").deserialize_plugin("in", data)
    assert revived.serialize() == data
    with pytest.raises(trt.SerializationError, match=r"version 2: these bytes are tagged '1', not '2'"):
        creator("InstanceNormalization_TRT", "2").deserialize_plugin("in", data)
