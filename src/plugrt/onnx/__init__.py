"""ONNX import: ``OnnxParser``, op importers, the plugin fallback and the ONNX backend API."""

from .errors import ErrorCode, ParserError
from .parser import OnnxParser, OnnxParserFlag

__all__ = ["ErrorCode", "OnnxParser", "OnnxParserFlag", "ParserError"]
