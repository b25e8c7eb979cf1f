"""Chains of layout-only layers read as one strided view of their source.

Exports split attention's heads off a packed projection with a run of layers that only move elements:
``nn.MultiheadAttention``'s is ``[S, B, 3D] → Reshape [S, B, 3, D] → Unsqueeze → Transpose → Squeeze → Gather
(q, k or v) → Reshape [S, B·H, d] → Transpose → Reshape [B, H, S, d]``, each a copy per run. The element that
chain puts at each position of its result is one element of the source: the result is a view of the source
reshaped into finer axes ("atoms": here ``S, B, 3, H, d``), one atom fixed at the Gather's index and the others
permuted. :func:`view_recipe` follows such a chain forward from its source on the tensors' dimension
expressions and gives that recipe, or None where a layer does something else (a reshape that would mix
elements of two atoms in a way no view of the source can show, a Gather of several indices, ...).

A recipe is ``(split, select, perm)``: ``split`` one list per source axis of the sizes of its atoms, outermost
first (``-1``: the axis's size over the others', at most one per axis; ``[]``: an axis of size 1); ``select``
``[atom, index, ...]`` pairs fixing atoms (positions in the flat list of atoms); ``perm`` the order of the
remaining atoms in the result, ``-1`` for an axis of size 1 (which spans no atom). The reader applies it as
``source.reshape(atoms)[selected].transpose(perm)`` and then gives the result its unit axes: a reshape of a
contiguous tensor, basic indexing and unit axes, views in NumPy, CuPy and PyTorch alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...engine.plan import LayerPlan
from ...shape.expr import IDimensionExpr
from ...shape.simplify import monomial
from ..views import reshapes
from .graph import LayerGraph

__all__ = ["Recipe", "is_view_step", "view_recipe"]

#: a dimension as (coefficient, symbolic factors): the product of the two
_Monomial = tuple[int, list[IDimensionExpr]]


@dataclass
class Recipe:
    """How to read a chain's result from its source (see the module's note)."""

    split: list[list[int]]
    select: list[int]
    perm: list[int]


def is_view_step(graph: LayerGraph, layer: LayerPlan) -> bool:
    """Whether ``layer`` only moves its first input's elements in a way :func:`view_recipe` follows: a shuffle
    (transposes and a reshape), a reshaping layer (squeeze, unsqueeze, flatten), a Gather of one constant index."""
    if layer.is_plugin or not layer.inputs or len(layer.outputs) != 1:
        return False
    if layer.kind == "shuffle":
        return True
    if layer.kind == "gather":
        index = graph.value(layer.inputs[1]) if len(layer.inputs) == 2 else None
        scalar = index is not None and index.size == 1 and not graph.tensors[layer.inputs[1]].shape  # (stored flat)
        return scalar and not layer.params.get("batch_dims")
    return reshapes(layer)


def view_recipe(graph: LayerGraph, source: int, chain: Sequence[LayerPlan]) -> Recipe | None:
    """The recipe reading the last of ``chain``'s results from ``source`` (``chain``: the layers from the one
    reading ``source`` on, each reading the one before), or None (see the module's note)."""
    shape = graph.tensors[source].shape
    atoms: list[_Monomial] = []
    axis_atoms: list[list[int]] = []  # source axis -> its atoms, outermost first (ids into ``atoms``)
    groups: list[list[int]] = []  # the current tensor's axes, each the atoms it spans
    for dim in shape:
        size = monomial(dim)
        ids = [] if size == (1, []) else [len(atoms)]
        atoms.extend([size] if ids else [])
        axis_atoms.append(list(ids))
        groups.append(list(ids))
    selected: dict[int, int] = {}
    current = source
    for layer in chain:
        if not layer.inputs or (layer.inputs[0] != current and not (layer.kind == "elementwise" and current in layer.inputs)):
            return None  # (an elementwise layer in the chain: a scale by one element, the caller's to take)
        found = _step(graph, layer, groups, atoms, axis_atoms, selected)
        if found is None:
            return None
        groups, current = found, layer.outputs[0]
    if any(len(group) > 1 for group in groups):  # every axis of the result one atom (or of size 1): a strided view
        return None
    order = [a for ids in axis_atoms for a in ids]
    remaining = [a for a in order if a not in selected]
    split = []
    for ids in axis_atoms:
        sizes = [atoms[a] for a in ids]
        symbolic = [k for k, s in enumerate(sizes) if s[1]]
        if len(symbolic) > 1:
            return None
        split.append([-1 if s[1] else s[0] for s in sizes])
    select = [x for a in order if a in selected for x in (order.index(a), selected[a])]
    return Recipe(split, select, [remaining.index(group[0]) if group else -1 for group in groups])


def _step(
    graph: LayerGraph,
    layer: LayerPlan,
    groups: list[list[int]],
    atoms: list[_Monomial],
    axis_atoms: list[list[int]],
    selected: dict[int, int],
) -> list[list[int]] | None:
    """The groups of ``layer``'s result, atoms split where a reshape needs it; None where it is no view."""
    out_shape = graph.tensors[layer.outputs[0]].shape
    if layer.kind == "gather":
        axis = int(layer.params.get("axis", 0))
        axis = axis + len(groups) if axis < 0 else axis
        value = graph.value(layer.inputs[1])
        if not 0 <= axis < len(groups) or value is None or len(groups[axis]) != 1:
            return None
        atom = groups[axis][0]
        size = atoms[atom]
        index = int(value.reshape(-1)[0])
        if size[1] or not -size[0] <= index < size[0]:
            return None
        selected[atom] = index % size[0]
        return groups[:axis] + groups[axis + 1 :]
    if layer.kind != "shuffle":  # squeeze, unsqueeze, flatten: a reshape
        return _reshape(groups, [monomial(d) for d in out_shape], atoms, axis_atoms)
    rank = len(groups)
    first = [int(p) for p in layer.params.get("first_transpose") or range(rank)][:rank]
    first += list(range(len(first), rank))
    if sorted(first) != list(range(rank)):
        return None
    groups = [groups[p] for p in first]
    second = [int(p) for p in layer.params.get("second_transpose") or range(len(out_shape))][: len(out_shape)]
    second += list(range(len(second), len(out_shape)))
    if sorted(second) != list(range(len(out_shape))):
        return None
    middle: list[IDimensionExpr] = [out_shape[0]] * len(out_shape)
    for position, axis in enumerate(second):  # out[j] = middle[second[j]]
        middle[axis] = out_shape[position]
    reshaped = _reshape(groups, [monomial(d) for d in middle], atoms, axis_atoms)
    return None if reshaped is None else [reshaped[p] for p in second]


def _reshape(
    groups: list[list[int]], dims: list[_Monomial], atoms: list[_Monomial], axis_atoms: list[list[int]]
) -> list[list[int]] | None:
    """``groups`` reshaped row-major to ``dims``: each new axis the run of atoms whose sizes multiply to it, an atom
    split in two (a constant outer part, the rest) where a new axis ends inside it; None where sizes disagree."""
    flat = [a for group in groups for a in group]
    result: list[list[int]] = []
    position = 0
    for need in dims:
        group: list[int] = []
        while need != (1, []):
            if position == len(flat):
                return None
            atom = flat[position]
            size = atoms[atom]
            rest = _divided(need, size)
            if rest is not None:  # the atom fits in whole
                group.append(atom)
                need = rest
                position += 1
                continue
            if need[1] or size[0] % need[0]:  # only a constant outer part can be split off
                return None
            outer, inner = len(atoms), len(atoms) + 1
            atoms.extend([(need[0], []), (size[0] // need[0], size[1])])
            for ids in axis_atoms:
                if atom in ids:
                    k = ids.index(atom)
                    ids[k : k + 1] = [outer, inner]
            flat[position : position + 1] = [outer, inner]
            group.append(outer)
            need = (1, [])
            position += 1
        result.append(group)
    return result if position == len(flat) else None


def _divided(total: _Monomial, part: _Monomial) -> _Monomial | None:
    """``total / part`` when ``part`` divides it exactly (coefficients and factors), else None."""
    if part[0] == 0 or total[0] % part[0]:
        return None
    rest = list(total[1])
    for factor in part[1]:
        if factor not in rest:
            return None
        rest.remove(factor)
    return total[0] // part[0], rest
