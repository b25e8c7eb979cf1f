"""Wrong value types are refused with TypeMismatchError naming what was given; errors name their layer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.examples.circ_pad_v2 import CircPadPlugin, CircPadPluginCreator
from plugrt.onnx.importers.base import OnnxImportError

from testing_plugins import build, fields, run

LOGGER = trt.Logger(trt.Logger.INTERNAL_ERROR)


def _relu_context() -> trt.IExecutionContext:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = trt.compile(helper.make_model(graph), shapes={"x": ((1, 3, 8), (2, 3, 8), (4, 3, 8))}, logger=LOGGER)
    return model.engine.create_execution_context()


@pytest.mark.parametrize("shape, shown", [
    ((2.7, 3, 8), r"\(2\.7, 3, 8\) \(element types \['float', 'int', 'int'\]\)"),
    ((True, 3, 8), r".*element types \['bool'"),
    (("2", 3, 8), r".*element types \['str'"),
    (2, r"2$"),
])
def test_set_input_shape_refuses_non_int_dimensions(shape: Any, shown: str) -> None:
    context = _relu_context()
    with pytest.raises(trt.TypeMismatchError, match=r"set_input_shape\('x'\): shape must be a sequence of ints, got " + shown):
        context.set_input_shape("x", shape)
    assert context.set_input_shape("x", (np.int64(2), 3, 8))  # NumPy integers are ints


def _onnx(node: Any, initializers: list[Any] = ()) -> Any:
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


KERNEL = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")


@pytest.mark.parametrize("model, message", [
    (_onnx(helper.make_node("Conv", ["x", "w"], ["y"], strides=[1.5, 1.5]), [KERNEL]),
     r"Conv .*UNSUPPORTED_NODE_DATATYPE: attribute 'strides' must be INTS, got FLOATS \[1\.5, 1\.5\]"),
    (_onnx(helper.make_node("Softmax", ["x"], ["y"], axis="0")),
     r"Softmax .*attribute 'axis' must be INT, got STRING '0'"),
    (_onnx(helper.make_node("Conv", ["x", "w"], ["y"], group=1.0), [KERNEL]), r"attribute 'group' must be INT, got FLOAT 1\.0"),
])
def test_onnx_attributes_of_the_wrong_type_are_refused(model: Any, message: str) -> None:
    with pytest.raises(OnnxImportError, match=message):
        trt.compile(model, logger=LOGGER)


class Answering(CircPadPlugin):
    """CircPad whose format hook answers ``ANSWER`` and whose enqueue returns ``STATUS``."""

    ANSWER: Any = True
    STATUS: Any = 0

    def supports_format_combination(self, pos: int, in_out: list[trt.PluginTensorDesc], num_inputs: int) -> Any:
        ok = super().supports_format_combination(pos, in_out, num_inputs)
        return self.ANSWER if ok else False

    def enqueue(self, *args: Any) -> Any:
        super().enqueue(*args)
        return self.STATUS

    def clone(self) -> Answering:
        copy = type(self)()
        copy.pads, copy.plugin_type = list(self.pads), self.plugin_type
        return copy


def _engine(plugin: CircPadPlugin) -> trt.ICudaEngine:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 2, 2))
    layer = network.add_plugin_v2([x], plugin)
    layer.name = "answering_pad"
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    return builder, network


@pytest.mark.parametrize("answer", ["yes", 2, None, [True]])
def test_supports_format_combination_must_return_a_bool(answer: Any) -> None:
    plugin = type("Odd", (Answering,), {"ANSWER": answer})()
    plugin.pads = [1, 1]
    builder, network = _engine(plugin)
    with pytest.raises(trt.TypeMismatchError, match=rf"answering_pad.*supports_format_combination must return a bool, got {answer!r}"
                       .replace("[", r"\[").replace("]", r"\]")):
        build(network, builder)


class StatusCreator(CircPadPluginCreator):
    """Revives Answering plugins whose enqueue returns ``status``."""

    def __init__(self, status: Any) -> None:
        super().__init__()
        self.name = "StatusPad_hardening"
        self.status = status

    def _make(self, pads: list[int]) -> Answering:
        plugin = type("StatusPad", (Answering,), {"STATUS": self.status})()
        plugin.plugin_type = self.name
        plugin.pads = list(pads)
        return plugin

    def create_plugin(self, name: str, fc: trt.PluginFieldCollection) -> Answering:
        return self._make(CircPadPlugin(fc).pads)

    def deserialize_plugin(self, name: str, data: bytes) -> Answering:
        return self._make(CircPadPluginCreator.deserialize_plugin(self, name, data).pads)


@pytest.mark.parametrize("status, ok", [(0, True), (False, True), (None, True), (np.int32(0), True), (1, False),
                                        (np.zeros(3), False), ("done", False)])
def test_enqueue_status(status: Any, ok: bool) -> None:
    """0, None and False (TensorRT's 0) succeed; anything else fails naming the layer and plugin."""
    creator = StatusCreator(status)
    registry = trt.get_plugin_registry()
    registry.register_creator(creator, "")
    try:
        builder, network = _engine(creator.create_plugin("pad", fields(pads=[1, 1])))
        engine = trt.Runtime(LOGGER).deserialize_cuda_engine(bytes(build(network, builder)))
    finally:
        registry.deregister_creator(creator)
    x = np.ones((2, 2, 2), np.float32)
    if ok:
        np.testing.assert_array_equal(run(engine.create_execution_context(), {"x": x})["y"], np.ones((2, 2, 4), np.float32))
        return
    shown = "a ndarray" if isinstance(status, np.ndarray) else repr(status)
    with pytest.raises(trt.PlugrtError, match=rf"layer 'answering_pad'.*StatusPad_hardening.*enqueue.*returned {shown}; "
                                              r"0 or None means success"):
        run(engine.create_execution_context(), {"x": x})
