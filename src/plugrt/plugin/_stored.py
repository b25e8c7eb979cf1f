"""The fields a template plugin is stored as, and the plugin revived from them.

Only the attributes ``impl`` takes are stored, plus what the run needs under
reserved names (never valid attribute names: they hold a '.'): the input each
output aliases, the data-dependent output dimensions and the AOT kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import FieldError
from ..interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType
from ._aot import decode_kernels, encode_kernels

if TYPE_CHECKING:
    from ._lib import PluginDef
    from ._template import QuickPlugin

__all__ = ["ALIASES", "AOT_KERNELS", "DATA_DEPENDENT", "RESERVED_FIELDS", "revive", "stored_fields"]

ALIASES = "qdp.aliases"
DATA_DEPENDENT = "qdp.data_dependent"
AOT_KERNELS = "qdp.aot_kernels"
#: Field names the template keeps for itself.
RESERVED_FIELDS = frozenset({ALIASES, DATA_DEPENDENT, AOT_KERNELS})


def stored_fields(plugin: QuickPlugin) -> PluginFieldCollection:
    """What ``get_fields_to_serialize`` returns for ``plugin``."""
    d = plugin.definition
    fields = PluginFieldCollection()
    for name in d.impl_attrs if d.impl_func is not None else []:
        if name in plugin.attrs:
            fields.append(d.schema.to_field(name, plugin.attrs[name]))
    aliases, dependent = plugin.run_facts()
    if any(a >= 0 for a in aliases):
        fields.append(PluginField(ALIASES, np.array(aliases, np.int32), PluginFieldType.INT32))
    if dependent:
        flat = [v for pair in dependent for v in pair]
        fields.append(PluginField(DATA_DEPENDENT, np.array(flat, np.int32), PluginFieldType.INT32))
    if plugin.aot:
        fields.append(PluginField(AOT_KERNELS, encode_kernels(plugin.compile_kernels()), PluginFieldType.UNKNOWN))
    return fields


def revive(make: type[QuickPlugin], definition: PluginDef, fields: PluginFieldCollection) -> QuickPlugin:
    """The run-time plugin (of class ``make``) from the fields :func:`stored_fields` wrote."""
    schema = definition.schema
    attrs: dict[str, Any] = {}
    extra: dict[str, PluginField] = {}
    for f in fields:
        if f.name in RESERVED_FIELDS:
            extra[f.name] = f
        elif f.name in schema.attrs:
            attrs[f.name] = schema.from_field(f)
        else:
            raise FieldError(
                f"QDP plugin {schema.plugin_id!r}: unknown field {f.name!r}; its attributes: "
                f"{', '.join(schema.attrs) or 'none'}"
            )
    plugin = make(definition, attrs, AOT_KERNELS in extra)
    inputs, outputs = len(schema.tensor_names), schema.num_outputs
    if ALIASES in extra:
        plugin.aliases = [int(v) for v in extra[ALIASES].data]
        if len(plugin.aliases) != outputs or any(not -1 <= a < inputs for a in plugin.aliases):
            raise FieldError(
                f"QDP plugin {schema.plugin_id!r}: stored aliases {plugin.aliases} do not fit {outputs} outputs "
                f"and {inputs} inputs"
            )
    if DATA_DEPENDENT in extra:
        flat = [int(v) for v in extra[DATA_DEPENDENT].data]
        plugin.data_dependent = list(zip(flat[0::2], flat[1::2]))
        if len(flat) % 2 or any(not (0 <= o < outputs and 0 <= a < 8) for o, a in plugin.data_dependent):
            raise FieldError(
                f"QDP plugin {schema.plugin_id!r}: stored data-dependent dimensions {flat} do not fit {outputs} outputs"
            )
    if AOT_KERNELS in extra:
        plugin.kernels = decode_kernels(extra[AOT_KERNELS].data.tobytes())
    return plugin
