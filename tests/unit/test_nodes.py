"""The node protocol: every step of an engine is a node, bound at shape change and launched per run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.core.dims import Dims
from plugrt.engine.plan import EnginePlan
from plugrt.examples import circ_pad_v2
from plugrt.interfaces.adapters import PluginNode
from plugrt.nodes import Binding, Node
from plugrt.ops.base import Operator, create_operator

from testing_plugins import build, fields, run

LOGGER = trt.Logger(trt.Logger.ERROR)


def _relu_then_pad() -> tuple[bytes, Any]:
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    relu = network.add_activation(network.add_input("x", trt.float32, (-1, 4)), trt.ActivationType.RELU)
    relu.name = "relu"
    pad = network.add_plugin_v2([relu.get_output(0)], circ_pad_v2.register().create_plugin("pad", fields(pads=[1, 1])))
    pad.name, pad.get_output(0).name = "pad", "y"
    network.mark_output(pad.get_output(0))
    plan = build(network, builder, [{"x": ((1, 4), (2, 4), (8, 4))}])
    return plan, trt.Runtime(LOGGER).deserialize_cuda_engine(plan)


def test_every_step_is_a_node_operators_directly_plugins_through_their_adapter() -> None:
    _, engine = _relu_then_pad()
    context = engine.create_execution_context()
    steps = context._executor.steps
    assert all(isinstance(step.node, Node) for step in steps)
    relu, pad = steps
    assert isinstance(pad.node, PluginNode) and pad.node.kind == "plugin" and pad.node.adapter.family == "v2_dynamic"
    assert isinstance(relu.node, Operator) and relu.node.kind == "activation"
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    y = run(context, {"x": x})["y"]
    np.testing.assert_array_equal(y, np.pad(np.maximum(x, 0), [(0, 0), (1, 1)], mode="wrap"))


def test_the_plan_holds_one_layer_record_a_plugin_is_kind_plugin_naming_its_record_and_family() -> None:
    plan_bytes, _ = _relu_then_pad()
    plan = EnginePlan.from_bytes(plan_bytes)
    relu, pad = plan.layers
    assert (pad.kind, pad.params["plugin"], pad.params["family"]) == ("plugin", 0, "v2_dynamic")
    assert pad.is_plugin and (pad.plugin, pad.family) == (0, "v2_dynamic")
    assert plan.plugins[pad.plugin].name == "CircPadPlugin"
    assert (relu.kind, relu.is_plugin) == ("activation", False)
    again = EnginePlan.from_bytes(plan.to_bytes())
    assert [(layer.name, layer.kind, layer.params) for layer in again.layers] == [
        (layer.name, layer.kind, layer.params) for layer in plan.layers
    ]


def test_a_binding_makes_its_descriptor_once_and_profile_dims_on_demand() -> None:
    asked: list[int] = []

    def dims() -> tuple[Dims, Dims, Dims]:
        asked.append(1)
        return Dims((1, 4)), Dims((2, 4)), Dims((8, 4))

    array = np.zeros((2, 4), np.float32)
    binding = Binding((2, 4), trt.float32, trt.TensorFormat.LINEAR, 0.5, array.ctypes.data, array, dims)
    assert not asked
    desc = binding.desc
    assert (tuple(desc.dims), desc.type, desc.scale) == ((2, 4), trt.float32, 0.5)
    assert binding.desc is desc  # plugins may cache per descriptor object
    assert binding.profile_dims[2] == Dims((8, 4)) and asked == [1]


def test_an_operator_binds_its_arrays_and_launches_its_kernel_on_them() -> None:
    op = create_operator("activation", {"type": "RELU"}, {})
    x = np.array([[-1.0, 2.0]], np.float32)
    y = np.zeros_like(x)
    bind = [Binding(a.shape, trt.float32, trt.TensorFormat.LINEAR, 1.0, 0, a, lambda: (Dims(), Dims(), Dims())) for a in (x, y)]
    op.bind(bind[:1], bind[1:], 0)
    op.launch(0)
    np.testing.assert_array_equal(y, [[0.0, 2.0]])
    kernel, args = op.prepared_launch(0)
    assert kernel == op.run and args[0][0] is x and args[1][0] is y


def test_a_failing_node_names_its_layer_and_kind() -> None:
    op = create_operator("activation", {"type": "RELU"}, {})
    op.name = "act"
    error = op.failure(ValueError("bad buffer"))
    assert isinstance(error, trt.ExecutionError)
    assert str(error) == "layer 'act' (activation) failed: ValueError: bad buffer"
    assert str(op.failure(trt.ShapeError("no"))) == "layer 'act' (activation): no"
    same = trt.ExecutionError("already named")
    assert op.failure(same) is same


@pytest.mark.usefixtures("numpy_kernels")  # the patched run() is the NumPy kernel
def test_an_operator_failing_at_run_is_an_execution_error_naming_the_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    _, engine = _relu_then_pad()
    context = engine.create_execution_context()
    relu = context._executor.steps[0].node

    def broken(inputs: Any, outputs: Any, xp: Any = np) -> None:
        raise ValueError("kernel exploded")

    monkeypatch.setattr(relu, "run", broken)
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(trt.ExecutionError, match=r"layer 'relu' \(activation\) failed: ValueError: kernel exploded"):
        run(context, {"x": x})
