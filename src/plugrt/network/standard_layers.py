# ruff: noqa: A002  (TensorRT names these parameters `input` and `type`; keyword callers rely on it)
"""Standard layers (identity, elementwise, activation, ...) of ``INetworkDefinition``.

Each layer keeps TensorRT's attributes, checked when assigned, and lowers to an
operator (``plugrt.ops``) through :meth:`ILayer.to_operator` when the network is
built. When every input of a new layer is a network input, ``add_*`` also runs
the operator's shape and type rules at once, so mistakes surface where they are
made, as in TensorRT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..core.dims import Dims
from ..core.errors import NetworkError, ShapeError
from ..core.types import DataType
from ..ops.base import Operator
from ..ops.concatenation import default_axis
from .layer import LayerType
from .layer_attributes import (
    Attribute,
    StandardLayer,
    check_axis,
    check_bool,
    check_dims,
    check_enum,
    check_float,
    check_mask,
    check_permutation,
    check_to_type,
    check_weights,
)
from .layer_enums import ActivationType, ElementWiseOperation, MatrixOperation, ReduceOperation, UnaryOperation, Weights
from .tensor import ITensor

__all__ = ["IActivationLayer", "ICastLayer", "IConcatenationLayer", "IConstantLayer", "IElementWiseLayer"]
__all__ += ["IIdentityLayer", "IMatrixMultiplyLayer", "IReduceLayer", "IShuffleLayer", "ISoftMaxLayer", "IUnaryLayer"]
__all__ += ["StandardLayers"]

L = TypeVar("L", bound=StandardLayer)
_IDENTITY = tuple(range(Dims.MAX_DIMS))


class IIdentityLayer(StandardLayer):
    """Copies its input."""

    layer_type = LayerType.IDENTITY

    def to_operator(self) -> Operator:
        return self._lower("identity", {})


class IElementWiseLayer(StandardLayer):
    """``op(input1, input2)`` with broadcasting over size-1 dimensions."""

    layer_type = LayerType.ELEMENTWISE
    op = Attribute(check_enum(ElementWiseOperation))

    def to_operator(self) -> Operator:
        return self._lower("elementwise", {"op": self.op.name})


class IActivationLayer(StandardLayer):
    """An activation; ``type`` is the ActivationType (it shadows ``ILayer.type``, as in TensorRT)."""

    layer_type = LayerType.ACTIVATION
    type = Attribute(check_enum(ActivationType))  # type: ignore[assignment]
    alpha = Attribute(check_float, default=0.0)
    beta = Attribute(check_float, default=0.0)

    def to_operator(self) -> Operator:
        return self._lower("activation", {"type": self.type.name, "alpha": self.alpha, "beta": self.beta})


class IUnaryLayer(StandardLayer):
    """``op(input)``."""

    layer_type = LayerType.UNARY
    op = Attribute(check_enum(UnaryOperation))

    def to_operator(self) -> Operator:
        return self._lower("unary", {"op": self.op.name})


class IMatrixMultiplyLayer(StandardLayer):
    """``op0(input0) @ op1(input1)``."""

    layer_type = LayerType.MATRIX_MULTIPLY
    op0 = Attribute(check_enum(MatrixOperation))
    op1 = Attribute(check_enum(MatrixOperation))

    def to_operator(self) -> Operator:
        return self._lower("matrix_multiply", {"op0": self.op0.name, "op1": self.op1.name})


class IConstantLayer(StandardLayer):
    """A constant tensor: ``weights`` laid out as ``shape``."""

    layer_type = LayerType.CONSTANT
    weights = Attribute(check_weights)
    shape = Attribute(check_dims)

    def to_operator(self) -> Operator:
        value = self.weights.numpy()
        if any(d < 0 for d in self.shape) or value.size != int(np.prod(list(self.shape), dtype=np.int64)):
            raise ShapeError(f"{self.name}: {value.size} weight values do not fill shape {tuple(self.shape)}")
        # a read-only view, not a copy: the build reads the network's weights (as TensorRT's does) and the plan
        # bytes hold the engine's own copy
        view = value.view()
        view.flags.writeable = False
        return self._lower("constant", {"shape": list(self.shape)}, {"value": view})


class IShuffleLayer(StandardLayer):
    """Transpose, reshape, transpose; a second input (``set_input(1, t)``) gives the reshape dimensions."""

    layer_type = LayerType.SHUFFLE
    first_transpose = Attribute(check_permutation, default=_IDENTITY)
    second_transpose = Attribute(check_permutation, default=_IDENTITY)
    zero_is_placeholder = Attribute(check_bool, default=True)
    _reshape_dims: Dims | None = None

    @property
    def reshape_dims(self) -> Dims | None:
        """The reshape dimensions (0 copies, -1 is inferred); None until set (no reshape)."""
        return None if self._reshape_dims is None else Dims(self._reshape_dims)

    @reshape_dims.setter
    def reshape_dims(self, value: Sequence[int] | Dims) -> None:
        self._reshape_dims = check_dims(f"{type(self).__name__}.reshape_dims", value, allow_unknown=True)

    def to_operator(self) -> Operator:
        params: dict[str, Any] = {
            "first_transpose": list(self.first_transpose),
            "second_transpose": list(self.second_transpose),
            "zero_is_placeholder": self.zero_is_placeholder,
        }
        if self._reshape_dims is not None:
            params["reshape_dims"] = list(self._reshape_dims)
        return self._lower("shuffle", params)


class IConcatenationLayer(StandardLayer):
    """Joins its inputs along ``axis``."""

    layer_type = LayerType.CONCATENATION
    shapes_checked_at_add = False  # the axis may be set after add_concatenation
    _axis: int | None = None

    @property
    def axis(self) -> int:
        """The axis; unset, TensorRT's default ``max(0, rank - 3)`` for the first input's current shape."""
        first = self._inputs[0]
        return self._axis if self._axis is not None else default_axis(len(first.shape) if first else 0)

    @axis.setter
    def axis(self, value: int) -> None:
        self._axis = check_axis(f"{type(self).__name__}.axis", value)

    def to_operator(self) -> Operator:
        return self._lower("concatenation", {} if self._axis is None else {"axis": self._axis})


class ICastLayer(StandardLayer):
    """Converts its input to ``to_type``."""

    layer_type = LayerType.CAST
    to_type = Attribute(check_to_type)

    def to_operator(self) -> Operator:
        return self._lower("cast", {"to_type": self.to_type.name})


class ISoftMaxLayer(StandardLayer):
    """Softmax over the axis whose bit is set in ``axes``."""

    layer_type = LayerType.SOFTMAX
    _axes: int | None = None

    @property
    def axes(self) -> int:
        """The axis bitmask; unset, TensorRT's default ``1 << max(0, rank - 3)`` for the input's current shape."""
        first = self._inputs[0]
        return self._axes if self._axes is not None else 1 << default_axis(len(first.shape) if first else 0)

    @axes.setter
    def axes(self, value: int) -> None:
        mask = check_mask(f"{type(self).__name__}.axes", value)
        if bin(mask).count("1") != 1:
            raise NetworkError(f"{type(self).__name__}.axes must have exactly one bit set (one axis), got {mask:#b}")
        self._axes = mask

    def to_operator(self) -> Operator:
        return self._lower("softmax", {} if self._axes is None else {"axes": self._axes})


class IReduceLayer(StandardLayer):
    """Reduces the axes of the ``axes`` bitmask with ``op``."""

    layer_type = LayerType.REDUCE
    op = Attribute(check_enum(ReduceOperation))
    axes = Attribute(check_mask)
    keep_dims = Attribute(check_bool)

    def to_operator(self) -> Operator:
        return self._lower("reduce", {"op": self.op.name, "axes": self.axes, "keep_dims": self.keep_dims})


class StandardLayers:
    """Mixin holding the ``add_<layer>`` methods of the standard layers."""

    if TYPE_CHECKING:

        def _check_tensor(self, tensor: Any, where: str) -> ITensor: ...
        def _check_inputs(self, inputs: Sequence[Any], where: str) -> list[ITensor]: ...
        def _add_layer(self, layer: Any) -> Any: ...

    def add_identity(self, input: ITensor) -> IIdentityLayer:
        """Add a layer copying ``input``."""
        return self._finish(IIdentityLayer(self, [self._check_tensor(input, "add_identity")], "add_identity"))

    def add_elementwise(self, input1: ITensor, input2: ITensor, op: ElementWiseOperation) -> IElementWiseLayer:
        """Add ``op(input1, input2)``; the inputs must have equal rank (broadcast over size-1 dims)."""
        where = "add_elementwise"
        tensors = [self._check_tensor(input1, f"{where} input1"), self._check_tensor(input2, f"{where} input2")]
        return self._finish(IElementWiseLayer(self, tensors, where, op=op))

    def add_activation(self, input: ITensor, type: ActivationType) -> IActivationLayer:
        """Add an activation; set ``alpha``/``beta`` on the layer for the parametric ones (default 0)."""
        where = "add_activation"
        return self._finish(IActivationLayer(self, [self._check_tensor(input, where)], where, type=type))

    def add_unary(self, input: ITensor, op: UnaryOperation) -> IUnaryLayer:
        """Add ``op(input)``."""
        return self._finish(IUnaryLayer(self, [self._check_tensor(input, "add_unary")], "add_unary", op=op))

    def add_matrix_multiply(
        self, input0: ITensor, op0: MatrixOperation, input1: ITensor, op1: MatrixOperation
    ) -> IMatrixMultiplyLayer:
        """Add ``op0(input0) @ op1(input1)`` with broadcast batch dimensions."""
        where = "add_matrix_multiply"
        tensors = [self._check_tensor(input0, f"{where} input0"), self._check_tensor(input1, f"{where} input1")]
        return self._finish(IMatrixMultiplyLayer(self, tensors, where, op0=op0, op1=op1))

    def add_constant(self, shape: Sequence[int] | Dims, weights: Weights | np.ndarray) -> IConstantLayer:
        """Add a constant of ``shape`` holding ``weights`` (a ``Weights`` or a NumPy array)."""
        layer = IConstantLayer(self, [], "add_constant", shape=shape, weights=weights)
        count = int(np.prod(list(layer.shape), dtype=np.int64))
        if layer.weights.size != count:
            raise ShapeError(
                f"add_constant: weights hold {layer.weights.size} values but shape {tuple(layer.shape)} "
                f"has volume {count}"
            )
        return self._finish(layer)

    def add_shuffle(self, input: ITensor) -> IShuffleLayer:
        """Add a shuffle; set ``first_transpose``, ``reshape_dims``, ``second_transpose`` on the layer."""
        return self._finish(IShuffleLayer(self, [self._check_tensor(input, "add_shuffle")], "add_shuffle"))

    def add_concatenation(self, inputs: Sequence[ITensor]) -> IConcatenationLayer:
        """Add a concatenation of ``inputs`` (at least one) along ``layer.axis``."""
        tensors = self._check_inputs(inputs, "add_concatenation")
        if not tensors:
            raise NetworkError("add_concatenation: inputs is empty; at least one tensor is needed")
        return self._finish(IConcatenationLayer(self, tensors, "add_concatenation"))

    def add_cast(self, input: ITensor, to_type: DataType) -> ICastLayer:
        """Add a conversion of ``input`` to ``to_type``."""
        return self._finish(ICastLayer(self, [self._check_tensor(input, "add_cast")], "add_cast", to_type=to_type))

    def add_softmax(self, input: ITensor) -> ISoftMaxLayer:
        """Add a softmax over ``layer.axes`` (default: TensorRT's default axis)."""
        return self._finish(ISoftMaxLayer(self, [self._check_tensor(input, "add_softmax")], "add_softmax"))

    def add_reduce(self, input: ITensor, op: ReduceOperation, axes: int, keep_dims: bool) -> IReduceLayer:
        """Add a reduction of the axes in the ``axes`` bitmask."""
        tensors = [self._check_tensor(input, "add_reduce")]
        return self._finish(IReduceLayer(self, tensors, "add_reduce", op=op, axes=axes, keep_dims=keep_dims))

    def _finish(self, layer: L) -> L:
        """Check the new layer's rules where its inputs' shapes are known, then add it."""
        layer.probe_rules()
        added: L = self._add_layer(layer)
        return added
