"""ONNX importers: cnn ops."""

from __future__ import annotations
