"""The graph optimizer: rules that fuse standard layers into fewer operators, then dead-layer removal.

Runs on the built layer list (types, shapes and roles known), before in-place outputs and
memory planning. One registry, :data:`RULES`, applied in its order; each rule sweeps the
layers and, at an anchor layer, may return a :class:`~plugrt.builder.passes.graph.Fusion`
(layers that become one new layer, placed where the last of them was). A fusion is made
only when every tensor it removes is internal and read by the fused layers alone.

=====================  ==================================================================  ==================
rule                   what                                                                results
=====================  ==================================================================  ==================
``round_trips``        HALF → FLOAT (cast) → HALF (reformat): readers read the HALF source   bit-identical
``scaled_softmax``     ``PROD(x, s)`` by a one-element ``s``, then ``SoftMax``               bit-identical
``matrix_bias``        ``MatrixMultiply``, then a FLOAT ``SUM`` of a ``[1, ..., N]`` bias     bit-identical
``attention``          ``MatMul → [Mul/Div c] → [Add mask] → SoftMax → MatMul`` → attention    bit-identical
``conv_affine``        ``Convolution`` or inference BN, then PROD/DIV/SUM/SUB by per-map c   ~1e-6 relative
``gelu``               every exported spelling of GELU (erf and tanh forms) → activation     few ulp
``hard_swish``         ``x * clip(x + 3, 0, 6) / 6`` spelled out → ``HARD_SWISH`` activation bit-identical
``conv_residual``      ``Convolution``, then a FLOAT ``SUM`` with a tensor of its shape       bit-identical
``conv_activation``    ``Convolution``, then a FLOAT activation it applies in place          same kernels
``conv_scale_shift``   ``Convolution`` + activation, then PROD/DIV/SUM/SUB by a scalar       ≤ 1 ulp
``spatial_pooling``    ``reduce`` AVG/MAX over H and W of ``[N, C, H, W]``, kept → global pool few ulp (AVG)
``squeeze_excitation`` GlobalAveragePool → 1x1 Conv → 1x1 Conv → Mul(x, ·) → one layer        few ulp
``layer_norm``         ReduceMean/Sub/square/ReduceMean/eps/Sqrt/Div (gamma, beta)          ~1e-6 relative
``residual_layer_norm`` ``SUM(x, r)`` then layer normalization → one kernel (GPU)             ~1e-6 relative
``elementwise_chain``  runs of elementwise layers, inference BN → ``fused_elementwise``      bit-identical
``duplicate_layers``   a layer repeating an earlier one's kind, params, weights and inputs     bit-identical
``dead_layers``        layers nobody reads after fusion (then their weights)                 –
=====================  ==================================================================  ==================

(``builder/passes/``: ``round_trips.py`` (first, so that the patterns the casts interrupted are found), ``pairs.py``, ``attention.py``, ``conv_fold.py``, ``gelu.py``, ``spatial.py``, ``squeeze.py``, ``layer_norm.py``,
``chains.py``, ``duplicates.py``, ``dead.py``.) ``hard_swish`` is bit-identical to PaddlePaddle's spelling, a few ulp from others;
``conv_activation`` applies the activation layer's kernel (NumPy's, or torch's under the
PyTorch tactic, whose results may differ from NumPy's by a few ulp where the unfused
layers chose otherwise).

The environment variable ``PLUGRT_DISABLE_PASSES`` turns rules off for the builds that
follow: ``all``, or names separated by commas (e.g. ``gelu,elementwise_chain``); unknown
names raise :class:`~plugrt.BuildError`. Comparing an engine with the one built with
``all`` is how the tests check each rule.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np

from ..core.errors import BuildError
from ..engine.plan import LayerPlan, TensorPlan
from .passes.attention import attention
from .passes.chains import elementwise_chain
from .passes.conv_fold import conv_affine, conv_scale_shift
from .passes.dead import remove_dead_layers
from .passes.duplicates import merge_duplicates
from .passes.gelu import gelu, hard_swish
from .passes.graph import Fusion, LayerGraph
from .passes.layer_norm import layer_norm, residual_layer_norm
from .passes.pairs import conv_activation, conv_residual, matrix_bias, scaled_softmax
from .passes.round_trips import drop_round_trips
from .passes.spatial import spatial_pooling
from .passes.squeeze import squeeze_excitation

__all__ = ["DISABLE_ENV", "PASS_NAMES", "RULES", "Rule", "disabled_passes", "fuse_layers"]

#: the environment variable naming the passes to skip
DISABLE_ENV = "PLUGRT_DISABLE_PASSES"


@dataclass(frozen=True)
class Rule:
    """A named rewrite: ``match(graph, step)`` gives the fusion anchored at ``step``, or None."""

    name: str
    match: Callable[[LayerGraph, int], Fusion | None]
    #: applied only to builds for the CPU (a rule that saves per-layer calls there and costs kernels on a GPU)
    cpu_only: bool = False
    #: applied only to builds for a GPU (a rule whose fused layer has a kernel of its own there alone)
    gpu_only: bool = False


RULES: tuple[Rule, ...] = (
    Rule("scaled_softmax", scaled_softmax),
    Rule("matrix_bias", matrix_bias),
    Rule("attention", attention),
    Rule("conv_affine", conv_affine),
    Rule("gelu", gelu),
    Rule("hard_swish", hard_swish),
    Rule("conv_residual", conv_residual),
    Rule("conv_activation", conv_activation),
    Rule("conv_scale_shift", conv_scale_shift),
    # before the SE rule, which anchors on global pooling
    Rule("spatial_pooling", spatial_pooling),
    # on a GPU its NumPy-shaped kernel is a dozen small launches: 0.47-0.57 ms a block eagerly, MobileNetV3-small's
    # eager run 5.3 ms fused against 2.9 ms with the layers apart, replayed no faster (H200, docs/benchmarks.md)
    Rule("squeeze_excitation", squeeze_excitation),
    Rule("layer_norm", layer_norm),
    # one CUDA kernel reads x and r and normalizes their sum (BERT-base fp16 at batch 32: 27 adds were 16% of its
    # kernel time); on the CPU the fused layer would only add the two first and lose PyTorch's layer_norm tactic
    Rule("residual_layer_norm", residual_layer_norm, gpu_only=True),
    Rule("elementwise_chain", elementwise_chain),
)
#: every pass a build runs, in order (type round trips, the rules, then merging duplicate layers, then dead-layer
#: removal)
PASS_NAMES: tuple[str, ...] = ("round_trips", *(rule.name for rule in RULES), "duplicate_layers", "dead_layers")


def disabled_passes(text: str | None = None) -> frozenset[str]:
    """The passes ``text`` (default: ``$PLUGRT_DISABLE_PASSES``) turns off; an unknown name raises."""
    text = os.environ.get(DISABLE_ENV, "") if text is None else text
    names = {name.strip() for name in text.split(",") if name.strip()}
    if "all" in names:
        return frozenset(PASS_NAMES)
    unknown = sorted(names - set(PASS_NAMES))
    if unknown:
        raise BuildError(f"{DISABLE_ENV} names unknown passes {unknown}; known: all, {', '.join(PASS_NAMES)}")
    return frozenset(names)


def fuse_layers(
    layers: list[LayerPlan],
    tensors: list[TensorPlan],
    io: list[int],
    weights: dict[str, np.ndarray] | None = None,
    disabled: Collection[str] | None = None,
    gpu: bool = False,
) -> tuple[list[LayerPlan], list[TensorPlan], list[int], list[str]]:
    """Run the passes; returns (layers, tensors, io) renumbered, and the fused layers' names.

    ``weights`` is the plan's weight table (constants are read from it; weights no layer
    uses any more leave it); ``disabled`` names passes to skip (default: the environment's);
    ``gpu``: the build is for a GPU (rules marked ``cpu_only`` are skipped; else those marked ``gpu_only``).
    """
    skip = disabled_passes() if disabled is None else frozenset(disabled)
    table = weights if weights is not None else {}
    graph = LayerGraph(layers, tensors, io, table, gpu)
    dropped = [] if "round_trips" in skip else drop_round_trips(graph)
    fused: list[str] = []
    for rule in RULES:
        if rule.name in skip or (rule.cpu_only if gpu else rule.gpu_only):
            continue
        for step in graph.steps():
            if graph.layers[step] is None:
                continue
            fusion = rule.match(graph, step)
            if fusion is not None and graph.apply(fusion):
                fused.append(fusion.layer.name)
    merged = merge_duplicates(graph) if "duplicate_layers" not in skip else []
    if not fused and not merged and not dropped and "dead_layers" in skip:
        return layers, tensors, io, []
    if "dead_layers" not in skip:
        remove_dead_layers(graph)
    layers, tensors, io = graph.compact()
    if weights is not None:
        used = {key for layer in layers for key in layer.weights.values()}
        for key in [k for k in weights if k not in used]:
            del weights[key]
    return layers, tensors, io, fused
