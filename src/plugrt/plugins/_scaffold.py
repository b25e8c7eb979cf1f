"""What the library's plugins share: construction from checked fields, bytes, clones and the common hooks.

:class:`LibraryPlugin` (any interface family) keeps the plugin's whole configuration
in ``params`` (the dict its schema parses) and serializes it: the header
(``MAGIC``, ``FORMAT``), an optional ``TAG`` string (TensorRT's plugins that write
their name or version first), the fields in schema order, then what
:meth:`~LibraryPlugin.write_state` adds. :class:`DynamicLibraryPlugin` adds the
IPluginV2DynamicExt hooks most of them spell alike: one float output of input 0's
type, linear float tensors of one type, a workspace described by
:meth:`~LibraryPlugin.workspace_layout`, and an ``enqueue`` that hands the
buffers, as arrays of the engine's device, to :meth:`~LibraryPlugin.compute` (:func:`launch`,
which IPluginV2Ext plugins call from ``execute_async``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..core.errors import SerializationError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import PluginTensorDesc
from ..interfaces.serialization import SerializationReader, SerializationWriter
from ..interfaces.v2 import IPluginV2DynamicExt
from ._base import FLOAT_TYPES, host_buffers, plugin_arrays
from ._workspace import WorkspaceLayout

__all__ = ["DynamicLibraryPlugin", "LibraryPlugin", "launch"]


class LibraryPlugin:
    """Construction, serialization and clones of a plugin whose configuration is ``params``.

    The class sets ``NAME``, ``VERSION``, ``SCHEMA`` (its field schema), ``MAGIC`` and
    ``FORMAT`` (the header :class:`~plugrt.SerializationWriter` writes) and, when it
    has more than one output, ``NUM_OUTPUTS``. List it before the interface class in
    the bases: its constructor calls the interface's.
    """

    NAME: ClassVar[str]
    VERSION: ClassVar[str]
    SCHEMA: ClassVar[Any]
    MAGIC: ClassVar[int]
    FORMAT: ClassVar[int]
    NUM_OUTPUTS: ClassVar[int] = 1
    #: a string written after the header and checked when reading ("" for none)
    TAG: ClassVar[str] = ""

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.num_outputs = self.NUM_OUTPUTS
        self.plugin_type, self.plugin_version, self.plugin_namespace = self.NAME, self.VERSION, ""
        self.params = dict(params or {})

    def serialize(self) -> bytes:
        """Magic, format version, the tag, every field of ``params`` in schema order, then the state."""
        writer = SerializationWriter(magic=self.MAGIC, version=self.FORMAT)
        if self.TAG:
            writer.write_str(self.TAG)
        self.SCHEMA.write(writer, self.params)
        self.write_state(writer)
        return writer.to_bytes()

    @classmethod
    def deserialize(cls, data: bytes) -> Any:
        """The plugin :meth:`serialize` wrote; damaged, foreign or leftover bytes raise SerializationError."""
        reader = SerializationReader(data, magic=cls.MAGIC, version=cls.FORMAT)
        if cls.TAG:
            found = reader.read_str()
            if found != cls.TAG:
                raise SerializationError(
                    f"{cls.NAME} version {cls.VERSION}: these bytes are tagged {found!r}, not {cls.TAG!r}"
                )
        plugin = cls(cls.SCHEMA.read(reader))
        plugin.read_state(reader)
        reader.finish()
        return plugin

    def write_state(self, writer: SerializationWriter) -> None:
        """Write what the plugin learned beyond its fields (nothing by default)."""

    def read_state(self, reader: SerializationReader) -> None:
        """Read back what :meth:`write_state` wrote (nothing by default)."""

    def clone(self) -> Any:
        """A plugin with the same params and namespace (extend it to copy more)."""
        copy = type(self)(self.params)
        copy.plugin_namespace = self.plugin_namespace
        return copy

    # --- running: what :func:`launch` calls -------------------------------------------
    def workspace_layout(self, input_desc: Sequence[PluginTensorDesc]) -> WorkspaceLayout:
        """The scratch arrays a run needs for these inputs (none by default)."""
        return WorkspaceLayout()

    def runs_on_host(self) -> bool:
        """True when :meth:`compute` must get host arrays even under a CUDA engine (default: False)."""
        return False

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        """The kernel: write ``outputs`` from ``inputs`` with array module ``xp``; ``scratch`` holds the workspace views."""
        raise NotImplementedError(f"{self.NAME} does not implement compute")


def launch(
    plugin: LibraryPlugin,
    input_desc: Sequence[PluginTensorDesc],
    output_desc: Sequence[PluginTensorDesc],
    inputs: Sequence[int],
    outputs: Sequence[int],
    workspace: int,
    stream: int,
) -> None:
    """Run ``plugin.compute`` on its buffers: arrays of the engine's device (host copies when it runs on the host)."""
    layout = plugin.workspace_layout(input_desc)
    if plugin.runs_on_host():
        with host_buffers(inputs, input_desc, outputs, output_desc, stream) as (ins, outs):
            plugin.compute(np, list(ins), list(outs), layout.bind(workspace) if layout.nbytes else {})
        return
    with plugin_arrays(inputs, input_desc, outputs, output_desc, stream) as (xp, ins, outs):
        plugin.compute(xp, ins, outs, layout.bind(workspace, xp=xp) if layout.nbytes else {})


class DynamicLibraryPlugin(LibraryPlugin, IPluginV2DynamicExt):
    """The IPluginV2DynamicExt hooks most library plugins share; override those that differ."""

    def get_output_datatype(self, index: int, input_types: list[DataType]) -> DataType:
        """Input 0's type."""
        return input_types[0]

    def supports_format_combination(self, pos: int, in_out: list[PluginTensorDesc], num_inputs: int) -> bool:
        """Linear FLOAT or HALF tensors, all of input 0's type."""
        desc = in_out[pos]
        return desc.format == TensorFormat.LINEAR and desc.type in FLOAT_TYPES and desc.type == in_out[0].type

    def get_workspace_size(self, input_desc: list[PluginTensorDesc], output_desc: list[PluginTensorDesc]) -> int:
        """The bytes of :meth:`workspace_layout`."""
        return self.workspace_layout(input_desc).nbytes

    def enqueue(
        self,
        input_desc: list[PluginTensorDesc],
        output_desc: list[PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> int:
        """:meth:`compute` on the buffers, on ``stream`` (see :func:`launch`)."""
        launch(self, input_desc, output_desc, inputs, outputs, workspace, stream)
        return 0
