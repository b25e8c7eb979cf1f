"""Imports every built-in importer module so their op types are registered."""

from . import (  # noqa: F401  (imported for registration)
    basic,
    cnn,
    cnn_norm,
    cnn_resize,
    control_flow,
    math_extra,
    quantize,
    quantized_ops,
    recurrent,
    tensor,
    tensor_select,
)
