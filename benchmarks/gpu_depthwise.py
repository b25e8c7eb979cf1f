"""Depthwise convolutions of channels-last runs on a GPU: the generated kernel (``ops/depthwise_cuda.py``) against
cuDNN's (PyTorch's ``conv2d`` with the one-kernel epilogue after it), as the engine binds them.

Each case is a depthwise layer of MobileNetV3-small or MobileNetV2 at 224 x 224 (bias and activation fused, as the
builder leaves them), on channels-last buffers; both paths are the convolution operator's kernels
(``torch_cpu_kernels.convolution`` with ``HWC`` formats), the generated one turned off with
``PLUGRT_DEPTHWISE_CUDA=0``. Times are CUDA events over back-to-back launches; the results are
compared.

Usage: python benchmarks/gpu_depthwise.py [--batch 32] [--repeats 200] [--fp32]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

#: (channels, input size, kernel, stride, activation)
CASES = [
    (16, 112, 3, 2, "RELU"),
    (72, 56, 3, 2, "RELU"),
    (88, 28, 3, 1, "RELU"),
    (96, 28, 5, 2, "HARD_SWISH"),
    (240, 14, 5, 1, "HARD_SWISH"),
    (144, 14, 5, 1, "HARD_SWISH"),
    (288, 14, 5, 2, "HARD_SWISH"),
    (576, 7, 5, 1, "HARD_SWISH"),
    (32, 112, 3, 1, "CLIP"),
    (96, 112, 3, 2, "CLIP"),
    (144, 56, 3, 1, "CLIP"),
    (192, 28, 3, 1, "CLIP"),
    (384, 14, 3, 1, "CLIP"),
    (960, 7, 3, 1, "CLIP"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--fp32", action="store_true", help="FLOAT tensors (default HALF)")
    args = parser.parse_args()

    import cupy as cp
    from _cuda_timing import launch_us

    from plugrt.core.types import TensorFormat
    from plugrt.ops.base import create_operator
    from plugrt.ops.depthwise_cuda import SWITCH
    from plugrt.ops.hand_over import hand_over
    from plugrt.ops.torch_cpu_kernels import convolution

    dtype = np.float32 if args.fp32 else np.float16
    rng = np.random.default_rng(0)
    hwc = [TensorFormat.HWC, TensorFormat.HWC]
    print(f"batch {args.batch}, {np.dtype(dtype).name}, us a layer (CUDA events over {args.repeats} launches)")
    print(f"{'layer':36s} {'cuDNN':>8s} {'own':>8s} {'ratio':>6s} {'max diff':>9s}")
    for channels, size, k, stride, activation in CASES:
        pad = k // 2
        params = {
            "kernel_shape": [k, k],
            "strides": [stride, stride],
            "pads": [pad, pad, pad, pad],
            "group": channels,
            "num_output_maps": channels,
            "activation": activation,
            "activation_alpha": 0.0,
            "activation_beta": 6.0,
        }
        weights = {
            "kernel": (rng.standard_normal((channels, 1, k, k)) * 0.3).astype(np.float32),
            "bias": rng.standard_normal(channels).astype(np.float32),
        }
        out_size = (size + 2 * pad - k) // stride + 1
        x = cp.asarray(rng.standard_normal((args.batch, size, size, channels)).astype(dtype))
        times, results = [], []
        for switch in ("0", "1"):
            os.environ[SWITCH] = switch
            op = create_operator("convolution", params, weights)
            op.xp = cp  # (as the engine binds it: its weights on the device)
            out = cp.full((args.batch, out_size, out_size, channels), 7, dtype)
            run = convolution(op, x, None, None, out, None, hwc)
            assert run is not None
            times.append(launch_us(run, args.repeats))
            handed = hand_over(out).tensor  # (cuDNN's fused ReLU hands its result over instead of writing out)
            stored = cp.asnumpy(out) if handed is None else handed.permute(0, 2, 3, 1).float().cpu().numpy()
            results.append(stored.astype(np.float64))
        diff = float(np.abs(results[0] - results[1]).max())
        name = f"{channels}ch {size}x{size} {k}x{k} s{stride} {activation}"
        print(f"{name:36s} {times[0]:8.1f} {times[1]:8.1f} {times[1] / times[0]:6.2f} {diff:9.2e}")
    os.environ.pop(SWITCH, None)


if __name__ == "__main__":
    main()
