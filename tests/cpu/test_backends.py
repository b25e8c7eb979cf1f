"""Backend selection on machines without CuPy or a GPU."""

from __future__ import annotations

import importlib.util

import pytest

import plugrt as trt


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_cuda_device_without_cupy_says_what_to_install() -> None:
    with pytest.raises(trt.MissingBackendError, match=r"pip install 'plugrt\[cuda\]'"):
        trt.Runtime(trt.Logger(trt.Logger.ERROR), device="cuda")


def test_unknown_device_is_rejected() -> None:
    with pytest.raises(trt.TypeMismatchError, match="unknown device 'tpu'"):
        trt.Runtime(trt.Logger(trt.Logger.ERROR), device="tpu")
