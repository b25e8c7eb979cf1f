"""Adapter for ``IPluginV3`` plugins (core, build and runtime capabilities)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...backends.base import Backend
from ...backends.registry import DEFAULT_DEVICE, get_backend, using_backend
from ...core.dims import Dims
from ...core.errors import BuildError, TypeMismatchError
from ...core.layouts import storage_shape
from ...core.types import DataType, TensorFormat
from ...shape.builder import DimsExprs, IExprBuilder
from ...shape.expr import IDimensionExpr
from ..descriptors import PluginTensorDesc
from ..field_codec import decode_fields, encode_fields
from ..fields import PluginFieldCollection
from ..hooks import is_overridden
from ..recorder import Phase, PluginCaller
from ..v3 import IPluginV3, IPluginV3OneBuildV2, PluginCapabilityType, TensorRTPhase
from .base import (
    BuildRequest,
    IOChoice,
    Port,
    check_status,
    require_hooks,
)
from .family import BuildResult, PluginAdapter, checked_output_count
from .v2_dynamic import _as_shape, _as_size, _as_type

__all__ = ["V3Adapter"]


def _capability(caller: PluginCaller, phase: str, kind: PluginCapabilityType) -> PluginCaller:
    found = caller(phase, "get_capability_interface", kind)
    if found is None:
        raise caller.fail("get_capability_interface", f" returned None for {kind.name}", phase=phase)
    return caller.with_plugin(found)


class V3Adapter(PluginAdapter):
    """Build: clone, capabilities, get_output_data_types, get_output_shapes,
    supports_format_combination, configure_plugin and get_workspace_size per
    profile, get_valid_tactics (+ timing), get_fields_to_serialize. Run:
    create_plugin(RUNTIME), set_tactic; per context attach_to_context,
    on_shape_change, enqueue."""

    family = "v3"
    interface = "v3"
    shape_hook = "get_output_shapes"
    type_hook = "get_output_data_types"
    identity_labels = ("plugin_name", "plugin_version", "plugin_namespace")
    expected_class = IPluginV3
    revived_may_refuse_shapes = True

    def __init__(self, layer: str, logger: Any, policy: Any = None) -> None:
        super().__init__(layer, logger, policy)
        self._build_runtime: PluginCaller | None = None
        self.size_tensor_outputs: dict[int, IDimensionExpr] = {}
        self.tactic = 0
        self.runtime_callers: dict[int, PluginCaller] = {}
        self.root_callers: dict[int, PluginCaller] = {}

    @staticmethod
    def identity_source(plugin: Any) -> Any:
        core = (
            plugin.get_capability_interface(PluginCapabilityType.CORE)
            if hasattr(plugin, "get_capability_interface")
            else None
        )
        return core if core is not None else plugin

    def declared_outputs(self, plugin: Any) -> int:
        caller = self.network_caller(plugin)
        build = caller(Phase.BUILD, "get_capability_interface", PluginCapabilityType.BUILD)
        if build is None:
            raise caller.fail(
                "get_capability_interface",
                " returned None for BUILD; a V3 plugin must provide IPluginV3OneBuild",
                TypeMismatchError,
            )
        return checked_output_count(plugin, build)

    def begin_build(self, plugin: Any) -> None:
        source = self.caller(plugin)
        require_hooks(
            source,
            (
                "clone",
                "get_output_data_types",
                "get_output_shapes",
                "supports_format_combination",
                "enqueue",
                "get_fields_to_serialize",
            ),
            IPluginV3,
            self.family,
        )
        self.use_build_instance(self.clone_of(source, Phase.BUILD))

    def use_build_instance(self, plugin: Any) -> None:
        root = self.caller(plugin)
        self.identity_of_build = self.identity(plugin)
        _capability(root, Phase.BUILD, PluginCapabilityType.CORE)
        self.build_caller = _capability(root, Phase.BUILD, PluginCapabilityType.BUILD)
        self._root = root

    def checking_interface(self, root: PluginCaller) -> PluginCaller | None:
        found = root(Phase.LOAD_CHECK, "get_capability_interface", PluginCapabilityType.BUILD)
        return None if found is None else root.with_plugin(found)

    def build_interface(self, plugin: Any) -> Any:
        return plugin.get_capability_interface(PluginCapabilityType.BUILD)

    def output_types(self, input_types: list[DataType]) -> list[DataType]:
        caller = self._build()
        result = caller(Phase.BUILD, "get_output_data_types", list(input_types))
        count = caller.plugin.num_outputs
        if not isinstance(result, (list, tuple)) or len(result) != count:
            raise caller.fail("get_output_data_types", f" returned {result!r}; expected {count} DataTypes")
        return [_as_type(caller, "get_output_data_types", t) for t in result]

    def output_shapes(
        self, request: BuildRequest, shape_inputs: list[Port], eb: IExprBuilder
    ) -> list[list[IDimensionExpr]]:
        caller = self._build()
        values = []
        for i, port in enumerate(shape_inputs):
            if port.values is None:
                raise caller.fail(
                    "get_output_shapes", f": shape input {i} is not a shape tensor whose values are known", BuildError
                )
            values.append(DimsExprs(port.values))
        result = caller(Phase.BUILD, "get_output_shapes", [DimsExprs(p.shape) for p in request.inputs], values, eb)
        count = caller.plugin.num_outputs
        if not isinstance(result, (list, tuple)) or len(result) != count:
            raise caller.fail("get_output_shapes", f" returned {result!r}; expected {count} DimsExprs")
        shapes = [_as_shape(caller, "get_output_shapes", r, i) for i, r in enumerate(result)]
        self.size_tensor_outputs = dict(eb.declared_size_tensors)
        for index in self.size_tensor_outputs:
            if not 0 <= index < count or shapes[index]:
                raise caller.fail(
                    "get_output_shapes", f": size tensor output {index} must exist and be 0-d", BuildError
                )
        return shapes

    def choose_formats(
        self, request: BuildRequest, outputs: list[Port], preferred: list[IOChoice | None]
    ) -> list[IOChoice]:
        return self._negotiate_formats(request, outputs, preferred)

    def format_desc(self, port: Port, dtype: DataType, fmt: TensorFormat) -> Any:
        return port.dynamic_desc(0, dtype, fmt)

    def offers_aliasing(self) -> bool:
        build = self._build().plugin
        hook = getattr(type(build), "get_aliased_input", None)
        return callable(hook) and (
            not isinstance(build, IPluginV3OneBuildV2) or is_overridden(build, "get_aliased_input", IPluginV3OneBuildV2)
        )

    def aliased_inputs(self, request: BuildRequest, outputs: list[Port]) -> dict[int, int]:
        caller = self._build()
        if not callable(getattr(caller.plugin, "get_aliased_input", None)):
            return {}
        aliases: dict[int, int] = {}
        count = len(request.inputs)
        for output in range(len(outputs)):
            index = caller(Phase.BUILD, "get_aliased_input", output)
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -1 <= index < count:
                raise caller.fail(
                    "get_aliased_input",
                    f" returned {index!r} for output {output}; expected -1 "
                    f"(not aliased) or an input index in [0, {count - 1}]"
                )
            if index == -1:
                continue
            for other, taken in aliases.items():
                if taken == index:
                    raise caller.fail(
                        "get_aliased_input",
                        f": outputs {other} and {output} both alias input "
                        f"{index}; an input can be aliased to one output only"
                    )
            aliases[output] = int(index)
        return aliases

    def configure(self, request: BuildRequest, outputs: list[Port], num_profiles: int) -> int:
        caller = self._build()
        workspace = 0
        for profile in range(num_profiles):
            ins = [p.dynamic_desc(profile) for p in request.inputs]
            outs = [p.dynamic_desc(profile) for p in outputs]
            caller(Phase.BUILD, "configure_plugin", ins, outs)
            size = caller(Phase.BUILD, "get_workspace_size", ins, outs)
            workspace = max(workspace, _as_size(caller, "get_workspace_size", size))
        tactics = caller(Phase.BUILD, "get_valid_tactics")
        tactics = list(tactics or [])
        if any(not isinstance(t, int) or t <= 0 for t in tactics):
            raise caller.fail("get_valid_tactics", f" returned {tactics!r}; tactics are positive ints")
        if tactics:
            timed = request.time_tactics
            self.tactic = self._choose_tactic(request, tactics, outputs, workspace) if timed else tactics[0]
        return workspace

    def _choose_tactic(self, request: BuildRequest, tactics: list[int], outputs: list[Port], workspace: int) -> int:
        """The fastest tactic; instances sharing a ``timing_cache_id`` (and identity and I/O) are timed once."""
        caller = self._build()
        cache: dict[Any, int] | None = request.extra.get("timing_cache")
        cache_id = getattr(caller.plugin, "timing_cache_id", None)
        key = None
        if cache is not None and cache_id is not None:
            if not isinstance(cache_id, str):
                raise caller.fail(
                    "timing_cache_id", f": timing_cache_id must be a str or None, got {cache_id!r}", TypeMismatchError
                )
            ports = [*request.inputs, *outputs]
            key = (self.identity_of_build, cache_id, tuple((tuple(p.ranges), p.dtype, p.format) for p in ports))
            cached = cache.get(key)
            if cached is not None and cached in tactics:
                return cached
        best = self._time_tactics(tactics, request.inputs, outputs, workspace, request.backend)
        if key is not None and cache is not None:
            cache[key] = best
        return best

    def _time_tactics(
        self, tactics: list[int], inputs: list[Port], outputs: list[Port], workspace: int, backend: Backend | None = None
    ) -> int:
        """Time each tactic with every descriptor at the profile's opt dims, as TensorRT does.

        The timing runs on the build device (``Builder(device=...)``): device buffers and a real
        stream on CUDA, host buffers and stream 0 on the CPU. Buffers are sized for the max dims
        (a data-dependent output may be written up to its upper bound); descriptors say opt, so a
        plugin sizing work from its output descriptor sees the same shapes it sees for its inputs.
        """
        if backend is None:
            backend = get_backend(DEFAULT_DEVICE)
        runtime = _capability(self._root, Phase.BUILD, PluginCapabilityType.RUNTIME)
        owners: list[Any] = []

        def buffer(nbytes: int) -> int:
            owner, address = backend.allocate_arena(max(nbytes, 1))
            owners.append(owner)
            return int(address)

        def buffers(ports: list[Port]) -> tuple[list[int], list[PluginTensorDesc]]:
            addresses, descs = [], []
            for port in ports:
                _, opt, high = port.ranges[0]
                count = max(int(np.prod(storage_shape(list(d), port.format), dtype=np.int64)) for d in (opt, high))
                addresses.append(buffer(count * np.dtype(port.dtype.nptype()).itemsize))
                descs.append(PluginTensorDesc(Dims(opt), port.dtype, port.format, port.scale))
            return addresses, descs

        in_addresses, in_descs = buffers(inputs)
        out_addresses, out_descs = buffers(outputs)
        scratch = buffer(workspace) if workspace else 0
        stream_owner, stream = backend.create_stream()
        best, best_time = tactics[0], float("inf")
        try:
            # the plugin's hooks see the build device as the active one (as_array, plugin_arrays and
            # decorator plugins' Tensors then describe device memory on CUDA)
            with using_backend(backend):
                for tactic in tactics:
                    runtime(Phase.BUILD, "set_tactic", tactic)
                    runtime(Phase.BUILD, "on_shape_change", in_descs, out_descs)
                    backend.synchronize(stream)
                    start = time.perf_counter()
                    for _ in range(3):
                        status = runtime(
                            Phase.BUILD, "enqueue", in_descs, out_descs, in_addresses, out_addresses, scratch, stream
                        )
                        check_status(runtime, "enqueue", status, Phase.BUILD)
                    backend.synchronize(stream)
                    elapsed = time.perf_counter() - start
                    if elapsed < best_time:
                        best, best_time = tactic, elapsed
        finally:
            backend.synchronize(stream)
            owners.clear()  # the buffers, then the stream, are freed only once the work on them is done
            stream_owner = None  # noqa: F841
        return best

    def serialized(self, caller: PluginCaller) -> bytes:
        runtime = _capability(caller, Phase.SERIALIZE, PluginCapabilityType.RUNTIME)
        fields = runtime(Phase.SERIALIZE, "get_fields_to_serialize")
        if not isinstance(fields, PluginFieldCollection):
            raise runtime.fail(
                "get_fields_to_serialize",
                f" returned {type(fields).__name__}; expected a PluginFieldCollection",
                TypeMismatchError,
                Phase.SERIALIZE,
            )
        return encode_fields(fields)

    def serialize_build(self) -> BuildResult:
        payload = self.serialized(self._root)
        self._root(Phase.TEARDOWN, "destroy")
        self.build_caller = None
        return BuildResult(payload, self.tactic)

    def finish_build(self, request: Any, outputs: Any) -> BuildResult:
        return self.serialize_build()

    def adopt_build(self) -> Any:
        root = self._root
        self.runtime_callers[id(root.plugin)] = runtime = _capability(root, Phase.BUILD, PluginCapabilityType.RUNTIME)
        self.root_callers[id(root.plugin)] = root
        runtime(Phase.BUILD, "set_tactic", self.tactic)
        self.build_caller = None
        return root.plugin

    def abort_build(self) -> None:
        if self.build_caller is not None:
            try:
                self._root(Phase.TEARDOWN, "destroy")
            except Exception:
                pass
        self.build_caller = None

    def revive(self, name: str, version: str, namespace: str, payload: bytes, registry: Any, tactic: int) -> Any:
        creator = registry.require_creator(name, version, namespace)
        creator_caller = PluginCaller(creator, self.layer, f"{name} v{version} creator", self.logger, self.policy)
        fields = decode_fields(payload)
        plugin = creator_caller(Phase.DESERIALIZE, "create_plugin", self.layer, fields, TensorRTPhase.RUNTIME)
        if not isinstance(plugin, IPluginV3):
            raise creator_caller.fail(
                "create_plugin",
                f" returned {type(plugin).__name__}; expected an IPluginV3",
                phase=Phase.DESERIALIZE,
            )
        require_hooks(self.caller(plugin), ("clone", "enqueue"), IPluginV3, self.family)
        runtime = _capability(self.caller(plugin), Phase.DESERIALIZE, PluginCapabilityType.RUNTIME)
        runtime(Phase.DESERIALIZE, "set_tactic", tactic)
        self.tactic = tactic
        self.runtime_callers[id(plugin)] = runtime
        self.root_callers[id(plugin)] = self.caller(plugin)
        return plugin

    def attach(self, engine_plugin: Any, resource_context: Any) -> Any:
        source = self.runtime_callers[id(engine_plugin)]
        clone = self.clone_of(source, Phase.CONTEXT, "attach_to_context", resource_context, original=engine_plugin)
        runtime = _capability(self.caller(clone), Phase.CONTEXT, PluginCapabilityType.RUNTIME)
        self.runtime_callers[id(clone)] = runtime
        self.root_callers[id(clone)] = self.caller(clone)
        return clone

    def shape_change(
        self,
        plugin: Any,
        inputs: Sequence[PluginTensorDesc],
        outputs: Sequence[PluginTensorDesc],
        input_ranges: Sequence[tuple[Dims, Dims, Dims]],
        output_ranges: Sequence[tuple[Dims, Dims, Dims]],
    ) -> None:
        self.runtime_callers[id(plugin)](Phase.SHAPE_CHANGE, "on_shape_change", list(inputs), list(outputs))

    def enqueue_hook(self, plugin: Any) -> tuple[PluginCaller, str]:
        return self.runtime_callers[id(plugin)], "enqueue"

    def detach(self, plugin: Any) -> None:
        self.release(plugin)

    def release(self, engine_plugin: Any) -> None:
        self.runtime_callers.pop(id(engine_plugin), None)
        root = self.root_callers.pop(id(engine_plugin), None)
        if root is not None:
            root(Phase.TEARDOWN, "destroy")
