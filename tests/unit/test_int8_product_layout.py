"""The GPU's INT8 product path (``ops/int8_cuda.py``: im2col straight into a padded ``[C * taps, N * positions]``
INT8 buffer, one INT8 product with INT32 accumulation, a strided epilogue) run on the CPU with NumPy arrays and
torch's CPU ``_int_mm``, against the exact float path: the same integers, so the same outputs (the epilogues
round alike; a requantized tie may land one INT8 step apart). Skipped without torch."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("torch")

import plugrt as trt
from plugrt.ops import int8, int8_cuda

LOGGER = trt.Logger(trt.Logger.ERROR)


def _plan(x_shape, maps, kernel, classes, **conv):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    c = x_shape[1]
    w1 = rng.standard_normal((maps, c, *kernel)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((maps, maps, 1, 1)).astype(np.float32) * 0.2
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], **conv),
        helper.make_node("Conv", ["c1", "w2"], ["c2"]),  # pointwise, INT8 in and out of the first
        helper.make_node("Relu", ["c2"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"]),
    ]
    inits = {"w1": w1, "b1": rng.standard_normal(maps), "w2": w2, "wf": rng.standard_normal((maps, classes)) * 0.1,
             "bf": rng.standard_normal(classes)}  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(model)
    network.get_input(0).set_dynamic_range(-4, 4)
    for i in range(network.num_layers):
        for o in range(network.get_layer(i).num_outputs):
            network.get_layer(i).get_output(o).set_dynamic_range(-6, 6)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    return bytes(builder.build_serialized_network(network, config))


def _run(plan: bytes, x: np.ndarray) -> np.ndarray:
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    context.set_input_shape("x", x.shape)
    y = np.full(tuple(context.get_tensor_shape("y")), 7, np.float32)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    context.execute_async_v3(0)
    return y


@pytest.mark.parametrize(
    ("x_shape", "maps", "kernel", "classes", "conv"),
    [
        ((3, 5, 9, 7), 24, (3, 3), 20, {"pads": [1, 1, 1, 1]}),  # K = 45, N * L = 189: both padded
        ((2, 4, 10, 10), 32, (3, 3), 17, {"pads": [0, 0, 1, 1], "strides": [2, 2]}),  # asymmetric, strided
        ((1, 3, 8, 8), 17, (5, 5), 24, {"pads": [2, 2, 2, 2], "dilations": [1, 1]}),
    ],
)
def test_int8_product_layout_matches_the_exact_float_path(monkeypatch, x_shape, maps, kernel, classes, conv) -> None:
    plan = _plan(x_shape, maps, kernel, classes, **conv)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = _run(plan, x)
    ran: list[object] = []
    original = int8_cuda.Int8Product.run
    monkeypatch.setattr(int8, "usable", lambda xp, rows: rows > int8_cuda.MIN_ROWS)
    monkeypatch.setattr(int8_cuda.Int8Product, "run", lambda self: (ran.append(self), original(self))[1])
    got = _run(plan, x)
    assert len({id(p) for p in ran}) == 3  # both convolutions and the Gemm
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))


def test_padded_rounds_up_to_cublaslt_multiples() -> None:
    assert [int8_cuda.padded(n) for n in (1, 8, 9, 147, 1000)] == [8, 8, 16, 152, 1000]
