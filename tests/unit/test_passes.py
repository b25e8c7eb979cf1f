"""The graph optimizer's rules on small hand-written ONNX graphs: what fuses, what must not, and the results.

Every fused engine is compared with the same model built with ``PLUGRT_DISABLE_PASSES=all``.
Tolerances: elementwise chains bit-identical (FLOAT and HALF); GELU 2e-6 relative + 1e-6
absolute in FLOAT (the layers round their constants to float32), 2e-3 in HALF; LayerNorm
1e-5 in FLOAT, 2e-3 in HALF.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder.fusion import DISABLE_ENV, disabled_passes
from plugrt.core.errors import BuildError

RNG = np.random.default_rng(17)


def _model(nodes, constants: dict[str, np.ndarray], shape, dtype=np.float32, outputs=("y",)):
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    graph = helper.make_graph(
        nodes,
        "passes",
        [helper.make_tensor_value_info("x", elem, list(shape))],
        [helper.make_tensor_value_info(o, elem, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v, dtype), k) for k, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def _build(model, monkeypatch, disabled: str = ""):
    monkeypatch.setenv(DISABLE_ENV, disabled)
    return plugrt.compile(model)


def _both(model, monkeypatch, x):
    fused, plain = _build(model, monkeypatch), _build(model, monkeypatch, "all")
    return fused, plain, fused({"x": x}), plain({"x": x})


def _kinds(compiled) -> list[str]:
    """The kinds of the engine's layers but constants."""
    return [layer.kind for layer in compiled.engine.plan.layers if layer.kind != "constant"]


def _computing(compiled) -> list:
    """The engine's layers but constants."""
    return [layer for layer in compiled.engine.plan.layers if layer.kind != "constant"]


n = helper.make_node

GELU_ERF_SPELLINGS = {
    "dynamo": [  # Div, Erf, Add, Mul(0.5, .), Mul(x, .)
        n("Div", ["x", "sqrt2"], ["a"]),
        n("Erf", ["a"], ["b"]),
        n("Add", ["b", "one"], ["c"]),
        n("Mul", ["half", "c"], ["d"]),
        n("Mul", ["x", "d"], ["y"]),
    ],
    "torchscript": [  # Div, Erf, Add, Mul(x, .), Mul(., 0.5)
        n("Div", ["x", "sqrt2"], ["a"]),
        n("Erf", ["a"], ["b"]),
        n("Add", ["one", "b"], ["c"]),
        n("Mul", ["x", "c"], ["d"]),
        n("Mul", ["d", "half"], ["y"]),
    ],
    "half first, reciprocal product": [  # Mul(x, 0.5) taken first, Mul by 1/sqrt(2)
        n("Mul", ["x", "half"], ["h"]),
        n("Mul", ["inv_sqrt2", "x"], ["a"]),
        n("Erf", ["a"], ["b"]),
        n("Add", ["b", "one"], ["c"]),
        n("Mul", ["c", "h"], ["y"]),
    ],
}
GELU_CONSTANTS = {
    "sqrt2": np.full((1, 1, 1), 1.4142135),
    "inv_sqrt2": np.full((1, 1, 1), 0.70710677),
    "one": np.ones((1, 1, 1)),
    "half": np.full((1, 1, 1), 0.5),
    "c3": np.full((1, 1, 1), 0.044715),
    "k": np.full((1, 1, 1), math.sqrt(2 / math.pi)),
    "three": np.full((1, 1, 1), 3.0),
}


def _tanh_gelu(cube: str) -> list:
    cubed = (
        [n("Pow", ["x", "three"], ["p"])]
        if cube == "pow"
        else [n("Mul", ["x", "x"], ["sq"]), n("Mul", ["sq", "x"], ["p"])]
    )
    return [
        n("Mul", ["x", "half"], ["h"]),
        *cubed,
        n("Mul", ["p", "c3"], ["q"]),
        n("Add", ["x", "q"], ["r"]),
        n("Mul", ["r", "k"], ["s"]),
        n("Tanh", ["s"], ["t"]),
        n("Add", ["t", "one"], ["u"]),
        n("Mul", ["h", "u"], ["y"]),
    ]


@pytest.mark.parametrize("spelling", sorted(GELU_ERF_SPELLINGS))
def test_every_erf_gelu_spelling_becomes_one_activation(spelling: str, monkeypatch) -> None:
    model = _model(GELU_ERF_SPELLINGS[spelling], GELU_CONSTANTS, (2, 7, 33))
    x = RNG.normal(0, 3, (2, 7, 33)).astype(np.float32)
    fused, plain, got, want = _both(model, monkeypatch, x)
    assert _kinds(fused) == ["activation"]
    layer = _computing(fused)[0]
    assert layer.params["type"] == "GELU_ERF" and layer.name.startswith("GELU_ERF [") and "5 layers" in layer.name
    assert len(plain.engine.plan.layers) > 5
    np.testing.assert_allclose(got["y"], want["y"], rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("cube", ["pow", "products"])
def test_tanh_gelu_becomes_one_activation(cube: str, monkeypatch) -> None:
    model = _model(_tanh_gelu(cube), GELU_CONSTANTS, (3, 4, 40))
    x = RNG.normal(0, 3, (3, 4, 40)).astype(np.float32)
    fused, _, got, want = _both(model, monkeypatch, x)
    assert _kinds(fused) == ["activation"] and _computing(fused)[0].params["type"] == "GELU_TANH"
    np.testing.assert_allclose(got["y"], want["y"], rtol=2e-6, atol=1e-6)


@pytest.mark.usefixtures("numpy_kernels")  # bit-exact against the unfused NumPy layers
def test_gelu_whose_intermediate_has_another_reader_does_not_fuse(monkeypatch) -> None:
    nodes = [*GELU_ERF_SPELLINGS["dynamo"], n("Neg", ["b"], ["z"])]  # Erf's result read outside the pattern
    model = _model(nodes, GELU_CONSTANTS, (2, 7, 33), outputs=("y", "z"))
    x = RNG.normal(0, 3, (2, 7, 33)).astype(np.float32)
    fused, _, got, want = _both(model, monkeypatch, x)
    assert not any(layer.params.get("type") == "GELU_ERF" for layer in fused.engine.plan.layers)
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["z"], want["z"])


def test_a_near_gelu_does_not_fuse(monkeypatch) -> None:
    constants = {**GELU_CONSTANTS, "sqrt2": np.full((1, 1, 1), 1.5)}  # not 1/sqrt(2): another function
    model = _model(GELU_ERF_SPELLINGS["dynamo"], constants, (2, 7, 33))
    fused = _build(model, monkeypatch)
    assert "activation" not in _kinds(fused)
    assert _kinds(fused) == ["fused_elementwise"]  # still one chain: Div, Erf, Add, Mul, Mul by x


def test_gelu_in_half(monkeypatch) -> None:
    model = _model(GELU_ERF_SPELLINGS["torchscript"], GELU_CONSTANTS, (2, 4, 50), np.float16)
    x = RNG.normal(0, 3, (2, 4, 50)).astype(np.float16)
    fused, _, got, want = _both(model, monkeypatch, x)
    assert _kinds(fused) == ["activation"]
    assert got["y"].dtype == np.float16
    np.testing.assert_allclose(got["y"].astype(np.float32), want["y"].astype(np.float32), rtol=2e-3, atol=2e-3)


def _layer_norm(axis: int = -1, affine: bool = True, square: str = "pow", extra_reader: bool = False) -> list:
    nodes = [
        n("ReduceMean", ["x", "axes"], ["m"]),
        n("Sub", ["x", "m"], ["d"]),
        n("Pow", ["d", "two"], ["sq"]) if square == "pow" else n("Mul", ["d", "d"], ["sq"]),
        n("ReduceMean", ["sq", "axes"], ["v"]),
        n("Add", ["v", "eps"], ["ve"]),
        n("Sqrt", ["ve"], ["s"]),
        n("Div", ["d", "s"], ["nrm" if affine else "y"]),
    ]
    if affine:
        nodes += [n("Mul", ["gamma", "nrm"], ["g"]), n("Add", ["g", "beta"], ["y"])]
    if extra_reader:
        nodes.append(n("Neg", ["d"], ["z"]))
    return nodes


def _ln_constants(axis: int, width: int = 24) -> dict[str, np.ndarray]:
    return {
        "axes": np.array([axis], np.int64),
        "two": np.full((1, 1, 1), 2.0),
        "eps": np.full((1, 1, 1), 1e-5),
        "gamma": RNG.normal(1, 0.2, (width,)),
        "beta": RNG.normal(0, 0.2, (width,)),
    }


def _ln_model(dtype=np.float32, axis: int = -1, **kwargs):
    constants = _ln_constants(axis)
    constants = {k: v for k, v in constants.items() if k != "axes"}
    model = _model(
        _layer_norm(axis, **kwargs), constants, (3, 5, 24), dtype, ("y", "z") if kwargs.get("extra_reader") else ("y",)
    )
    model.graph.initializer.append(numpy_helper.from_array(np.array([axis], np.int64), "axes"))
    return model


@pytest.mark.parametrize(("affine", "square"), [(True, "pow"), (True, "mul"), (False, "pow")])
def test_decomposed_layer_norm_becomes_normalization(affine: bool, square: str, monkeypatch) -> None:
    x = RNG.normal(2, 3, (3, 5, 24)).astype(np.float32)
    fused, _, got, want = _both(_ln_model(affine=affine, square=square), monkeypatch, x)
    assert _kinds(fused) == ["normalization"]
    (layer,) = _computing(fused)
    assert layer.name.startswith("LayerNorm [") and layer.params["mode"] == "layer" and layer.params["axis"] == 2
    assert layer.params["has_bias"] is affine
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("numpy_kernels")  # bit-exact against the unfused NumPy layers
def test_layer_norm_over_another_axis_does_not_fuse(monkeypatch) -> None:
    x = RNG.normal(0, 1, (3, 5, 24)).astype(np.float32)
    fused, _, got, want = _both(_ln_model(axis=1), monkeypatch, x)
    assert "normalization" not in _kinds(fused)
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.usefixtures("numpy_kernels")  # bit-exact against the unfused NumPy layers
def test_layer_norm_with_a_centred_value_read_elsewhere_does_not_fuse(monkeypatch) -> None:
    x = RNG.normal(0, 1, (3, 5, 24)).astype(np.float32)
    fused, _, got, want = _both(_ln_model(extra_reader=True), monkeypatch, x)
    assert "normalization" not in _kinds(fused)
    np.testing.assert_array_equal(got["z"], want["z"])
    np.testing.assert_array_equal(got["y"], want["y"])


def test_layer_norm_in_half(monkeypatch) -> None:
    x = RNG.normal(0, 1, (3, 5, 24)).astype(np.float16)
    fused, _, got, want = _both(_ln_model(np.float16), monkeypatch, x)
    assert _kinds(fused) == ["normalization"]
    np.testing.assert_allclose(got["y"].astype(np.float32), want["y"].astype(np.float32), rtol=2e-3, atol=2e-3)


def _chain_model(shape, dtype=np.float32, split: bool = False):
    channels = shape[1]
    nodes = [
        n("Add", ["x", "bias"], ["a"]),
        n("Relu", ["a"], ["b"]),
        n("Mul", ["b", "scale"], ["c"]),
        n("Sub", ["c", "x"], ["d"]),  # the chain's own input as an operand
        n("Sigmoid", ["d"], ["e"]),
        n("Mul", ["e", "e"], ["y"]),
    ]
    outputs = ("y", "c") if split else ("y",)
    constants = {"bias": RNG.normal(0, 1, (1, channels, 1, 1)), "scale": np.full((1, 1, 1, 1), 1.5)}
    return _model(nodes, constants, shape, dtype, outputs)


@pytest.mark.usefixtures("numpy_kernels")  # bit-exact against the unfused NumPy layers
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (2, 16, 96, 80)])  # one block; many blocks on two threads
def test_elementwise_chain_is_one_layer_and_bit_identical(shape, dtype, monkeypatch) -> None:
    x = RNG.normal(0, 2, shape).astype(dtype)
    fused, _, got, want = _both(_chain_model(shape, dtype), monkeypatch, x)
    assert _kinds(fused) == ["fused_elementwise"]
    (layer,) = _computing(fused)
    assert layer.name == "elementwise chain [Add_a/sum#2 .. Mul_y/prod#8, 6 layers]"
    assert [step.get("binary", step.get("activation")) for step in layer.params["steps"]] == [
        "SUM",
        "RELU",
        "PROD",
        "SUB",
        "SIGMOID",
        "PROD",
    ]
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.usefixtures("numpy_kernels")  # bit-exact against the unfused NumPy layers
def test_an_engine_output_in_the_middle_splits_the_chain(monkeypatch) -> None:
    x = RNG.normal(0, 2, (2, 3, 5, 7)).astype(np.float32)
    fused, _, got, want = _both(_chain_model((2, 3, 5, 7), split=True), monkeypatch, x)
    assert _kinds(fused) == ["fused_elementwise", "fused_elementwise"]  # up to c, then from c
    for name in ("y", "c"):
        np.testing.assert_array_equal(got[name], want[name])


def test_fused_layers_leave_no_constants_or_weights_behind(monkeypatch) -> None:
    fused = _build(_model(GELU_ERF_SPELLINGS["dynamo"], GELU_CONSTANTS, (2, 7, 33)), monkeypatch)
    plan = fused.engine.plan
    assert [layer.kind for layer in plan.layers] == ["activation"]
    assert plan.weights == {}  # 1.4142, 1 and 0.5 were read by the fused layers only
    assert [t.name for t in plan.tensors] == ["x", "y"]


def test_fused_layers_are_named_in_the_inspector(monkeypatch) -> None:
    fused = _build(_model(GELU_ERF_SPELLINGS["dynamo"], GELU_CONSTANTS, (2, 7, 33)), monkeypatch)
    info = fused.engine.create_engine_inspector().layer_info(0)
    assert info["name"] == "GELU_ERF [Div_a/div#2 .. Mul_y/prod#8, 5 layers]"
    assert info["kind"] == "activation"


def test_disabling_passes_by_name(monkeypatch) -> None:
    model = _model(GELU_ERF_SPELLINGS["dynamo"], GELU_CONSTANTS, (2, 7, 33))
    only_chains = _build(model, monkeypatch, "gelu")
    assert _kinds(only_chains) == ["fused_elementwise"]
    kept_constants = _build(model, monkeypatch, "gelu,elementwise_chain,dead_layers")
    assert [layer.kind for layer in kept_constants.engine.plan.layers].count("constant") == 3
    assert disabled_passes("all") >= {"gelu", "layer_norm", "elementwise_chain", "dead_layers"}
    assert disabled_passes(" gelu , layer_norm ") == {"gelu", "layer_norm"}


def test_an_unknown_pass_name_raises(monkeypatch) -> None:
    with pytest.raises(BuildError, match=r"PLUGRT_DISABLE_PASSES names unknown passes \['gleu'\]"):
        disabled_passes("gleu")
    monkeypatch.setenv(DISABLE_ENV, "gleu")
    with pytest.raises(BuildError, match="unknown passes"):
        plugrt.compile(_model(GELU_ERF_SPELLINGS["dynamo"], GELU_CONSTANTS, (2, 7, 33)))


def test_the_graph_maps_kept_by_each_rewrite_are_those_of_a_full_index(monkeypatch):
    """The optimizer updates who produces and reads each tensor at a rewrite instead of re-indexing."""
    from plugrt.builder.passes.graph import LayerGraph

    checked = []
    apply, remove = LayerGraph.apply, LayerGraph.remove

    def check(graph: LayerGraph) -> None:
        kept = (dict(graph.producer), {k: sorted(v) for k, v in graph.readers.items()})
        graph._index()
        assert kept == (graph.producer, {k: sorted(v) for k, v in graph.readers.items()})
        checked.append(True)

    def checked_apply(graph: LayerGraph, fusion) -> bool:
        made = apply(graph, fusion)
        check(graph)
        return made

    def checked_remove(graph: LayerGraph, step: int) -> None:
        remove(graph, step)
        check(graph)

    monkeypatch.setattr(LayerGraph, "apply", checked_apply)
    monkeypatch.setattr(LayerGraph, "remove", checked_remove)
    w = RNG.standard_normal((8, 8)).astype(np.float32)
    bias = RNG.standard_normal(8).astype(np.float32)
    nodes = [n("MatMul", ["x", "w"], ["xw"]), n("Add", ["xw", "bias"], ["g"])] + [
        n(node.op_type, [{"x": "g"}.get(i, i) for i in node.input], list(node.output))
        for node in GELU_ERF_SPELLINGS["dynamo"]
    ]
    model = _model(nodes, {**GELU_CONSTANTS, "w": w, "bias": bias}, (2, 3, 8))
    x = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    fused, plain, got, want = _both(model, monkeypatch, x)
    assert len(checked) >= 3  # bias pair, GELU, then dead constants
    assert "activation" in _kinds(fused) and len(_kinds(fused)) < len(_kinds(plain))
    np.testing.assert_allclose(got["y"], want["y"], rtol=2e-6, atol=1e-6)


def test_a_gelu_after_a_chain_stays_its_own_layer(monkeypatch) -> None:
    # wav2vec2's group norm affine then GELU: the Mul and Add fuse, the GELU keeps its activation layer (and tactics)
    nodes = [n("Mul", ["x", "scale"], ["s"]), n("Add", ["s", "shift"], ["t"])]
    nodes += [
        n(node.op_type, [{"x": "t"}.get(i, i) for i in node.input], list(node.output))
        for node in GELU_ERF_SPELLINGS["dynamo"]
    ]
    constants = {**GELU_CONSTANTS, "scale": RNG.normal(size=(1, 7, 1)), "shift": RNG.normal(size=(1, 7, 1))}
    model = _model(nodes, constants, (2, 7, 33))
    x = RNG.normal(0, 3, (2, 7, 33)).astype(np.float32)
    fused, _, got, want = _both(model, monkeypatch, x)
    assert _kinds(fused) == ["fused_elementwise", "activation"]
    assert "2 layers" in _computing(fused)[0].name and _computing(fused)[1].params["type"] == "GELU_ERF"
    np.testing.assert_allclose(got["y"], want["y"], rtol=2e-6, atol=1e-6)
