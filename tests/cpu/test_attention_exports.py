"""Attention as PyTorch exports it from ``nn.MultiheadAttention`` (random weights, both exporters): the fused
engine has one ``attention`` layer per block and gives the unfused engine's results (``PLUGRT_DISABLE_PASSES=all``)
within 1e-5 of the output's scale, and onnxruntime's; with the TorchScript exporter q, k and v are read as views
of the packed input projection (``builder/passes/view_chains.py``): no Gather, Squeeze or transpose of theirs is
left to run."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import plugrt
from plugrt.builder.fusion import DISABLE_ENV

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow


class _Block(torch.nn.Module):
    """A pre-norm self-attention block, batch first, as ``benchmarks/_gpu_models.py`` exports it (smaller)."""

    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.attn = torch.nn.MultiheadAttention(width, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        return x + self.attn(h, h, h, need_weights=False)[0]


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    torch.manual_seed(0)
    module, example = _Block().eval(), torch.randn(2, 6, 32)
    folder = tmp_path_factory.mktemp("mha")
    paths = {}
    for exporter in ("torchscript", "dynamo"):
        path = str(folder / f"{exporter}.onnx")
        try:  # grad mode on: under no_grad the block takes the fused fast path, which has no ONNX export
            with torch.enable_grad():
                torch.onnx.export(
                    module, (example,), path, input_names=["x"], output_names=["y"],
                    dynamic_axes={"x": {0: "batch"}} if exporter == "torchscript" else None,
                    dynamo=exporter == "dynamo", opset_version=17 if exporter == "torchscript" else 18,
                )  # fmt: skip
        except Exception as exc:  # the dynamo exporter needs onnxscript, absent or too new in some environments
            if exporter == "torchscript":
                raise
            paths[exporter] = f"skip: {type(exc).__name__}: {exc}"
            continue
        paths[exporter] = path
    return paths


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_multihead_attention_exports_fuse_and_match(exports: dict[str, str], exporter: str, monkeypatch) -> None:
    path = exports[exporter]
    if path.startswith("skip: "):
        pytest.skip(path[6:])
    x = np.random.default_rng(5).standard_normal((2, 6, 32)).astype(np.float32)
    monkeypatch.setenv(DISABLE_ENV, "all")
    want = plugrt.compile(path)(x=x)["y"]
    monkeypatch.setenv(DISABLE_ENV, "")
    fused = plugrt.compile(path)
    got = fused(x=x)["y"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(want).max()))
    np.testing.assert_allclose(got, ort.InferenceSession(path).run(None, {"x": x})[0], rtol=0, atol=1e-5 * 8)
    layers = fused.engine.plan.layers
    attention = [layer for layer in layers if layer.kind == "attention"]
    assert len(attention) == 1
    if exporter == "torchscript":  # the three read the projection's output; its split's Squeeze is gone
        source = attention[0].inputs[0]
        writer = next(layer for layer in layers if source in layer.outputs)
        assert writer.kind == "matrix_multiply" and set(attention[0].inputs[:3]) == {source}
        assert [attention[0].params[f"select_{x}"][1::2] for x in "abv"] == [[0], [1], [2]]
        assert "squeeze" not in [layer.kind for layer in layers]
