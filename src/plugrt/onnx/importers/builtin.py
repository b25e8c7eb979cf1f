"""Imports every built-in importer module so their op types are registered."""

from . import basic, cnn, cnn_norm, cnn_resize, control_flow, math_extra, quantize, recurrent, tensor, tensor_select  # noqa: F401  (imported for registration)
