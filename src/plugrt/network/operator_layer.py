"""``IOperatorLayer``: a layer that runs any registered operator (used by the ONNX importer).

TensorRT-named layers (``add_elementwise`` …) cover TensorRT's layer set; ONNX ops
without a TensorRT layer of their own are added as an operator kind with params
and weights, through :meth:`INetworkDefinition.add_operator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops.base import Operator, create_operator
from .layer import ILayer, LayerType
from .tensor import ITensor

__all__ = ["IOperatorLayer"]


class IOperatorLayer(ILayer):
    """A layer running operator ``kind`` with ``params`` and ``weights``."""

    layer_type = LayerType.PLUGIN  # shown as a generic layer

    def __init__(
        self,
        network: Any,
        inputs: list[ITensor | None],
        kind: str,
        params: dict[str, Any],
        weights: dict[str, np.ndarray],
        num_outputs: int,
    ) -> None:
        super().__init__(network, inputs, num_outputs)
        self.kind = kind
        self.params = dict(params)
        self.weights = dict(weights)

    def to_operator(self) -> Operator:
        """The operator with this layer's current params and weights."""
        return create_operator(self.kind, self.params, self.weights)
