"""Enums of the standard layers and ``Weights``, with TensorRT's names and values."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.enums import TrtEnum
from ..core.errors import TypeMismatchError
from ..core.types import DataType, from_nptype, nptype

__all__ = [
    "ActivationType",
    "ElementWiseOperation",
    "MatrixOperation",
    "ReduceOperation",
    "UnaryOperation",
    "Weights",
]


class ElementWiseOperation(TrtEnum):
    """Binary operations of ``add_elementwise``."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    SUB = 4
    DIV = 5
    POW = 6
    FLOOR_DIV = 7
    AND = 8
    OR = 9
    XOR = 10
    EQUAL = 11
    GREATER = 12
    LESS = 13


class ActivationType(TrtEnum):
    """Functions of ``add_activation``; ``alpha``/``beta`` as in TensorRT.

    LEAKY_RELU ``x if x >= 0 else alpha*x``; ELU ``x if x >= 0 else alpha*(exp(x)-1)``;
    SELU ``beta*x if x > 0 else beta*(alpha*exp(x)-alpha)``; SOFTPLUS
    ``alpha*log(exp(beta*x)+1)``; CLIP ``max(alpha, min(beta, x))``; HARD_SIGMOID
    ``max(0, min(1, alpha*x+beta))``; SCALED_TANH ``alpha*tanh(beta*x)``;
    THRESHOLDED_RELU ``x if x > alpha else 0``.
    """

    RELU = 0
    SIGMOID = 1
    TANH = 2
    LEAKY_RELU = 3
    ELU = 4
    SELU = 5
    SOFTSIGN = 6
    SOFTPLUS = 7
    CLIP = 8
    HARD_SIGMOID = 9
    SCALED_TANH = 10
    THRESHOLDED_RELU = 11
    GELU_ERF = 12
    GELU_TANH = 13


class UnaryOperation(TrtEnum):
    """Operations of ``add_unary``."""

    EXP = 0
    LOG = 1
    SQRT = 2
    RECIP = 3
    ABS = 4
    NEG = 5
    SIN = 6
    COS = 7
    TAN = 8
    SINH = 9
    COSH = 10
    ASIN = 11
    ACOS = 12
    ATAN = 13
    ASINH = 14
    ACOSH = 15
    ATANH = 16
    CEIL = 17
    FLOOR = 18
    ERF = 19
    NOT = 20
    SIGN = 21
    ROUND = 22
    ISINF = 23
    ISNAN = 24


class MatrixOperation(TrtEnum):
    """How ``add_matrix_multiply`` treats an input.

    NONE: the last two dimensions are a matrix. TRANSPOSE: the same, transposed.
    VECTOR: the last dimension is a vector (the others are a collection).
    """

    NONE = 0
    TRANSPOSE = 1
    VECTOR = 2


class ReduceOperation(TrtEnum):
    """Operations of ``add_reduce``."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class Weights:
    """A flat, typed array of weights (TensorRT's ``trt.Weights``).

    ``Weights()`` is empty FLOAT weights, ``Weights(DataType.HALF)`` empty weights
    of a type, ``Weights(array)`` wraps a NumPy array without copying when it is
    already contiguous (as TensorRT, the array is read when the network is built).

    >>> w = Weights(np.arange(6, dtype=np.float32))
    >>> w.dtype, w.size, w.nbytes
    (<DataType.FLOAT: 0>, 6, 24)
    """

    def __init__(self, value: np.ndarray | np.generic | DataType | None = None) -> None:
        if value is None or isinstance(value, DataType):
            dtype = DataType.FLOAT if value is None else value
            self._array = np.zeros(0, dtype=nptype(dtype))
        elif isinstance(value, (np.ndarray, np.generic)):
            array = np.ascontiguousarray(value)
            try:
                from_nptype(array.dtype)
            except TypeMismatchError as error:
                raise TypeMismatchError(f"Weights: {error}; convert first, e.g. array.astype(np.float32)") from None
            self._array = array.reshape(-1)
        else:
            raise TypeMismatchError(f"Weights takes a NumPy array, a DataType or nothing, got {type(value).__name__}")

    @property
    def dtype(self) -> DataType:
        """The element type."""
        return from_nptype(self._array.dtype)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(self._array.size)

    @property
    def nbytes(self) -> int:
        """Number of bytes."""
        return int(self._array.nbytes)

    def numpy(self) -> np.ndarray:
        """The weights as a flat NumPy array (a view, not a copy)."""
        return self._array

    def __len__(self) -> int:
        return self.size

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Weights):
            return NotImplemented
        return self._array.dtype == other._array.dtype and bool(np.array_equal(self._array, other._array))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Weights({self.dtype.name}, size={self.size})"
