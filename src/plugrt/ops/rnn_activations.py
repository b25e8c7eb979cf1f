"""The activation functions ONNX's recurrent cells accept, by name, with their alpha and beta.

``activation_alpha`` and ``activation_beta`` are consumed in order by the
functions that take them; a function that finds the list exhausted uses its
ONNX default (e.g. LeakyRelu's alpha 0.01), as the ONNX specification and
TensorRT's parser do. (onnxruntime instead uses 0 for Affine's, ScaledTanh's
and ThresholdedRelu's missing values; give them explicitly to agree with both.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import NetworkError
from .activation import activation_kernel

__all__ = ["ACTIVATIONS", "Activation", "activation_functions"]

#: ONNX's recurrent activation names (lower case) as activation layer types; Affine has none
_LAYER_TYPES = {
    "relu": "RELU",
    "tanh": "TANH",
    "sigmoid": "SIGMOID",
    "leakyrelu": "LEAKY_RELU",
    "thresholdedrelu": "THRESHOLDED_RELU",
    "scaledtanh": "SCALED_TANH",
    "hardsigmoid": "HARD_SIGMOID",
    "elu": "ELU",
    "softsign": "SOFTSIGN",
    "softplus": "SOFTPLUS",
}


def _affine(xp: Any, x: Any, out: Any, alpha: float, beta: float) -> None:
    xp.multiply(x, alpha, out=out)
    xp.add(out, beta, out=out)


@dataclass(frozen=True)
class Activation:
    """``f(xp, x, out)`` writes the activation of ``x`` into ``out`` (which may be ``x``); equal when the
    kernel, alpha and beta are."""

    kernel: Callable[[Any, Any, Any, float, float], None]
    alpha: float
    beta: float

    def __call__(self, xp: Any, x: Any, out: Any) -> None:
        self.kernel(xp, x, out, self.alpha, self.beta)


def _make(name: str, alpha: float, beta: float) -> Activation:
    if name == "softplus":  # the layer's softplus is alpha * log(1 + exp(beta * x))
        alpha, beta = 1.0, 1.0
    return Activation(_affine if name == "affine" else activation_kernel(_LAYER_TYPES[name]), alpha, beta)


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
    """One in-place callable per name (the activation layer's kernels); unknown names raise
    :class:`NetworkError` listing the valid ones. Equal names with equal alpha and beta give equal callables."""
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
