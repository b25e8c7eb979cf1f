"""ONNX op importers, one module per op family."""
