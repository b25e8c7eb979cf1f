"""Real exports' shape arithmetic in a CUDA graph: shape tensors are computed on the host.

``Shape -> Gather -> Concat -> Reshape`` and integer arithmetic on shape values feeding Slice,
Range, Reshape and Expand (the exporters' patterns, ``tests/export_graphs.py``) capture into a
graph and replay with the same results as the CPU, across shape changes; and a transformer
block exported by ``torch.onnx.export`` does too, against PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import plugrt as trt

from export_graphs import bert_attention_reshape, conv_length_chain
from gpu_helpers import run_plan

pytestmark = pytest.mark.gpu


def _plan(model: object, shapes: dict[str, tuple[tuple[int, ...], ...]], device: str = "cuda") -> bytes:
    compiled = trt.compile(model, shapes=shapes, device=device)
    return bytes(compiled.engine.serialize())


@pytest.mark.parametrize("graph", [False, True])
def test_head_split_and_merge_captures_and_matches_the_cpu(graph: bool) -> None:
    shapes = {"x": ((1, 2, 768), (1, 16, 768), (4, 64, 768))}
    plan = _plan(bert_attention_reshape(), shapes)
    cpu_plan = _plan(bert_attention_reshape(), shapes, "cpu")
    for batch, seq in ((2, 7), (4, 64), (1, 3)):
        x = np.random.default_rng(seq).standard_normal((batch, seq, 768)).astype(np.float32)
        got = run_plan(plan, "cuda", {"x": x}, graph=graph)["y"]
        want = run_plan(cpu_plan, "cpu", {"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_length_arithmetic_feeding_slice_range_and_expand_captures() -> None:
    shapes = {"audio": ((2, 20), (2, 100), (2, 4000))}
    plan = _plan(conv_length_chain(), shapes)
    cpu_plan = _plan(conv_length_chain(), shapes, "cpu")
    for samples in (23, 3999, 100):
        audio = np.arange(2 * samples, dtype=np.float32).reshape(2, samples)
        got = run_plan(plan, "cuda", {"audio": audio}, graph=True)
        want = run_plan(cpu_plan, "cpu", {"audio": audio})
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


def _torch_block(torch: Any) -> Any:
    """A pre-norm transformer block as users write it: heads split with sizes read from ``x.shape``."""

    class Block(torch.nn.Module):
        def __init__(self, dim: int = 256, heads: int = 8) -> None:
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
            self.qkv, self.out = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
            self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

        def forward(self, x: Any) -> Any:
            b, s, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
            x = x + self.out((att @ v).transpose(1, 2).reshape(b, s, d))
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))

    return Block().eval()


def test_a_torch_exported_transformer_block_captures(tmp_path: Any) -> None:
    torch = pytest.importorskip("torch")
    import onnx

    torch.manual_seed(0)
    block = _torch_block(torch)
    x = torch.randn(2, 32, 256)
    path = f"{tmp_path}/block.onnx"
    torch.onnx.export(block, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "B", 1: "S"}, "y": {0: "B", 1: "S"}}, dynamo=False)  # fmt: skip
    model = onnx.load(path)
    assert {"Shape", "Reshape"} <= {n.op_type for n in model.graph.node}
    plan = _plan(model, {"x": ((1, 1, 256), (2, 32, 256), (4, 64, 256))})
    for batch, seq in ((2, 32), (4, 17)):
        x = torch.randn(batch, seq, 256)
        with torch.no_grad():
            want = block(x).numpy()
        got = run_plan(plan, "cuda", {"x": x.numpy()}, graph=True)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
