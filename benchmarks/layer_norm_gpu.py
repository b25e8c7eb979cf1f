"""LayerNorm on the GPU: plugrt's one-pass kernel against torch.nn.functional.layer_norm and a device copy.

Effective bandwidth counts the bytes a LayerNorm must move: read x, write y
(gamma/beta are negligible). Shapes from the issue: fp16 16384x4096, fp16 65536x1024,
fp32 8192x1024. Results are checked against torch in fp32.

Usage: python benchmarks/layer_norm_gpu.py
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from plugrt.ops.layer_norm_cuda import layer_norm_cuda


def _time(fn, repeats: int = 50) -> float:  # type: ignore[no-untyped-def]
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / repeats / 1e3


def main() -> None:
    import torch

    print(f"{time.strftime('%Y-%m-%d')} {torch.cuda.get_device_name()} torch {torch.__version__}")
    print(
        f"{'shape':<22}{'plugrt GB/s':>12}{'torch GB/s':>12}{'copy GB/s':>11}{'plugrt/torch':>14}{'plugrt/copy':>13}{'max err':>10}"
    )
    for rows, cols, dtype in ((16384, 4096, torch.float16), (65536, 1024, torch.float16), (8192, 1024, torch.float32)):
        bench_one(rows, cols, dtype)


def bench_one(rows: int, cols: int, dtype: Any) -> None:
    """Time and check one shape; print one row."""
    import torch

    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    y = torch.empty_like(x)
    gamma = torch.randn(cols, device="cuda", dtype=torch.float32)
    beta = torch.randn(cols, device="cuda", dtype=torch.float32)
    stream = torch.cuda.current_stream().cuda_stream
    np_dtype = np.float16 if dtype == torch.float16 else np.float32

    def ours() -> None:
        layer_norm_cuda(
            x.data_ptr(), gamma.data_ptr(), beta.data_ptr(), y.data_ptr(), rows, cols, 1e-5, np_dtype, stream
        )

    g, b = gamma.to(dtype), beta.to(dtype)
    ref_out = torch.empty_like(x)

    def theirs() -> None:
        torch.nn.functional.layer_norm(x, (cols,), g, b, 1e-5)

    copy_dst = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    t_ours, t_torch, t_copy = _time(ours), _time(theirs), _time(lambda: copy_dst.copy_(x))
    ours()
    ref_out = torch.nn.functional.layer_norm(x.float(), (cols,), gamma, beta, 1e-5)
    err = (y.float() - ref_out).abs().max().item()
    print(
        f"{f'{rows}x{cols} {str(dtype)[6:]}':<22}{nbytes / t_ours / 1e9:>12.0f}{nbytes / t_torch / 1e9:>12.0f}"
        f"{nbytes / t_copy / 1e9:>11.0f}{t_torch / t_ours:>14.2f}{t_copy / t_ours:>13.2f}{err:>10.4f}"
    )


if __name__ == "__main__":
    main()
