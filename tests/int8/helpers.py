"""Small networks and a runner for the INT8 tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.engine.plan import EnginePlan

QUIET = plugrt.Logger(plugrt.Logger.ERROR)


def conv_model(batch: int | str = 2, second_conv: bool = True, seed: int = 0) -> bytes:
    """x [batch, 3, 8, 8] -> Conv 3x3 (+bias) -> [Conv 1x1] -> Relu -> Flatten -> Gemm(10)."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3, "w1"),
        numpy_helper.from_array(rng.standard_normal(6).astype(np.float32) * 0.1, "b1"),
        numpy_helper.from_array(rng.standard_normal((4, 6, 1, 1)).astype(np.float32) * 0.3, "w2"),
        numpy_helper.from_array(rng.standard_normal((4 * 64, 10)).astype(np.float32) * 0.1, "wf"),
        numpy_helper.from_array(rng.standard_normal(10).astype(np.float32) * 0.1, "bf"),
    ]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1])]
    if second_conv:
        nodes.append(helper.make_node("Conv", ["c1", "w2"], ["c2"]))
    else:
        inits[2] = numpy_helper.from_array(np.zeros(1, np.float32), "unused")
    nodes += [
        helper.make_node("Relu", ["c2" if second_conv else "c1"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"]),
    ]
    if not second_conv:
        inits[3] = numpy_helper.from_array(rng.standard_normal((6 * 64, 10)).astype(np.float32) * 0.1, "wf")
    graph = helper.make_graph(
        nodes,
        "int8_test",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def parse(model: bytes) -> tuple[plugrt.Builder, plugrt.INetworkDefinition]:
    builder = plugrt.Builder(QUIET)
    network = builder.create_network(0)
    parser = plugrt.OnnxParser(network, QUIET)
    assert parser.parse(model), [parser.get_error(i) for i in range(parser.num_errors)]
    return builder, network


def tensors_of(network: plugrt.INetworkDefinition) -> dict[str, plugrt.ITensor]:
    found = {network.get_input(i).name: network.get_input(i) for i in range(network.num_inputs)}
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for k in range(layer.num_outputs):
            found[layer.get_output(k).name] = layer.get_output(k)
    return found


def build(
    model: bytes, configure: Callable[[plugrt.Builder, plugrt.INetworkDefinition, plugrt.IBuilderConfig], None]
) -> tuple[EnginePlan, Callable[[np.ndarray], np.ndarray]]:
    """Build ``model`` after ``configure(builder, network, config)``; (the plan, a runner of input x -> y)."""
    builder, network = parse(model)
    config = builder.create_builder_config()
    configure(builder, network, config)
    data = bytes(builder.build_serialized_network(network, config))
    engine = plugrt.Runtime(QUIET).deserialize_cuda_engine(data)
    context = engine.create_execution_context()

    def run(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        context.set_input_shape("x", x.shape)
        out = np.empty(tuple(context.get_tensor_shape("y")), np.float32)
        context.set_tensor_address("x", x.ctypes.data)
        context.set_tensor_address("y", out.ctypes.data)
        assert context.execute_async_v3(0)
        return out

    return EnginePlan.from_bytes(data), run


def kinds(plan: EnginePlan) -> list[str]:
    return [layer.family if layer.is_plugin else layer.kind for layer in plan.layers]
