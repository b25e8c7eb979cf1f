"""What a channels-last convolution does once, not at every bind: its kernel reordered for oneDNN is kept while
the shapes stay (``TorchOperator.derived_weight``; a context whose output moves at each call binds its last layer
again every time), and the copies between layouts (``torch_cpu_kernels.relayout``) are bit-identical to torch's."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt
from plugrt.ops import torch_cpu

try:
    import torch
except ImportError:  # the tests that need it skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install 'plugrt[torch]')")


def _model(batch: object = 1, maps: int = 32, size: object = 24):
    """Two 3x3 convolutions with ReLU; the second one's output, of more than 64 KiB, is the network's output (a
    new array at every call: that layer is bound again each time)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)
        for name, shape in (("w1", (maps, 8, 3, 3)), ("b1", (maps,)), ("w2", (maps, maps, 3, 3)), ("b2", (maps,)))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, maps, size, size])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_torch
def test_a_moving_output_does_not_reorder_the_kernel_again(monkeypatch):
    made: list[tuple[object, ...]] = []
    original = torch_cpu.TorchOperator.derived_weight

    def counted(self, name, key, make):  # type: ignore[no-untyped-def]
        return original(self, name, key, lambda: made.append(key) or make())

    monkeypatch.setattr(torch_cpu.TorchOperator, "derived_weight", counted)
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    reference = plugrt.compile(_model(), device="cpu")
    monkeypatch.setenv("PLUGRT_TORCH", "nhwc")
    engine = plugrt.compile(_model(), device="cpu")
    x = np.random.default_rng(1).standard_normal((1, 8, 24, 24)).astype(np.float32)
    first = engine(x=x)["y"]
    reordered = len(made)
    assert reordered == 2  # one kernel per convolution, at the first bind
    results = [engine(x=x)["y"] for _ in range(3)]  # a new output array each call: the last layer bound again
    assert len(made) == reordered
    assert all(r is not first and np.array_equal(r, first) for r in results)
    np.testing.assert_allclose(first, reference(x=x)["y"], rtol=1e-5, atol=1e-5)


@needs_torch
def test_a_new_shape_reorders_the_kernel_for_it(monkeypatch):
    monkeypatch.setenv("PLUGRT_TORCH", "0")
    shapes = {"x": ((1, 8, 8, 8), (1, 8, 24, 24), (2, 8, 32, 32))}
    reference = plugrt.compile(_model("n", size="s"), device="cpu", shapes=shapes)
    monkeypatch.setenv("PLUGRT_TORCH", "nhwc")
    engine = plugrt.compile(_model("n", size="s"), device="cpu", shapes=shapes)
    rng = np.random.default_rng(2)
    for shape in ((1, 8, 24, 24), (2, 8, 32, 32), (1, 8, 8, 8), (1, 8, 24, 24)):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(engine(x=x)["y"], reference(x=x)["y"], rtol=1e-5, atol=1e-5)


class _Operator(torch_cpu.TorchOperator):
    """Only for derived_weight: no kernels."""


def test_a_derived_weight_is_kept_per_name_for_the_last_key() -> None:
    op = _Operator({}, {})
    calls: list[str] = []

    def make(tag: str):  # type: ignore[no-untyped-def]
        return lambda: calls.append(tag) or tag

    assert op.derived_weight("kernel", (1, 2), make("a")) == "a"
    assert op.derived_weight("kernel", (1, 2), make("b")) == "a"  # the same key: kept
    assert op.derived_weight("other", (1, 2), make("c")) == "c"  # another name: its own
    assert op.derived_weight("kernel", (3, 4), make("d")) == "d"  # a new key replaces it
    assert op.derived_weight("kernel", (1, 2), make("e")) == "e"  # only the last key is kept
    assert calls == ["a", "c", "d", "e"]


@needs_torch
@pytest.mark.parametrize(
    "shape", [(1, 256, 64, 1), (1, 64, 1, 200), (2, 32, 40, 1), (1, 64, 32, 32), (3, 16, 24, 24), (1, 3, 224, 224)]
)
def test_copies_between_layouts_are_torchs_copies(shape):
    from plugrt.ops.torch_cpu_kernels import relayout

    source = torch.randn(shape)
    stored = torch.empty(shape).contiguous(memory_format=torch.channels_last)
    relayout(stored, source)  # to channels-last
    assert stored.is_contiguous(memory_format=torch.channels_last) and torch.equal(stored, source)
    back = torch.full(shape, float("nan"))
    relayout(back, stored)  # to contiguous
    assert torch.equal(back, source)


@needs_torch
def test_a_copy_into_a_strided_view_stays_a_plain_copy():
    """A target the per-image views could not reach (a slice of a larger tensor) gets torch's own copy."""
    from plugrt.ops.torch_cpu_kernels import relayout

    source = torch.randn(1, 64, 40, 40).contiguous(memory_format=torch.channels_last)
    whole = torch.zeros(1, 64, 40, 41)
    target = whole[..., :40]
    relayout(target, source)
    assert torch.equal(target, source) and torch.equal(whole[..., 40], torch.zeros(1, 64, 40))
    cropped = torch.randn(1, 64, 42, 42).contiguous(memory_format=torch.channels_last)[:, :, 1:41, 1:41]
    out = torch.empty(1, 64, 40, 40)
    relayout(out, cropped)
    assert torch.equal(out, cropped)
