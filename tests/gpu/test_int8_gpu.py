"""INT8 engines (implicit INT8 with dynamic ranges) on the GPU, against the same plan on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt

from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu
LOGGER = trt.Logger(trt.Logger.ERROR)


def _int8_plan_model(batch: int, channels: int, classes: int = 10) -> bytes:
    """Conv 3x3 -> Conv 3x3 (INT8 between them) -> Relu -> Flatten -> Gemm, every tensor ranged +-4."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((channels, 3, 3, 3)).astype(np.float32) * 0.3, "w1"),
        numpy_helper.from_array(rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.1, "w2"),
        numpy_helper.from_array(rng.standard_normal((channels * 64, classes)).astype(np.float32) * 0.05, "wf"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "wf"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "int8_gpu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, classes])], inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _int8_plan(batch: int, channels: int, classes: int = 10) -> bytes:
    model = _int8_plan_model(batch, channels, classes)
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(model)
    for i in range(network.num_inputs):
        network.get_input(i).set_dynamic_range(-4, 4)
    for i in range(network.num_layers):
        network.get_layer(i).get_output(0).set_dynamic_range(-4, 4)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    return bytes(builder.build_serialized_network(network, config))


# (2, 8): every product on the exact float path; (16, 160): the convolutions in cuBLASLt (160 maps > 16),
# 160 x 9 = 1440 also blocked on the CPU; (3, 32, 24): a Gemm of 24 columns in cuBLASLt, batch 3 padded to 8
CASES = [(2, 8, 10), (16, 160, 10), (3, 32, 24)]


@pytest.mark.parametrize(("batch", "channels", "classes"), CASES)
@pytest.mark.parametrize("graph", [False, True])
def test_int8_engine_on_the_gpu_matches_the_cpu(batch: int, channels: int, classes: int, graph: bool) -> None:
    plan = _int8_plan(batch, channels, classes)
    x = np.random.default_rng(1).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    cpu = run_plan(plan, "cpu", {"x": x})["y"]
    gpu = run_plan(plan, "cuda", {"x": x}, graph=graph)["y"]
    # integer sums are exact on both; an activation on a rounding tie may land one INT8 step apart
    np.testing.assert_allclose(gpu, cpu, rtol=1e-3, atol=0.05 * np.abs(cpu).max())


@pytest.mark.parametrize(("batch", "channels", "classes", "expected"), [(2, 8, 10, 0), (16, 160, 10, 2), (3, 32, 24, 3)])
def test_int8_products_take_cublaslt_where_its_shape_rules_allow(
    monkeypatch: pytest.MonkeyPatch, batch: int, channels: int, classes: int, expected: int
) -> None:
    pytest.importorskip("torch")
    from plugrt.ops import int8_cuda

    ran: list[object] = []
    original = int8_cuda.Int8Product.run

    def spy(self: object) -> None:
        ran.append(self)
        original(self)  # type: ignore[arg-type]

    monkeypatch.setattr(int8_cuda.Int8Product, "run", spy)
    x = np.random.default_rng(2).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    run_plan(_int8_plan(batch, channels, classes), "cuda", {"x": x})
    assert len({id(p) for p in ran}) == expected


def test_calibration_of_a_gpu_build_reads_device_batches_and_matches_the_cpu() -> None:
    # a GPU build's calibrator hands out device addresses (as TensorRT's do); the FP32 calibration engine
    # must run on the GPU too, and find the ranges a CPU build finds from the same data in host memory
    import cupy as cp

    rng = np.random.default_rng(5)
    batches = [rng.standard_normal((4, 3, 8, 8)).astype(np.float32) for _ in range(2)]

    class Batches(trt.IInt8MinMaxCalibrator):
        def __init__(self, device: bool) -> None:
            super().__init__()
            self.arrays = [cp.asarray(b) if device else b for b in batches]
            self.device, self.index, self.cache = device, 0, b""

        def get_batch(self, names):  # type: ignore[no-untyped-def]
            if self.index == len(self.arrays):
                return None
            array = self.arrays[self.index]
            self.index += 1
            return [int(array.data.ptr) if self.device else array.ctypes.data]

        def read_calibration_cache(self):  # type: ignore[no-untyped-def]
            return None

        def write_calibration_cache(self, cache: bytes) -> None:
            self.cache = cache

    caches = []
    for device in ("cpu", "cuda"):
        builder = trt.Builder(LOGGER, device=device)
        network = builder.create_network(0)
        model = _int8_plan_model(4, 8)
        assert trt.OnnxParser(network, LOGGER).parse(model)
        config = builder.create_builder_config()
        config.set_flag(trt.BuilderFlag.INT8)
        calibrator = Batches(device == "cuda")
        config.int8_calibrator = calibrator
        assert builder.build_serialized_network(network, config) is not None
        caches.append(calibrator.cache)
    # the same ranges; the GPU sums in another order, so a scale may differ in its last bits
    cpu, gpu = (trt.builder.calibration.parse_cache(c) for c in caches)
    assert cpu[0] == gpu[0] and sorted(cpu[1]) == sorted(gpu[1]) and len(cpu[1]) >= 5
    for name, amax in cpu[1].items():
        assert gpu[1][name] == pytest.approx(amax, rel=1e-5), name
