"""The attention rule: the layers an exporter writes for scaled dot-product attention, as one ``attention`` layer.

``MatrixMultiply(a, b)`` → [``ElementWise PROD/DIV`` by a one-element tensor] → [``ElementWise SUM`` with a
mask] → ``SoftMax`` over the last axis (perhaps already scaled, see ``pairs.py``) → ``MatrixMultiply(p, v)``,
each intermediate read only by the next: BERT's and ViT's ``QK^T / sqrt(d) (+ mask)``, and the
``Mul``-scaled form; the transposes that split the heads off its inputs and merge them in its result, and
the query's and key's own scales (the exported ``scaled_dot_product_attention``'s), are taken in too; between the softmax and the second product, ``Where(IsNaN(p), 0, p)`` (the dynamo
exporter's guard for rows the mask removes entirely) is taken in too. The fused layer (:class:`~plugrt.ops.attention.AttentionOperator`) computes the same
steps in the same order (bit-identical), and keeps the softmax's result as its second output, in the
engine's activation memory; with PyTorch its scaled-dot-product-attention kernel is a tactic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...engine.plan import LayerPlan
from ...ops.softmax import SoftmaxOperator
from .graph import FLOAT_TYPES, Fusion, LayerGraph
from .view_chains import is_view_step, view_recipe

__all__ = ["attention"]

_OPS = ("NONE", "TRANSPOSE")
_TRANSPOSES = ("first_transpose", "second_transpose")


def _one_element(graph: LayerGraph, tensor: int) -> bool:
    return all(d.is_constant() and d.get_constant_value() == 1 for d in graph.tensors[tensor].shape)


def _private_from(graph: LayerGraph, tensor: int, reader: int) -> tuple[int, LayerPlan] | None:
    """The step and layer writing ``tensor`` when it is internal and ``reader`` its only reader."""
    step = graph.producer.get(tensor)
    if step is None or graph.only_reader(tensor) != reader or not graph.fusable(step):
        return None
    return step, graph.layer(step)


def _product_chain(
    graph: LayerGraph, current: int, reader: int
) -> tuple[list[int], tuple[str, int] | None, LayerPlan] | None:
    """[Scale by a one-element tensor ←] product, ending at ``current`` read by ``reader``: (steps, pre, product)."""
    steps: list[int] = []
    pre = None
    found = _private_from(graph, current, reader)
    if found is not None and found[1].kind == "elementwise" and found[1].params.get("op") in ("PROD", "DIV"):
        scale_step, scale = found
        orders = [scale.inputs] if scale.params["op"] == "DIV" else [scale.inputs, scale.inputs[::-1]]
        for scores, factor in orders:
            if _one_element(graph, factor) and not _one_element(graph, scores):
                pre, current, reader = (str(scale.params["op"]), factor), scores, scale_step
                steps.append(scale_step)
                break
        found = _private_from(graph, current, reader)
    if found is None or found[1].kind != "matrix_multiply" or found[1].params.get("bias") or len(found[1].inputs) != 2:
        return None
    if found[1].params.get("op0") not in _OPS or found[1].params.get("op1") not in _OPS:
        return None
    return [found[0], *steps], pre, found[1]


def _nan_guard(graph: LayerGraph, where_step: int, where: LayerPlan) -> tuple[tuple[int, LayerPlan], list[int]] | None:
    """``Where(IsNaN(p), 0, p)`` at ``where_step``: ((the softmax's step, the softmax), [IsNaN's step, the Where's
    step]) when ``p`` is a softmax's result read by those two alone, else None."""
    if len(where.inputs) != 3:
        return None
    condition, zero, probs = where.inputs
    test_step = graph.producer.get(condition)
    softmax_step = graph.producer.get(probs)
    if test_step is None or softmax_step is None or graph.only_reader(condition) != where_step:
        return None
    test = graph.layer(test_step)
    if test.kind != "unary" or test.params.get("op") != "ISNAN" or test.inputs != [probs]:
        return None
    value = graph.value(zero)
    if value is None or value.size != 1 or float(value.reshape(-1)[0]) != 0.0:
        return None
    if not graph.private(probs) or graph.read_by(probs) != {test_step, where_step} or not graph.fusable(test_step):
        return None
    softmax = graph.layer(softmax_step)
    if softmax.kind != "softmax" or not graph.fusable(softmax_step):
        return None
    return (softmax_step, softmax), [test_step, where_step]


def attention(graph: LayerGraph, step: int) -> Fusion | None:
    """The attention fusion ending at the product ``step`` (see the module's note), or None."""
    second = graph.layer(step)
    if second.kind != "matrix_multiply" or second.params.get("bias") or len(second.inputs) != 2:
        return None
    if second.params.get("op0") != "NONE" or second.params.get("op1") not in _OPS:
        return None
    probs, value = second.inputs
    found = _private_from(graph, probs, step) if probs != value else None
    guard = _nan_guard(graph, found[0], found[1]) if found is not None and found[1].kind == "where" else None
    if guard is not None:
        found, guard_steps = guard[0], guard[1]
        probs = found[1].outputs[0]
    if found is None or found[1].kind != "softmax":
        return None
    softmax_step, softmax = found
    rank = len(graph.tensors[probs].shape)
    if rank < 2 or SoftmaxOperator(dict(softmax.params)).axes_for(rank) != (rank - 1,):
        return None
    post = softmax.inputs[1] if softmax.params.get("scaled") else None
    current = softmax.inputs[0]
    chain, masked, steps = None, None, [softmax_step, step]
    found = _private_from(graph, current, softmax_step)
    if found is not None and found[1].kind == "elementwise" and found[1].params.get("op") == "SUM":
        add_step, add = found
        for scores, mask in (add.inputs, add.inputs[::-1]):
            chain = _product_chain(graph, scores, add_step) if scores != mask else None
            if chain is not None:
                masked = mask
                steps.insert(0, add_step)
                break
    if chain is None:
        chain = _product_chain(graph, current, softmax_step)
    if chain is None:
        return None
    chain_steps, pre, first = chain
    steps = [*chain_steps, *steps, *(guard_steps if guard is not None else [])]
    core = _Core(steps, pre, masked, post, guard is not None, first, second, probs, value, step)
    fusion = _fused(graph, core, shared=True)  # q, k and v split off one tensor by one chain of layers
    return fusion if fusion is not None and graph.sound(fusion) else _fused(graph, core, shared=False)


@dataclass
class _Core:
    """The attention's own layers: steps, pre-scale, mask, softmax scale, NaN guard, the two products, the
    scores, ``v`` and the second product's step."""

    steps: list[int]
    pre: tuple[str, int] | None
    masked: int | None
    post: int | None
    guard: bool
    first: LayerPlan
    second: LayerPlan
    probs: int
    value: int
    step: int


def _fused(graph: LayerGraph, core: _Core, shared: bool) -> Fusion | None:
    """The fused layer of ``core`` with what its inputs are read through taken in (see :func:`_taken_in`)."""
    first, second, step, pre, masked, post = core.first, core.second, core.step, core.pre, core.masked, core.post
    inputs = [*first.inputs, core.value]
    readers = [core.steps[0], core.steps[0], step]
    distinct = len(set(inputs)) == 3
    taken = [_taken_in(graph, t, r, i < 2, shared) if distinct else _Around(t) for i, (t, r) in
             enumerate(zip(inputs, readers))]  # fmt: skip
    inputs = [around.source for around in taken]
    steps, probs = list(core.steps), core.probs
    result, out_perm = second.outputs[0], None
    following = _pure_transpose(graph, result, step)
    if following is not None:
        out_perm, steps = following[1], [*steps, *following[0]]
        result = graph.layer(following[0][-1]).outputs[0]
    scales = [around.scale for around in taken[:2] if around.scale is not None]
    extra = [t for t in (pre[1] if pre else None, masked, post, *scales) if t is not None]
    dtype = graph.tensors[probs].dtype
    if dtype not in FLOAT_TYPES or any(graph.tensors[t].dtype != dtype for t in (*inputs, *extra)):
        return None
    params = {
        "op0": first.params["op0"],
        "op1": first.params["op1"],
        "value_op": second.params["op1"],
        "pre": pre[0] if pre else "",
        "mask": masked is not None,
        "scaled": post is not None,
        "nan_to_zero": core.guard,
        "perm_a": taken[0].perm,
        "perm_b": taken[1].perm,
        "perm_v": taken[2].perm,
        "perm_out": out_perm or [],
        "scale_a": taken[0].scale is not None,
        "scale_b": taken[1].scale is not None,
    }
    for name, around in zip("abv", taken):
        if around.split is not None:
            params[f"split_{name}"], params[f"select_{name}"] = around.split, around.select
    steps = sorted({*steps, *(s for around in taken for s in around.steps)})
    names = " + ".join(graph.layer(s).name for s in sorted(steps))
    layer = LayerPlan(names, "attention", [*inputs, *extra], [result, probs], params=params)
    return Fusion(steps, layer)


@dataclass
class _Around:
    """What an attention input is read through: ``source`` seen through a view recipe (``split`` and ``select``,
    None: no reshape, ``builder/passes/view_chains.py``) and transposed by ``perm`` (``[]``: none), times the
    one-element ``scale`` (None: none); ``steps`` are the layers that did it."""

    source: int
    perm: list[int] = field(default_factory=list)
    scale: int | None = None
    steps: list[int] = field(default_factory=list)
    split: list[list[int]] | None = None
    select: list[int] = field(default_factory=list)


#: the most layers one input's chain may take in (the scale and the view steps)
_CHAIN = 12


def _taken_in(graph: LayerGraph, tensor: int, reader: int, scale: bool, shared: bool) -> _Around:
    """The layers before ``reader`` that only move ``tensor``'s elements (transposes, reshapes, squeezes, a Gather of
    one index: a strided view of their source, :func:`~.view_chains.view_recipe`) and, where ``scale``, the ``Mul``
    by a one-element tensor, in any order: the exported ``scaled_dot_product_attention`` splits the heads off with
    a transpose and scales the query and the key each by the square root of its scale, ``nn.MultiheadAttention``
    splits q, k and v off one projection. Each tensor on the way is read by the next layer alone, or (``shared``)
    by other layers too, which the caller checks are all taken in."""
    links: list[tuple[int, LayerPlan, int | None]] = []  # (step, layer, scale factor), from ``tensor`` back
    source = tensor
    for _ in range(_CHAIN):
        step = graph.producer.get(source)
        readers = graph.read_by(source)
        if step is None or not graph.fusable(step) or not graph.private(source):
            break
        if readers != {reader} and not (shared and reader in readers):
            break
        layer = graph.layer(step)
        if scale and not any(f is not None for _, _, f in links) and _scaling(graph, layer) is not None:
            operand, factor = _scaling(graph, layer)  # type: ignore[misc]
            links.append((step, layer, factor))
            source = operand
        elif is_view_step(graph, layer):
            links.append((step, layer, None))
            source = layer.inputs[0]
        else:
            break
        reader = step
    for cut in range(len(links), 0, -1):  # the longest chain that is a view
        kept = links[:cut]
        last = kept[-1]
        start = last[1].inputs[0] if last[2] is None else _scaling(graph, last[1])[0]  # type: ignore[index]
        chain = [layer for _, layer, _ in reversed(kept)]
        recipe = view_recipe(graph, start, chain)
        if recipe is None:
            continue
        factors = [f for _, _, f in kept if f is not None]
        around = _Around(start, scale=factors[0] if factors else None, steps=[s for s, _, _ in kept])
        # one atom per axis (the whole axis), none fixed, no unit axis added: a transpose alone, as plans had it
        if all(len(a) == 1 for a in recipe.split) and not recipe.select and -1 not in recipe.perm:
            around.perm = [] if recipe.perm == sorted(recipe.perm) else recipe.perm
        else:
            around.split, around.select, around.perm = recipe.split, recipe.select, recipe.perm
        return around
    return _Around(tensor)


def _scaling(graph: LayerGraph, layer: LayerPlan) -> tuple[int, int] | None:
    """(the scaled operand, the one-element factor) of a ``Mul`` by a one-element tensor, else None."""
    if layer.kind != "elementwise" or layer.params.get("op") != "PROD" or len(layer.inputs) != 2:
        return None
    for operand, factor in (layer.inputs, layer.inputs[::-1]):
        if _one_element(graph, factor) and not _one_element(graph, operand):
            return operand, factor
    return None


def _is_pure_transpose(layer: LayerPlan) -> bool:
    """A shuffle that only transposes (no reshape, no second transpose)."""
    if layer.kind != "shuffle" or len(layer.inputs) != 1 or layer.params.get("reshape_dims") is not None:
        return False
    second = list(layer.params.get("second_transpose") or [])
    return second == sorted(second) and bool(layer.params.get("first_transpose"))


def _full_perm(layer: LayerPlan, rank: int) -> list[int]:
    perm = [int(p) for p in layer.params["first_transpose"]][:rank]
    return perm + list(range(len(perm), rank))


def _pure_transpose(graph: LayerGraph, tensor: int, producer: int) -> tuple[list[int], list[int]] | None:
    """(the steps, the permutation) when a pure transpose, perhaps after reshapes that keep the dims (the
    exporter's ``Reshape`` of the result to its own shape), is ``tensor``'s only reader, else None."""
    steps: list[int] = []
    for _ in range(3):
        reader = graph.only_reader(tensor)
        if reader is None or not graph.fusable(reader):
            return None
        layer = graph.layer(reader)
        steps.append(reader)
        if _is_pure_transpose(layer):
            perm = _full_perm(layer, len(graph.tensors[tensor].shape))
            return (steps, perm) if perm != sorted(perm) else None
        if layer.kind != "shuffle" or not graph.shape_equal(layer.inputs[0], layer.outputs[0]):
            return None
        if any(list(layer.params.get(k) or []) != sorted(layer.params.get(k) or []) for k in _TRANSPOSES):
            return None
        tensor = layer.outputs[0]
    return None
