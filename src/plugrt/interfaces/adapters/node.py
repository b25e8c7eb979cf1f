"""``PluginNode``: a plugin layer as a node of the engine, driven through its family's adapter.

At build the node wraps the network's plugin (the adapter clones it and asks it,
in TensorRT's order, for types, shapes, formats, configuration, workspace and
tactics); in a context it wraps that context's plugin: ``bind`` tells the plugin
the new shapes (``configure_plugin`` / ``on_shape_change``) and prepares the run
hook's arguments, ``launch`` calls the hook with them and checks its status.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...core.errors import ExecutionError, PlugrtError
from ...core.logger import ILogger
from ...core.types import DataType
from ...nodes.base import Binding, InferredShapes, Node, Serialized
from ...nodes.ports import BuildRequest, IOChoice, Port
from ...nodes.shape_checks import plugin_output_checks
from ...shape.builder import IExprBuilder
from .base import checked_enqueue
from .family import PluginAdapter

__all__ = ["PluginNode"]


class PluginNode(Node):
    """A plugin layer: the build instance's questions at build, a context's plugin at run."""

    kind = "plugin"
    #: the run hook, its status checked (a context's node only)
    _run: Callable[..., None]

    def __init__(self, adapter: PluginAdapter, plugin: Any) -> None:
        """``plugin``: the network's plugin (to build) or a context's plugin (to run)."""
        self.adapter = adapter
        self.plugin = plugin
        self.name = adapter.layer
        self.params: dict[str, Any] = {"family": adapter.family}
        self.weights = {}
        self._args: tuple[Any, ...] = ()

    @classmethod
    def for_network(cls, plugin: Any, layer: str, logger: ILogger | None) -> PluginNode:
        """The node building ``plugin`` of layer ``layer`` (its family's adapter)."""
        from . import adapter_for_plugin

        return cls(adapter_for_plugin(plugin, layer, logger), plugin)

    @classmethod
    def for_context(cls, adapter: PluginAdapter, plugin: Any) -> PluginNode:
        """The node running a context's ``plugin`` (made by ``adapter.attach``)."""
        node = cls(adapter, plugin)
        node._run = checked_enqueue(*adapter.enqueue_hook(plugin))
        return node

    # --- build side ---------------------------------------------------------------------
    def begin_build(self, request: BuildRequest) -> None:
        self.adapter.begin_build(self.plugin)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        return self.adapter.output_types(list(input_types))

    def infer_shapes(self, request: BuildRequest, shape_inputs: Sequence[Port]) -> InferredShapes:
        eb = IExprBuilder(owner=self.name)
        shapes = self.adapter.output_shapes(request, list(shape_inputs), eb)
        checks = plugin_output_checks(self.adapter.describe_shapes(), shapes)
        return InferredShapes(shapes, [None] * len(shapes), dict(eb.declared_size_tensors), list(checks))

    def choose_formats(
        self, request: BuildRequest, outputs: Sequence[Port], preferred: Sequence[IOChoice | None]
    ) -> list[IOChoice]:
        return self.adapter.choose_formats(request, list(outputs), list(preferred))

    def offers_aliasing(self) -> bool:
        return self.adapter.offers_aliasing()

    def aliased_inputs(self, request: BuildRequest, outputs: Sequence[Port]) -> dict[int, int]:
        return self.adapter.aliased_inputs(request, list(outputs))

    def configure(self, request: BuildRequest, outputs: Sequence[Port], num_profiles: int) -> int:
        ports = request.inputs + list(outputs)
        if any(p.dtype == DataType.INT8 for p in ports):  # the scales the plugin sees when it runs
            self.params["io_scales"] = [p.scale for p in ports]
        return self.adapter.configure(request, list(outputs), num_profiles)

    def finish_build(self, request: BuildRequest, outputs: Sequence[Port]) -> Serialized:
        result = self.adapter.finish_build(request, list(outputs))
        name, version, namespace = self.adapter.identity_of_build
        return Serialized(self.adapter.interface, name, version, namespace, result.payload, result.tactic)

    def abort_build(self) -> None:
        self.adapter.abort_build()

    # --- run side -----------------------------------------------------------------------
    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        in_descs = [b.desc for b in inputs]
        out_descs = [b.desc for b in outputs]
        in_ptrs = [b.address for b in inputs]
        out_ptrs = [b.address for b in outputs]
        self.adapter.shape_change(
            self.plugin, in_descs, out_descs, [b.profile_dims for b in inputs], [b.profile_dims for b in outputs]
        )
        self._args = self.adapter.enqueue_args(in_descs, out_descs, in_ptrs, out_ptrs, workspace)

    def launch(self, stream: int) -> None:
        self._run(*self._args, stream)

    def prepared_launch(self, stream: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self._run, (*self._args, stream)

    def release(self) -> None:
        self.adapter.detach(self.plugin)

    def failure(self, exc: Exception) -> ExecutionError:
        """Plugin errors already name the layer, the plugin and the hook."""
        if isinstance(exc, PlugrtError) and not isinstance(exc, ExecutionError):
            return ExecutionError(str(exc))
        return super().failure(exc)


