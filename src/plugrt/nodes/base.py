"""The node protocol: what every step of an engine implements, at build time and at run time.

A node is one layer of an engine: a standard operator (:class:`~plugrt.ops.base.Operator`)
or a plugin (:class:`~plugrt.interfaces.adapters.node.PluginNode`, which drives the
plugin through its family's adapter). The builder takes every layer through the
build side, in this order::

    begin_build → reads → output_types → infer_shapes → choose_formats
                → [offers_aliasing, aliased_inputs] → configure → finish_build (or abort_build)

and the plan stores ``kind``, ``params`` and ``weights`` (plus workspace and tactic).
An execution context takes every node through the run side::

    bind(inputs, outputs, workspace)    when shapes or addresses change
    launch(stream)                      per run, and nothing else (``prepared_launch``: the same call,
                                        as a callable and its arguments, for the executor's flat list)
    release()                           when the context goes
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.dims import Dims
from ..core.errors import ExecutionError, PlugrtError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import PluginTensorDesc
from ..shape.expr import IDimensionExpr
from .ports import BuildRequest, IOChoice, Port, ProfileDims
from .shape_checks import ShapeCheck

__all__ = ["Binding", "InferredShapes", "Node", "Serialized"]


class Binding:
    """One tensor of a node at shape change: what it is, where it lives and the array over it.

    ``shape`` is the concrete shape (the upper bound while a data-dependent size is
    unknown), ``array`` the view the backend made of its memory (storage shape),
    ``address`` its start, ``values`` a shape tensor's values for these shapes (None for
    other tensors: then only the array holds them), ``constant`` whether it is an engine
    constant (written once per context, never per inference). The plugin descriptor and the
    profile's (min, opt, max) dims are made on first use: operators need neither.
    """

    __slots__ = (
        "_desc", "_profile_dims", "address", "array", "constant", "dtype", "format", "scale", "shape", "values"
    )

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: DataType,
        fmt: TensorFormat,
        scale: float,
        address: int,
        array: Any,
        profile_dims: Callable[[], ProfileDims],
        values: tuple[int, ...] | None = None,
        constant: bool = False,
    ) -> None:
        self.shape = shape
        self.values = values
        self.constant = constant
        self.dtype = dtype
        self.format = fmt
        self.scale = scale
        self.address = address
        self.array = array
        self._profile_dims = profile_dims
        self._desc: PluginTensorDesc | None = None

    @property
    def desc(self) -> PluginTensorDesc:
        """The plugin descriptor: dims, type, format and INT8 scale (one object per binding)."""
        if self._desc is None:
            self._desc = PluginTensorDesc(Dims(self.shape), self.dtype, self.format, self.scale)
        return self._desc

    @property
    def profile_dims(self) -> ProfileDims:
        """(min, opt, max) dims of this tensor in the active optimization profile."""
        return self._profile_dims()


@dataclass
class InferredShapes:
    """What a node's shape rule gives for one layer at build time."""

    shapes: list[list[IDimensionExpr]]
    #: values of outputs that are shape tensors, as expressions (None for the others)
    values: list[list[IDimensionExpr] | None]
    #: output index -> the size-tensor expression it defines (data-dependent shapes)
    sizes: dict[int, IDimensionExpr]
    #: what the rule could not decide: checked at each profile's min/opt/max, at load and at shape change
    checks: list[ShapeCheck]


@dataclass
class Serialized:
    """What a node leaves in the plan besides its params and weights: a plugin record."""

    interface: str
    name: str
    version: str
    namespace: str
    payload: bytes
    tactic: int = 0


class Node(ABC):
    """One step of an engine (a standard operator or a plugin), at build time and at run time."""

    #: the plan's layer kind: an operator kind, or "plugin"
    kind: ClassVar[str] = ""
    #: True when the outputs never change: computed once per context
    is_constant: ClassVar[bool] = False
    #: True when the outputs depend on the inputs only: a node reading only constants is constant too
    pure: ClassVar[bool] = False
    name: str
    params: dict[str, Any]
    weights: dict[str, np.ndarray]

    # --- build side ---------------------------------------------------------------------
    def begin_build(self, request: BuildRequest) -> None:
        """Start building this layer (a plugin makes its build instance)."""

    def reads(self, input_types: Sequence[DataType]) -> list[IOChoice] | None:
        """The (type, format) this node reads each input as, when fixed before its rules run;
        None when chosen by :meth:`choose_formats` after them (``input_types``: the declared types)."""
        return None

    @abstractmethod
    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        """The output types for these input types."""
        raise NotImplementedError

    @abstractmethod
    def infer_shapes(self, request: BuildRequest, shape_inputs: Sequence[Port]) -> InferredShapes:
        """Output shapes (and shape values, size tensors, checks) as expressions of the inputs' shapes."""
        raise NotImplementedError

    def choose_formats(
        self, request: BuildRequest, outputs: Sequence[Port], preferred: Sequence[IOChoice | None]
    ) -> list[IOChoice]:
        """One (type, format) per input then output; default: the inputs as they are, linear outputs."""
        return [(p.dtype, p.format) for p in request.inputs] + [(p.dtype, TensorFormat.LINEAR) for p in outputs]

    def offers_aliasing(self) -> bool:
        """True when the node declares in-place outputs."""
        return False

    def aliased_inputs(self, request: BuildRequest, outputs: Sequence[Port]) -> dict[int, int]:
        """Output index → the input whose memory it overwrites in place (default: none)."""
        return {}

    def configure(self, request: BuildRequest, outputs: Sequence[Port], num_profiles: int) -> int:
        """Configure for the chosen formats and every profile; return the workspace bytes needed."""
        return 0

    def finish_build(self, request: BuildRequest, outputs: Sequence[Port]) -> Serialized | None:
        """Finish the build: a plugin record for the plan, or None (operators: params and weights say all)."""
        return None

    def abort_build(self) -> None:
        """Tear down after a failed build (errors ignored)."""

    # --- run side -----------------------------------------------------------------------
    @abstractmethod
    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """Prepare for these tensors (shapes, addresses, arrays) and this workspace address."""
        raise NotImplementedError

    @abstractmethod
    def launch(self, stream: int) -> None:
        """Run once on ``stream`` with what :meth:`bind` prepared."""
        raise NotImplementedError

    def prepared_launch(self, stream: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """``launch(stream)`` as a callable and its arguments, for a flat list of calls (valid until the next
        :meth:`bind`); a node whose launch only forwards to a kernel gives the kernel, one call less per run."""
        return self.launch, (stream,)

    def views_input(self) -> bool:
        """True when output 0 holds input 0's elements in the same order, only in other dimensions (a reshape):
        the builder may lay it over its input's memory, and then it has nothing to do (no launch)."""
        return False

    def release(self) -> None:
        """Release what this node holds for its context."""

    def failure(self, exc: Exception) -> ExecutionError:
        """The error a failing :meth:`bind` or :meth:`launch` raises: names the layer and its kind."""
        if isinstance(exc, ExecutionError):
            return exc
        if isinstance(exc, PlugrtError):
            return ExecutionError(f"layer {self.name!r} ({self.kind}): {exc}")
        return ExecutionError(f"layer {self.name!r} ({self.kind}) failed: {type(exc).__name__}: {exc}")
