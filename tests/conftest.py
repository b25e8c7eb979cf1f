"""Shared test setup: test helpers importable; GPU tests skip without a GPU."""

from __future__ import annotations

import os
import sys

import pytest

# The optional PyTorch tactic (plugrt.ops.torch_cpu) is timed per layer at build, so which kernel a layer
# runs would depend on the machine's load: the suite runs the NumPy kernels (the embedded default) unless
# PLUGRT_TORCH says otherwise; tests/unit/test_torch_cpu*.py turn the tactic on themselves.
os.environ.setdefault("PLUGRT_TORCH", "0")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (os.path.join(ROOT, "tests"),):
    if path not in sys.path:
        sys.path.insert(0, path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests skip themselves where CuPy or a GPU is missing."""
    try:
        import cupy  # type: ignore[import-not-found]

        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
