"""Nodes of plugrt's own ONNX domain: one node per plugrt operator (kind, params, weights).

The bodies of the network API's loops and conditionals are stored as ONNX
subgraphs like ONNX's own control flow; their layers are written as nodes of
domain :data:`OPERATOR_DOMAIN` whose op type is the operator kind, with the
params as a JSON attribute and each weight as a tensor attribute ``w:<name>``.
Importing such a node adds that operator to the network again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, helper, numpy_helper

from ...engine.plan import _decode_params, _encode_params
from .base import ImportContext, register_importer

__all__ = ["OPERATOR_DOMAIN", "ensure_operator_importers", "operator_node"]

OPERATOR_DOMAIN = "plugrt.operator"
_WEIGHT = "w:"
_registered: set[str] = set()


def operator_node(
    kind: str, params: dict[str, Any], weights: dict[str, np.ndarray], inputs: Sequence[str], outputs: Sequence[str]
) -> NodeProto:
    """The node running operator ``kind`` with ``params`` and ``weights`` on the named tensors."""
    attributes = {"params": json.dumps(_encode_params(params))}
    node = helper.make_node(kind, list(inputs), list(outputs), domain=OPERATOR_DOMAIN, **attributes)
    for name, value in weights.items():
        node.attribute.append(helper.make_attribute(_WEIGHT + name, numpy_helper.from_array(np.asarray(value))))
    return node


def _import_operator(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    node = ctx.node
    params = _decode_params(json.loads(ctx.attr("params", "{}")))
    weights = {
        a.name[len(_WEIGHT) :]: numpy_helper.to_array(a.t) for a in node.attribute if a.name.startswith(_WEIGHT)
    }
    tensors = [t for t in inputs if t is not None]
    return ctx.op(node.op_type, tensors, params, weights, num_outputs=len(node.output))


def ensure_operator_importers() -> None:
    """Register the importer of every operator kind in :data:`OPERATOR_DOMAIN` (once per kind)."""
    from ...ops.base import registered_operators

    for kind in registered_operators():
        if kind not in _registered:
            register_importer(kind, OPERATOR_DOMAIN)(_import_operator)
            _registered.add(kind)
