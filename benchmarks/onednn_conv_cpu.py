"""One convolution layer at a time on the CPU, channels-last: oneDNN's primitive called directly
(``ops/onednn_conv.py``) against the kernels a channels-last run had before it: oneDNN through PyTorch's call
(``torch_channels_last.convolution_channels_last``), the compiled depthwise loop (``depthwise_numba``) and NumPy's
product of the rows for small 1x1 layers (both reached through ``convolution_channels_last``'s own choice).

Layers are MobileNetV2's, the CRNN's first convolution and ResNet-18's 3x3, at batch 1, each kernel alternated in
blocks; us a call (best block's mean). Run: ``PYTHONPATH=src python benchmarks/onednn_conv_cpu.py [--threads N]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--threads", type=int, default=1, help="threads of every kernel")
parser.add_argument("--blocks", type=int, default=5, help="alternating timing blocks per kernel")
parser.add_argument("--runs", type=int, default=200, help="calls per block")
parser.add_argument("--batch", type=int, default=1, help="images a call")
args = parser.parse_args()
for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[name] = str(args.threads)

import numpy as np  # noqa: E402

from plugrt.core.types import TensorFormat  # noqa: E402
from plugrt.ops import onednn  # noqa: E402
from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel  # noqa: E402
from plugrt.ops.depthwise_numba import depthwise_channels_last  # noqa: E402
from plugrt.ops.hand_over import hand_over  # noqa: E402
from plugrt.ops.onednn_conv import convolution_onednn  # noqa: E402
from plugrt.ops.torch_channels_last import convolution_channels_last  # noqa: E402
from plugrt.ops.torch_cpu import torch_module  # noqa: E402

HWC = [TensorFormat.HWC, TensorFormat.HWC]

# (label, channels, maps, size, kernel, stride, group, activation)
LAYERS = [
    ("MobileNetV2 dw 32ch 112x112 s1", 32, 32, 112, 3, 1, 32, "CLIP"),
    ("MobileNetV2 dw 96ch 112x112 s2", 96, 96, 112, 3, 2, 96, "CLIP"),
    ("MobileNetV2 dw 144ch 56x56 s1", 144, 144, 56, 3, 1, 144, "CLIP"),
    ("MobileNetV2 dw 192ch 28x28 s1", 192, 192, 28, 3, 1, 192, "CLIP"),
    ("MobileNetV2 dw 576ch 14x14 s1", 576, 576, 14, 3, 1, 576, "CLIP"),
    ("MobileNetV2 dw 960ch 7x7 s1", 960, 960, 7, 3, 1, 960, "CLIP"),
    ("MobileNetV2 1x1 32->16 112x112", 32, 16, 112, 1, 1, 1, ""),
    ("MobileNetV2 1x1 24->144 56x56", 24, 144, 56, 1, 1, 1, "CLIP"),
    ("MobileNetV2 1x1 96->576 14x14", 96, 576, 14, 1, 1, 1, "CLIP"),
    ("MobileNetV2 1x1 160->960 7x7", 160, 960, 7, 1, 1, 1, "CLIP"),
    ("MobileNetV2 1x1 320->1280 7x7", 320, 1280, 7, 1, 1, 1, "CLIP"),
    ("MobileNetV2 first 3->32 224x224 s2", 3, 32, 224, 3, 2, 1, "CLIP"),
    ("CRNN first 1->32 32x128", 1, 32, (32, 128), 3, 1, 1, "RELU"),
    ("ResNet-18 3x3 64->64 56x56", 64, 64, 56, 3, 1, 1, "RELU"),
    ("ResNet-18 3x3 256->256 14x14", 256, 256, 14, 3, 1, 1, "RELU"),
    ("magika 5x1 256->512 512x1", 256, 512, (512, 1), (5, 1), 1, 1, "RELU"),
]


def operator(
    channels: int, maps: int, size: int | tuple[int, int], stride: int, group: int, activation: str
) -> ConvolutionOperator:
    rng = np.random.default_rng(0)
    kernel = size if isinstance(size, tuple) else (size, size)
    weights = {
        "kernel": pack_conv_kernel(rng.standard_normal((maps, channels // group, *kernel)).astype(np.float32), group),
        "bias": rng.standard_normal(maps).astype(np.float32),
    }
    params = {
        "num_output_maps": maps,
        "kernel_shape": list(kernel),
        "strides": [stride, stride],
        "pads": [0, 0, 0, 0] if isinstance(size, tuple) else [size // 2] * 4,  # magika's is unpadded
        "group": group,
        "activation": activation,
        "activation_alpha": 0.0,
        "activation_beta": 6.0,
    }
    return ConvolutionOperator(params, weights)


def kernels(op: ConvolutionOperator, x: np.ndarray, out: np.ndarray) -> dict[str, object]:
    """Each kernel a channels-last run could take for this layer (None where it declines)."""
    found = {"oneDNN direct": convolution_onednn(op, x, out, None, HWC)}
    os.environ[onednn.ENV_SWITCH] = "0"  # the kernels before it: oneDNN through torch, the loop, NumPy's product
    try:
        found["through torch"] = convolution_channels_last(op, x, out, None, HWC)
        found["compiled loop"] = depthwise_channels_last(op, x, out, None, HWC)
    finally:
        del os.environ[onednn.ENV_SWITCH]
    return found


def best_time(calls: dict[str, object]) -> dict[str, float]:
    runnable = {name: call for name, call in calls.items() if call is not None}
    for call in runnable.values():
        for _ in range(10):
            call()  # type: ignore[operator]
    best = dict.fromkeys(runnable, float("inf"))
    for _ in range(args.blocks):
        for name, call in runnable.items():
            start = time.perf_counter()
            for _ in range(args.runs):
                call()  # type: ignore[operator]
            best[name] = min(best[name], (time.perf_counter() - start) / args.runs * 1e6)
    return best


def main() -> None:
    if not onednn.available() or torch_module() is None:
        sys.exit("needs oneDNN (pip install 'plugrt[onednn]') and torch")
    torch_module().set_num_threads(args.threads)
    lib = onednn.library()
    assert lib is not None
    print(
        f"# threads {args.threads}, batch {args.batch}, oneDNN {lib.version}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(
        "| layer | MFLOP | oneDNN direct (us) | through torch (us) | compiled loop (us) | direct / torch | max abs diff |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, channels, maps, size, kernel, stride, group, activation in LAYERS:
        height, width = size if isinstance(size, tuple) else (size, size)
        op = operator(channels, maps, kernel, stride, group, activation)
        x = np.random.default_rng(1).standard_normal((args.batch, height, width, channels)).astype(np.float32)
        sizes, _, _ = op.window.resolve((height, width))
        out = np.empty((args.batch, *sizes, maps), np.float32)
        calls = kernels(op, x, out)
        results = {}
        for name, call in calls.items():
            if call is not None:
                call()  # type: ignore[operator]
                slot = hand_over(out).tensor
                results[name] = out.copy() if slot is None else slot.permute(0, 2, 3, 1).numpy().copy()
                hand_over(out).tensor = None
        diff = max(float(np.abs(r - results["through torch"]).max()) for r in results.values())
        times = best_time(calls)
        loop = times.get("compiled loop")
        flops = 2.0 * out.size * channels // group * math.prod(op.window.kernel) / 1e6
        print(
            f"| {label} | {flops:.1f} | {times['oneDNN direct']:.1f} | {times['through torch']:.1f} | "
            f"{'-' if loop is None else f'{loop:.1f}'} | {times['oneDNN direct'] / times['through torch']:.2f} | {diff:.1e} |"
        )


if __name__ == "__main__":
    main()
