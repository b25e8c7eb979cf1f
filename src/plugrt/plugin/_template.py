"""The template plugin: a decorator-API definition realised as an ``IPluginV3``.

Every QDP plugin is an instance of :class:`QuickPlugin`, a real IPluginV3 with core,
build and runtime capabilities; the V3 adapter drives it like any class-based V3
plugin. Its hooks call the user's functions:

* ``get_output_data_types`` / ``get_output_shapes``: the ``register`` function, on
  symbolic descriptions (it must be pure: it is called more than once);
* ``supports_format_combination`` / ``get_valid_tactics``: the ``autotune`` function's
  combinations (default: the declared types, LINEAR);
* ``enqueue``: the ``impl`` function on :class:`~plugrt.plugin.Tensor` objects (JIT), or
  one launch of the kernel ``aot_impl`` compiled at build (AOT);
* ``get_fields_to_serialize``: only the attributes ``impl`` takes, plus what the run
  needs (aliasing, data-dependent dimensions, AOT kernels) under reserved names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..backends.registry import active_backend, backend_class
from ..core.errors import PluginDefinitionError, PluginError, PlugrtError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..interfaces.fields import PluginFieldCollection
from ..interfaces.v3 import (
    IPluginResourceContext,
    IPluginV3,
    IPluginV3OneBuildV2,
    IPluginV3OneCore,
    IPluginV3OneRuntime,
    PluginCapabilityType,
)
from ..shape.builder import DimsExprs, IExprBuilder
from ._aot import AOTKernel, input_symbol, kernel_from_aot_impl
from ._autotune import AutoTuneCombination, Combination
from ._desc import TensorDesc, lower_outputs
from ._expr import ShapeExpr, ShapeExprs
from ._run import RunTensors, copy_aliased_inputs, time_aot_kernel
from ._stored import revive, stored_fields

if TYPE_CHECKING:
    from ._lib import PluginDef

__all__ = ["QuickPlugin"]


class QuickPlugin(IPluginV3, IPluginV3OneCore, IPluginV3OneBuildV2, IPluginV3OneRuntime):
    """One instance of a decorator-API plugin (JIT: ``impl``; AOT: an ``aot_impl`` kernel)."""

    def __init__(
        self,
        definition: PluginDef,
        attrs: dict[str, Any],
        aot: bool,
        inputs: Sequence[tuple[int, DataType]] | None = None,
    ) -> None:
        IPluginV3.__init__(self)
        IPluginV3OneCore.__init__(self)
        IPluginV3OneBuildV2.__init__(self)
        IPluginV3OneRuntime.__init__(self)
        schema = definition.schema
        self.plugin_name, self.plugin_namespace, self.plugin_version = schema.name, schema.namespace, "1"
        self.num_outputs = schema.num_outputs
        self.definition = definition
        self.attrs = dict(attrs)
        self.aot = aot
        #: (rank, declared type) of each input, known once the plugin is added to a network.
        self.inputs = list(inputs) if inputs is not None else None
        #: Run-time facts the plan stores: the input each output aliases (-1: none), data-dependent dims.
        self.aliases: list[int] = []
        self.data_dependent: list[tuple[int, int]] = []
        self.kernels: dict[int, AOTKernel] = {}
        self.tactic = 0
        self._configured: list[DynamicPluginTensorDesc] = []
        self._resolved: Any = None
        self._tensors = RunTensors()

    @property
    def plugin_id(self) -> str:
        """``namespace::name``."""
        return self.definition.schema.plugin_id

    def get_capability_interface(self, type: PluginCapabilityType) -> Any:  # noqa: A002 - TensorRT's name
        return self

    def clone(self) -> QuickPlugin:
        made = QuickPlugin(self.definition, self.attrs, self.aot, self.inputs)
        made.aliases, made.data_dependent, made.tactic = list(self.aliases), list(self.data_dependent), self.tactic
        made.kernels = self.kernels  # compiled kernels are shared: each module is loaded once
        made._configured = list(self._configured)
        return made

    # --- the user's functions ------------------------------------------------------------
    def _call(self, function: Any, who: str, *args: Any) -> Any:
        try:
            return function(*args)
        except Exception as exc:
            raise self._failure(exc, who) from exc

    def _failure(self, exc: Exception, who: str) -> Exception:
        """The error for ``exc`` raised by a user function: it names the plugin and the function."""
        if isinstance(exc, PlugrtError):
            return exc if self.plugin_id in str(exc) else type(exc)(f"QDP plugin {self.plugin_id!r}, {who}: {exc}")
        return PluginError(f"QDP plugin {self.plugin_id!r}: {who} raised {type(exc).__name__}: {exc}")

    def _register(self, inputs: list[TensorDesc]) -> list[TensorDesc]:
        d = self.definition
        schema = d.schema
        missing = [name for name in schema.attrs if name not in self.attrs]
        if missing:
            raise PluginDefinitionError(f"QDP plugin {self.plugin_id!r}: attributes {missing} were not given")
        result = self._call(
            lambda *a: d.register_func(*a, **{k: self.attrs[k] for k in schema.attrs}),
            f"register function {d.register_func.__name__}",
            *inputs,
        )
        outputs = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(outputs) != schema.num_outputs or not all(isinstance(o, TensorDesc) for o in outputs):
            raise PluginDefinitionError(
                f"{schema.function} returned {result!r}; its return hint declares {schema.num_outputs} TensorDesc"
            )
        for i, out in enumerate(outputs):
            if not isinstance(out.dtype, DataType):
                raise PluginDefinitionError(f"{schema.function}: output {i} has no dtype")
        return outputs

    def _inputs(self, shapes: Sequence[Sequence[Any]], types: Sequence[DataType]) -> list[TensorDesc]:
        return [
            TensorDesc(ShapeExprs.from_tuple([ShapeExpr(e) for e in dims]), t)._freeze()
            for dims, t in zip(shapes, types)
        ]

    def _declared(self) -> list[tuple[int, DataType]]:
        schema = self.definition.schema
        if self.inputs is None:
            raise PluginError(
                f"QDP plugin {self.plugin_id!r} does not know its inputs; add it with "
                f"network.add_plugin(trtp.op.{schema.namespace}.{schema.name}(...))"
            )
        return self.inputs

    def _local(self, types: Sequence[DataType] | None = None) -> tuple[list[TensorDesc], list[TensorDesc]]:
        """The register function on plugin-local symbolic dims (``in0[1]``, ...): inputs and outputs."""
        declared = self._declared()
        kinds = list(types) if types is not None else [t for _, t in declared]
        shapes = [[input_symbol(i, j) for j in range(rank)] for i, (rank, _) in enumerate(declared)]
        inputs = self._inputs(shapes, kinds)
        return inputs, self._register(inputs)

    def _aliases(self, inputs: list[TensorDesc], outputs: list[TensorDesc]) -> list[int]:
        found = []
        for i, out in enumerate(outputs):
            target = out.get_aliased()
            index = next((k for k, d in enumerate(inputs) if d is target), -1)
            if target is not None and index < 0:
                raise PluginDefinitionError(
                    f"{self.definition.schema.function}: output {i} is aliased to something that is not an input"
                )
            found.append(index)
        return found

    # --- build (every hook is a pure function of its arguments, the attributes and the inputs) ---
    def get_output_data_types(self, input_types: list[DataType]) -> list[DataType]:
        schema = self.definition.schema
        if len(input_types) != len(self._declared()):
            raise PluginError(
                f"QDP plugin {self.plugin_id!r} takes {len(schema.tensor_names)} inputs "
                f"({', '.join(schema.tensor_names)}), got {len(input_types)}"
            )
        inputs, outputs = self._local(input_types)
        self._aliases(inputs, outputs)
        return [o.dtype for o in outputs]  # type: ignore[misc]

    def get_output_shapes(
        self,
        inputs: list[DimsExprs],
        shape_inputs: list[DimsExprs],
        exprBuilder: IExprBuilder,
    ) -> list[DimsExprs]:
        if shape_inputs:
            raise PluginError(f"QDP plugin {self.plugin_id!r} takes no shape inputs, got {len(shape_inputs)}")
        descs = self._inputs([list(dims) for dims in inputs], [t for _, t in self._declared()])
        shapes, _ = lower_outputs(self._register(descs), exprBuilder, self.definition.schema.function)
        return shapes

    def supports_format_combination(self, pos: int, in_out: list[DynamicPluginTensorDesc], num_inputs: int) -> bool:
        return any(
            all(c.types[p] == in_out[p].desc.type and c.formats[p] == in_out[p].desc.format for p in range(pos + 1))
            for c in self._combinations(in_out, num_inputs)
        )

    def _combinations(self, in_out: Sequence[Any], num_inputs: int) -> list[Combination]:
        """The autotune function's combinations (default: declared types, LINEAR) for these descriptors."""
        d = self.definition
        inputs, outputs = self._local()
        declared = [*(i.dtype for i in inputs), *(o.dtype for o in outputs)]
        default = [Combination(tuple(declared), (TensorFormat.LINEAR,) * len(declared), ())]  # type: ignore[arg-type]
        if d.autotune_func is None:
            return default
        for desc, given in zip([*inputs, *outputs], in_out):
            if isinstance(given, DynamicPluginTensorDesc):  # positions not decided yet may hold placeholders
                desc._set_concrete(given, with_type=False)
        who = f"autotune function {d.autotune_func.__name__}"
        values = [self.attrs[k] for k in d.autotune_attrs]
        result = self._call(d.autotune_func, who, *inputs, *values, tuple(outputs))
        listed = [result] if isinstance(result, AutoTuneCombination) else result
        if not isinstance(listed, (list, tuple)) or not all(isinstance(c, AutoTuneCombination) for c in listed):
            raise PluginDefinitionError(
                f"QDP plugin {self.plugin_id!r}: {who} returned {result!r}; expected a list of trtp.AutoTuneCombination"
            )
        combos: list[Combination] = []
        for combination in listed:
            for c in self._call(combination._expand, who, len(declared)):
                if c not in combos:
                    combos.append(c)
        aliased = [(num_inputs + out, inp) for out, inp in enumerate(self._aliases(inputs, outputs)) if inp >= 0]
        kept = [c for c in combos if all(c.types[o] == c.types[i] and c.formats[o] == c.formats[i] for o, i in aliased)]
        if listed and not kept:
            raise PluginDefinitionError(
                f"QDP plugin {self.plugin_id!r}: {who} offers no combination where each aliased output has its "
                "input's type and format"
            )
        return kept or default

    def get_aliased_input(self, output_index: int) -> int:
        """The input an output declared with ``TensorDesc.aliased()`` shares its buffer with (-1: none)."""
        aliases = self.run_facts()[0]
        return aliases[output_index] if 0 <= output_index < len(aliases) else -1

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        self._configured = [*inp, *out]

    def get_valid_tactics(self) -> list[int]:
        if not self._configured:
            return []
        chosen = (tuple(d.desc.type for d in self._configured), tuple(d.desc.format for d in self._configured))
        tactics: list[int] = []
        for c in self._combinations(self._configured, len(self._declared())):
            if (c.types, c.formats) == chosen:
                tactics.extend(t for t in c.tactics if t not in tactics)
        return tactics

    # --- serialization (the fields: _stored.py) -------------------------------------------
    def get_fields_to_serialize(self) -> PluginFieldCollection:
        return stored_fields(self)

    def run_facts(self) -> tuple[list[int], list[tuple[int, int]]]:
        """(aliased input per output, data-dependent (output, axis) pairs): stored in a revived
        plugin, worked out from the register function in a build instance."""
        if self.inputs is None:
            return self.aliases, self.data_dependent
        inputs, outputs = self._local()
        _, dependent = lower_outputs(outputs, IExprBuilder(owner=self.plugin_id), self.definition.schema.function)
        return self._aliases(inputs, outputs), dependent

    def compile_kernels(self) -> dict[int, AOTKernel]:
        """Call ``aot_impl`` once per tactic of the chosen combination, on plugin-local shapes."""
        if self.kernels:
            return self.kernels
        d = self.definition
        if d.aot_func is None or not self._configured:
            raise PluginError(
                f"QDP plugin {self.plugin_id!r}: no AOT kernel can be made (no aot_impl, or not configured)"
            )
        inputs, outputs = self._local()
        lower_outputs(outputs, IExprBuilder(owner=self.plugin_id), d.schema.function)
        for desc, given in zip([*inputs, *outputs], self._configured):
            desc._set_concrete(given, with_type=True)
        who = f"aot_impl function {d.aot_func.__name__}"
        values = [self.attrs[k] for k in d.aot_attrs]
        kernels = {}
        for tactic in self.get_valid_tactics() or [0]:
            result = self._call(d.aot_func, who, *inputs, *values, tuple(outputs), tactic)
            kernels[tactic] = kernel_from_aot_impl(result, f"QDP plugin {self.plugin_id!r}: {who}")
        return kernels

    @classmethod
    def from_fields(cls, definition: PluginDef, fields: PluginFieldCollection) -> QuickPlugin:
        """The run-time plugin from the fields ``get_fields_to_serialize`` wrote."""
        return revive(cls, definition, fields)

    # --- run -----------------------------------------------------------------------------
    def _aot_needs_cuda(self) -> PluginError:
        return PluginError(
            f"QDP plugin {self.plugin_id!r} was built with its AOT implementation (a PTX kernel), which runs only "
            f"on a CUDA engine; on the CPU it needs its JIT implementation: define @trtp.impl({self.plugin_id!r}) "
            "(then this plan runs it on the CPU) or build with add_plugin(..., aot=False)"
        )

    def attach_to_context(self, resource_context: IPluginResourceContext) -> QuickPlugin:
        made = self.clone()
        if self.aot and not backend_class(resource_context.backend).gpu:
            d = self.definition
            if d.impl_func is None or any(name not in self.attrs for name in d.impl_attrs):
                raise self._aot_needs_cuda()
            made.aot = False
        return made

    def set_tactic(self, tactic: int) -> None:
        self.tactic = int(tactic)

    def on_shape_change(self, inputs: list[PluginTensorDesc], outputs: list[PluginTensorDesc]) -> None:
        self._tensors.clear()
        self._resolved = None
        if self.aot and active_backend().gpu:
            self._resolved = self._kernel().resolve([list(d.dims) for d in inputs], f"QDP plugin {self.plugin_id!r}")

    def _kernel(self) -> AOTKernel:
        """The AOT kernel of the current tactic; a build instance compiles its kernels on first use."""
        if not self.kernels:
            self.kernels = self.compile_kernels()
        kernel = self.kernels.get(self.tactic)
        if kernel is None:
            raise PluginError(
                f"QDP plugin {self.plugin_id!r} has no AOT kernel for tactic {self.tactic} (kernels for {sorted(self.kernels)})"
            )
        return kernel

    def enqueue(
        self,
        input_desc: list[PluginTensorDesc],
        output_desc: list[PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> None:
        backend = active_backend()
        if self.aot:
            if self.inputs is not None:  # a build instance: only tactic timing enqueues it
                time_aot_kernel(self._kernel, self.plugin_id, (input_desc, output_desc), (inputs, outputs), stream)
                return
            if not backend.gpu:
                raise self._aot_needs_cuda()
            kernel = self._kernel()
            resolved = self._resolved or kernel.resolve(
                [list(d.dims) for d in input_desc], f"QDP plugin {self.plugin_id!r}"
            )
            kernel.launch_on(resolved, inputs, outputs, stream)
            return
        d = self.definition
        if d.impl_func is None:
            raise PluginError(
                f"QDP plugin {self.plugin_id!r} has no JIT implementation; define @trtp.impl({self.plugin_id!r})"
            )
        aliases, data_dependent = self.run_facts()
        inputs = copy_aliased_inputs(aliases, input_desc, inputs, outputs, stream)
        ins, outs = self._tensors.get(
            (input_desc, output_desc), (inputs, outputs), stream, backend.name, aliases, data_dependent
        )
        values = [self.attrs[k] for k in d.impl_attrs]
        if d.impl_takes_tactic:
            values = [*values, outs, stream, self.tactic]
        else:
            values = [*values, outs, stream]
        try:
            d.impl_func(*ins, *values)
        except Exception as exc:  # the message is made only on failure
            raise self._failure(exc, f"impl function {d.impl_func.__name__}") from exc
