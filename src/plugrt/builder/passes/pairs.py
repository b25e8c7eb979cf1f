"""Pair rules: a producer and its only reader the engine computes as one operator.

- **scaled softmax** — ``ElementWise PROD(x, s)`` then ``SoftMax``, where ``s`` is a
  one-element tensor of ``x``'s type: ``softmax(x * s)`` (attention's ``QK^T / sqrt(d)``),
  one kernel on the GPU.
- **matrix bias** — ``MatrixMultiply(a, b)`` then ``ElementWise SUM`` with a bias of its type and
  dims ``[1, ..., 1, N]``: the bias is added in the product's epilogue on the GPU.
- **convolution residual** — ``Convolution`` (no activation yet) then a ``SUM`` of its type with a
  tensor of its output's shape (ResNet's and MobileNetV2's shortcut): added in place to the
  result (``residual``, the fused layer's last input).
- **convolution activation** — ``Convolution`` then an activation the convolution
  applies in place (``ops/conv.py`` ``FUSED_ACTIVATIONS``: ReLU, ReLU6's Clip, hard-swish,
  hard-sigmoid, sigmoid, tanh, leaky ReLU), one memory pass fewer; with the PyTorch
  tactic the activation is the pass that writes the output.

FLOAT or HALF (under ``BuilderFlag.FP16``). In FLOAT the results are those of the unfused layers
(the same float operations in the same order on the CPU); in HALF the fused epilogue adds before it
rounds to half (the convolution's in FLOAT), so results differ from the unfused layers' by half's
rounding, and are closer to the exact values. The fused layer is named ``"<producer> + <consumer>"``.
"""

from __future__ import annotations

from collections.abc import Callable

from ...engine.plan import LayerPlan, TensorPlan
from ...ops.conv import FUSED_ACTIVATIONS
from .graph import FLOAT_TYPES, Fusion, LayerGraph

__all__ = ["conv_activation", "conv_residual", "matrix_bias", "scaled_softmax"]

PairRule = Callable[[LayerPlan, LayerPlan, int, list[TensorPlan]], "LayerPlan | None"]


def _one_element(tensor: TensorPlan) -> bool:
    return all(d.is_constant() and d.get_constant_value() == 1 for d in tensor.shape)


def _scaled_softmax(first: LayerPlan, second: LayerPlan, link: int, tensors: list[TensorPlan]) -> LayerPlan | None:
    if first.kind != "elementwise" or first.params.get("op") != "PROD" or second.kind != "softmax":
        return None
    if second.params.get("scaled") or len(first.inputs) != 2:
        return None
    for x, s in (first.inputs, first.inputs[::-1]):
        big, scale, out = tensors[x], tensors[s], tensors[link]
        if _one_element(scale) and len(scale.shape) <= len(big.shape) and big.dtype == scale.dtype == out.dtype:
            if len(big.shape) == len(out.shape) and all(p == q for p, q in zip(big.shape, out.shape)):
                return LayerPlan(
                    f"{first.name} + {second.name}",
                    "softmax",
                    [x, s],
                    list(second.outputs),
                    params={**second.params, "scaled": True},
                )
    return None


def _matrix_bias(first: LayerPlan, second: LayerPlan, link: int, tensors: list[TensorPlan]) -> LayerPlan | None:
    if first.kind != "matrix_multiply" or first.params.get("bias") or first.params.get("op1") == "VECTOR":
        return None
    if second.kind != "elementwise" or second.params.get("op") != "SUM" or len(second.inputs) != 2:
        return None
    out = tensors[link]
    bias_index = second.inputs[1] if second.inputs[0] == link else second.inputs[0]
    if bias_index == link or out.dtype not in FLOAT_TYPES or tensors[bias_index].dtype != out.dtype:
        return None
    bias = tensors[bias_index].shape
    if (
        not bias
        or len(bias) > len(out.shape)
        or not all(d.is_constant() and d.get_constant_value() == 1 for d in bias[:-1])
    ):
        return None
    if not (bias[-1].is_constant() and out.shape[-1].is_constant() and bias[-1] == out.shape[-1]):
        return None
    return LayerPlan(
        f"{first.name} + {second.name}",
        "matrix_multiply",
        [*first.inputs, bias_index],
        list(second.outputs),
        params={**first.params, "bias": True},
    )


def _conv_residual(first: LayerPlan, second: LayerPlan, link: int, tensors: list[TensorPlan]) -> LayerPlan | None:
    if first.kind != "convolution" or first.params.get("activation") or first.params.get("residual"):
        return None
    if second.kind != "elementwise" or second.params.get("op") != "SUM" or len(second.inputs) != 2:
        return None
    other = second.inputs[1] if second.inputs[0] == link else second.inputs[0]
    out, residual = tensors[link], tensors[other]
    if other == link or out.dtype not in FLOAT_TYPES or residual.dtype != out.dtype:
        return None
    if len(residual.shape) != len(out.shape) or any(not (r == o) for r, o in zip(residual.shape, out.shape)):
        return None
    return LayerPlan(
        f"{first.name} + {second.name}",
        "convolution",
        [*first.inputs, other],
        list(second.outputs),
        params={**first.params, "residual": True},
        weights=dict(first.weights),
    )


def _conv_activation(first: LayerPlan, second: LayerPlan, link: int, tensors: list[TensorPlan]) -> LayerPlan | None:
    if first.kind != "convolution" or first.params.get("activation") or second.kind != "activation":
        return None
    if second.params.get("type") not in FUSED_ACTIVATIONS or tensors[link].dtype not in FLOAT_TYPES:
        return None
    return LayerPlan(
        f"{first.name} + {second.name}",
        "convolution",
        list(first.inputs),
        list(second.outputs),
        params={
            **first.params,
            "activation": second.params["type"],
            "activation_alpha": float(second.params.get("alpha", 0.0)),
            "activation_beta": float(second.params.get("beta", 0.0)),
        },
        weights=dict(first.weights),
    )


def _pair(rule: PairRule) -> Callable[[LayerGraph, int], Fusion | None]:
    """A graph rule anchored at the reader: ``rule`` on each input whose producer only this layer reads."""

    def run(graph: LayerGraph, step: int) -> Fusion | None:
        second = graph.layer(step)
        if second.weights:
            return None
        for link in second.inputs:
            first_step = graph.producer.get(link)
            if first_step is None or graph.only_reader(link) != step or graph.readers[link].count(step) != 1:
                continue
            first = graph.layer(first_step)
            if len(first.outputs) != 1 or not graph.fusable(first_step):
                continue
            fused = rule(first, second, link, graph.tensors)
            if fused is not None and fused.weights == first.weights:  # the producer's weights carried over
                return Fusion([first_step, step], fused)
        return None

    run.__name__ = rule.__name__.lstrip("_")
    run.__doc__ = rule.__doc__
    return run


scaled_softmax = _pair(_scaled_softmax)
matrix_bias = _pair(_matrix_bias)
conv_residual = _pair(_conv_residual)
conv_activation = _pair(_conv_activation)
