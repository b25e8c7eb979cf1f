"""The optimizer on graphs torch exports: small BERT, GPT-2 and ViT configs (random weights) and a
hand-written LayerNorm module, each through the dynamo exporter (opset 18) and the TorchScript
exporter (opset 17).

Each engine is compared with the one built with ``PLUGRT_DISABLE_PASSES=all`` on the same
inputs, to 1e-5 relative to the output's largest value (the GELU and LayerNorm kernels round
differently from the layers they replace: measured up to 1.1e-7 relative here), and the fused
layers are counted.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import plugrt
from plugrt.builder.fusion import DISABLE_ENV

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow


class _Hidden(torch.nn.Module):
    """A transformers model returning its last hidden state (the TorchScript exporter needs plain outputs)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).last_hidden_state


class _WrittenOutLayerNorm(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(width))
        self.bias = torch.nn.Parameter(torch.randn(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        variance = (x - mean).pow(2).mean(-1, keepdim=True)
        return self.weight * ((x - mean) / torch.sqrt(variance + 1e-5)) + self.bias


def _module(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    small = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 32, "intermediate_size": 64}
    if name == "bert":
        model = transformers.BertModel(transformers.BertConfig(vocab_size=100, **small))
        return _Hidden(model), torch.randint(0, 100, (2, 8))
    if name == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64)
        return _Hidden(transformers.GPT2Model(config)), torch.randint(0, 100, (2, 8))
    if name == "vit":
        config = transformers.ViTConfig(image_size=32, patch_size=8, **small)
        return _Hidden(transformers.ViTModel(config)), torch.randn(2, 3, 32, 32)
    return _WrittenOutLayerNorm(48), torch.randn(2, 5, 48)


#: (model, fused layer name prefix, how many in the model)
CASES = [
    ("bert", "GELU_ERF [", 2),
    ("gpt2", "GELU_TANH [", 2),
    ("vit", "GELU_ERF [", 2),
    ("layer_norm", "LayerNorm [", 1),
]


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    try:
        import onnxscript  # noqa: F401  (the dynamo exporter's)
    except Exception as exc:  # absent, or too new for this environment's ml_dtypes (the NumPy 1 run)
        pytest.skip(f"torch's dynamo exporter cannot import onnxscript here: {type(exc).__name__}: {exc}")
    folder = tmp_path_factory.mktemp("exports")
    paths = {}
    for name, _, _ in CASES:
        module, example = _module(name)
        for exporter in ("dynamo", "torchscript"):
            path = str(folder / f"{name}-{exporter}.onnx")
            with torch.no_grad():
                if exporter == "dynamo":
                    torch.onnx.export(module.eval(), (example,), path, dynamo=True, opset_version=18)
                else:
                    torch.onnx.export(module.eval(), (example,), path, dynamo=False, opset_version=17)
            paths[(name, exporter)] = path
    return paths


def _feeds(path: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    feeds = {}
    for value in onnx.load(path).graph.input:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[value.name] = rng.integers(0, 100, dims).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _plain_and_fused(path: str, monkeypatch) -> tuple:
    """The engine of ``path`` built with every pass off, and with them on."""
    monkeypatch.setenv(DISABLE_ENV, "all")
    plain = plugrt.compile(path)
    monkeypatch.setenv(DISABLE_ENV, "")
    return plain, plugrt.compile(path)


def _assert_same_results(plain, fused, feeds: dict[str, np.ndarray]) -> None:
    """The fused engine's outputs within 1e-5 of the largest value of the unfused one's."""
    want, got = plain(feeds), fused(feeds)
    for key, expected in want.items():
        scale = float(np.abs(expected).max())
        np.testing.assert_allclose(got[key], expected, rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize(("name", "prefix", "count"), CASES)
def test_exported_patterns_fuse_and_match_the_unfused_engine(
    exports: dict[tuple[str, str], str], name: str, prefix: str, count: int, exporter: str, monkeypatch
) -> None:
    path = exports[(name, exporter)]
    plain, fused = _plain_and_fused(path, monkeypatch)
    names = [layer.name for layer in fused.engine.plan.layers]
    assert sum(n.startswith(prefix) for n in names) == count, names
    assert len(names) < len(plain.engine.plan.layers)
    _assert_same_results(plain, fused, _feeds(path))


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize(("name", "kept"), [("bert", False), ("gpt2", True), ("vit", True)])
def test_residual_layer_norms_of_real_exports_match_the_unfused_engine(
    exports: dict[tuple[str, str], str], name: str, kept: bool, exporter: str, monkeypatch
) -> None:
    """The GPU-only ``residual_layer_norm`` rule applied here (as a plan built for a GPU runs on the CPU): BERT's
    post-LN sums are read by their norm alone, GPT-2's and ViT's pre-LN sums are kept for the next residual."""
    import dataclasses

    from plugrt.builder import fusion

    monkeypatch.setattr(fusion, "RULES", tuple(dataclasses.replace(rule, gpu_only=False) for rule in fusion.RULES))
    path = exports[(name, exporter)]
    plain, fused = _plain_and_fused(path, monkeypatch)
    norms = [layer for layer in fused.engine.plan.layers if layer.params.get("residual")]
    assert norms, [layer.name for layer in fused.engine.plan.layers]
    assert any(layer.params["keep_sum"] for layer in norms) is kept
    _assert_same_results(plain, fused, _feeds(path))
