"""1x1 convolutions of channels-last runs on the CPU: oneDNN's product of the rows against its convolution.

For each shape (MobileNetV2's 1x1 layers at batch 1 by default), one thread, each call alone (medians of
``--runs`` calls, us): ``torch.ops.mkldnn._linear_pointwise`` on the ``[H*W, C]`` rows with the weight packed by
``_reorder_linear_weight`` (what ``ops/torch_channels_last.py`` runs from ``SMALL_PRODUCT_FLOPS`` on), and
``_convolution_pointwise`` on the channels-last tensor with the kernel reordered by
``_reorder_convolution_weight`` (what it ran before), both with the bias and a Clip(0, 6) post-op, the C heap
keeping freed blocks as in the engine's channels-last runs (``ops/heap.py``).

Usage: python benchmarks/conv1x1_cpu.py [--runs 200]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

#: (H = W, C, M): MobileNetV2's 1x1 layers at 224 x 224
SHAPES = [(112, 32, 16), (112, 16, 96), (56, 96, 24), (56, 24, 144), (28, 144, 32), (28, 192, 32), (14, 192, 64),
          (14, 384, 64), (14, 64, 384), (14, 576, 96), (7, 576, 160), (7, 960, 160), (7, 160, 960), (7, 320, 1280)]  # fmt: skip


def _median_us(call: object, runs: int) -> float:
    for _ in range(5):
        call()  # type: ignore[operator]
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        call()  # type: ignore[operator]
        times.append(time.perf_counter() - began)
    return 1e6 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="timed calls per kernel (default 200)")
    args = parser.parse_args()
    import torch

    from plugrt.ops.heap import keep_freed_memory

    keep_freed_memory()  # as the engine's channels-last runs do: results are not fresh pages at every call
    torch.set_num_threads(1)
    mkldnn = torch.ops.mkldnn
    print("| H x W | C -> M | MFLOP | product of the rows us | convolution us | rows / convolution |")
    print("|---|---|---|---|---|---|")
    for size, channels, maps in SHAPES:
        rows = torch.randn(size * size, channels)
        image = rows.view(1, size, size, channels).permute(0, 3, 1, 2)  # channels-last [1, C, H, W]
        weight, bias = torch.randn(maps, channels) * 0.1, torch.randn(maps)
        packed_rows = mkldnn._reorder_linear_weight(weight, None)
        kernel = weight.view(maps, channels, 1, 1).contiguous(memory_format=torch.channels_last)
        packed_conv = mkldnn._reorder_convolution_weight(kernel, [0, 0], [1, 1], [1, 1], 1, [1, channels, size, size])
        clip = ("hardtanh", [0.0, 6.0], "")
        product = _median_us(functools.partial(mkldnn._linear_pointwise, rows, packed_rows, bias, *clip), args.runs)
        unit = ([0, 0], [1, 1], [1, 1], 1)
        conv = _median_us(
            functools.partial(mkldnn._convolution_pointwise, image, packed_conv, bias, *unit, *clip), args.runs
        )
        flops = 2e-6 * size * size * channels * maps
        print(
            f"| {size} x {size} | {channels} -> {maps} | {flops:.1f} | {product:.1f} | {conv:.1f} | {product / conv:.2f} |"
        )


if __name__ == "__main__":
    main()
