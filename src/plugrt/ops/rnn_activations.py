"""The activation functions ONNX's recurrent cells accept, by name, with their alpha and beta.

``activation_alpha`` and ``activation_beta`` are consumed in order by the
functions that take them; a function that finds the list exhausted uses its
ONNX default (e.g. LeakyRelu's alpha 0.01), as the ONNX specification and
TensorRT's parser do. (onnxruntime instead uses 0 for Affine's, ScaledTanh's
and ThresholdedRelu's missing values; give them explicitly to agree with both.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError

__all__ = ["ACTIVATIONS", "activation_functions"]

Activation = Callable[[Any], Any]


def _sigmoid(x: Any) -> Any:
    # Split by sign so exp never overflows.
    positive = x >= 0
    z = np.exp(np.where(positive, -x, x))
    return np.where(positive, 1 / (1 + z), z / (1 + z))


def _make(name: str, alpha: float, beta: float) -> Activation:
    if name == "relu":
        return lambda x: np.maximum(x, 0)
    if name == "tanh":
        return np.tanh
    if name == "sigmoid":
        return _sigmoid
    if name == "affine":
        return lambda x: alpha * x + beta
    if name == "leakyrelu":
        return lambda x: np.where(x >= 0, x, alpha * x)
    if name == "thresholdedrelu":
        return lambda x: np.where(x > alpha, x, 0)
    if name == "scaledtanh":
        return lambda x: alpha * np.tanh(beta * x)
    if name == "hardsigmoid":
        return lambda x: np.clip(alpha * x + beta, 0, 1)
    if name == "elu":
        return lambda x: np.where(x >= 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))
    if name == "softsign":
        return lambda x: x / (1 + np.abs(x))
    return lambda x: np.logaddexp(0, x).astype(x.dtype)  # softplus


#: lower-case name -> (takes alpha, takes beta, default alpha, default beta)
ACTIVATIONS: dict[str, tuple[bool, bool, float, float]] = {
    "relu": (False, False, 0.0, 0.0),
    "tanh": (False, False, 0.0, 0.0),
    "sigmoid": (False, False, 0.0, 0.0),
    "affine": (True, True, 1.0, 0.0),
    "leakyrelu": (True, False, 0.01, 0.0),
    "thresholdedrelu": (True, False, 1.0, 0.0),
    "scaledtanh": (True, True, 1.0, 1.0),
    "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, 0.0),
    "softsign": (False, False, 0.0, 0.0),
    "softplus": (False, False, 0.0, 0.0),
}


def activation_functions(names: Sequence[str], alphas: Sequence[float], betas: Sequence[float]) -> list[Activation]:
    """One callable per name; unknown names raise :class:`NetworkError` listing the valid ones."""
    functions: list[Activation] = []
    alpha_iter, beta_iter = iter(alphas), iter(betas)
    for name in names:
        key = name.lower()
        if key not in ACTIVATIONS:
            raise NetworkError(f"recurrent: unknown activation {name!r}; valid: {', '.join(sorted(ACTIVATIONS))}")
        takes_alpha, takes_beta, alpha, beta = ACTIVATIONS[key]
        if takes_alpha:
            alpha = next(alpha_iter, alpha)
        if takes_beta:
            beta = next(beta_iter, beta)
        functions.append(_make(key, alpha, beta))
    return functions
