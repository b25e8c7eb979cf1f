"""Parsing trtexec-style shape and input arguments: ``name:1x3x224x224,other:4x8`` and ``name:file``."""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from .errors import UsageError

__all__ = ["load_input", "parse_input_files", "parse_shapes"]


def _split_name(item: str, flag: str) -> tuple[str, str]:
    name, sep, value = item.rpartition(":")
    if not sep or not name:
        raise UsageError(f"{flag}: expected NAME:VALUE, got {item!r}")
    return name.strip("'\""), value


def parse_shapes(values: Iterable[str], flag: str) -> dict[str, tuple[int, ...]]:
    """``--shapes=x:1x3x8,y:2`` (repeatable, comma-separated) → {name: shape}; ``x:scalar`` is 0-d."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        for item in (v for v in value.split(",") if v):
            name, text = _split_name(item, flag)
            if text in ("", "scalar"):
                shapes[name] = ()
                continue
            try:
                dims = tuple(int(d) for d in text.split("x"))
            except ValueError:
                raise UsageError(f"{flag}: shape {text!r} of {name!r} must look like 1x3x224x224") from None
            if any(d < 0 for d in dims):
                raise UsageError(f"{flag}: shape {text!r} of {name!r} has a negative dimension")
            shapes[name] = dims
    return shapes


def parse_input_files(values: Iterable[str]) -> dict[str, str]:
    """``--loadInputs=x:x.npy,y:y.bin`` → {name: path}."""
    files: dict[str, str] = {}
    for value in values:
        for item in (v for v in value.split(",") if v):
            name, path = _split_name(item, "--loadInputs")
            if not os.path.isfile(path):
                raise UsageError(f"--loadInputs: file {path!r} for input {name!r} does not exist")
            files[name] = path
    return files


def load_input(path: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A ``.npy`` file (shape and dtype checked) or raw bytes (as trtexec reads them)."""
    if path.endswith(".npy"):
        array = np.load(path, allow_pickle=False)
        if array.shape != shape:
            raise UsageError(f"--loadInputs: {path!r} holds shape {array.shape}, the input needs {shape}")
        return np.ascontiguousarray(array, dtype=dtype)
    raw = np.fromfile(path, dtype=np.uint8)
    needed = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if raw.nbytes != needed:
        raise UsageError(f"--loadInputs: {path!r} has {raw.nbytes} bytes; shape {shape} of {dtype} needs {needed}")
    return raw.view(dtype).reshape(shape).copy()
