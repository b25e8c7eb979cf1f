"""Products by a constant matrix on the CPU: oneDNN's matmul primitive called directly (``ops/onednn_matmul.py``)
against oneDNN's linear through PyTorch (``torch.ops.mkldnn._linear_pointwise`` on a packed weight, its result copied
into the output, as ``ops/torch_cpu_linear.py`` runs it) and NumPy's ``matmul`` (the BLAS), with a bias, on
BERT-base's shapes. The three kernels alternate call by call in one process; each figure is the fastest of ``--runs``
calls.

Usage: python benchmarks/onednn_matmul_cpu.py [--threads 1] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)

    import numpy as np
    import torch

    from plugrt.ops import onednn
    from plugrt.ops.onednn_matmul import pack, product_onednn

    torch.set_num_threads(args.threads)
    if not onednn.available():
        raise SystemExit("needs oneDNN: pip install 'plugrt[onednn]'")
    rng = np.random.default_rng(0)
    print(f"# threads {args.threads}, fastest of {args.runs}, load {os.getloadavg()[0]:.2f}")
    print("| rows x K by K x N | direct ms | PyTorch's linear ms | NumPy ms | direct / linear |")
    print("|---|---|---|---|---|")
    for k, n in [(768, 768), (768, 3072), (3072, 768)]:
        weight = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        packed = pack(weight, False)
        torch_packed = torch.ops.mkldnn._reorder_linear_weight(torch.from_numpy(weight).t().contiguous())
        for rows in (1, 8, 128, 512):
            a = rng.standard_normal((rows, k)).astype(np.float32)
            out = np.empty((rows, n), np.float32)
            direct = product_onednn(a, packed, False, bias, out)
            assert packed is not None and direct is not None
            at, bt, ot = torch.from_numpy(a), torch.from_numpy(bias), torch.from_numpy(out)

            def linear(at=at, wt=torch_packed, bt=bt, ot=ot) -> object:  # type: ignore[no-untyped-def]
                return ot.copy_(torch.ops.mkldnn._linear_pointwise(at, wt, bt, "none", [], ""))

            def numpy_product(a=a, w=weight, b=bias, out=out) -> object:  # type: ignore[no-untyped-def]
                np.matmul(a, w, out=out)
                return np.add(out, b, out=out)

            kernels = {"direct": direct, "linear": linear, "numpy": numpy_product}
            times = dict.fromkeys(kernels, float("inf"))
            for _ in range(args.runs + 1):  # the kernels alternate call by call (the first calls warm up)
                for name, run in kernels.items():
                    start = time.perf_counter()
                    run()
                    times[name] = min(times[name], (time.perf_counter() - start) * 1e3)
            print(
                f"| {rows} x {k} by {k} x {n} | {times['direct']:.3f} | {times['linear']:.3f} | {times['numpy']:.3f} "
                f"| {times['direct'] / times['linear']:.2f} |"
            )


if __name__ == "__main__":
    main()
