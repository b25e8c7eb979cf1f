"""The build pass: network definition → :class:`~plugrt.engine.plan.EnginePlan`.

Order: check the graph and profiles, then walk layers in topological order,
inferring types and shapes symbolically and driving plugin adapters through
TensorRT's build-time calls (inserting reformat layers where a plugin wants
another type or layout), check every shape at each profile's min/opt/max,
serialize the plugins, and plan activation memory per profile.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.base import Backend
from ..core.dims import Dims
from ..core.enums import PreviewFeature
from ..core.errors import BuildError, PlugrtError, ShapeError
from ..core.logger import ILogger, Severity
from ..core.types import DataType, TensorFormat
from ..engine.plan import PLUGIN_KIND, EnginePlan, LayerPlan, ProfilePlan, TensorPlan, tensor_max_bytes
from ..engine.plan_format import PluginRecord
from ..interfaces.adapters import PluginAdapter, adapter_for_plugin
from ..interfaces.adapters.base import BuildRequest, Port
from ..network.definition import INetworkDefinition
from ..network.layer import ILayer, IPluginV2Layer, IPluginV3Layer
from ..network.tensor import ITensor
from ..nodes.shape_checks import broadcast_checks, check_at_points, plugin_output_checks, profile_points
from ..shape.builder import IExprBuilder, constant, symbol
from ..shape.expr import IDimensionExpr
from .config import BuilderFlag, IBuilderConfig, MemoryPoolType
from .fusion import fuse_layers
from .graph import topological_layers
from .int8 import int8_operator, int8_positions, tensor_scale
from .memory import Block, plan_memory
from .profiles import ResolvedProfile, resolve_profiles

__all__ = ["build_plan"]

_Pending = tuple[LayerPlan, PluginAdapter, BuildRequest, list[Port]]


class _Build:
    def __init__(
        self,
        network: INetworkDefinition,
        config: IBuilderConfig,
        logger: ILogger,
        backend: Backend | None = None,
        calibrated: dict[str, float] | None = None,
    ) -> None:
        self.network = network
        self.backend = backend
        self.config = config
        self.logger = logger
        #: BuilderFlag.INT8: layers with INT8 kernels run in INT8 where scales are known (builder/int8.py)
        self.int8 = config.get_flag(BuilderFlag.INT8)
        #: tensor name -> amax from the calibrator (dynamic ranges set on tensors win)
        self.calibrated = dict(calibrated or {})
        #: tensor -> its INT8 scale, where known
        self.scales: dict[int, float] = {}
        self._readers: dict[int, list[ILayer]] | None = None
        self.tensors: list[TensorPlan] = []
        self.values: list[list[IDimensionExpr] | None] = []
        self.index: dict[int, int] = {}
        self.layers: list[LayerPlan] = []
        self.weights: dict[str, np.ndarray] = {}
        self.pending: list[_Pending] = []
        self.begun: list[PluginAdapter] = []
        self.conversions: dict[tuple[int, DataType, TensorFormat], int] = {}
        #: The type the network declares for a plugin output stored in another type (the plugin chose
        #: it, e.g. HALF under BuilderFlag.FP16): consumers and network outputs see the declared type.
        self.declared_types: dict[int, DataType] = {}
        self.profiles: list[ResolvedProfile] = []
        #: (plugin identity, timing_cache_id, I/O descriptors) → chosen tactic; TensorRT's timing cache
        self.timing_cache: dict[Any, int] | None = (
            None if config.get_flag(BuilderFlag.DISABLE_TIMING_CACHE) else {}
        )
        #: plugin layer → {output position: input position} it computes in place
        self.aliases: dict[int, dict[int, int]] = {}
        #: tensor → the tensor whose memory it shares (an in-place plugin output → its input)
        self.shares: dict[int, int] = {}

    # --- tensors ------------------------------------------------------------------
    def add_tensor(
        self,
        name: str,
        dtype: DataType,
        fmt: TensorFormat,
        shape: list[IDimensionExpr],
        role: str,
        values: list[IDimensionExpr] | None = None,
    ) -> int:
        self.tensors.append(TensorPlan(name, dtype, fmt, list(shape), role))
        self.values.append(values)
        return len(self.tensors) - 1

    def port(self, index: int) -> Port:
        t = self.tensors[index]
        return Port(
            list(t.shape),
            [self.ranges(t.shape, p) for p in range(len(self.profiles))],
            t.dtype,
            t.format,
            self.values[index],
            self.scales.get(index, 1.0),
        )

    def ranges(self, shape: list[IDimensionExpr], profile: int) -> tuple[Dims, Dims, Dims]:
        env = self.profiles[profile]
        lows, opts, highs = [], [], []
        for dim in shape:
            lo, hi = dim.bounds(env.low, env.high)
            lows.append(max(lo, 0))
            opts.append(max(dim.evaluate(env.opt), 0))
            highs.append(max(hi, 0))
        return Dims(lows), Dims(opts), Dims(highs)

    def converted(self, index: int, dtype: DataType, fmt: TensorFormat, consumer: str) -> int:
        source = self.tensors[index]
        if (source.dtype, source.format) == (dtype, fmt):
            return index
        key = (index, dtype, fmt)
        if key not in self.conversions:
            name = f"{source.name} [{dtype.name}/{fmt.name}]"
            out = self.add_tensor(name, dtype, fmt, source.shape, "internal", self.values[index])
            params: dict[str, Any] = {"dst_type": dtype.name, "src_format": source.format.name, "dst_format": fmt.name}
            if DataType.INT8 in (source.dtype, dtype) and source.dtype != dtype:
                scale = self.scales.get(index)
                if scale is None and self.int8:
                    self.logger.emit(
                        Severity.WARNING,
                        f"tensor {source.name!r} has no INT8 scale (no dynamic range, not calibrated); its INT8 "
                        f"conversion for {consumer!r} uses scale 1; set one with ITensor.set_dynamic_range",
                    )
                if scale is not None:
                    params["scale"] = scale
                    self.scales[out] = scale
            self.layers.append(
                LayerPlan(
                    f"Reformat {source.name} {source.dtype.name}/{source.format.name} -> {dtype.name}/{fmt.name}",
                    "reformat",
                    [index],
                    [out],
                    params=params,
                )
            )
            self.logger.emit(
                Severity.VERBOSE, f"inserted a reformat of {source.name!r} to {dtype.name}/{fmt.name} for {consumer!r}"
            )
            self.conversions[key] = out
        return self.conversions[key]

    def declared(self, index: int) -> DataType:
        """The type the network declares for tensor ``index`` (its stored type may differ)."""
        return self.declared_types.get(index, self.tensors[index].dtype)

    def input_index(self, layer: ILayer, position: int, tensor: ITensor | None) -> int:
        if tensor is None:
            raise BuildError(f"layer {layer.name!r}: input {position} is not set")
        if id(tensor) not in self.index:
            raise BuildError(f"layer {layer.name!r}: input {position} ({tensor.name!r}) is not produced by any layer")
        return self.index[id(tensor)]

    def bind_outputs(
        self,
        layer: ILayer,
        types: list[DataType],
        formats: list[TensorFormat],
        shapes: list[list[IDimensionExpr]],
        values: list[Any],
        role: str = "internal",
        declared: list[DataType] | None = None,
    ) -> list[int]:
        if not len(types) == len(shapes) == layer.num_outputs:
            raise BuildError(
                f"layer {layer.name!r}: rules gave {len(types)} types and {len(shapes)} shapes for {layer.num_outputs} outputs"
            )
        outputs = []
        for i, tensor in enumerate(layer._outputs):
            index = self.add_tensor(tensor.name, types[i], formats[i], shapes[i], role, values[i])
            if declared is not None and declared[i] != types[i]:
                self.declared_types[index] = declared[i]
            dims = [d.get_constant_value() if d.is_constant() else -1 for d in shapes[i]]
            tensor.set_inferred(types[i] if declared is None else declared[i], dims)
            self.index[id(tensor)] = index
            self.note_scale(index, tensor)
            outputs.append(index)
        return outputs

    # --- INT8 -----------------------------------------------------------------------
    def note_scale(self, index: int, tensor: ITensor) -> None:
        """Record the INT8 scale of ``tensor`` (dynamic range or calibration) for engine tensor ``index``."""
        scale = tensor_scale(tensor, self.calibrated)
        if scale is not None:
            self.scales[index] = scale

    def readers(self, tensor: ITensor) -> list[ILayer]:
        if self._readers is None:
            self._readers = {}
            for i in range(self.network.num_layers):
                layer = self.network.get_layer(i)
                for t in layer._inputs:
                    if t is not None:
                        self._readers.setdefault(id(t), []).append(layer)
        return self._readers.get(id(tensor), [])

    def reads_int8(self, layer: ILayer, tensor: ITensor) -> bool:
        """Whether standard ``layer`` will read ``tensor`` as INT8 (an INT8 kernel with all its scales)."""
        if isinstance(layer, (IPluginV2Layer, IPluginV3Layer)):
            return False
        try:
            op = layer.to_operator()
        except PlugrtError:
            return False
        positions = int8_positions(op, len(layer._inputs))
        if positions is None:
            return False
        scales = [tensor_scale(t, self.calibrated) for t in layer._inputs]
        return all(scales[p] is not None for p in positions) and any(layer._inputs[p] is tensor for p in positions)

    def int8_form(self, layer: ILayer, op: Any, sources: list[int]) -> tuple[Any, tuple[int, ...], float | None]:
        """(operator, inputs read as INT8, output scale or None) for ``layer``: its INT8 form where it has one."""
        if not self.int8 or layer.num_outputs != 1 or int8_positions(op, len(sources)) is None:
            return op, (), None
        out = layer.get_output(0)
        out_scale = tensor_scale(out, self.calibrated)
        readers = self.readers(out)
        if out.is_network_output or not readers or not all(self.reads_int8(r, out) for r in readers):
            out_scale = None
        new = int8_operator(op, [self.scales.get(s) for s in sources], out_scale)
        if new is None:
            return op, (), None
        self.logger.emit(
            Severity.VERBOSE,
            f"layer {layer.name!r} runs in INT8 ({new.kind}, output {'INT8' if out_scale else 'FLOAT'})",
        )
        return new, int8_positions(op, len(sources)) or (), out_scale

    # --- layers -------------------------------------------------------------------
    def standard_layer(self, layer: ILayer) -> None:
        op = layer.to_operator()
        op.name = layer.name
        sources = [self.input_index(layer, i, t) for i, t in enumerate(layer._inputs)]
        op, int8_inputs, out_scale = self.int8_form(layer, op, sources)
        inputs = [
            self.converted(
                source,
                DataType.INT8 if i in int8_inputs else self.declared(source),
                TensorFormat.LINEAR,
                layer.name,
            )
            for i, source in enumerate(sources)
        ]
        in_types = [self.tensors[i].dtype for i in inputs]
        in_shapes = [self.tensors[i].shape for i in inputs]
        in_values = [self.values[i] for i in inputs]
        try:
            types = op.output_types(in_types)
            shapes = op.output_shapes(in_shapes, in_values)
            values = op.output_values(in_shapes, in_values)
        except PlugrtError:
            raise
        except Exception as exc:
            raise BuildError(f"layer {layer.name!r} ({op.kind}): {type(exc).__name__}: {exc}") from exc
        check_at_points(broadcast_checks(op, layer.name), profile_points(self.profiles))
        # A layer computed only from constants is constant too: it runs once per context, not per inference
        # (standard operators are deterministic; data-dependent sizes are left to the run).
        derived = bool(inputs) and all(self.tensors[i].role == "constant" for i in inputs) and not op.size_exprs
        role = "constant" if op.is_constant or derived else "internal"
        declared = [DataType.FLOAT] if out_scale is not None else None
        outputs = self.bind_outputs(layer, types, [TensorFormat.LINEAR] * len(types), shapes, values, role, declared)
        if out_scale is not None:
            self.scales[outputs[0]] = out_scale
        keys = {}
        for name, array in op.weights.items():
            key = f"{len(self.layers)}/{name}"
            self.weights[key] = np.ascontiguousarray(array)
            keys[name] = key
        for expr in op.size_exprs.values():
            for profile in self.profiles:
                profile.opt[expr.symbol] = expr.size_bounds[0].evaluate(profile.opt)
        self.layers.append(
            LayerPlan(
                layer.name,
                op.kind,
                inputs,
                outputs,
                params=dict(op.params),
                weights=keys,
                size_outputs={i: e.symbol for i, e in op.size_exprs.items()},
            )
        )

    def plugin_layer(self, layer: IPluginV2Layer | IPluginV3Layer) -> None:
        adapter = adapter_for_plugin(layer.plugin, layer.name, self.logger)
        adapter.begin_build(layer.plugin)
        self.begun.append(adapter)
        inputs = [self.input_index(layer, i, t) for i, t in enumerate(layer._inputs)]
        shape_inputs = [self.input_index(layer, i, t) for i, t in enumerate(getattr(layer, "shape_inputs", []))]
        request = BuildRequest(
            layer.name,
            [self.port(i) for i in inputs],
            fp16=self.config.get_flag(BuilderFlag.FP16),
            int8=self.config.get_flag(BuilderFlag.INT8),
            workspace_limit=self.config.get_memory_pool_limit(MemoryPoolType.WORKSPACE),
            extra={"timing_cache": self.timing_cache},
            backend=self.backend,
        )
        # type rules see declared types; negotiation starts from the stored ones (no conversion)
        types = adapter.output_types([self.declared(i) for i in inputs])
        eb = IExprBuilder(owner=layer.name)
        shapes = adapter.output_shapes(request, [self.port(i) for i in shape_inputs], eb)
        for expr in eb.declared_size_tensors.values():
            opt_expr = expr.size_bounds[0]
            for profile in self.profiles:
                profile.opt[expr.symbol] = opt_expr.evaluate(profile.opt)
        check_at_points(plugin_output_checks(adapter.describe_shapes(), shapes), profile_points(self.profiles))
        outputs = [
            Port(s, [self.ranges(s, p) for p in range(len(self.profiles))], t, scale=self.output_scale(layer, k))
            for k, (s, t) in enumerate(zip(shapes, types))
        ]
        preferred: list[Any] = [(p.dtype, p.format) for p in request.inputs] + [(t, TensorFormat.LINEAR) for t in types]
        choices = adapter.choose_formats(request, outputs, preferred)
        for i, (dtype, fmt) in enumerate(choices[: len(inputs)]):
            inputs[i] = self.converted(inputs[i], dtype, fmt, layer.name)
            request.inputs[i].dtype, request.inputs[i].format = dtype, fmt
            request.inputs[i].scale = self.scales.get(inputs[i], 1.0)
        for port, (dtype, fmt) in zip(outputs, choices[len(inputs) :]):
            port.dtype, port.format = dtype, fmt
        aliases = self.in_place_outputs(layer.name, adapter, request, outputs)
        workspace = adapter.configure(request, outputs, len(self.profiles))
        if workspace > request.workspace_limit:
            raise BuildError(
                f"layer {layer.name!r} needs {workspace} bytes of workspace but MemoryPoolType.WORKSPACE is limited to "
                f"{request.workspace_limit}; raise it with config.set_memory_pool_limit"
            )
        out_index = self.bind_outputs(
            layer, [p.dtype for p in outputs], [p.format for p in outputs], shapes, [None] * len(outputs), declared=types
        )
        for index, port in zip(out_index, outputs):
            if port.dtype == DataType.INT8 and index not in self.scales:
                self.scales[index] = port.scale
        ports = request.inputs + outputs
        params: dict[str, Any] = {"family": adapter.family}
        if any(p.dtype == DataType.INT8 for p in ports):  # the scales the plugin sees when it runs
            params["io_scales"] = [p.scale for p in ports]
        plan = LayerPlan(
            layer.name,
            PLUGIN_KIND,
            inputs,
            out_index,
            params=params,
            workspace=workspace,
            shape_inputs=shape_inputs,
            size_outputs={i: e.symbol for i, e in eb.declared_size_tensors.items()},
        )
        self.layers.append(plan)
        self.pending.append((plan, adapter, request, outputs))
        if aliases:
            self.aliases[id(plan)] = aliases

    def output_scale(self, layer: ILayer, position: int) -> float:
        """The INT8 scale of plugin output ``position`` (1 when unknown)."""
        scale = tensor_scale(layer.get_output(position), self.calibrated)
        return 1.0 if scale is None else scale

    def in_place_outputs(
        self, layer: str, adapter: PluginAdapter, request: BuildRequest, outputs: list[Port]
    ) -> dict[int, int]:
        """The plugin's in-place outputs, honoured with PreviewFeature.ALIASED_PLUGIN_IO_10_03 on (as in TensorRT)."""
        if not self.config.get_preview_feature(PreviewFeature.ALIASED_PLUGIN_IO_10_03):
            if adapter.offers_aliasing():
                self.logger.emit(
                    Severity.WARNING,
                    f"layer {layer!r}: the plugin declares in-place outputs (get_aliased_input) but "
                    "PreviewFeature.ALIASED_PLUGIN_IO_10_03 is off, so every output gets its own buffer and the "
                    "plugin is not asked; turn it on with config.set_preview_feature(trt.PreviewFeature."
                    "ALIASED_PLUGIN_IO_10_03, True)",
                )
            return {}
        aliases = adapter.aliased_inputs(request, outputs)
        for out, inp in aliases.items():
            source, target = request.inputs[inp], outputs[out]
            if (source.dtype, source.format) != (target.dtype, target.format) or source.ranges != target.ranges:
                raise BuildError(
                    f"layer {layer!r}: output {out} aliases input {inp}, so both need one type, format and shape; "
                    f"input {inp} is {source.dtype.name}/{source.format.name} with (min, opt, max) {source.ranges}, "
                    f"output {out} is {target.dtype.name}/{target.format.name} with {target.ranges}"
                )
        return aliases

    def resolve_in_place(self) -> None:
        """Give each in-place output its input's memory, copying the input first where it must survive.

        The input is copied (as TensorRT does) when anyone reads it after the plugin, when it
        is a network input (the caller's memory is never overwritten; logged) or a constant;
        an in-place output that is a network output is computed in the arena and copied out.
        """
        if not self.aliases:
            return
        layers: list[LayerPlan] = []
        for step, layer in enumerate(self.layers):
            aliases = self.aliases.get(id(layer), {})
            copies_after: list[LayerPlan] = []
            for out, inp in sorted(aliases.items()):
                source = layer.inputs[inp]
                read_later = any(
                    source in later.inputs or source in later.shape_inputs for later in self.layers[step + 1 :]
                ) or [i for i, t in enumerate(layer.inputs) if t == source] != [inp] or source in layer.shape_inputs
                role = self.tensors[source].role
                if read_later or role in ("input", "constant", "output"):
                    why = (
                        "it is a network input the caller owns"
                        if role == "input"
                        else "it is a constant"
                        if role == "constant"
                        else "it is read after the plugin"
                    )
                    self.logger.emit(
                        Severity.INFO if role == "input" else Severity.VERBOSE,
                        f"layer {layer.name!r} writes output {out} in place of input {inp} "
                        f"({self.tensors[source].name!r}); {why}, so the plugin gets a copy",
                    )
                    copy = self._copy_of(source, f"{self.tensors[source].name} [copy for {layer.name}]")
                    layers.append(LayerPlan(f"Copy {self.tensors[source].name} for {layer.name}", "identity", [source], [copy]))
                    layer.inputs[inp] = source = copy
                target = layer.outputs[out]
                if self.tensors[target].role == "output":
                    private = self._copy_of(target, f"{self.tensors[target].name} [in place]")
                    layer.outputs[out] = private
                    copies_after.append(
                        LayerPlan(f"Copy {self.tensors[target].name} to the output", "identity", [private], [target])
                    )
                    target = private
                self.shares[target] = source
            layers.append(layer)
            layers.extend(copies_after)
        self.layers = layers

    def _copy_of(self, index: int, name: str) -> int:
        t = self.tensors[index]  # (after fusion renumbered the tensors; build-time values are no longer needed)
        return self.add_tensor(name, t.dtype, t.format, list(t.shape), "internal")

    # --- the whole pass -------------------------------------------------------------
    def run(self) -> EnginePlan:
        network = self.network
        if network.num_outputs == 0:
            raise BuildError("the network has no outputs; mark at least one with network.mark_output(tensor)")
        self.profiles, symbols = resolve_profiles(
            network._inputs,
            [self.config.get_optimization_profile(i) for i in range(self.config.num_optimization_profiles)],
        )
        for tensor in network._inputs:
            shape = [symbol(f"{tensor.name}[{k}]") if d < 0 else constant(d) for k, d in enumerate(tensor.shape)]
            self.index[id(tensor)] = self.add_tensor(tensor.name, tensor.dtype, TensorFormat.LINEAR, shape, "input")
            self.note_scale(self.index[id(tensor)], tensor)
        order = topological_layers(network)
        monitor = self.config.progress_monitor
        if monitor is not None:
            monitor.phase_start("Building engine", None, len(order))
        try:
            for step, layer in enumerate(order):
                if isinstance(layer, (IPluginV2Layer, IPluginV3Layer)):
                    self.plugin_layer(layer)
                else:
                    self.standard_layer(layer)
                if monitor is not None and monitor.step_complete("Building engine", step) is False:
                    raise BuildError(f"the build was cancelled by the progress monitor after layer {layer.name!r}")
            io = self.mark_outputs()
            self.layers, self.tensors, io, fused = fuse_layers(self.layers, self.tensors, io)
            for name in fused:
                self.logger.emit(Severity.VERBOSE, f"fused layers into {name!r}")
            self.resolve_in_place()
            self.check_profile_shapes()
            plugins = self.finish_plugins()
        except BaseException:
            for adapter in self.begun:
                adapter.abort_build()
            raise
        finally:
            if monitor is not None:
                monitor.phase_finish("Building engine")
        return EnginePlan(
            network.name,
            self.tensors,
            io,
            self.layers,
            self.memory_plans(),
            symbols,
            self.weights,
            plugins,
            self.io_shapes(io),
        )

    def mark_outputs(self) -> list[int]:
        inputs = [self.index[id(t)] for t in self.network._inputs]
        outputs = []
        for tensor in self.network._outputs:
            if id(tensor) not in self.index:
                raise BuildError(f"output {tensor.name!r} is not produced by any layer")
            index = self.index[id(tensor)]
            if index in inputs:
                raise BuildError(f"tensor {tensor.name!r} is both a network input and output; add an identity layer")
            declared = self.declared(index)
            if (self.tensors[index].dtype, self.tensors[index].format) != (declared, TensorFormat.LINEAR):
                # the caller gets the declared type and a linear layout, whatever the plugin chose inside
                stored = self.tensors[index]
                stored.name = f"{tensor.name} [{stored.dtype.name}/{stored.format.name}]"
                index = self.converted(index, declared, TensorFormat.LINEAR, "network output")
                self.tensors[index].name = tensor.name
            if self.tensors[index].role == "constant":
                # constants are computed once into the arena; an output lives in the caller's memory, so copy
                source = self.tensors[index]
                source.name = f"{tensor.name} [constant]"
                copy = self.add_tensor(tensor.name, source.dtype, source.format, source.shape, "internal", self.values[index])
                self.layers.append(LayerPlan(f"Copy {tensor.name} to the output", "identity", [index], [copy]))
                index = copy
            self.tensors[index].role = "output"
            outputs.append(index)
        return inputs + outputs

    def check_profile_shapes(self) -> None:
        producers = {o: layer.name for layer in self.layers for o in layer.outputs}
        for p, env in enumerate(self.profiles):
            for index, tensor in enumerate(self.tensors):
                for label, values in (("min", env.low), ("opt", env.opt), ("max", env.high)):
                    if label != "opt" and any(d.symbols() - set(values) for d in tensor.shape):
                        continue
                    try:
                        dims = [d.evaluate(values) for d in tensor.shape]
                    except ShapeError as exc:
                        raise BuildError(
                            f"tensor {tensor.name!r} (layer {producers.get(index, 'input')!r}) at profile {p} {label}: {exc}"
                        ) from exc
                    if any(d < 0 for d in dims):
                        raise BuildError(
                            f"tensor {tensor.name!r} produced by layer {producers.get(index, 'input')!r} has shape {dims} "
                            f"at profile {p} {label} shapes; dimensions must be >= 0"
                        )

    def finish_plugins(self) -> list[PluginRecord]:
        records: list[PluginRecord] = []
        for plan, adapter, request, outputs in self.pending:
            result = adapter.finish_build(request, outputs)
            name, version, namespace = adapter.identity_of_build
            plan.params["plugin"] = len(records)
            plan.tactic = result.tactic
            records.append(PluginRecord(namespace, name, version, adapter.interface, result.payload))
        return records

    def memory_plans(self) -> list[ProfilePlan]:
        last_use: dict[int, int] = {}
        producer: dict[int, int] = {}
        for step, layer in enumerate(self.layers):
            for i in layer.inputs + layer.shape_inputs:
                last_use[i] = step
            for o in layer.outputs:
                producer[o] = step
        end = len(self.layers)

        def root(index: int) -> int:  # in-place outputs live in the memory of the input they overwrite
            while index in self.shares:
                index = self.shares[index]
            return index

        plans = []
        for profile in self.profiles:
            lifetimes: dict[int, tuple[int, int, int]] = {}
            for index, tensor in enumerate(self.tensors):
                data_dependent = any(d.symbols() - set(profile.low) for d in tensor.shape)
                if tensor.role == "input" or (tensor.role == "output" and not data_dependent):
                    continue
                nbytes = tensor_max_bytes(tensor, profile.low, profile.high)
                start = 0 if tensor.role == "constant" else producer.get(index, 0)
                stop = end if tensor.role in ("constant", "output") else last_use.get(index, start)
                owner = root(index)
                if owner in lifetimes:
                    size, first, last = lifetimes[owner]
                    lifetimes[owner] = (max(size, nbytes), min(first, start), max(last, stop))
                else:
                    lifetimes[owner] = (nbytes, start, stop)
            blocks = [Block(("t", index), size, start, stop) for index, (size, start, stop) in lifetimes.items()]
            for step, layer in enumerate(self.layers):
                if layer.workspace:
                    blocks.append(Block(("w", step), layer.workspace, step, step))
            arena, offsets = plan_memory(blocks)
            tensor_offsets = {k[1]: v for k, v in offsets.items() if isinstance(k, tuple) and k[0] == "t"}
            for member in self.shares:
                tensor_offsets[member] = tensor_offsets[root(member)]
            plans.append(
                ProfilePlan(
                    profile.shapes,
                    arena,
                    tensor_offsets,
                    {k[1]: v for k, v in offsets.items() if isinstance(k, tuple) and k[0] == "w"},
                )
            )
        return plans

    def io_shapes(self, io: list[int]) -> dict[str, Dims]:
        return {
            self.tensors[i].name: Dims(
                [d.get_constant_value() if d.is_constant() else -1 for d in self.tensors[i].shape]
            )
            for i in io
        }


def build_plan(
    network: INetworkDefinition,
    config: IBuilderConfig,
    logger: ILogger,
    backend: Backend | None = None,
    calibrated: dict[str, float] | None = None,
) -> EnginePlan:
    """Build ``network`` with ``config`` into an in-memory plan, timing plugin tactics on ``backend`` (None: CPU);
    ``calibrated`` maps tensor names to the amax the INT8 calibrator found (see :mod:`plugrt.builder.int8`)."""
    return _Build(network, config, logger, backend, calibrated).run()
