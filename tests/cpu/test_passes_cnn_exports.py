"""The convolution rules on CNN blocks torch exports (dynamo exporter at opset 18, TorchScript at opset 17):
MobileNetV3's hard-swish, squeeze-excite and inverted residual, and ResNet's basic block.

Each engine is compared with the one built with ``PLUGRT_DISABLE_PASSES=all`` on the same input, and
with torch's own output, to 1e-5 of the output's largest value (the folded kernels and the
hard-swish kernel round differently from the layers they replace); the epilogues the
convolutions took are counted.
"""

from __future__ import annotations

import numpy as np
import pytest

import plugrt
from plugrt.builder.fusion import DISABLE_ENV

torch = pytest.importorskip("torch")
nn = torch.nn

pytestmark = pytest.mark.slow


class _MobileBlock(nn.Module):
    """Stem conv + BN + hard-swish; an inverted residual with ReLU6, squeeze-excite and its shortcut."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(16, 48, 1, bias=False), nn.BatchNorm2d(48), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(48, 48, 3, 1, 1, groups=48, bias=False), nn.BatchNorm2d(48))
        self.squeeze = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Conv2d(48, 8, 1), nn.ReLU(), nn.Conv2d(8, 48, 1), nn.Hardsigmoid()
        )
        self.project = nn.Sequential(nn.Conv2d(48, 16, 1, bias=False), nn.BatchNorm2d(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stem = self.stem(x)
        hidden = nn.functional.hardswish(self.depthwise(self.expand(stem)))
        return stem + self.project(hidden * self.squeeze(hidden))


class _BasicBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 1, 1)
        self.one = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.two = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stem = self.stem(x)
        return torch.relu(self.two(self.one(stem)) + stem)


def _randomize(module: nn.Module) -> nn.Module:
    """Batch-norm statistics away from the identity, so folding them matters."""
    for layer in module.modules():
        if isinstance(layer, nn.BatchNorm2d):
            layer.running_mean.uniform_(-0.5, 0.5)
            layer.running_var.uniform_(0.5, 2.0)
            layer.weight.data.uniform_(0.5, 1.5)
            layer.bias.data.uniform_(-0.5, 0.5)
    return module.eval()


#: (module, the epilogues its convolutions must take: (activation, residual) -> at least how many)
CASES = {
    "mobile": (
        _MobileBlock,
        {("HARD_SWISH", False): 2, ("RELU", False): 1, ("HARD_SIGMOID", False): 1, ("CLIP", False): 1, ("", True): 1},
    ),
    "resnet": (_BasicBlock, {("RELU", False): 1, ("RELU", True): 1}),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[str, np.ndarray, np.ndarray]]:
    folder = tmp_path_factory.mktemp("cnn_exports")
    made = {}
    x = torch.from_numpy(np.random.default_rng(5).standard_normal((1, 3, 20, 20)).astype(np.float32))
    for name, (factory, _) in CASES.items():
        torch.manual_seed(0)
        module = _randomize(factory())
        with torch.no_grad():
            expected = module(x).numpy()
        for exporter in ("dynamo", "torchscript"):
            path = str(folder / f"{name}-{exporter}.onnx")
            with torch.no_grad():
                if exporter == "dynamo":
                    try:
                        import onnxscript  # noqa: F401  (the dynamo exporter's)
                    except Exception:  # absent, or too new for this environment's ml_dtypes
                        continue
                    torch.onnx.export(module, (x,), path, dynamo=True, opset_version=18)
                else:
                    torch.onnx.export(module, (x,), path, dynamo=False, opset_version=17)
            made[(name, exporter)] = (path, x.numpy(), expected)
    return made


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("tactic", ["0", "1"], ids=["numpy", "timed"])
def test_exported_cnn_blocks_fuse_into_their_convolutions(exports, name, exporter, tactic, monkeypatch) -> None:
    if (name, exporter) not in exports:
        pytest.skip("torch's dynamo exporter cannot import onnxscript here")
    path, x, expected = exports[(name, exporter)]
    monkeypatch.setenv("PLUGRT_TORCH", tactic)
    monkeypatch.setenv(DISABLE_ENV, "all")
    plain = plugrt.compile(path)
    monkeypatch.setenv(DISABLE_ENV, "")
    fused = plugrt.compile(path)
    feeds = {plain.input_names[0]: x}
    want, got = plain(feeds), fused(feeds)
    (key,) = want
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(got[key], expected, rtol=0, atol=1e-5 * scale)
    epilogues: dict[tuple[str, bool], int] = {}
    for layer in fused.engine.plan.layers:
        if layer.kind == "convolution":
            found = (str(layer.params.get("activation", "")), bool(layer.params.get("residual")))
            epilogues[found] = epilogues.get(found, 0) + 1
        elif layer.kind == "squeeze_excitation":  # an SE block's two 1x1 convolutions, activations kept
            for k in (1, 2):
                found = (str(layer.params.get(f"activation{k}", "")), False)
                epilogues[found] = epilogues.get(found, 0) + 1
    for epilogue, least in CASES[name][1].items():
        assert epilogues.get(epilogue, 0) >= least, epilogues
    left = [layer.kind for layer in fused.engine.plan.layers if layer.kind in ("activation", "fused_elementwise")]
    assert len(left) < len(plain.engine.plan.layers) and "batch_normalization" not in left
