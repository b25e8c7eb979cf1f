"""ONNX import: ``OnnxParser``, op importers, the plugin fallback and the ONNX backend API."""
