"""Layer fusion: pairs of standard layers the engine computes as one operator.

Runs on the built layer list (types, shapes and roles known), before memory planning.
Each rule replaces a producer and its only consumer by one layer named
``"<producer> + <consumer>"``, at the consumer's place; the tensor between them
disappears from the engine:

- **scaled softmax** — ``ElementWise PROD(x, s)`` then ``SoftMax``, where ``s`` is a
  one-element tensor of ``x``'s type: ``softmax(x * s)`` (attention's ``QK^T / sqrt(d)``),
  one kernel on the GPU.
- **matrix bias** — ``MatrixMultiply(a, b)`` then ``ElementWise SUM`` with a FLOAT bias of
  dims ``[1, ..., 1, N]``: the bias is added in the product's epilogue on the GPU.
- **convolution activation** — ``Convolution`` then a FLOAT ``RELU`` or ``CLIP`` activation
  (MobileNet's ReLU6): applied in place to the convolution's result, one memory pass fewer.

Results are those of the unfused layers (the same float operations in the same order on
the CPU). The tensor between the two layers must feed nothing else and must not be an
engine output.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from ..core.types import DataType
from ..engine.plan import LayerPlan, TensorPlan

__all__ = ["fuse_layers"]

Rule = Callable[[LayerPlan, LayerPlan, int, list[TensorPlan]], "LayerPlan | None"]


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
    if bias_index == link or out.dtype != DataType.FLOAT or tensors[bias_index].dtype != DataType.FLOAT:
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


#: activations a convolution applies to its result in place (after the bias), as one layer
_CONV_ACTIVATIONS = ("RELU", "CLIP")


def _conv_activation(first: LayerPlan, second: LayerPlan, link: int, tensors: list[TensorPlan]) -> LayerPlan | None:
    if first.kind != "convolution" or first.params.get("activation") or second.kind != "activation":
        return None
    if second.params.get("type") not in _CONV_ACTIVATIONS or tensors[link].dtype != DataType.FLOAT:
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


RULES: tuple[Rule, ...] = (_scaled_softmax, _matrix_bias, _conv_activation)


def fuse_layers(
    layers: list[LayerPlan], tensors: list[TensorPlan], io: list[int]
) -> tuple[list[LayerPlan], list[TensorPlan], list[int], list[str]]:
    """Apply the fusion rules; returns (layers, tensors, io) renumbered, and the fused layers' names."""
    uses = Counter(i for layer in layers for i in (*layer.inputs, *layer.shape_inputs))
    producer = {o: step for step, layer in enumerate(layers) for o in layer.outputs}
    consumer = {i: step for step, layer in enumerate(layers) for i in (*layer.inputs, *layer.shape_inputs)}
    merged: dict[int, LayerPlan] = {}
    dropped: set[int] = set()
    removed_tensors: set[int] = set()
    for link, count in uses.items():
        if count != 1 or tensors[link].role != "internal" or link not in producer or link in io:
            continue
        first_step, second_step = producer[link], consumer[link]
        if first_step in merged or first_step in dropped or second_step in merged or second_step in dropped:
            continue
        first, second = layers[first_step], layers[second_step]
        if first.is_plugin or second.is_plugin or second.weights or len(first.outputs) != 1:
            continue
        if first.size_outputs or second.size_outputs or second.shape_inputs or first_step > second_step:
            continue
        for rule in RULES:
            fused = rule(first, second, link, tensors)
            if fused is not None and fused.weights != first.weights:
                fused = None  # a rule that does not carry the producer's weights over cannot take it
            if fused is not None:  # placed where the consumer was: every input is ready there
                merged[second_step] = fused
                dropped.add(first_step)
                removed_tensors.add(link)
                break
    if not merged:
        return layers, tensors, io, []
    new_index: dict[int, int] = {}
    kept_tensors: list[TensorPlan] = []
    for index, tensor in enumerate(tensors):
        if index not in removed_tensors:
            new_index[index] = len(kept_tensors)
            kept_tensors.append(tensor)
    kept_layers: list[LayerPlan] = []
    for step, layer in enumerate(layers):
        if step in dropped:
            continue
        layer = merged.get(step, layer)
        layer.inputs = [new_index[i] for i in layer.inputs]
        layer.outputs = [new_index[o] for o in layer.outputs]
        layer.shape_inputs = [new_index[i] for i in layer.shape_inputs]
        kept_layers.append(layer)
    return kept_layers, kept_tensors, [new_index[i] for i in io], [merged[s].name for s in sorted(merged)]
