"""Imports every built-in operator module so their kinds are registered."""

from . import (  # noqa: F401  (imported for registration)
    activation,
    cast,
    concatenation,
    constant,
    elementwise,
    identity,
    matrix_multiply,
    reduce,
    reformat,
    shuffle,
    softmax,
    unary,
)
