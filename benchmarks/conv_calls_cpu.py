"""What one convolution call costs on the CPU at batch 1, by the ways PyTorch and NumPy offer it (one thread).

For layers of PP-OCR's classifier and MobileNetV2 (1x1, depthwise and dense), each way timed alone on the
same tensors, interleaved in one process, the calling thread's CPU time, fastest of ``--blocks`` blocks of
``--runs`` calls:

- ``onednn``: ``torch.ops.mkldnn._convolution_pointwise`` on channels-last tensors, the weight reordered once
  (what the ``torch-nhwc`` tactic calls);
- ``conv2d``: ``torch.nn.functional.conv2d`` on NCHW tensors (the ``torch`` tactic);
- ``prepacked``: ``torch.ops.mkldnn_prepacked.conv2d_run`` over a ``ConvOpContext`` made once;
- 1x1 layers only: ``numpy``, NumPy's product of the ``[H*W, C]`` rows on one BLAS thread; ``mm``, torch's (MKL) ``mm`` with ``out=``;
- ``plugrt``: plugrt's channels-last kernel for the layer with its bias and activation
  (``ops/torch_channels_last.py``; a 1x1 under ``SMALL_PRODUCT_FLOPS`` is NumPy's product there), and
  ``plugrt-onednn`` the same with that threshold at 0 (oneDNN's convolution);
- depthwise layers only: ``numba``, the compiled channels-last loop with bias and activation
  (``ops/depthwise_numba.py``, whatever the layer's size; needs numba), and ``numpy-dw``, the NumPy kernel on
  NCHW tensors (tap sums or im2col, as the engine chooses).

``--se``: PP-OCR cls's squeeze-and-excitation blocks instead (channels-last, ReLU then hard-sigmoid):
``torch-nhwc``, torch's kernel (``torch_channels_last.squeeze_excitation``), and ``numba``, the compiled block
(``ops/squeeze_numba.py``).

Needs torch. ``PYTHONPATH=src python benchmarks/conv_calls_cpu.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Callable

import numpy as np

#: (name, C, M, H, W, kernel, stride (one, or H and W), group, activation)
LAYERS: list[tuple[str, int, int, int, int, int, int | tuple[int, int], int, str]] = [
    ("cls 8->8 1x1", 8, 8, 6, 96, 1, 1, 1, "RELU"),
    ("cls 16->88 1x1", 16, 88, 3, 96, 1, 1, 1, "HARD_SWISH"),
    ("cls 104->32 1x1", 104, 32, 2, 96, 1, 1, 1, ""),
    ("cls 32->200 1x1", 32, 200, 2, 96, 1, 1, 1, "HARD_SWISH"),
    ("cls dw 5x5 200", 200, 200, 2, 96, 5, 1, 200, "HARD_SWISH"),
    ("cls dw 3x3/2 24", 24, 24, 12, 96, 3, 2, 24, "RELU"),
    ("mnv2 576->160 1x1", 576, 160, 7, 7, 1, 1, 1, ""),
    ("mnv2 64->384 1x1", 64, 384, 14, 14, 1, 1, 1, "CLIP"),
    ("mnv2 192->32 1x1", 192, 32, 28, 28, 1, 1, 1, ""),
    ("mnv2 960->160 1x1", 960, 160, 7, 7, 1, 1, 1, ""),
    ("mnv2 24->144 1x1", 24, 144, 56, 56, 1, 1, 1, "CLIP"),
    ("mnv2 dw 3x3 960", 960, 960, 7, 7, 3, 1, 960, "CLIP"),
    # every depthwise shape of the two models (PP-OCR cls at 48 x 192; MobileNetV2 at 224 x 224)
    ("cls dw 3x3/2,1 8", 8, 8, 24, 96, 3, (2, 1), 8, "RELU"),
    ("cls dw 3x3/2,1 24", 24, 24, 12, 96, 3, (2, 1), 24, "RELU"),
    ("cls dw 3x3 32", 32, 32, 6, 96, 3, 1, 32, "RELU"),
    ("cls dw 5x5/2,1 32", 32, 32, 6, 96, 5, (2, 1), 32, "HARD_SWISH"),
    ("cls dw 5x5 88", 88, 88, 3, 96, 5, 1, 88, "HARD_SWISH"),
    ("cls dw 5x5 40", 40, 40, 3, 96, 5, 1, 40, "HARD_SWISH"),
    ("cls dw 5x5 48", 48, 48, 3, 96, 5, 1, 48, "HARD_SWISH"),
    ("cls dw 5x5/2,1 104", 104, 104, 3, 96, 5, (2, 1), 104, "HARD_SWISH"),
    ("mnv2 dw 3x3 32", 32, 32, 112, 112, 3, 1, 32, "CLIP"),
    ("mnv2 dw 3x3/2 96", 96, 96, 112, 112, 3, 2, 96, "CLIP"),
    ("mnv2 dw 3x3 144", 144, 144, 56, 56, 3, 1, 144, "CLIP"),
    ("mnv2 dw 3x3/2 144", 144, 144, 56, 56, 3, 2, 144, "CLIP"),
    ("mnv2 dw 3x3 192", 192, 192, 28, 28, 3, 1, 192, "CLIP"),
    ("mnv2 dw 3x3/2 192", 192, 192, 28, 28, 3, 2, 192, "CLIP"),
    ("mnv2 dw 3x3 384", 384, 384, 14, 14, 3, 1, 384, "CLIP"),
    ("mnv2 dw 3x3 576", 576, 576, 14, 14, 3, 1, 576, "CLIP"),
    ("mnv2 dw 3x3/2 576", 576, 576, 14, 14, 3, 2, 576, "CLIP"),
]


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=7, help="timing blocks per way")
    parser.add_argument("--runs", type=int, default=200, help="calls per block")
    parser.add_argument("--se", action="store_true", help="time the SE blocks instead of the convolutions")
    parser.add_argument("--only", default="", help="only the layers whose name contains this text (e.g. 'dw')")
    return parser.parse_args()


def _fastest(ways: dict[str, Callable[[], object]], blocks: int, runs: int) -> dict[str, float]:
    """Each way's fastest mean call time in microseconds, the ways interleaved block by block."""
    for call in ways.values():
        for _ in range(10):
            call()
    best = dict.fromkeys(ways, math.inf)
    for _ in range(blocks):
        for name, call in ways.items():
            start = time.thread_time_ns()
            for _ in range(runs):
                call()
            best[name] = min(best[name], (time.thread_time_ns() - start) / runs / 1e3)
    return best


def _ways(
    c: int, m: int, h: int, w: int, k: int, stride: int | tuple[int, int], g: int, act: str
) -> dict[str, Callable[[], object]]:
    import torch

    from plugrt.core.types import TensorFormat
    from plugrt.ops import torch_channels_last
    from plugrt.ops.blas_threads import blas_threads_for
    from plugrt.ops.conv import ConvolutionOperator, pack_conv_kernel

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, h, w), dtype=np.float32)
    kernel = (rng.standard_normal((m, c // g, k, k)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    pads = [k // 2] * 2
    strides = list(stride) if isinstance(stride, tuple) else [stride, stride]
    xt, wt, bt = torch.from_numpy(x), torch.from_numpy(kernel), torch.from_numpy(bias)
    xc = xt.contiguous(memory_format=torch.channels_last)
    wc = wt.contiguous(memory_format=torch.channels_last)
    packed = torch.ops.mkldnn._reorder_convolution_weight(wc, pads, strides, [1, 1], g, list(x.shape))
    context = torch.ops.mkldnn_prepacked.conv2d_prepack(wt, bt, strides, pads, [1, 1], g, list(x.shape), "none")
    conv = torch.ops.mkldnn._convolution_pointwise
    ways: dict[str, Callable[[], object]] = {
        "onednn": lambda: conv(xc, packed, bt, pads, strides, [1, 1], g, "none", [], ""),
        "conv2d": lambda: torch.nn.functional.conv2d(xt, wt, bt, strides, pads, [1, 1], g),
        "prepacked": lambda: torch.ops.mkldnn_prepacked.conv2d_run(xc, context),
    }
    if k == 1 and g == 1:
        rows = np.ascontiguousarray(x.reshape(c, -1).T)
        columns = np.ascontiguousarray(kernel.reshape(m, c).T)
        result = np.empty((rows.shape[0], m), np.float32)
        rows_t, columns_t, result_t = torch.from_numpy(rows), torch.from_numpy(columns), torch.from_numpy(result)
        guard = blas_threads_for(2.0 * result.size * c)  # one BLAS thread, as the engine's small products

        def product() -> None:
            with guard:
                np.matmul(rows, columns, out=result)

        ways["numpy"] = product
        ways["mm"] = lambda: torch.mm(rows_t, columns_t, out=result_t)
    params = {"num_output_maps": m, "kernel_shape": [k, k], "strides": strides, "pads": pads * 2, "group": g}
    params.update(activation=act, activation_alpha=0.0, activation_beta=6.0)
    op = ConvolutionOperator(params, {"kernel": pack_conv_kernel(kernel, g), "bias": bias})
    size = [(d + 2 * pads[0] - k) // s + 1 for d, s in zip((h, w), strides)]
    op.prepare([x.shape], [(1, m, *size)])
    hwc = [TensorFormat.HWC, TensorFormat.HWC]
    x_hwc, out_hwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.empty((1, *size, m), np.float32)
    ways["plugrt"] = torch_channels_last.convolution_channels_last(op, x_hwc, out_hwc, None, hwc)  # type: ignore[assignment]
    threshold = torch_channels_last.SMALL_PRODUCT_FLOPS
    torch_channels_last.SMALL_PRODUCT_FLOPS = 0.0
    try:
        ways["plugrt-onednn"] = torch_channels_last.convolution_channels_last(op, x_hwc, out_hwc, None, hwc)  # type: ignore[assignment]
    finally:
        torch_channels_last.SMALL_PRODUCT_FLOPS = threshold
    if g == c and g > 1:
        ways.update(_depthwise_ways(op, x, x_hwc, out_hwc, size))
    return ways


def _depthwise_ways(op: object, x: np.ndarray, x_hwc: np.ndarray, out_hwc: np.ndarray, size: list[int]) -> dict:
    """The compiled loop (any size: the layer-size limit lifted) and the NumPy kernel on NCHW tensors."""
    from plugrt.core.types import TensorFormat
    from plugrt.ops import depthwise_numba

    ways: dict[str, Callable[[], object]] = {}
    out = np.empty((1, out_hwc.shape[-1], *size), np.float32)
    ways["numpy-dw"] = lambda: op.run([x], [out])  # type: ignore[attr-defined]
    limit = depthwise_numba.NUMBA_MAX_MACS
    depthwise_numba.NUMBA_MAX_MACS = 1 << 62
    try:
        loop = depthwise_numba.depthwise_channels_last(op, x_hwc, out_hwc, None, [TensorFormat.HWC] * 2)  # type: ignore[arg-type]
    finally:
        depthwise_numba.NUMBA_MAX_MACS = limit
    if loop is not None:
        ways["numba"] = loop
    return ways


#: PP-OCR cls's SE blocks at 48 x 192 (the inputs of its pools; squeezed: C / 4, PP-LCNet's ratio): (C, H, W, squeezed)
SE_BLOCKS = [(8, 12, 96, 2), (32, 3, 96, 8), (88, 3, 96, 22), (40, 3, 96, 10), (48, 3, 96, 12), (104, 2, 96, 26), (200, 2, 96, 50)]


def _se_ways(c: int, h: int, w: int, m: int) -> dict[str, Callable[[], object]]:
    from plugrt.core.types import TensorFormat
    from plugrt.ops.squeeze_numba import squeeze_excitation_channels_last
    from plugrt.ops.torch_channels_last import squeeze_excitation

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, h, w, c), dtype=np.float32)
    weights = (
        rng.standard_normal((c, m), dtype=np.float32),
        rng.standard_normal(m, dtype=np.float32),
        rng.standard_normal((m, c), dtype=np.float32),
        rng.standard_normal(c, dtype=np.float32),
    )
    acts = [("RELU", 0.0, 0.0), ("HARD_SIGMOID", 0.2, 0.5)]
    hwc = [TensorFormat.HWC, TensorFormat.HWC]
    ways: dict[str, Callable[[], object]] = {}
    ways["torch-nhwc"] = squeeze_excitation(acts, weights, x, np.empty_like(x), hwc)  # type: ignore[assignment]
    loop = squeeze_excitation_channels_last(acts, weights, x, np.empty_like(x), hwc)
    if loop is not None:
        ways["numba"] = loop
    return ways


def main() -> None:
    args = _parse()
    import torch

    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, one thread, load {load:.2f}, {stamp}")
    if args.se:
        print("| SE block (C, H x W, squeezed) | torch-nhwc | numba |\n|---|---|---|")
        for c, h, w, m in SE_BLOCKS:
            times = _fastest(_se_ways(c, h, w, m), args.blocks, args.runs)
            print(f"| {c}, {h} x {w}, {m} | {times['torch-nhwc']:.1f} | {times.get('numba', math.nan):.1f} |")
        print(f"# end load {os.getloadavg()[0]:.2f}")
        return
    names = ["onednn", "conv2d", "prepacked", "numpy", "mm", "plugrt", "plugrt-onednn", "numba", "numpy-dw"]
    print("| layer | MFLOP | " + " | ".join(names) + " |")
    print("|---|---" + "|---" * len(names) + "|")
    for name, c, m, h, w, k, s, g, act in LAYERS:
        if args.only not in name:
            continue
        times = _fastest(_ways(c, m, h, w, k, s, g, act), args.blocks, args.runs)
        sh, sw = s if isinstance(s, tuple) else (s, s)
        flops = 2.0 * m * (c // g) * k * k * ((h + 2 * (k // 2) - k) // sh + 1) * ((w + 2 * (k // 2) - k) // sw + 1)
        cells = [f"{times[n]:.1f}" if n in times else "" for n in names]
        print(f"| {name} | {flops / 1e6:.1f} | " + " | ".join(cells) + " |")
    print(f"# end load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
