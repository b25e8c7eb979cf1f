"""TensorRT's quickly-deployable-plugin samples, on the CPU with NumPy impls, against NumPy references."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from qdp_helpers import build, network_with, run
from qdp_samples import CALLS, Tactic, circ_pad_reference

import plugrt as trt
import plugrt.plugin as trtp
from plugrt.engine.plan import EnginePlan

RNG = np.random.default_rng(12)


def _add_network(plugin: trtp.PluginDef, **attrs: object) -> tuple[trt.Builder, trt.INetworkDefinition]:
    return network_with(
        lambda net, t: {"y": net.add_plugin(plugin(t["x"], **attrs)).get_output(0)},
        {"x": (trt.float32, (-1, 3, 8, 8))},
    )


def test_elementwise_add_with_block_size() -> None:
    builder, network = _add_network(trtp.op.sample.elemwise_add_plugin, block_size=256)
    layer = network.get_layer(0)
    assert isinstance(layer, trt.IPluginV3Layer) and layer.plugin.plugin_name == "elemwise_add_plugin"
    plan = build(builder, network, {"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))})
    CALLS.clear()
    for batch in (1, 3):
        x = RNG.integers(0, 10, (batch, 3, 8, 8)).astype(np.float32)
        np.testing.assert_array_equal(run(plan, {"x": x})["y"], x + 1)
    assert CALLS[-1]["block_size"] == 256 and CALLS[-1]["dtype"] == trt.float32


def test_elementwise_add_autotune_offers_fp16_under_the_fp16_flag() -> None:
    builder, network = _add_network(trtp.op.sample.elemwise_add_plugin_tuned, block_size=128)
    profile = {"x": ((1, 3, 8, 8), (2, 3, 8, 8), (2, 3, 8, 8))}
    x = RNG.integers(0, 10, (2, 3, 8, 8)).astype(np.float32)
    CALLS.clear()
    np.testing.assert_array_equal(run(build(builder, network, profile), {"x": x})["y"], x + 1)
    assert {c["dtype"] for c in CALLS} == {trt.float32}
    builder, network = _add_network(trtp.op.sample.elemwise_add_plugin_tuned, block_size=128)
    CALLS.clear()
    y = run(build(builder, network, profile, flags=[trt.BuilderFlag.FP16]), {"x": x})["y"]
    np.testing.assert_array_equal(y, x + 1)  # small integers are exact in FP16
    assert CALLS[-1]["dtype"] == trt.float16 and CALLS[-1]["out_dtype"] == trt.float16


def test_elementwise_add_plan_keeps_only_the_impl_attributes() -> None:
    # block_size is an attribute of the tuned add's register, but its impl takes none
    builder, network = _add_network(trtp.op.sample.elemwise_add_plugin_tuned, block_size=128)
    plan = EnginePlan.from_bytes(build(builder, network, {"x": ((1, 3, 8, 8),) * 3}))
    assert b"block_size" not in plan.plugins[0].payload
    builder, network = _add_network(trtp.op.sample.elemwise_add_plugin, block_size=128)
    plan = EnginePlan.from_bytes(build(builder, network, {"x": ((1, 3, 8, 8),) * 3}))
    assert b"block_size" in plan.plugins[0].payload


def _inplace_network() -> tuple[trt.Builder, trt.INetworkDefinition]:
    def make(net: trt.INetworkDefinition, t: dict[str, trt.ITensor]) -> dict[str, trt.ITensor]:
        out0 = net.add_plugin(trtp.op.sample.elemwise_add_plugin_(t["x"], delta=2))
        out1 = net.add_plugin(trtp.op.sample.elemwise_add_plugin_(out0.get_output(0), delta=4))
        return {"y": out1.get_output(0)}

    return network_with(make, {"x": (trt.float32, (10, 3, 32, 32))})


def test_in_place_add_via_aliased() -> None:
    builder, network = _inplace_network()
    assert network.get_layer(0).plugin.get_aliased_input(0) == 0
    plan = build(builder, network, preview=[trt.PreviewFeature.ALIASED_PLUGIN_IO_10_03])
    x = np.ones((10, 3, 32, 32), np.float32)
    x_clone = x.copy()
    CALLS.clear()
    # as in TensorRT's sample, the output is bound to the input's own buffer
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", x.ctypes.data)
    context.execute_async_v3(0)
    np.testing.assert_allclose(x, x_clone + 6, atol=1e-2)
    assert [c["aliased"] for c in CALLS] == [True, True]
    assert CALLS[1]["shared"], "the second plugin updates its input's buffer in place"
    x = np.ones((10, 3, 32, 32), np.float32)
    np.testing.assert_allclose(run(plan, {"x": x})["y"], x + 6)
    np.testing.assert_array_equal(x, 1), "a caller-owned input is not written"


def test_in_place_add_without_the_preview_feature_still_computes() -> None:
    builder, network = _inplace_network()
    plan = build(builder, network)
    x = RNG.normal(size=(10, 3, 32, 32)).astype(np.float32)
    CALLS.clear()
    given = x.copy()
    y = run(plan, {"x": given})["y"]
    np.testing.assert_allclose(y, x + 6, rtol=1e-6)
    np.testing.assert_array_equal(given, x)
    # each output has its own buffer: it gets the input's values and the impl works on it in place
    assert all(c["shared"] for c in CALLS) and CALLS[0]["pointers"][1] != given.ctypes.data


def test_non_zero_with_a_size_tensor() -> None:
    builder, network = network_with(
        lambda net, t: {"Y": net.add_plugin(trtp.op.sample.non_zero_plugin(t["X"])).get_output(0)},
        {"X": (trt.float32, (-1, -1))},
    )
    plan = build(builder, network, {"X": ((1, 1), (16, 16), (32, 32))})
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan)
    assert engine.get_tensor_shape("Y") == (-1, 2)
    for shape in [(16, 16), (5, 7), (1, 1)]:
        x = RNG.normal(size=shape).astype(np.float32)
        x[RNG.random(shape) < 0.5] = 0
        CALLS.clear()
        y = run(plan, {"X": x}, data_dependent=["Y"])["Y"]
        np.testing.assert_array_equal(y, np.transpose(np.nonzero(x)))
        assert CALLS[-1]["data_dependent"] is True


@pytest.mark.parametrize("batch", [1, 2])
def test_circular_pad_two_tactics(batch: int) -> None:
    pads = np.array((1, 1, 2, 0), dtype=np.int32)
    builder, network = network_with(
        lambda net, t: {"y": net.add_plugin(trtp.op.sample.circ_pad_plugin(t["x"], pads=pads)).get_output(0)},
        {"x": (trt.float32, (-1, 3, 6, 5))},
    )
    CALLS.clear()
    plan = build(builder, network, {"x": ((1, 3, 6, 5), (2, 3, 6, 5), (4, 3, 6, 5))})  # timing sees opt shapes
    timed = {c["tactic"] for c in CALLS}
    assert timed == {int(Tactic.NUMPY_PAD), int(Tactic.GATHER)}, "every tactic is timed at build"
    chosen = next(layer.tactic for layer in EnginePlan.from_bytes(plan).layers if layer.is_plugin)
    assert chosen in timed
    x = RNG.normal(size=(batch, 3, 6, 5)).astype(np.float32)
    CALLS.clear()
    y = run(plan, {"x": x})["y"]
    np.testing.assert_array_equal(y, circ_pad_reference(x, pads))
    assert CALLS[-1]["tactic"] == chosen and CALLS[-1]["pads"] == [1, 1, 2, 0]


@pytest.mark.parametrize("tactic", [Tactic.NUMPY_PAD, Tactic.GATHER])
def test_circular_pad_each_tactic_matches_the_reference(tactic: Tactic) -> None:
    from qdp_samples import circ_pad_plugin_impl

    x = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    pads = np.array((2, 1, 1, 3), dtype=np.int32)
    expected = circ_pad_reference(x, pads)
    y = np.zeros_like(expected)
    xin = trtp.Tensor._make(trt.PluginTensorDesc(trt.Dims(x.shape), trt.float32), x.ctypes.data, 0, "cpu", True)
    yout = trtp.Tensor._make(trt.PluginTensorDesc(trt.Dims(y.shape), trt.float32), y.ctypes.data, 0, "cpu", False)
    circ_pad_plugin_impl(xin, pads, (yout,), 0, int(tactic))
    np.testing.assert_array_equal(y, expected)


def circ_pad_onnx(pads: np.ndarray, shape: tuple[int, ...], aot: bool | None = None) -> bytes:
    attrs: dict[str, object] = {"pads": numpy_helper.from_array(pads), "plugin_namespace": "sample"}
    if aot is not None:
        attrs["aot"] = int(aot)
    node = helper.make_node("circ_pad_plugin", ["x"], ["y"], name="circ_pad_plugin 0", **attrs)  # type: ignore[arg-type]
    graph = helper.make_graph(
        [node],
        "circ_pad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()


def _parse(model: bytes) -> tuple[trt.Builder, trt.INetworkDefinition]:
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, trt.Logger(trt.Logger.ERROR))
    assert parser.parse(model), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    return builder, network


def test_circular_pad_onnx_mode_with_engine_save_and_load(tmp_path: os.PathLike[str]) -> None:
    inp_shape = (10, 3, 32, 32)
    pads = np.array((1, 1, 1, 1), dtype=np.int32)
    builder, network = _parse(circ_pad_onnx(pads, inp_shape, aot=False))
    layer = network.get_layer(0)
    assert isinstance(layer.plugin, trtp.QuickPlugin) and not layer.plugin.aot
    engine_path = os.path.join(tmp_path, "circ_pad.engine")
    with open(engine_path, "wb") as f:
        f.write(build(builder, network))
    with open(engine_path, "rb") as f:
        plan = f.read()
    x = RNG.normal(size=inp_shape).astype(np.float32)
    y = run(plan, {"x": x})["y"]
    np.testing.assert_allclose(
        y, np.pad(x, [[0, 0], [0, 0], [pads[0], pads[1]], [pads[2], pads[3]]], "wrap"), atol=1e-2
    )


def test_circular_pad_onnx_without_aot_attribute() -> None:
    pads = np.array((0, 2), dtype=np.int32)
    builder, network = _parse(circ_pad_onnx(pads, (2, 4)))
    x = RNG.normal(size=(2, 4)).astype(np.float32)
    np.testing.assert_array_equal(run(build(builder, network), {"x": x})["y"], circ_pad_reference(x, pads))
