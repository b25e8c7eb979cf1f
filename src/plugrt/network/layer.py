"""``ILayer`` and the plugin layers; standard layers live in ``standard_layers``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.dims import Dims
from ..core.enums import TrtEnum
from ..core.errors import NetworkError, TypeMismatchError
from ..core.types import DataType
from ..interfaces.adapters import adapter_for_plugin
from .tensor import ITensor

if TYPE_CHECKING:
    from ..ops.base import Operator

__all__ = ["ILayer", "IPluginV2Layer", "IPluginV3Layer", "LayerType"]


class LayerType(TrtEnum):
    """Kind of a layer (TensorRT's names)."""

    CONVOLUTION = 0
    CAST = 1
    ACTIVATION = 2
    POOLING = 3
    LRN = 4
    SCALE = 5
    SOFTMAX = 6
    DECONVOLUTION = 7
    CONCATENATION = 8
    ELEMENTWISE = 9
    PLUGIN = 10
    UNARY = 11
    PADDING = 12
    SHUFFLE = 13
    REDUCE = 14
    TOPK = 15
    GATHER = 16
    MATRIX_MULTIPLY = 17
    RAGGED_SOFTMAX = 18
    CONSTANT = 19
    IDENTITY = 20
    PLUGIN_V2 = 21
    SLICE = 22
    SHAPE = 23
    PARAMETRIC_RELU = 24
    RESIZE = 25
    TRIP_LIMIT = 26
    RECURRENCE = 27
    ITERATOR = 28
    LOOP_OUTPUT = 29
    SELECT = 30
    FILL = 31
    QUANTIZE = 32
    DEQUANTIZE = 33
    CONDITION = 34
    CONDITIONAL_INPUT = 35
    CONDITIONAL_OUTPUT = 36
    SCATTER = 38
    EINSUM = 39
    ASSERTION = 40
    ONE_HOT = 41
    NON_ZERO = 42
    GRID_SAMPLE = 43
    NMS = 44
    REVERSE_SEQUENCE = 45
    NORMALIZATION = 46
    PLUGIN_V3 = 47
    SQUEEZE = 48
    UNSQUEEZE = 49
    CUMULATIVE = 50


class ILayer:
    """A node of a network: inputs, outputs, name and precision controls."""

    layer_type: LayerType = LayerType.IDENTITY

    def __init__(self, network: Any, inputs: list[ITensor | None], num_outputs: int) -> None:
        self._network = network
        self._inputs: list[ITensor | None] = list(inputs)
        self.name = ""
        self.precision: DataType | None = None
        self.metadata = ""
        self._output_types: dict[int, DataType] = {}
        self._outputs = [ITensor("", DataType.FLOAT, Dims(), self) for _ in range(num_outputs)]

    @property
    def type(self) -> LayerType:
        """The layer's :class:`LayerType`."""
        return self.layer_type

    @property
    def num_inputs(self) -> int:
        """Number of inputs."""
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        """Number of outputs."""
        return len(self._outputs)

    def get_input(self, index: int) -> ITensor | None:
        """Input ``index`` (None for an unset optional input)."""
        return self._inputs[self._check_index(index, self.num_inputs, "input")]

    def set_input(self, index: int, tensor: ITensor) -> None:
        """Replace input ``index`` (or append at ``index == num_inputs`` for optional inputs)."""
        if not isinstance(tensor, ITensor):
            raise TypeMismatchError(f"layer {self.name!r}: set_input takes an ITensor, got {type(tensor).__name__}")
        if index == len(self._inputs):
            self._inputs.append(tensor)
        else:
            self._inputs[self._check_index(index, self.num_inputs, "input")] = tensor

    def get_output(self, index: int) -> ITensor:
        """Output ``index``."""
        return self._outputs[self._check_index(index, self.num_outputs, "output")]

    def set_output_type(self, index: int, dtype: DataType) -> None:
        """Request a type for output ``index``."""
        self._output_types[self._check_index(index, self.num_outputs, "output")] = DataType(dtype)

    def get_output_type(self, index: int) -> DataType:
        """The requested (or inferred) type of output ``index``."""
        return self._output_types.get(index, self.get_output(index).dtype)

    def reset_precision(self) -> None:
        """Forget a precision set with :attr:`precision`."""
        self.precision = None

    def _check_index(self, index: int, count: int, what: str) -> int:
        if not isinstance(index, int) or not 0 <= index < count:
            raise NetworkError(f"layer {self.name!r} has {count} {what}s; index {index!r} is out of range")
        return index

    def to_operator(self) -> Operator:
        """The operator that runs this layer (standard layers override this)."""
        raise NetworkError(f"layer {self.name!r} of type {self.type.name} has no operator")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class IPluginV2Layer(ILayer):
    """A layer running an IPluginV2-family plugin."""

    layer_type = LayerType.PLUGIN_V2

    def __init__(self, network: Any, inputs: list[ITensor | None], plugin: Any) -> None:
        super().__init__(network, inputs, _declared_outputs(plugin))
        self.plugin = plugin


class IPluginV3Layer(ILayer):
    """A layer running an IPluginV3 plugin (with optional shape inputs)."""

    layer_type = LayerType.PLUGIN_V3

    def __init__(self, network: Any, inputs: list[ITensor | None], shape_inputs: list[ITensor], plugin: Any) -> None:
        super().__init__(network, inputs, _declared_outputs(plugin))
        self.shape_inputs = list(shape_inputs)
        self.plugin = plugin

    def get_plugin(self) -> Any:
        """The plugin object."""
        return self.plugin


def _declared_outputs(plugin: Any) -> int:
    """The plugin's output count, asked through its family's adapter (the only code calling plugin hooks)."""
    return adapter_for_plugin(plugin, "", None).declared_outputs(plugin)
