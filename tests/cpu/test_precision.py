"""Layer precision as TensorRT chooses it: BuilderFlag.FP16, precision constraints, strongly typed networks.

The automatic choice runs a layer in HALF only where the build's backend computes HALF faster
(the GPU); the CPU backend does not, so these tests give it that property with a monkeypatch to
exercise the same pass the GPU build takes (``tests/gpu/test_gpu_precision.py`` runs it there).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import plugrt as trt
from plugrt.backends.cpu import CpuBackend
from plugrt.core.errors import BuildError

from export_graphs import masked_attention, onnx_model

LOGGER = trt.Logger(trt.Logger.ERROR)


@pytest.fixture
def fast_half(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU backend claims to compute HALF faster (as the CUDA backend does)."""
    monkeypatch.setattr(CpuBackend, "fast_types", frozenset({trt.float16}))


def _build(
    model: object, *flags: trt.BuilderFlag, network_flags: int = 0, edit: object = None, logger: trt.ILogger = LOGGER
) -> trt.ICudaEngine:
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(model.SerializeToString())  # type: ignore[attr-defined]
    if edit is not None:
        edit(network)  # type: ignore[operator]
    config = builder.create_builder_config()
    for flag in flags:
        config.set_flag(flag)
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        shape = tuple(2 if d < 0 else d for d in tensor.shape)
        profile.set_shape(tensor.name, shape, shape, shape)
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    return trt.Runtime(logger).deserialize_cuda_engine(plan)


def _run(engine: trt.ICudaEngine, feeds: dict[str, np.ndarray]) -> np.ndarray:
    context = engine.create_execution_context()
    for name, array in feeds.items():
        context.set_input_shape(name, array.shape)
        context.set_tensor_address(name, array.ctypes.data)
    out = np.empty(tuple(context.get_tensor_shape("y")), trt.nptype(engine.get_tensor_dtype("y")))
    context.set_tensor_address("y", out.ctypes.data)
    context.execute_async_v3(0)
    return out


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    mask = np.ones((2, 16), np.int64)
    mask[1, 11:] = 0
    return {"x": rng.standard_normal((2, 16, 64)).astype(np.float32), "mask": mask}


def _stored_types(engine: trt.ICudaEngine) -> set[trt.DataType]:
    return {t.dtype for t in engine.plan.tensors if t.role == "internal"}


def test_fp16_changes_nothing_where_the_backend_is_not_faster_in_half() -> None:
    engine = _build(masked_attention(), trt.BuilderFlag.FP16)
    assert trt.float16 not in _stored_types(engine)


def test_fp16_runs_the_compute_layers_in_half_and_keeps_the_io_types(fast_half: None) -> None:
    feeds = _feeds()
    want = _run(_build(masked_attention()), feeds)
    engine = _build(masked_attention(), trt.BuilderFlag.FP16)
    assert trt.float16 in _stored_types(engine)
    assert engine.get_tensor_dtype("x") == trt.float32 and engine.get_tensor_dtype("y") == trt.float32
    halves = {layer.kind for layer in engine.plan.layers if any(
        engine.plan.tensors[o].dtype == trt.float16 for o in layer.outputs)}  # fmt: skip
    assert {"matrix_multiply", "attention", "normalization"} <= halves  # the softmax is inside the attention
    got = _run(engine, feeds)
    assert got.dtype == np.float32 and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())


def test_the_mask_constant_saturates_in_half_instead_of_making_nan(fast_half: None) -> None:
    """(1 - mask) * finfo(float32).min is -inf in half without clamping, and 0 * -inf is NaN."""
    feeds = _feeds()
    got = _run(_build(masked_attention(), trt.BuilderFlag.FP16), feeds)
    assert np.isfinite(got).all()
    plan = _build(masked_attention(), trt.BuilderFlag.FP16).plan
    halves = [plan.weights[layer.weights["value"]] for layer in plan.layers
              if layer.kind == "constant" and plan.tensors[layer.outputs[0]].dtype == trt.float16]  # fmt: skip
    assert any(value.min() == -65504 for value in halves)  # converted once, at build, saturated


def test_constants_are_converted_at_build_not_per_inference(fast_half: None) -> None:
    """A FLOAT constant a HALF layer reads is stored in HALF in the plan (as TensorRT stores FP16 weights):
    no reformat layer converts weights at every run, and the exported attention still fuses."""
    plan = _build(masked_attention(), trt.BuilderFlag.FP16).plan
    for layer in plan.layers:
        if layer.kind == "reformat":
            assert plan.tensors[layer.inputs[0]].role != "constant", layer.name
    assert any(layer.kind == "attention" for layer in plan.layers)
    kinds = [layer.kind for layer in plan.layers]
    assert kinds.count("reformat") <= 3  # the input, the mask made from it, the output


def test_saturating_reformat_keeps_infinities_and_clamps_finite_values() -> None:
    from plugrt.ops.base import create_operator

    op = create_operator("reformat", {"dst_type": "HALF", "src_format": "LINEAR", "dst_format": "LINEAR",
                                      "saturate": True}, {})  # fmt: skip
    source = np.array([-3.4e38, -70000.0, 1.5, 70000.0, np.inf, -np.inf], np.float32)
    out = np.empty(6, np.float16)
    op.prepare([(6,)], [(6,)])
    op.run([source], [out])
    np.testing.assert_array_equal(out, np.array([-65504, -65504, 1.5, 65504, np.inf, -np.inf], np.float16))


def _precision(layer_type: str, dtype: trt.DataType) -> object:
    def edit(network: trt.INetworkDefinition) -> None:
        for i in range(network.num_layers):
            layer = network.get_layer(i)
            if layer.type == getattr(trt.LayerType, layer_type):
                layer.precision = dtype

    return edit


def test_obeyed_layer_precision_runs_that_layer_in_half() -> None:
    engine = _build(
        masked_attention(), trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS, edit=_precision("SOFTMAX", trt.float16)
    )
    softmax = next(layer for layer in engine.plan.layers if layer.kind == "softmax")
    assert engine.plan.tensors[softmax.outputs[0]].dtype == trt.float16
    got = _run(engine, _feeds())
    want = _run(_build(masked_attention()), _feeds())
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())


def test_layer_precision_is_ignored_without_a_constraints_flag() -> None:
    engine = _build(masked_attention(), edit=_precision("SOFTMAX", trt.float16))
    assert trt.float16 not in _stored_types(engine)


def _mean() -> object:
    """y = ReduceMean(x, axis 1): a reduction, which accumulates in FLOAT."""
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 16, 64])
    model = onnx_model(nodes, [x], ["y"], {"axes": np.array([1], np.int64)})
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    return model


def test_an_obeyed_precision_an_operator_cannot_compute_fails_naming_the_layer() -> None:
    edit = _precision("REDUCE", trt.float16)
    with pytest.raises(BuildError, match=r"layer '.*' \(reduce\) has precision HALF") as info:
        _build(_mean(), trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS, edit=edit)
    assert "OBEY_PRECISION_CONSTRAINTS" in str(info.value)


def test_a_preferred_precision_an_operator_cannot_compute_warns_and_keeps_float() -> None:
    logger = trt.Logger(trt.Logger.WARNING)
    messages: list[str] = []
    logger.log = lambda severity, message: messages.append(message)  # type: ignore[method-assign]
    edit = _precision("REDUCE", trt.float16)
    engine = _build(_mean(), trt.BuilderFlag.PREFER_PRECISION_CONSTRAINTS, edit=edit, logger=logger)
    assert trt.float16 not in _stored_types(engine)
    assert any("has precision HALF" in m and "keeps FLOAT" in m for m in messages)


def test_an_obeyed_output_type_stores_that_output_in_half() -> None:
    def edit(network: trt.INetworkDefinition) -> None:
        for i in range(network.num_layers):
            layer = network.get_layer(i)
            if layer.type == trt.LayerType.SOFTMAX:
                layer.set_output_type(0, trt.float16)

    engine = _build(masked_attention(), trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS, edit=edit)
    assert trt.float16 in _stored_types(engine)
    assert engine.get_tensor_dtype("y") == trt.float32
    want = _run(_build(masked_attention()), _feeds())
    np.testing.assert_allclose(_run(engine, _feeds()), want, atol=2e-2 * np.abs(want).max())


def test_reduced_precision_flags_are_refused_for_a_strongly_typed_network() -> None:
    strongly = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    with pytest.raises(BuildError, match=r"BuilderFlag\.FP16 is set for a strongly typed network"):
        _build(masked_attention(), trt.BuilderFlag.FP16, network_flags=strongly)


def test_a_strongly_typed_network_ignores_layer_precisions(fast_half: None) -> None:
    strongly = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    engine = _build(masked_attention(), trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS, network_flags=strongly,
                    edit=_precision("SOFTMAX", trt.float16))  # fmt: skip
    assert trt.float16 not in _stored_types(engine)


def test_masked_attention_exported_by_torch_in_fp16_and_with_the_flag(fast_half: None, tmp_path: object) -> None:
    """The issue's case: a masked attention exported by torch.onnx.export, as an FP32 model built with
    FP16 and as an fp16 model (model.half()): both finite and close to PyTorch in FP32."""
    torch = pytest.importorskip("torch")
    import onnx

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(64, 192)

        def forward(self, x, mask):  # type: ignore[no-untyped-def]
            b, s, d = x.shape
            q, k, v = self.qkv(x).reshape(b, s, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
            bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            probs = torch.softmax(q @ k.transpose(-1, -2) / 4.0 + bias, dim=-1)
            return (probs @ v).transpose(1, 2).reshape(b, s, d)

    torch.manual_seed(0)
    module = Attention().eval()
    feeds = _feeds()
    with torch.no_grad():
        want = module(torch.from_numpy(feeds["x"]), torch.from_numpy(feeds["mask"])).numpy()
    for half in (False, True):
        path = f"{tmp_path}/attention{int(half)}.onnx"
        exported = module.half() if half else module
        x = torch.from_numpy(feeds["x"]).to(torch.float16 if half else torch.float32)
        torch.onnx.export(exported, (x, torch.from_numpy(feeds["mask"])), path, input_names=["x", "mask"],
                          output_names=["y"], opset_version=17, dynamo=False)  # fmt: skip
        engine = _build(onnx.load(path), trt.BuilderFlag.FP16)
        got = _run(engine, {"x": x.numpy(), "mask": feeds["mask"]}).astype(np.float32)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())
        module = module.float()


def test_a_shape_layer_reads_a_half_tensor_without_a_reformat(fast_half: None) -> None:
    """Shape only reads dimensions: it takes the HALF activation as stored instead of a FLOAT copy made at every run."""
    weight = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Shape", ["h"], ["s"]),
        helper.make_node("Reshape", ["h", "s"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    model = onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 16, 64])], ["y"], {"w": weight})
    engine = _build(model, trt.BuilderFlag.FP16)
    plan = engine.plan
    converted = sorted(plan.tensors[layer.inputs[0]].name for layer in plan.layers if layer.kind == "reformat")
    assert converted == ["x", "y [HALF/LINEAR]"]  # the input and the output only
    x = np.random.default_rng(3).standard_normal((2, 16, 64)).astype(np.float32)
    np.testing.assert_allclose(_run(engine, {"x": x}), np.maximum(x @ weight, 0), rtol=2e-2, atol=2e-2)


def test_epilogues_fuse_in_half_as_in_float(fast_half: None) -> None:
    """Under FP16 the bias Add fuses into the product, and the residual Add and ReLU into the convolution,
    as they do in FLOAT (HALF layers were left unfused before)."""
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "x"], ["r"]),
        helper.make_node("Relu", ["r"], ["a"]),
        helper.make_node("Reshape", ["a", "flat"], ["f"]),
        helper.make_node("MatMul", ["f", "w"], ["m"]),
        helper.make_node("Add", ["m", "bias"], ["y"]),
    ]
    weights = {
        "k": (0.1 * rng.standard_normal((4, 4, 3, 3))).astype(np.float32),
        "flat": np.array([2, 64], np.int64),
        "w": (0.1 * rng.standard_normal((64, 8))).astype(np.float32),
        "bias": rng.standard_normal(8).astype(np.float32),
    }
    model = onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 4, 4])], ["y"], weights)
    x = rng.standard_normal((2, 4, 4, 4)).astype(np.float32)
    want = _run(_build(model), {"x": x})
    engine = _build(model, trt.BuilderFlag.FP16)
    layers = {layer.kind: layer for layer in engine.plan.layers}
    assert "elementwise" not in layers and "activation" not in layers
    assert layers["matrix_multiply"].params.get("bias") and layers["convolution"].params.get("residual")
    assert layers["convolution"].params.get("activation") == "RELU"
    assert engine.plan.tensors[layers["convolution"].outputs[0]].dtype == trt.float16
    np.testing.assert_allclose(_run(engine, {"x": x}), want, atol=2e-2 * np.abs(want).max())
