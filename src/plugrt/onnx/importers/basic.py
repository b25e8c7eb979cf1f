"""ONNX importers: basic ops."""

from __future__ import annotations
