"""The fill_like operator: a tensor of one value, shaped like its input.

Used where ONNX wants a tensor of known contents but data-dependent shape (the
all-True mask of an inference-mode Dropout, for example).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.types import nptype
from .base import register_operator
from .cast import ToTypeOperator

__all__ = ["FillLikeOperator"]


@register_operator
class FillLikeOperator(ToTypeOperator):
    """``out = full(x.shape, value)``; params: ``value`` (number or bool), ``to_type`` (a DataType name)."""

    kind = "fill_like"

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.value = np.asarray(self.param("value")).astype(nptype(self.to_type))

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        outputs[0][...] = self.value
