"""On the GPU: MobileNetV3's squeeze-and-excitation block as exported, eager and captured in a CUDA graph, FLOAT
and under ``BuilderFlag.FP16``, against the CPU's engine (which fuses it; a GPU build leaves a FLOAT block's layers
apart and fuses a HALF one: under FP16, and an fp16 export's, into its channels-last run)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from plugrt.engine.plan import EnginePlan

from export_graphs import onnx_model
from gpu_helpers import onnx_plan, run_plan

pytestmark = pytest.mark.gpu
n = helper.make_node


def _se_block(half: bool = False):  # type: ignore[no-untyped-def]
    """x [N, 16, 6, 20]: depthwise conv, the SE block (pool, 1x1 + ReLU, 1x1 + HardSigmoid, Mul), a 1x1 conv;
    ``half``: typed FLOAT16 throughout, as an fp16 export."""
    rng = np.random.default_rng(3)

    def w(shape: tuple[int, ...]) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    inits = {"wd": w((16, 1, 3, 3)), "w1": w((4, 16, 1, 1)), "b1": w((4,)), "w2": w((16, 4, 1, 1)), "b2": w((16,))}
    inits["w3"] = w((8, 16, 1, 1))
    if half:
        inits = {k: v.astype(np.float16) for k, v in inits.items()}
    nodes = [
        n("Conv", ["x", "wd"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=16),
        n("GlobalAveragePool", ["d"], ["g"]),
        n("Conv", ["g", "w1", "b1"], ["s1"], kernel_shape=[1, 1]),
        n("Relu", ["s1"], ["r1"]),
        n("Conv", ["r1", "w2", "b2"], ["s2"], kernel_shape=[1, 1]),
        n("HardSigmoid", ["s2"], ["h2"], alpha=1 / 6, beta=0.5),
        n("Mul", ["d", "h2"], ["e"]),
        n("Conv", ["e", "w3"], ["y"], kernel_shape=[1, 1]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16 if half else TensorProto.FLOAT, ["n", 16, 6, 20])
    return onnx_model(nodes, [x], ["y"], inits)


SHAPES = {"x": ((1, 16, 6, 20), (2, 16, 6, 20), (4, 16, 6, 20))}


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("fp16", [False, True])
def test_squeeze_excitation_on_the_gpu_matches_the_cpu(fp16: bool, graph: bool) -> None:
    model = _se_block()
    plan = onnx_plan(model, "cuda", SHAPES, fp16)
    # a GPU build fuses the block in HALF only (under FP16 its layers are HALF when the rules run)
    assert ("squeeze_excitation" in [layer.kind for layer in EnginePlan.from_bytes(plan).layers]) is fp16
    assert "squeeze_excitation" in [
        layer.kind for layer in EnginePlan.from_bytes(onnx_plan(model, "cpu", SHAPES)).layers
    ]
    x = np.random.default_rng(4).standard_normal((3, 16, 6, 20)).astype(np.float32)
    want = run_plan(onnx_plan(model, "cpu", SHAPES), "cpu", {"x": x})["y"]
    got = run_plan(plan, "cuda", {"x": x}, graph)["y"]
    scale = float(np.abs(want).max())
    tolerance = 2e-2 if fp16 else 1e-5
    assert np.abs(got - want).max() <= tolerance * scale, (np.abs(got - want).max(), scale)


@pytest.mark.parametrize("graph", [False, True])
def test_a_half_squeeze_excitation_block_fuses_into_the_channels_last_run_on_the_gpu(monkeypatch, graph: bool) -> None:
    """An fp16 export's block: one ``squeeze_excitation`` layer taking its channels-last kernel, its input and output
    stored HWC (the depthwise convolution before it and the 1x1 after read and write them without reorders)."""
    from plugrt.core.types import TensorFormat

    x = np.random.default_rng(4).standard_normal((3, 16, 6, 20)).astype(np.float32)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    want = run_plan(onnx_plan(_se_block(), "cpu", SHAPES), "cpu", {"x": x})["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "1")  # (also at bind, the first run: torch's kernels)
    plan = EnginePlan.from_bytes(onnx_plan(_se_block(half=True), "cuda", SHAPES))
    (block,) = [layer for layer in plan.layers if layer.kind == "squeeze_excitation"]
    assert block.tactic == 2
    assert plan.tensors[block.inputs[0]].format == TensorFormat.HWC
    assert plan.tensors[block.outputs[0]].format == TensorFormat.HWC
    got = run_plan(plan.to_bytes(), "cuda", {"x": x.astype(np.float16)}, graph)["y"].astype(np.float32)
    scale = float(np.abs(want).max())
    assert np.abs(got - want).max() <= 2e-2 * scale, (np.abs(got - want).max(), scale)
