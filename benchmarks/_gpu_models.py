"""The models of ``real_models_gpu.py``: PyTorch modules with random weights, their inputs, and their ONNX export.

Each model is what a user would export: a module returning one tensor (the transformers models
return ``last_hidden_state``), inputs with a dynamic batch axis. BERT-base is fed ``inputs_embeds``
(no embedding gather) together with the ``attention_mask`` a server passes for padded batches, so
the export carries the mask arithmetic (``(1 - mask) * finfo.min``) real BERT deployments have.
``small`` shrinks every config (2 layers, narrower, shorter sequences, 64x64 images) for CPU runs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MODELS", "ModelSpec", "export_onnx", "make_inputs"]


@dataclass
class ModelSpec:
    """A model: its factory (``small`` → fp32 module in eval mode on the CPU) and its inputs."""

    name: str
    needs: str  # the package it comes from ('torch', 'torchvision' or 'transformers')
    make: Callable[[bool], Any]
    inputs: Callable[[int, bool], list[tuple[str, tuple[int, ...], str]]]  # batch, small -> (name, shape, kind)


def _block(small: bool) -> Any:
    import torch
    from torch import nn

    dim, heads, ffn = (128, 4, 512) if small else (512, 8, 2048)

    class Block(nn.Module):
        """A pre-norm transformer encoder block: self-attention and a GELU MLP, each with a residual."""

        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(), nn.Linear(ffn, dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    return Block()


def _torchvision(name: str) -> Callable[[bool], Any]:
    def make(small: bool) -> Any:
        import torchvision

        return getattr(torchvision.models, name)(weights=None)

    return make


def _last_hidden(model: Any, keyword: str, masked: bool) -> Any:
    """``model`` wrapped so that the export has one output, ``last_hidden_state``."""
    from torch import nn

    class Wrapped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any, mask: Any = None) -> Any:
            extra = {"attention_mask": mask} if masked else {}
            return self.model(**{keyword: x}, **extra).last_hidden_state

    return Wrapped()


#: the transformers models' ``small`` sizes
_SMALL: dict[str, Any] = dict(num_hidden_layers=2, hidden_size=256, num_attention_heads=4, intermediate_size=1024)


def _bert(small: bool) -> Any:
    import transformers

    config = transformers.BertConfig(**(_SMALL if small else {}))
    return _last_hidden(transformers.BertModel(config), "inputs_embeds", masked=True)


def _vit(small: bool) -> Any:
    import transformers

    config = transformers.ViTConfig(**({**_SMALL, "image_size": 64} if small else {}))
    return _last_hidden(transformers.ViTModel(config), "pixel_values", masked=False)


def _image_inputs(batch: int, small: bool) -> list[tuple[str, tuple[int, ...], str]]:
    size = 64 if small else 224
    return [("pixel_values", (batch, 3, size, size), "float")]


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "block",
            "torch",
            _block,
            lambda b, small: [("x", (b, 32, 128) if small else (b, 128, 512), "float")],
        ),
        ModelSpec("resnet50", "torchvision", _torchvision("resnet50"), _image_inputs),
        ModelSpec("mobilenetv3", "torchvision", _torchvision("mobilenet_v3_small"), _image_inputs),
        ModelSpec(
            "bert",
            "transformers",
            _bert,
            lambda b, small: [
                ("inputs_embeds", (b, 128, 256 if small else 768), "float"),
                ("attention_mask", (b, 128), "mask"),
            ],
        ),
        ModelSpec("vit", "transformers", _vit, _image_inputs),
    )
}


def make_inputs(spec: ModelSpec, batch: int, small: bool, dtype: Any, device: str) -> dict[str, Any]:
    """Seeded inputs at ``batch``: floats of ``dtype``; masks with rows padded by 0, 16, 32 or 48 tokens."""
    import torch

    generator = torch.Generator().manual_seed(batch)
    made: dict[str, Any] = {}
    for name, shape, kind in spec.inputs(batch, small):
        if kind == "mask":
            lengths = [shape[1] - 16 * ((row + 1) % 4) for row in range(shape[0])]
            tensor = (torch.arange(shape[1])[None, :] < torch.tensor(lengths)[:, None]).to(torch.int64)
        else:
            tensor = torch.randn(shape, generator=generator).to(dtype)
        made[name] = tensor.to(device)
    return made


def weights_digest(module: Any) -> str:
    """A short digest of a module's parameters and buffers (so a cached export matches the weights in use)."""
    digest = hashlib.sha1()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(f"{name}:{tuple(tensor.shape)}:{float(tensor.double().sum()):.9e}".encode())
    return digest.hexdigest()[:10]


def export_onnx(module: Any, inputs: dict[str, Any], path: str, exporter: str) -> str:
    """Export ``module`` at ``inputs`` to ``path`` (opset 17, dynamic batch axis), unless it exists there."""
    if os.path.exists(path):
        return path
    import torch

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    names = list(inputs)
    axes = {name: {0: "batch"} for name in [*names, "output"]}
    partial = f"{path}.partial.onnx"
    # grad mode on, as a plain export runs: under no_grad nn.MultiheadAttention takes its fused fast path,
    # which has no ONNX export
    with torch.enable_grad():
        torch.onnx.export(
            module,
            tuple(inputs.values()),
            partial,
            input_names=names,
            output_names=["output"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=exporter == "dynamo",
        )
    os.replace(partial, path)
    return path
