"""Channels-last runs: convolutions that take the channels-last PyTorch kernel hand over HWC tensors
(``builder/layouts.py``), with the NumPy engine's results; the scalar affine map after a convolution's
activation folded into its epilogue (``conv_scale_shift``)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.builder import layouts
from plugrt.core.types import TensorFormat
from plugrt.engine.plan import EnginePlan, LayerPlan
from plugrt.ops import torch_cpu

from testing_plugins import run

try:
    import torch
except ImportError:  # the tests that need it skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install 'plugrt[torch]')")


def _model(batch: object = 1, second_output: bool = False):
    """Convolutions in a row: 1x1 + ReLU, depthwise 3x3 stride 2 padded at the end only + Clip, 1x1, 1x1 with a
    residual + ReLU, 3x3 + hard-swish then a scalar Mul and Add, 1x1 + hard-sigmoid (not a oneDNN post-op)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def weight(name: str, shape: tuple[int, ...]) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name))
        return name

    def conv(x: str, y: str, c: int, m: int, k: int, group: int = 1, **attrs: object) -> None:
        w, b = weight(f"{y}_w", (m, c // group, k, k)), weight(f"{y}_b", (m,))
        nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], group=group, **attrs))

    conv("x", "c1", 8, 16, 1)
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    conv("r1", "c2", 16, 16, 3, group=16, strides=[2, 2], pads=[0, 0, 1, 1])
    nodes.append(helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]))
    inits += [
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
    ]
    conv("r2", "c3", 16, 16, 1)
    conv("c3", "c4", 16, 16, 1)
    nodes.append(helper.make_node("Add", ["c4", "c3"], ["s4"]))
    nodes.append(helper.make_node("Relu", ["s4"], ["r4"]))
    conv("r4", "c5", 16, 16, 3, pads=[1, 1, 1, 1])
    nodes.append(helper.make_node("HardSwish", ["c5"], ["h5"]))
    inits += [
        numpy_helper.from_array(np.array([1.3], np.float32), "a"),
        numpy_helper.from_array(np.array([-0.2], np.float32), "b"),
    ]
    nodes.append(helper.make_node("Mul", ["h5", "a"], ["m5"]))
    nodes.append(helper.make_node("Add", ["m5", "b"], ["a5"]))
    conv("a5", "c6", 16, 8, 1)
    nodes.append(helper.make_node("HardSigmoid", ["c6"], ["y"], alpha=0.2, beta=0.5))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 8, 5, 6])]
    if second_output:  # read by the caller: stays LINEAR, the run is cut there
        outputs.append(helper.make_tensor_value_info("r4", TensorProto.FLOAT, [batch, 16, 5, 6]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 10, 12])], outputs, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _graph_model(nodes, inits, x_dims):  # type: ignore[no-untyped-def]
    """An opset-17 model of ``nodes`` reading FLOAT ``x`` of ``x_dims``, giving ``y``."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _x(batch: int = 1) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 8, 10, 12)).astype(np.float32)


def _compile(monkeypatch: pytest.MonkeyPatch, switch: str, model=None, **kwargs):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PLUGRT_TORCH", switch)
    return plugrt.compile(model if model is not None else _model(), device="cpu", **kwargs)


@needs_torch
@pytest.mark.parametrize("second_output", [False, True])
def test_a_channels_last_run_matches_the_numpy_engine(monkeypatch, second_output):
    model = _model(second_output=second_output)
    numpy_engine = _compile(monkeypatch, "0", model)
    engine = _compile(monkeypatch, "nhwc", model)
    plan = engine.engine.plan
    convs = [layer for layer in plan.layers if layer.kind == "convolution"]
    assert len(convs) == 6 and all(layer.tactic == torch_cpu.CHANNELS_LAST_TACTIC for layer in convs)
    stored = {t.name for t in plan.tensors if t.format == TensorFormat.HWC}
    assert stored == ({"r1", "r2", "c3", "a5"} if second_output else {"r1", "r2", "c3", "r4", "a5"})
    assert all(plan.tensors[i].format == TensorFormat.LINEAR for i in plan.io)
    x = _x()
    got, want = engine(x=x), numpy_engine(x=x)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


@needs_torch
def test_handed_over_tensors_are_released_after_their_last_reader(monkeypatch):
    """A channels-last run leaves its results in hand-over slots; the executor empties each slot once the tensor's
    last reader ran, so after a call no slot of the run holds a tensor, and calls after it still match."""
    from plugrt.ops import hand_over

    model = _model()
    numpy_engine = _compile(monkeypatch, "0", model)
    engine = _compile(monkeypatch, "nhwc", model)
    for seed in (1, 2, 3):
        x = _x(seed)[:1]
        got, want = engine(x=x), numpy_engine(x=x)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
        slots = list(hand_over._SLOTS.values())
        assert slots and all(slot.tensor is None for slot in slots)


@needs_torch
def test_the_scalar_affine_after_the_activation_folds_into_the_convolution(monkeypatch):
    x = _x()
    for switch in ("0", "always"):
        fused = _compile(monkeypatch, switch)
        monkeypatch.setenv("PLUGRT_DISABLE_PASSES", "conv_scale_shift")
        unfused = _compile(monkeypatch, switch)
        monkeypatch.delenv("PLUGRT_DISABLE_PASSES")
        folded = [layer for layer in fused.engine.plan.layers if "post_scale" in layer.params]
        assert len(folded) == 1 and np.isclose(folded[0].params["post_scale"], 1.3)
        assert np.isclose(folded[0].params["post_shift"], -0.2)
        assert not any("post_scale" in layer.params for layer in unfused.engine.plan.layers)
        chains = ("elementwise", "fused_elementwise")
        assert not any(layer.kind in chains for layer in fused.engine.plan.layers)
        assert any(layer.kind in chains for layer in unfused.engine.plan.layers)  # the Mul + Add chain
        got, want = fused(x=x)["y"], unfused(x=x)["y"]
        if switch == "0":
            np.testing.assert_array_equal(got, want)  # NumPy: the multiply, then the add, as the layers
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # torch: one pass, within an ulp


@needs_torch
def test_a_channels_last_plan_runs_with_numpy_where_torch_is_off(monkeypatch):
    blob = _compile(monkeypatch, "nhwc").serialize()
    plan = EnginePlan.from_bytes(blob)
    assert any(t.format == TensorFormat.HWC for t in plan.tensors)
    x = _x()
    want = _compile(monkeypatch, "0")(x=x)["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "0")  # the layers run the NumPy kernel through linear copies
    engine = plugrt.Runtime(plugrt.Logger(plugrt.Logger.ERROR)).deserialize_cuda_engine(blob)
    context = engine.create_execution_context()
    y = np.empty((1, 8, 5, 6), np.float32)
    context.set_tensor_address("x", x.ctypes.data)
    context.set_tensor_address("y", y.ctypes.data)
    assert context.execute_async_v3(0)
    np.testing.assert_array_equal(y, want)


@needs_torch
def test_channels_last_kernels_follow_a_new_batch(monkeypatch):
    shapes = {"x": ((1, 8, 10, 12), (2, 8, 10, 12), (4, 8, 10, 12))}
    reference = _compile(monkeypatch, "0", _model("n"), shapes=shapes)
    engine = _compile(monkeypatch, "nhwc", _model("n"), shapes=shapes)  # runs with the switch it was built with
    for batch in (1, 3, 2):
        x = _x(batch)
        np.testing.assert_allclose(engine(x=x)["y"], reference(x=x)["y"], rtol=1e-5, atol=1e-5)


@needs_torch
@pytest.mark.parametrize(
    "size, kernel, stride, begin, end",
    [
        (10, 3, 2, 0, 1),
        (11, 3, 2, 0, 1),
        (9, 5, 1, 1, 3),
        (12, 3, 2, 1, 0),
        (7, 4, 3, 0, 2),
        (8, 3, 1, 1, 1),
        (9, 3, 1, 2, 0),
    ],
)
def test_symmetric_padding_then_a_crop_is_the_asymmetric_convolution(size, kernel, stride, begin, end):
    from plugrt.ops.spatial import Window
    from plugrt.ops.torch_channels_last import _symmetric_pads

    window = Window.from_params(
        {"kernel_shape": [kernel, kernel], "strides": [stride, stride], "pads": [begin, begin, end, end]}, "test"
    )
    sizes, begins, ends = window.resolve([size, size])
    pads, skip = _symmetric_pads(window, begins, ends)
    x, w = torch.randn(1, 2, size, size), torch.randn(3, 2, kernel, kernel)
    want = torch.nn.functional.conv2d(torch.nn.functional.pad(x, [begin, end, begin, end]), w, stride=stride)
    got = torch.nn.functional.conv2d(x, w, stride=stride, padding=pads)  # at least the wanted outputs, cropped
    got = got[:, :, skip[0] : skip[0] + sizes[0], skip[1] : skip[1] + sizes[1]]
    assert tuple(want.shape[2:]) == tuple(sizes)
    torch.testing.assert_close(got, want)


@needs_torch
def test_layers_left_out_of_the_channels_last_choice_keep_their_other_tactics(monkeypatch):
    monkeypatch.setattr(layouts, "_choose", lambda *args: set())
    plan = _compile(monkeypatch, "1").engine.plan
    assert all(layer.tactic != torch_cpu.CHANNELS_LAST_TACTIC for layer in plan.layers)
    assert all(t.format == TensorFormat.LINEAR for t in plan.tensors)
    monkeypatch.setattr(layouts, "_choose", lambda state, candidates, *args: {id(c) for c in candidates})
    plan = _compile(monkeypatch, "1").engine.plan
    assert sum(layer.tactic == torch_cpu.CHANNELS_LAST_TACTIC for layer in plan.layers) == 6
    assert sum(t.format == TensorFormat.HWC for t in plan.tensors) == 5


class _State:
    def __init__(self, times):  # type: ignore[no-untyped-def]
        self.tactic_times = times


def _chain(n: int) -> list[LayerPlan]:
    """Layers 0..n-1 in a row: layer k reads tensor k and writes tensor k + 1."""
    return [LayerPlan(f"l{k}", "convolution", [k], [k + 1]) for k in range(n)]


def test_the_choice_takes_a_slower_layer_between_faster_ones_and_leaves_a_lone_one(monkeypatch):
    """Three layers in a row; channels-last alone is faster for the first and last, not the middle. With
    reorders at the ends that cost little, the middle one joins (no reorders between them); with reorders
    that cost more than channels-last saves, none takes it."""
    layers = _chain(3)
    taken = {id(layer): ([0], [0]) for layer in layers}
    writer = {k + 1: (layer, 0) for k, layer in enumerate(layers)}
    readers = {k: [(layer, 0)] for k, layer in enumerate(layers)}
    readers[3] = []
    eligible = {1, 2}
    times = {layer.name: {0: 10.0, 1: 12.0, 2: 5.0} for layer in layers}
    times["l1"] = {0: 10.0, 1: 12.0, 2: 10.5}
    for reorder, expected in ((1.0, {0, 1, 2}), (20.0, set())):
        monkeypatch.setattr(
            layouts,
            "time_layer",
            lambda state, layer, variants, r=reorder: [
                times[layer.name][t] + (r * f.count(TensorFormat.LINEAR) if f else 0) for t, f in variants
            ],
        )
        chosen = layouts._choose(_State(times), layers, eligible, taken, writer, readers)
        assert {k for k, layer in enumerate(layers) if id(layer) in chosen} == expected


def _pool_model(ceil_mode: int = 0, pool: str = "MaxPool", **attrs: object):  # type: ignore[no-untyped-def]
    """A 3x3 convolution (ReLU), a padded 3x3 ``pool`` (stride 2 unless ``attrs`` say otherwise), a 1x1 convolution."""
    rng = np.random.default_rng(5)
    inits = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32), "w2"),
    ]
    window = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": ceil_mode, **attrs}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node(pool, ["r1"], ["p"], **window),
        helper.make_node("Conv", ["p", "w2"], ["y"], kernel_shape=[1, 1]),
    ]
    return _graph_model(nodes, inits, [2, 3, 12, 11])


@needs_torch
@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_max_pooling_between_channels_last_convolutions_stays_channels_last(monkeypatch, ceil_mode):
    model = _pool_model(ceil_mode)
    want_engine = _compile(monkeypatch, "0", model)
    engine = _compile(monkeypatch, "nhwc", model)  # runs with the switch it was built with
    plan = engine.engine.plan
    assert [layer.tactic for layer in plan.layers if layer.kind in ("convolution", "pooling")] == [2, 2, 2]
    assert sum(t.format == TensorFormat.HWC for t in plan.tensors) == 2  # the conv's output, the pooling's
    x = np.random.default_rng(6).standard_normal((2, 3, 12, 11)).astype(np.float32)
    np.testing.assert_allclose(engine(x=x)["y"], want_engine(x=x)["y"], rtol=1e-5, atol=1e-5)


def _global_pool_model(mode: str):  # type: ignore[no-untyped-def]
    """Two convolutions (ReLU), then global pooling (``mode``: Average or Max) of the second one's output."""
    rng = np.random.default_rng(8)
    inits = [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)
        for name, shape in (("w1", (16, 3, 3, 3)), ("w2", (24, 16, 1, 1)), ("b2", (24,)))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
        helper.make_node(f"Global{mode}Pool", ["c2"], ["y"]),
    ]
    return _graph_model(nodes, inits, ["n", 3, 9, 7])


@needs_torch
@pytest.mark.parametrize("mode", ["Average", "Max"])
def test_global_pooling_reads_the_last_convolution_channels_last(monkeypatch, mode):
    model, shapes = _global_pool_model(mode), {"x": ((1, 3, 9, 7), (2, 3, 9, 7), (2, 3, 9, 7))}
    want_engine = _compile(monkeypatch, "0", model, shapes=shapes)
    engine = _compile(monkeypatch, "nhwc", model, shapes=shapes)
    for batch in (2, 1):  # the second conv hands its result over (CPU); a new batch binds again
        x = np.random.default_rng(batch).standard_normal((batch, 3, 9, 7)).astype(np.float32)
        np.testing.assert_allclose(engine(x=x)["y"], want_engine(x=x)["y"], rtol=1e-5, atol=1e-5)
    plan = engine.engine.plan
    assert [layer.tactic for layer in plan.layers if layer.kind in ("convolution", "global_pooling")] == [2, 2, 2]
    assert {t.name for t in plan.tensors if t.format == TensorFormat.HWC} == {"r1", "c2"}


def _se_model(bias: bool = True):  # type: ignore[no-untyped-def]
    """A depthwise convolution, then an SE block (pool, 1x1 + ReLU, 1x1 + hard-sigmoid, Mul), then a 1x1."""
    rng = np.random.default_rng(7)

    def w(name: str, shape: tuple[int, ...]):  # type: ignore[no-untyped-def]
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)

    inits = [w("wd", (16, 1, 3, 3)), w("w1", (4, 16, 1, 1)), w("w2", (16, 4, 1, 1)), w("w3", (8, 16, 1, 1))]
    inits += [w("b1", (4,)), w("b2", (16,))]
    nodes = [
        helper.make_node("Conv", ["x", "wd"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=16),
        helper.make_node("GlobalAveragePool", ["d"], ["g"]),
        helper.make_node("Conv", ["g", "w1", *(["b1"] if bias else [])], ["s1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["s1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", *(["b2"] if bias else [])], ["s2"], kernel_shape=[1, 1]),
        helper.make_node("HardSigmoid", ["s2"], ["h2"], alpha=0.2, beta=0.5),
        helper.make_node("Mul", ["d", "h2"], ["e"]),
        helper.make_node("Conv", ["e", "w3"], ["y"], kernel_shape=[1, 1]),
    ]
    return _graph_model(nodes, inits, ["n", 16, 6, 20])


@pytest.mark.parametrize("switch", ["0", "always", "nhwc"])
@pytest.mark.parametrize("bias", [True, False])
def test_a_squeeze_excitation_block_runs_as_one_layer(monkeypatch, switch, bias):
    if switch != "0" and torch is None:
        pytest.skip("needs torch")
    shapes = {"x": ((1, 16, 6, 20), (2, 16, 6, 20), (3, 16, 6, 20))}
    fused = _compile(monkeypatch, switch, _se_model(bias), shapes=shapes)
    monkeypatch.setenv("PLUGRT_DISABLE_PASSES", "squeeze_excitation")
    unfused = _compile(monkeypatch, switch, _se_model(bias), shapes=shapes)
    monkeypatch.delenv("PLUGRT_DISABLE_PASSES")
    assert [layer.kind for layer in fused.engine.plan.layers] == ["convolution", "squeeze_excitation", "convolution"]
    assert "squeeze_excitation" not in [layer.kind for layer in unfused.engine.plan.layers]
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 16, 6, 20)).astype(np.float32)
        np.testing.assert_allclose(fused(x=x)["y"], unfused(x=x)["y"], rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("numpy_layers", [(), ("Conv_c3",), ("Conv_c2", "Conv_c4"), ("Conv_c1", "Conv_c5", "Conv_c6")])
def test_handed_over_tensors_meet_layers_that_run_numpy(monkeypatch, numpy_layers):
    """Channels-last layers hand their results over without writing the buffers; a layer whose channels-last
    kernel declines (here: forced to) runs NumPy through linear copies, reading a handed-over input and
    writing its output into the buffer for the next layer, run after run with new inputs."""
    from plugrt.ops import conv

    real = conv.convolution_channels_last
    declined: set[str] = set()

    def some_decline(op, *args):  # type: ignore[no-untyped-def]
        if any(op.name.startswith(name) for name in numpy_layers):
            declined.add(op.name.split("/")[0])
            return None
        return real(op, *args)

    monkeypatch.setattr(conv, "convolution_channels_last", some_decline)
    monkeypatch.setenv("PLUGRT_NUMBA", "0")  # the depthwise layer too reaches oneDNN's kernel (ops/depthwise_numba.py)
    monkeypatch.setenv("PLUGRT_ONEDNN", "0")  # through PyTorch's call (ops/onednn_conv.py comes first otherwise)
    reference = _compile(monkeypatch, "0")
    engine = _compile(monkeypatch, "nhwc")  # runs with the switch it was built with
    for seed in range(4):
        x = np.random.default_rng(10 + seed).standard_normal((1, 8, 10, 12)).astype(np.float32)
        np.testing.assert_allclose(engine(x=x)["y"], reference(x=x)["y"], rtol=1e-5, atol=1e-5)
    assert declined == set(numpy_layers)


@needs_torch
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("pads", [[1, 1, 1, 1], [0, 0, 1, 1]])
def test_the_convolution_kernel_on_hwc_views_matches_nchw(residual: bool, pads: list[int]) -> None:
    """``torch_cpu_kernels.convolution`` with HWC formats (the GPU's channels-last tactic: cuDNN's NHWC kernels on
    channels-last views) writes what it writes for NCHW tensors, here with PyTorch's CPU kernels."""
    from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel
    from plugrt.ops.torch_cpu_kernels import convolution

    rng = np.random.default_rng(3)
    kernel = (rng.standard_normal((8, 8, 3, 3)) * 0.3).astype(np.float32)
    op = ConvolutionOperator(
        {"num_output_maps": 8, "kernel_shape": [3, 3], "pads": pads, "strides": [2, 2], "residual": residual,
         "activation": "RELU"},
        {"kernel": pack_conv_kernel(kernel, 1), "bias": rng.standard_normal(8).astype(np.float32)},
    )  # fmt: skip
    x = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    size = (9 + pads[0] + pads[2] - 3) // 2 + 1
    extra = rng.standard_normal((2, 8, size, size)).astype(np.float32) if residual else None
    want = np.empty((2, 8, size, size), np.float32)
    op.prepare([x.shape, *([extra.shape] if residual else [])], [want.shape])
    run = convolution(op, x, None, None, want, extra)
    assert run is not None
    run()
    hwc = [TensorFormat.HWC] * (3 if residual else 2)
    x_hwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    extra_hwc = None if extra is None else np.ascontiguousarray(extra.transpose(0, 2, 3, 1))
    got = np.empty((2, size, size, 8), np.float32)
    run = convolution(op, x_hwc, None, None, got, extra_hwc, hwc)
    assert run is not None
    run()
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), want, rtol=1e-5, atol=1e-5)


def _fake_timing(monkeypatch, times, reorder):  # type: ignore[no-untyped-def]
    """Layers timed as ``times`` says, plus ``reorder`` for each LINEAR tensor a channels-last kernel takes."""
    monkeypatch.setattr(
        layouts,
        "time_layer",
        lambda state, layer, variants: [
            times[layer.name][t] + (reorder * f.count(TensorFormat.LINEAR) if f else 0) for t, f in variants
        ],
    )


def _chain_choice(times, reorder, monkeypatch):  # type: ignore[no-untyped-def]
    layers = _chain(len(times))
    taken = {id(layer): ([0], [0]) for layer in layers}
    writer = {k + 1: (layer, 0) for k, layer in enumerate(layers)}
    readers = {k: [(layer, 0)] for k, layer in enumerate(layers)}
    readers[len(layers)] = []
    eligible = set(range(1, len(layers)))
    _fake_timing(monkeypatch, times, reorder)
    chosen = layouts._choose(_State(times), layers, eligible, taken, writer, readers)
    return {k for k, layer in enumerate(layers) if id(layer) in chosen}


def test_a_run_that_pays_only_as_a_whole_is_taken(monkeypatch):
    """Five layers in a row: channels-last is much faster for the middle one alone, a little for the ends, no
    faster for the others. Moving one layer at a time from the fastest-alone set ends with none (each step
    pays more reorders than it saves); the whole row channels-last is cheaper than none, so it is taken."""
    cl = [9.0, 10.0, 5.0, 10.0, 9.0]
    times = {f"l{k}": {0: 10.0, 1: 12.0, 2: t} for k, t in enumerate(cl)}
    assert _chain_choice(times, 3.0, monkeypatch) == {0, 1, 2, 3, 4}


def test_a_much_slower_layer_leaves_the_run(monkeypatch):
    """The search from every candidate drops the one layer that is far slower channels-last: that
    configuration is more than the margin cheaper than every layer channels-last."""
    cl = [5.0, 5.0, 100.0, 5.0, 5.0]
    times = {f"l{k}": {0: 10.0, 1: 12.0, 2: t} for k, t in enumerate(cl)}
    assert _chain_choice(times, 1.0, monkeypatch) == {0, 1, 3, 4}


def test_every_layer_stays_channels_last_unless_another_choice_is_clearly_cheaper(monkeypatch):
    """Four layers, each a little slower channels-last alone than its other kernel, reorders free: none
    channels-last is cheaper, but by less than the margin, so every layer keeps the channels-last kernel."""
    times = {f"l{k}": {0: 10.0, 1: 12.0, 2: 10.5} for k in range(4)}
    assert _chain_choice(times, 0.0, monkeypatch) == {0, 1, 2, 3}
    times = {f"l{k}": {0: 10.0, 1: 12.0, 2: 12.0} for k in range(4)}
    assert _chain_choice(times, 0.0, monkeypatch) == set()


@needs_torch
@pytest.mark.parametrize(("pads", "strides"), [([0, 0, 1, 1], [2, 2]), ([2, 0, 0, 1], [1, 1])], ids=["tf-same", "mixed"])
def test_a_linear_input_with_uneven_padding_is_staged_bordered(pads: list[int], strides: list[int]) -> None:
    """A run's first convolution reads a LINEAR input; with uneven padding (TensorFlow's "same" at stride 2) it is
    copied into the interior of a zero-bordered channels-last buffer and convolved unpadded, so the result is the
    output itself, handed over, with no crop copied out (MobileNetV2's first layer: 214 -> 177 us)."""
    from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel
    from plugrt.ops.hand_over import hand_over
    from plugrt.ops.torch_channels_last import convolution_channels_last
    from plugrt.ops.torch_cpu_kernels import convolution

    rng = np.random.default_rng(7)
    kernel = (rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32)
    op = ConvolutionOperator(
        {"num_output_maps": 16, "kernel_shape": [3, 3], "pads": pads, "strides": strides, "activation": "CLIP",
         "activation_alpha": 0.0, "activation_beta": 6.0},
        {"kernel": pack_conv_kernel(kernel, 1), "bias": rng.standard_normal(16).astype(np.float32)},
    )  # fmt: skip
    x = rng.standard_normal((2, 3, 11, 13)).astype(np.float32)
    sizes = [(n + pads[a] + pads[a + 2] - 3) // strides[a] + 1 for a, n in enumerate(x.shape[2:])]
    want = np.empty((2, 16, *sizes), np.float32)
    op.prepare([x.shape], [want.shape])
    reference = convolution(op, x, None, None, want)
    assert reference is not None
    reference()
    buffer = np.full((2, *sizes, 16), np.nan, np.float32)
    run = convolution_channels_last(op, x, buffer, None, [TensorFormat.LINEAR, TensorFormat.HWC])
    assert run is not None
    for _ in range(2):  # the border stays zero from call to call
        run()
        handed = hand_over(buffer).tensor
        assert handed is not None, "the result was cropped and copied, not handed over"
        np.testing.assert_allclose(handed.numpy(), want, rtol=1e-5, atol=1e-5)


def _fire_model(linear_branch: bool = False):  # type: ignore[no-untyped-def]
    """A SqueezeNet fire module: a 1x1 squeeze (ReLU), a 1x1 and a 3x3 expand (ReLU) joined along the channels,
    then a 1x1 convolution; with ``linear_branch`` a third input of the join is an Add of the squeeze and an input
    (an elementwise layer: LINEAR)."""
    rng = np.random.default_rng(9)
    shapes = {"ws": (6, 5, 1, 1), "we1": (8, 6, 1, 1), "we3": (7, 6, 3, 3), "wy": (4, 15 + 6 * linear_branch, 1, 1)}
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.4).astype(np.float32), n) for n, s in shapes.items()]
    nodes = [
        helper.make_node("Conv", ["x", "ws"], ["s"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["s"], ["rs"]),
        helper.make_node("Conv", ["rs", "we1"], ["e1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["e1"], ["r1"]),
        helper.make_node("Conv", ["rs", "we3"], ["e3"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["e3"], ["r3"]),
        helper.make_node("Concat", ["r1", "r3", *(["moved"] if linear_branch else [])], ["joined"], axis=1),
        helper.make_node("Conv", ["joined", "wy"], ["y"], kernel_shape=[1, 1]),
    ]
    if linear_branch:
        nodes.insert(2, helper.make_node("Add", ["rs", "z"], ["moved"]))
    graph = helper.make_graph(
        nodes,
        "fire",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5, 9, 11])]
        + [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 6, 9, 11])] * linear_branch,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_torch
@pytest.mark.parametrize("linear_branch", [False, True])
def test_a_concatenation_of_channels_keeps_the_run_channels_last(monkeypatch, linear_branch):
    """The join of a fire module takes its channels-last inputs as they are and writes its output HWC for the next
    convolution; an input stored LINEAR (an elementwise layer's) is read in its layout; results as NumPy's."""
    model = _fire_model(linear_branch)
    shapes = {"x": ((1, 5, 9, 11), (2, 5, 9, 11), (3, 5, 9, 11))}
    if linear_branch:
        shapes["z"] = ((1, 6, 9, 11),) * 3
    want_engine = _compile(monkeypatch, "0", model, shapes=shapes)
    engine = _compile(monkeypatch, "nhwc", model, shapes=shapes)
    plan = engine.engine.plan
    joins = [layer for layer in plan.layers if layer.kind == "concatenation"]
    assert len(joins) == 1 and joins[0].tactic == torch_cpu.CHANNELS_LAST_TACTIC
    formats = [plan.tensors[i].format for i in (*joins[0].inputs, *joins[0].outputs)]
    assert formats == [TensorFormat.HWC] * 2 + [TensorFormat.LINEAR] * linear_branch + [TensorFormat.HWC]
    rng = np.random.default_rng(10)
    for batch in (2, 3, 2):
        feeds = {"x": rng.standard_normal((batch, 5, 9, 11)).astype(np.float32)}
        if linear_branch:
            feeds["z"] = rng.standard_normal((1, 6, 9, 11)).astype(np.float32)
        np.testing.assert_allclose(engine(**feeds)["y"], want_engine(**feeds)["y"], rtol=1e-5, atol=1e-5)


@needs_torch
def test_a_concatenation_never_takes_the_linear_pytorch_tactic(monkeypatch):
    """On linear tensors NumPy's concatenate copies as fast as torch's: only the own kernel and the channels-last
    one are offered (none but the own kernel where PyTorch is forced: ``PLUGRT_TORCH=always``)."""
    from plugrt.core.types import DataType
    from plugrt.ops.concatenation import ConcatenationOperator

    op = ConcatenationOperator({"axis": 1})
    types, shapes = [DataType.FLOAT] * 2, [(1, 4, 5, 6), (1, 3, 5, 6)]
    monkeypatch.setenv("PLUGRT_TORCH", "1")
    assert op.tactics(types, shapes, [False, False]) == [torch_cpu.NUMPY_TACTIC, torch_cpu.CHANNELS_LAST_TACTIC]
    assert ConcatenationOperator({"axis": 2}).tactics(types, shapes, [False, False]) == [torch_cpu.NUMPY_TACTIC]
    assert op.tactics(types, [(4, 5), (3, 5)], [False, False]) == [torch_cpu.NUMPY_TACTIC]
    monkeypatch.setenv("PLUGRT_TORCH", "always")
    assert op.tactics(types, shapes, [False, False]) == [torch_cpu.NUMPY_TACTIC]


@needs_torch
def test_a_channels_last_concatenation_runs_with_numpy_where_torch_is_off(monkeypatch):
    shapes = {"x": ((2, 5, 9, 11),) * 3}
    blob = _compile(monkeypatch, "nhwc", _fire_model(), shapes=shapes).serialize()
    x = np.random.default_rng(11).standard_normal((2, 5, 9, 11)).astype(np.float32)
    want = _compile(monkeypatch, "0", _fire_model(), shapes=shapes)(x=x)["y"]
    monkeypatch.setenv("PLUGRT_TORCH", "0")  # every layer the NumPy kernel, through linear copies of HWC tensors
    engine = plugrt.Runtime(plugrt.Logger(plugrt.Logger.ERROR)).deserialize_cuda_engine(blob)
    assert any(layer.kind == "concatenation" and layer.tactic == 2 for layer in engine.plan.layers)
    np.testing.assert_allclose(run(engine.create_execution_context(), {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pooling_between_channels_last_convolutions_stays_channels_last(monkeypatch, count_include_pad):
    """An Inception branch's 3x3 average pooling (stride 1, padded) between channels-last convolutions pools the
    HWC tensor as it is, counting the padding or not as ONNX says; results as NumPy's."""
    model = _pool_model(pool="AveragePool", strides=[1, 1], count_include_pad=count_include_pad)
    want_engine = _compile(monkeypatch, "0", model)
    engine = _compile(monkeypatch, "nhwc", model)
    plan = engine.engine.plan
    assert [layer.tactic for layer in plan.layers if layer.kind in ("convolution", "pooling")] == [2, 2, 2]
    assert sum(t.format == TensorFormat.HWC for t in plan.tensors) == 2  # the conv's output, the pooling's
    x = np.random.default_rng(13).standard_normal((2, 3, 12, 11)).astype(np.float32)
    np.testing.assert_allclose(engine(x=x)["y"], want_engine(x=x)["y"], rtol=1e-5, atol=1e-5)


@needs_torch
def test_average_pooling_in_ceil_mode_keeps_its_own_kernel(monkeypatch) -> None:
    from plugrt.core.types import DataType
    from plugrt.ops.pooling import PoolingOperator

    monkeypatch.setenv("PLUGRT_ONEDNN", "0")  # oneDNN's pooling takes ceil mode (tests/unit/test_onednn_pooling.py)
    params = {"mode": "AVERAGE", "kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": True}
    op = PoolingOperator(params)
    assert not op.channels_last_supports([DataType.FLOAT], [(1, 4, 9, 9)], [False])
    assert PoolingOperator({**params, "ceil_mode": False}).channels_last_supports([DataType.FLOAT], [(1, 4, 9, 9)], [False])
