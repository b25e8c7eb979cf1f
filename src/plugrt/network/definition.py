"""``INetworkDefinition``: the graph users build (directly or through the ONNX parser)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..core.context_manager import DeprecatedContextManager
from ..core.dims import Dims
from ..core.enums import TrtEnum
from ..core.errors import NetworkError, TypeMismatchError
from ..core.types import DataType
from ..interfaces.v2 import IPluginV2
from ..interfaces.v3 import IPluginV3
from .control_flow import IIfConditional, ILoop
from .layer import ILayer, IPluginV2Layer, IPluginV3Layer
from .operator_layer import IOperatorLayer
from .standard_layers import StandardLayers
from .tensor import ITensor

__all__ = ["INetworkDefinition", "NetworkDefinitionCreationFlag"]


class NetworkDefinitionCreationFlag(TrtEnum):
    """Flags of ``Builder.create_network`` (networks are always explicit-batch here).

    ``PREFER_AOT_PYTHON_PLUGINS`` / ``PREFER_JIT_PYTHON_PLUGINS`` choose the implementation
    of decorator-API plugins that have both, when ``add_plugin`` is not told with ``aot=``.
    """

    EXPLICIT_BATCH = 0
    STRONGLY_TYPED = 1
    PREFER_AOT_PYTHON_PLUGINS = 2
    PREFER_JIT_PYTHON_PLUGINS = 3


class INetworkDefinition(StandardLayers, DeprecatedContextManager):
    """A network: inputs, layers and marked outputs.

    >>> import plugrt as trt
    >>> network = trt.Builder(trt.Logger()).create_network(0)
    >>> x = network.add_input("x", trt.float32, (-1, 4))
    >>> network.mark_output(network.add_identity(x).get_output(0))
    """

    def __init__(self, flags: int = 0) -> None:
        self.flags = int(flags)
        self.name = "network"
        self._layers: list[ILayer] = []
        self._inputs: list[ITensor] = []
        self._outputs: list[ITensor] = []
        self._tensors: dict[str, ITensor] = {}
        self._loops: list[ILoop] = []
        self._conditionals: list[IIfConditional] = []

    # --- inputs and outputs -------------------------------------------------------
    def add_input(self, name: str, dtype: DataType, shape: Sequence[int] | Dims) -> ITensor:
        """Declare a network input; ``-1`` dimensions are dynamic (set by a profile)."""
        if not isinstance(name, str) or not name:
            raise NetworkError(f"add_input: name must be a non-empty str, got {name!r}")
        if name in self._tensors:
            raise NetworkError(f"add_input: a tensor named {name!r} already exists in the network")
        if not isinstance(dtype, DataType):
            raise TypeMismatchError(f"add_input {name!r}: dtype must be a DataType, got {dtype!r}")
        tensor = ITensor(name, dtype, Dims(shape), None)
        self._register(tensor)
        self._inputs.append(tensor)
        return tensor

    def mark_output(self, tensor: ITensor) -> None:
        """Make ``tensor`` an output of the network."""
        self._check_tensor(tensor, "mark_output")
        if tensor.is_network_output:
            raise NetworkError(f"mark_output: tensor {tensor.name!r} is already an output")
        tensor.is_network_output = True
        self._outputs.append(tensor)

    def unmark_output(self, tensor: ITensor) -> None:
        """Stop ``tensor`` being an output."""
        if tensor not in self._outputs:
            raise NetworkError(f"unmark_output: tensor {tensor.name!r} is not an output")
        tensor.is_network_output = False
        self._outputs.remove(tensor)

    @property
    def num_inputs(self) -> int:
        """Number of network inputs."""
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        """Number of marked outputs."""
        return len(self._outputs)

    def get_input(self, index: int) -> ITensor:
        """Network input ``index``."""
        if not 0 <= index < len(self._inputs):
            raise NetworkError(f"the network has {len(self._inputs)} inputs; index {index} is out of range")
        return self._inputs[index]

    def get_output(self, index: int) -> ITensor:
        """Network output ``index``."""
        if not 0 <= index < len(self._outputs):
            raise NetworkError(f"the network has {len(self._outputs)} outputs; index {index} is out of range")
        return self._outputs[index]

    # --- layers -------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        """Number of layers."""
        return len(self._layers)

    def get_layer(self, index: int) -> ILayer:
        """Layer ``index`` in insertion order."""
        if not isinstance(index, int) or not 0 <= index < len(self._layers):
            raise NetworkError(f"the network has {len(self._layers)} layers; index {index!r} is out of range")
        return self._layers[index]

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, index: int) -> ILayer:
        return self.get_layer(index)

    def __iter__(self) -> Iterator[ILayer]:
        return iter(list(self._layers))

    def add_plugin_v2(self, inputs: Sequence[ITensor], plugin: IPluginV2) -> IPluginV2Layer:
        """Add a layer running an IPluginV2-family plugin."""
        if not isinstance(plugin, IPluginV2):
            raise TypeMismatchError(
                f"add_plugin_v2 takes an IPluginV2/IPluginV2Ext/IPluginV2DynamicExt, got {type(plugin).__name__}"
                + ("; use add_plugin_v3 for IPluginV3 plugins" if isinstance(plugin, IPluginV3) else "")
            )
        tensors = self._check_inputs(inputs, "add_plugin_v2")
        return self._add_layer(IPluginV2Layer(self, list(tensors), plugin))

    def add_plugin_v3(
        self, inputs: Sequence[ITensor], shape_inputs: Sequence[ITensor], plugin: IPluginV3
    ) -> IPluginV3Layer:
        """Add a layer running an IPluginV3 plugin; ``shape_inputs`` are host shape tensors."""
        if not isinstance(plugin, IPluginV3):
            raise TypeMismatchError(
                f"add_plugin_v3 takes an IPluginV3, got {type(plugin).__name__}"
                + ("; use add_plugin_v2 for IPluginV2 plugins" if isinstance(plugin, IPluginV2) else "")
            )
        tensors = self._check_inputs(inputs, "add_plugin_v3")
        shape_tensors = self._check_inputs(shape_inputs, "add_plugin_v3 shape_inputs")
        return self._add_layer(IPluginV3Layer(self, list(tensors), list(shape_tensors), plugin))

    def add_plugin(self, plugin: Any, aot: bool | None = None) -> IPluginV3Layer:
        """Add a decorator-API plugin: a ``trtp.op.<ns>.<name>(...)`` call, or an
        ``(inputs, shape_inputs, plugin)`` tuple.

        ``aot=True`` / ``False`` insists on the AOT / JIT implementation; without it, a
        plugin with both follows the ``PREFER_AOT/JIT_PYTHON_PLUGINS`` network flag.
        """
        from ..plugin._lib import QuickPluginCreationRequest
        from ..plugin._template import QuickPlugin

        if isinstance(plugin, tuple):
            if aot is not None:
                raise NetworkError(
                    "add_plugin: aot= applies to a trtp.op call, not to an (inputs, shape_inputs, plugin) tuple"
                )
            if len(plugin) != 3:
                raise TypeMismatchError(
                    f"add_plugin takes an (inputs, shape_inputs, plugin) tuple, got {len(plugin)} items"
                )
            inputs, shape_inputs, made = plugin
        elif callable(plugin) and not isinstance(plugin, IPluginV3):
            prefer_aot = self.get_flag(NetworkDefinitionCreationFlag.PREFER_AOT_PYTHON_PLUGINS)
            prefer_jit = self.get_flag(NetworkDefinitionCreationFlag.PREFER_JIT_PYTHON_PLUGINS)
            if prefer_aot and prefer_jit:
                raise NetworkError(
                    "add_plugin: the network has both PREFER_AOT_PYTHON_PLUGINS and PREFER_JIT_PYTHON_PLUGINS; give one"
                )
            if aot is not None:
                request = QuickPluginCreationRequest.STRICT_AOT if aot else QuickPluginCreationRequest.STRICT_JIT
            elif prefer_aot or prefer_jit:
                request = QuickPluginCreationRequest.PREFER_AOT if prefer_aot else QuickPluginCreationRequest.PREFER_JIT
            else:
                request = QuickPluginCreationRequest.UNKNOWN
            made_tuple = plugin(request)
            if not isinstance(made_tuple, tuple) or len(made_tuple) != 3:
                raise TypeMismatchError(
                    f"add_plugin: the plugin call returned {type(made_tuple).__name__}, not a 3-tuple"
                )
            inputs, shape_inputs, made = made_tuple
        else:
            raise TypeMismatchError(
                f"add_plugin takes a trtp.op.<namespace>.<name>(...) call or an (inputs, shape_inputs, plugin) tuple, "
                f"got {type(plugin).__name__}"
                + ("; use add_plugin_v3 for an IPluginV3" if isinstance(plugin, IPluginV3) else "")
            )
        if isinstance(made, QuickPlugin) and made.inputs is None:
            made.inputs = [(len(t.shape), t.dtype) for t in self._check_inputs(inputs, "add_plugin")]
        return self.add_plugin_v3(inputs, shape_inputs, made)

    def add_operator(
        self,
        kind: str,
        inputs: Sequence[ITensor],
        params: dict[str, Any] | None = None,
        weights: dict[str, Any] | None = None,
        num_outputs: int = 1,
    ) -> IOperatorLayer:
        """Add a layer running the registered operator ``kind`` (plugrt extension).

        Optional inputs that are absent are simply left out (tell the operator
        through ``params``). Unknown kinds raise :class:`NetworkError` listing the known ones.
        """
        from ..ops.base import registered_operators

        known = registered_operators()
        if kind not in known:
            raise NetworkError(f"add_operator: unknown operator kind {kind!r}; known: {sorted(known)}")
        tensors: list[ITensor | None] = list(self._check_inputs(inputs, f"add_operator({kind!r})"))
        layer = IOperatorLayer(self, tensors, kind, params or {}, weights or {}, num_outputs)
        return self._add_layer(layer)

    def add_loop(self) -> ILoop:
        """A new loop; add its trip limit, recurrences, iterators and outputs through the returned object."""
        loop = ILoop(self, len(self._loops))
        self._loops.append(loop)
        return loop

    def add_if_conditional(self) -> IIfConditional:
        """A new if-conditional; give its condition, inputs and outputs through the returned object."""
        conditional = IIfConditional(self, len(self._conditionals))
        self._conditionals.append(conditional)
        return conditional

    def discard_layers_from(self, index: int) -> list[ILayer]:
        """Remove the layers from ``index`` on, with their output tensors (plugrt extension); returns them.

        The ONNX importer uses it when it has computed a node's layers at import
        (constant folding). None of their outputs may be a network output; the
        caller makes sure no layer that stays reads them (layers made before them
        can only through ``set_input``).
        """
        if not isinstance(index, int) or not 0 <= index <= len(self._layers):
            raise NetworkError(f"the network has {len(self._layers)} layers; cannot discard from {index!r}")
        removed = self._layers[index:]
        outputs = {id(t) for layer in removed for t in layer._outputs}
        marked = [t.name for t in self._outputs if id(t) in outputs]
        if marked:
            raise NetworkError(f"cannot discard layers from {index}: their outputs {marked} are network outputs")
        del self._layers[index:]
        for layer in removed:
            for tensor in layer._outputs:
                if self._tensors.get(tensor.name) is tensor:
                    del self._tensors[tensor.name]
        return removed

    # --- shared mechanism ---------------------------------------------------------
    def _add_layer(self, layer: Any) -> Any:
        index = len(self._layers)
        kind = getattr(layer, "kind", None)
        if not isinstance(kind, str) or not kind:  # operator layers name their kind; loop layers' kind is an enum
            kind = layer.layer_type.name.title().replace("_", "")
        layer.name = f"(Unnamed Layer* {index}) [{kind}]"
        for i, output in enumerate(layer._outputs):
            output._name = f"{layer.name}_output_{i}"
            self._register(output)
        self._layers.append(layer)
        return layer

    def _register(self, tensor: ITensor) -> None:
        tensor.network = self
        self._tensors[tensor.name] = tensor

    def _rename_tensor(self, tensor: ITensor, new_name: str) -> None:
        if new_name == tensor.name:
            return
        if new_name in self._tensors:
            raise NetworkError(f"cannot rename tensor {tensor.name!r} to {new_name!r}: that name is taken")
        del self._tensors[tensor.name]
        self._tensors[new_name] = tensor

    def _check_tensor(self, tensor: Any, where: str) -> ITensor:
        if not isinstance(tensor, ITensor):
            raise TypeMismatchError(f"{where}: expected an ITensor, got {type(tensor).__name__}")
        if tensor.network is not self:
            raise NetworkError(f"{where}: tensor {tensor.name!r} belongs to another network")
        return tensor

    def _check_inputs(self, inputs: Sequence[Any], where: str) -> list[ITensor]:
        if isinstance(inputs, ITensor) or not isinstance(inputs, Sequence):
            raise TypeMismatchError(f"{where}: inputs must be a list of ITensor, got {type(inputs).__name__}")
        return [self._check_tensor(t, f"{where} input {i}") for i, t in enumerate(inputs)]

    @property
    def has_implicit_batch_dimension(self) -> bool:
        """Always False: networks are explicit-batch."""
        return False

    def get_flag(self, flag: NetworkDefinitionCreationFlag) -> bool:
        """Whether ``flag`` was given to ``create_network``."""
        return bool(self.flags & (1 << int(flag)))
