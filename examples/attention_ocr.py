"""Attention OCR and CRNN in PyTorch, exported to ONNX and run with plugrt (and onnxruntime to compare).

The attention-OCR model has the shape of the classic recipe: a small CNN turns a text-line image
into a feature sequence, a bidirectional LSTM encodes it, and an attention decoder (a GRU cell
with additive attention over the encoder states) emits one character per step, greedily, for
at most ``max_steps`` steps -- stopping early once every line in the batch has emitted the end
token. The decoding loop is scripted, so ``torch.onnx.export`` writes it as an ONNX ``Loop``
whose body holds the attention step; the early stop is the loop's condition.

The CRNN is the same CNN and BiLSTM with a per-frame classifier (a CTC head): its output is
decoded outside the model by collapsing repeats and dropping blanks.

    python examples/attention_ocr.py            # export both (random weights), compare plugrt with onnxruntime
    python examples/attention_ocr.py --out DIR  # also keep the .onnx files in DIR

Needs PyTorch for the export (plugrt itself does not).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import torch
from torch import nn

BLANK, START, END = 0, 1, 2


class Encoder(nn.Module):
    """CNN then BiLSTM: ``[B, 1, 32, W]`` images to ``[B, W / 4, 2 * hidden]`` states."""

    def __init__(self, hidden: int = 32, channels: int = 32) -> None:
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, channels // 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 16 x W/2
            nn.Conv2d(channels // 2, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 8 x W/4
            nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
            nn.MaxPool2d((8, 1)),  # 1 x W/4
        )
        self.rnn = nn.LSTM(channels, hidden, batch_first=True, bidirectional=True)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        features = self.cnn(image).squeeze(2).permute(0, 2, 1)  # [B, T, C]
        states, _ = self.rnn(features)
        return states


class AttentionDecoder(nn.Module):
    """Greedy attention decoding for at most ``max_steps`` steps (a scripted loop: ONNX ``Loop``)."""

    def __init__(self, classes: int, enc: int, hidden: int = 32, max_steps: int = 12) -> None:
        super().__init__()
        self.max_steps = max_steps
        self.hidden = hidden
        self.start_token = START
        self.end_token = END
        self.embed = nn.Embedding(classes, hidden)
        self.key = nn.Linear(enc, hidden, bias=False)
        self.query = nn.Linear(hidden, hidden)
        self.score = nn.Linear(hidden, 1, bias=False)
        # a GRU cell written out (nn.GRUCell's input checks do not script into ONNX)
        self.gates_x = nn.Linear(hidden + enc, 3 * hidden)
        self.gates_h = nn.Linear(hidden, 3 * hidden)
        self.classify = nn.Linear(hidden, classes)

    def gru(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        rx, zx, nx = self.gates_x(x).chunk(3, dim=1)
        rh, zh, nh = self.gates_h(h).chunk(3, dim=1)
        r, z = torch.sigmoid(rx + rh), torch.sigmoid(zx + zh)
        n = torch.tanh(nx + r * nh)
        return (1 - z) * n + z * h

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        batch = states.size(0)
        keys = self.key(states)  # [B, T, H]
        h = torch.zeros(batch, self.hidden, dtype=states.dtype)
        token = torch.full((batch,), self.start_token, dtype=torch.long)
        done = torch.zeros(batch, dtype=torch.bool)
        # a fixed-size result written step by step (a loop-carried tensor, not a list: its shape stays put)
        tokens = torch.full((batch, self.max_steps), self.end_token, dtype=torch.long)
        for step in range(self.max_steps):
            energy = self.score(torch.tanh(keys + self.query(h).unsqueeze(1))).squeeze(2)  # [B, T]
            weights = torch.softmax(energy, dim=1)
            context = torch.bmm(weights.unsqueeze(1), states).squeeze(1)  # [B, enc]
            h = self.gru(torch.cat([self.embed(token), context], dim=1), h)
            token = self.classify(h).argmax(dim=1)
            token = torch.where(done, torch.full_like(token, self.end_token), token)
            tokens[:, step] = token
            done = done | (token == self.end_token)
            if bool(done.all()):
                break
        return tokens  # [B, max_steps], END after the end


class AttentionOCR(nn.Module):
    """Image to character ids: ``[B, 1, 32, W]`` float to ``[B, steps]`` int64 (END-padded)."""

    def __init__(self, classes: int = 40, hidden: int = 32, max_steps: int = 12) -> None:
        super().__init__()
        self.encoder = Encoder(hidden)
        self.decoder = AttentionDecoder(classes, 2 * hidden, hidden, max_steps)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(image))


class CRNN(nn.Module):
    """Image to per-frame class scores: ``[B, 1, 32, W]`` to ``[B, W / 4, classes]`` log-probabilities (CTC)."""

    def __init__(self, classes: int = 40, hidden: int = 32) -> None:
        super().__init__()
        self.encoder = Encoder(hidden)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.head(self.encoder(image)), dim=2)


def ctc_greedy(log_probs: np.ndarray) -> list[list[int]]:
    """Best-path CTC decoding: the most likely class per frame, repeats collapsed, blanks dropped."""
    decoded = []
    for frames in log_probs.argmax(axis=2):
        ids = [int(c) for i, c in enumerate(frames) if c != BLANK and (i == 0 or c != frames[i - 1])]
        decoded.append(ids)
    return decoded


def export(model: nn.Module, path: str, width: int = 64, batch: int = 2) -> None:
    """Export with fixed batch and width (TorchScript exporter: it writes scripted loops as ONNX Loop)."""
    model.eval()
    example = torch.rand(batch, 1, 32, width)
    scripted = torch.jit.script(model) if isinstance(model, AttentionOCR) else model
    torch.onnx.export(scripted, (example,), path, input_names=["image"], output_names=["out"], opset_version=17,
                      dynamo=False)


def build(seed: int = 0) -> tuple[AttentionOCR, CRNN]:
    """Both models with random weights (fixed seed), in eval mode."""
    torch.manual_seed(seed)
    ocr, crnn = AttentionOCR(), CRNN()
    for model in (ocr, crnn):
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):  # non-trivial statistics
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
        model.eval()
    return ocr, crnn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="", help="directory to keep the exported .onnx files in")
    args = parser.parse_args()
    import onnxruntime as ort

    import plugrt

    folder = args.out or tempfile.mkdtemp()
    os.makedirs(folder, exist_ok=True)
    ocr, crnn = build()
    image = np.random.default_rng(0).random((2, 1, 32, 64), dtype=np.float32)
    for name, model in (("attention_ocr", ocr), ("crnn", crnn)):
        path = os.path.join(folder, f"{name}.onnx")
        export(model, path)
        ours = plugrt.compile(path)({"image": image})["out"]
        theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"image": image})[0]
        with torch.no_grad():
            torch_out = model(torch.from_numpy(image)).numpy()
        same = ours.shape == theirs.shape and np.allclose(ours, theirs, atol=1e-4)
        print(f"{name}: plugrt {ours.shape} {'matches' if same else 'DIFFERS FROM'} onnxruntime; torch {torch_out.shape}")
        if name == "crnn":
            print("  CTC greedy decode (plugrt):", ctc_greedy(ours))
        else:
            print("  tokens (plugrt):", ours.tolist())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
