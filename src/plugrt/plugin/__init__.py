"""``plugrt.plugin``: TensorRT's decorator plugin API ("quickly deployable plugins").

A plugin is three decorated functions; type hints are its attribute schema. Only
the import changes from TensorRT (``import tensorrt.plugin as trtp`` ->
``import plugrt.plugin as trtp``):

>>> import numpy as np
>>> import plugrt as trt
>>> import plugrt.plugin as trtp
>>> @trtp.register("doc::add_one")
... def add_one_desc(x: trtp.TensorDesc, delta: float) -> trtp.TensorDesc:
...     return x.like()
>>> @trtp.impl("doc::add_one")
... def add_one_impl(x: trtp.Tensor, delta: float, outputs: tuple[trtp.Tensor], stream: int) -> None:
...     np.add(np.asarray(x), delta, out=np.asarray(outputs[0]))
>>> network = trt.Builder(trt.Logger()).create_network(0)
>>> x = network.add_input("x", trt.float32, (2, 3))
>>> layer = network.add_plugin(trtp.op.doc.add_one(x, delta=1.0))
>>> layer.num_outputs
1

Each plugin is realised as an ``IPluginV3`` (:class:`~plugrt.plugin._template.QuickPlugin`)
whose creator sits in the plugin registry under (name, "1", namespace): it builds,
serializes into the plan, revives through the registry and runs like any V3 plugin.
"""

from __future__ import annotations

from ._aot import KernelLaunchParams
from ._autotune import AutoTuneCombination
from ._desc import Shape, SizeTensorDesc, TensorDesc, from_shape_expr, size_tensor
from ._expr import (
    ShapeExpr,
    ShapeExprs,
    SizeTensorShapeExpr,
    SymExpr,
    SymExprs,
    SymInt8,
    SymInt16,
    SymInt32,
    SymIntExpr,
    SymIntExprs,
    cdiv,
    max,  # noqa: A004 - TensorRT's name
    min,  # noqa: A004 - TensorRT's name
)
from ._lib import PluginDef, QuickPluginCreationRequest, aot_impl, autotune, impl, op, register
from ._template import QuickPlugin
from ._tensor import Tensor

__all__ = [
    "AutoTuneCombination",
    "KernelLaunchParams",
    "PluginDef",
    "QuickPlugin",
    "QuickPluginCreationRequest",
    "Shape",
    "ShapeExpr",
    "ShapeExprs",
    "SizeTensorDesc",
    "SizeTensorShapeExpr",
    "SymExpr",
    "SymExprs",
    "SymInt8",
    "SymInt16",
    "SymInt32",
    "SymIntExpr",
    "SymIntExprs",
    "Tensor",
    "TensorDesc",
    "aot_impl",
    "autotune",
    "cdiv",
    "from_shape_expr",
    "impl",
    "max",
    "min",
    "op",
    "register",
    "size_tensor",
]
