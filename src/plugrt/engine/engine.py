"""``ICudaEngine``: a deserialized plan, its plugins, and the factory of execution contexts."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..backends.base import Backend
from ..backends.registry import using_backend
from ..core.context_manager import DeprecatedContextManager
from ..core.dims import Dims
from ..core.errors import ExecutionError, PlanFormatError, PlugrtError
from ..core.finalizers import release_when_safe, run_pending
from ..core.logger import ILogger
from ..core.types import DataType, TensorFormat
from ..interfaces.adapters import PluginAdapter, PluginNode, adapter_for_family
from ..interfaces.registry import IPluginRegistry
from ..interfaces.v3 import IPluginResourceContext
from ..network.tensor import TensorIOMode, TensorLocation
from ..nodes.base import Node
from ..nodes.ports import ProfileDims
from ..nodes.shape_checks import ShapeCheck, plugin_output_checks
from ..ops.base import create_operator
from ..ops.linear_weights import pack_product_weights
from ..ops.torch_cpu import check_tactics
from .host_memory import IHostMemory
from .plan import EnginePlan, profile_envs
from .validate import check_revived_plugin, validate_plan

__all__ = ["ICudaEngine"]


class ICudaEngine(DeprecatedContextManager):
    """An engine ready to run (the name is TensorRT's, also on the CPU).

    Made by :meth:`plugrt.Runtime.deserialize_cuda_engine`. Holds the plan, one
    deserialized plugin per plugin layer, and creates execution contexts.
    """

    def __init__(
        self, plan: EnginePlan, data: bytes | None, registry: IPluginRegistry, logger: ILogger, backend: Backend
    ) -> None:
        self.plan = plan
        #: the plan bytes the engine was loaded from; None for an engine made from a plan in memory
        #: (:meth:`Runtime.engine_from_plan`), whose bytes are written when asked for
        self._data = None if data is None else bytes(data)
        self.logger = logger
        self.backend = backend
        self.resource_context = IPluginResourceContext(backend.name)
        self._io = {plan.tensors[i].name: i for i in plan.io}
        self._ranges: dict[tuple[int, int], ProfileDims] = {}
        self._lock = threading.Lock()
        self._contexts: weakref.WeakSet[Any] = weakref.WeakSet()
        self.adapters: dict[int, PluginAdapter] = {}
        self.plugins: dict[int, Any] = {}
        #: what the shape rules could not decide at build (broadcasts, plugin output sizes): checked by each
        #: context at shape change
        self.shape_checks: list[ShapeCheck] = list(validate_plan(plan))
        check_tactics(plan.layers, logger, backend.xp)
        #: how many constant matrices the products hold in a layout of their own (on the CPU: packed for oneDNN
        #: under the torch tactic, rows first for NumPy's products that take them transposed)
        self.packed_weights = pack_product_weights(plan) if backend.host_memory and not backend.gpu else 0
        try:
            for index, layer in enumerate(plan.layers):
                if not layer.is_plugin:
                    continue
                record = plan.plugins[layer.plugin]
                adapter = adapter_for_family(layer.family, layer.name, logger)
                if adapter.interface != record.interface:
                    raise PlanFormatError(
                        f"plan layer {layer.name!r}: plugin family {layer.family!r} does not match record interface {record.interface!r}"
                    )
                self.adapters[index] = adapter
                self.plugins[index] = adapter.revive(
                    record.name, record.version, record.namespace, record.payload, registry, layer.tactic
                )
                check_revived_plugin(plan, layer, adapter, self.plugins[index], self.tensor_range)
                outputs = [plan.tensors[i].shape for i in layer.outputs]
                self.shape_checks += plugin_output_checks(adapter.describe_shapes(self.plugins[index]), outputs)
        except BaseException:
            self._release_plugins()
            raise

    # --- IO tensors ----------------------------------------------------------------------
    @property
    def num_io_tensors(self) -> int:
        """Number of inputs plus outputs."""
        return len(self.plan.io)

    def get_tensor_name(self, index: int) -> str:
        """Name of IO tensor ``index`` (inputs first, then outputs)."""
        if not isinstance(index, int) or not 0 <= index < len(self.plan.io):
            raise ExecutionError(f"the engine has {len(self.plan.io)} IO tensors; index {index!r} is out of range")
        return self.plan.tensors[self.plan.io[index]].name

    def tensor_index(self, name: str) -> int:
        """Plan index of IO tensor ``name``; unknown names raise, listing the valid ones."""
        try:
            return self._io[name]
        except (KeyError, TypeError):
            raise ExecutionError(f"the engine has no IO tensor named {name!r}; IO tensors: {list(self._io)}") from None

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        """INPUT or OUTPUT (NONE for names that are not IO tensors, as TensorRT)."""
        index = self._io.get(name)
        if index is None:
            return TensorIOMode.NONE
        return TensorIOMode.INPUT if self.plan.tensors[index].role == "input" else TensorIOMode.OUTPUT

    def get_tensor_shape(self, name: str) -> Dims:
        """Shape with -1 for dynamic dimensions."""
        self.tensor_index(name)
        return Dims(self.plan.io_shapes[name])

    def get_tensor_dtype(self, name: str) -> DataType:
        """Element type."""
        return self.plan.tensors[self.tensor_index(name)].dtype

    def get_tensor_format(self, name: str) -> TensorFormat:
        """Memory layout (always LINEAR for IO tensors)."""
        return self.plan.tensors[self.tensor_index(name)].format

    def get_tensor_location(self, name: str) -> TensorLocation:
        """Where the tensor lives (DEVICE; host memory on the CPU backend)."""
        self.tensor_index(name)
        return TensorLocation.DEVICE

    def is_shape_inference_io(self, name: str) -> bool:
        """Whether IO tensor ``name`` is read on the host for shape inference: never in plugrt's engines."""
        self.tensor_index(name)
        return False

    def get_aliased_input_tensor(self, name: str) -> str | None:
        """The input an output shares memory with: None, plugrt copies in-place results to the caller's output."""
        self.tensor_index(name)
        return None

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[Dims]:
        """[min, opt, max] of input ``name`` in profile ``profile_index``."""
        self.tensor_index(name)
        if not 0 <= profile_index < len(self.plan.profiles):
            raise ExecutionError(
                f"profile index {profile_index} is out of range (the engine has {len(self.plan.profiles)})"
            )
        shapes = self.plan.profiles[profile_index].shapes.get(name)
        if shapes is None:
            raise ExecutionError(f"{name!r} is not an input of profile {profile_index}")
        return [Dims(d) for d in shapes]

    # --- engine-wide -------------------------------------------------------------------
    @property
    def num_optimization_profiles(self) -> int:
        """Number of optimization profiles."""
        return len(self.plan.profiles)

    @property
    def num_layers(self) -> int:
        """Number of layers (reformat layers included)."""
        return len(self.plan.layers)

    @property
    def name(self) -> str:
        """The network's name."""
        return self.plan.name

    @property
    def device_memory_size(self) -> int:
        """Bytes of activation memory a context needs (largest profile)."""
        return max(p.arena_size for p in self.plan.profiles)

    def serialize(self) -> IHostMemory:
        """The plan bytes this engine came from (written from its plan for an engine made in memory)."""
        return IHostMemory(self.plan.to_bytes() if self._data is None else self._data)

    def create_execution_context(self) -> Any:
        """A new context with its own memory and plugin clones."""
        from .context import IExecutionContext

        run_pending()
        try:
            with using_backend(self.backend):
                context = IExecutionContext(self)
        except PlugrtError:
            raise
        except Exception as exc:
            raise ExecutionError(f"creating an execution context failed: {type(exc).__name__}: {exc}") from exc
        with self._lock:
            self._contexts.add(context)
        return context

    def create_engine_inspector(self) -> Any:
        """An inspector describing layers and the engine."""
        from .inspector import EngineInspector

        return EngineInspector(self)

    def create_node(self, index: int, resource_context: Any) -> Node:
        """Layer ``index`` as a node of one execution context: its operator, or a node over a clone
        of the engine's plugin attached to ``resource_context``."""
        layer = self.plan.layers[index]
        if layer.is_plugin:
            adapter = self.adapters[index]
            return PluginNode.for_context(adapter, adapter.attach(self.plugins[index], resource_context))
        weights = {name: self.plan.weights[key] for name, key in layer.weights.items()}
        op = create_operator(layer.kind, layer.params, weights)
        op.name = layer.name
        op.xp = self.backend.xp
        op.tactic = layer.tactic
        return op

    def tensor_range(self, tensor: int, profile: int) -> ProfileDims:
        """(min, opt, max) dims of plan tensor ``tensor`` in ``profile``."""
        key = (tensor, profile)
        found = self._ranges.get(key)
        if found is None:
            low, opt, high = profile_envs(self.plan, profile)
            shape = self.plan.tensors[tensor].shape
            bounds = [d.bounds(low, high) for d in shape]
            found = (
                Dims([max(b[0], 0) for b in bounds]),
                Dims([_opt_value(d, opt) for d in shape]),
                Dims([max(b[1], 0) for b in bounds]),
            )
            self._ranges[key] = found
        return found

    def _release_plugins(self) -> None:
        with using_backend(self.backend):
            for index, plugin in list(self.plugins.items()):
                self.adapters[index].release(plugin)
        self.plugins.clear()

    def __del__(self) -> None:
        release_when_safe(self._release_plugins)


def _opt_value(expr: Any, opt: dict[str, int]) -> int:
    env = dict(opt)
    stack = [expr]
    while stack:
        node = stack.pop()
        if node.is_size_tensor() and node.symbol not in env:
            env[node.symbol] = _opt_value(node.size_bounds[0], opt)
        stack.extend(getattr(node, "_args", ()))
    return max(expr.evaluate(env), 0)
