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


@pytest.fixture(autouse=True)
def _strict_fp32_on_the_gpu(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU tests compare the GPU's results with the CPU's in strict FP32: there a new builder config has
    ``BuilderFlag.TF32`` cleared. TensorRT's default (the flag set: products and convolutions may round to TF32,
    ~1e-3 relative) is pinned by the tests marked ``tf32_default`` (``tests/gpu/test_gpu_tf32.py``)."""
    if "gpu" not in request.keywords or "tf32_default" in request.keywords:
        return
    from plugrt.builder.config import BuilderFlag, IBuilderConfig

    made = IBuilderConfig.__init__

    def strict(self: IBuilderConfig) -> None:
        made(self)
        self.clear_flag(BuilderFlag.TF32)

    monkeypatch.setattr(IBuilderConfig, "__init__", strict)


@pytest.fixture
def numpy_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NumPy kernels whatever ``PLUGRT_TORCH`` says (it is read at build and bind): for tests of one kernel
    path's own behaviour (a fused chain bit-identical to its unfused layers, an operator's patched ``run``)."""
    monkeypatch.setenv("PLUGRT_TORCH", "0")


@pytest.fixture
def onednn_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """oneDNN's direct kernels switched on: ``PLUGRT_ONEDNN`` and ``PLUGRT_ONEDNN_LIBRARY`` unset for the test."""
    from plugrt.ops import onednn

    monkeypatch.delenv(onednn.ENV_SWITCH, raising=False)
    monkeypatch.delenv(onednn.LIBRARY_VARIABLE, raising=False)
