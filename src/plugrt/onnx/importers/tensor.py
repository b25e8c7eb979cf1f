"""ONNX importers: tensor ops."""

from __future__ import annotations
