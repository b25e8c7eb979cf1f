"""The IPluginV2 family: ``IPluginV2`` → ``IPluginV2Ext`` → ``IPluginV2DynamicExt``.

Users subclass one of these classes exactly as with TensorRT's Python API. Hooks
that TensorRT requires raise :class:`~plugrt.MissingHookError` naming the hook and
class when left undefined; optional hooks have TensorRT's defaults.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dims import Dims
from ..core.errors import PluginError, SerializationError
from ..core.types import DataType, TensorFormat
from ..shape.builder import DimsExprs, IExprBuilder
from .descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from .hooks import missing_hook

__all__ = [
    "IPluginV2",
    "IPluginV2DynamicExt",
    "IPluginV2DynamicExtBase",
    "IPluginV2Ext",
    "declared_serialization_size",
    "serialized_bytes",
]


def serialized_bytes(value: Any, who: str = "serialize()") -> bytes:
    """What ``serialize()`` returned, as the bytes TensorRT's binding would copy.

    TensorRT's Python binding converts the result to a C++ string: a ``str`` becomes its
    UTF-8 bytes, anything bytes-like (``bytes``, ``bytearray``, ``memoryview``, a NumPy
    array) its raw bytes. Anything else raises :class:`SerializationError` naming the type.
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    try:
        return bytes(memoryview(value))
    except (TypeError, ValueError):
        raise SerializationError(
            f"{who} returned {type(value).__name__}; expected bytes, a bytes-like object or a str (stored as UTF-8)"
        ) from None


def declared_serialization_size(plugin: Any) -> int:
    """The size TensorRT allocates for ``plugin``'s serialization, asked as TensorRT asks.

    A plugin class that defines ``get_serialization_size()`` is asked through it (as
    TensorRT's binding does); otherwise an assigned ``serialization_size`` is used; otherwise
    the length of what ``serialize()`` returns.
    """
    if callable(getattr(type(plugin), "get_serialization_size", None)):
        size = plugin.get_serialization_size()
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise PluginError(f"get_serialization_size() returned {size!r}; expected a non-negative int")
        return int(size)
    override = plugin.__dict__.get("_serialization_size")
    if override is not None:
        return int(override)
    return len(serialized_bytes(plugin.serialize()))


class IPluginV2:
    """A static-shape plugin with implicit batch (TensorRT's legacy ``IPluginV2``).

    In plugrt the first dimension of every input is the batch dimension: the
    plugin sees the remaining dimensions and gets the batch size in
    :meth:`execute_async`. Attributes: ``num_outputs``, ``plugin_type``,
    ``plugin_version``, ``plugin_namespace``.
    """

    num_outputs: int = 1
    plugin_type: str = ""
    plugin_version: str = "1"
    plugin_namespace: str = ""
    tensorrt_version: int = 100000

    def __init__(self) -> None:
        pass

    # --- required hooks -------------------------------------------------------
    def get_output_shape(self, index: int, input_shapes: list[Dims]) -> Dims:
        """Output ``index``'s dims (without the batch dimension). Required."""
        missing_hook(self, "get_output_shape", "IPluginV2")

    def execute_async(
        self, batch_size: int, inputs: list[int], outputs: list[int], workspace: int, stream_handle: int
    ) -> int | None:
        """Run the plugin on buffer addresses. Return 0 or None on success. Required."""
        missing_hook(self, "execute_async", "IPluginV2")

    def clone(self) -> IPluginV2:
        """A copy carrying the same (initialized) state. Required."""
        missing_hook(self, "clone", "IPluginV2")

    # --- optional hooks with TensorRT's defaults -----------------------------
    def supports_format(self, dtype: DataType, format: TensorFormat) -> bool:  # noqa: A002
        """Whether the plugin runs with ``dtype``/``format``. Default: FLOAT and LINEAR."""
        return dtype == DataType.FLOAT and format == TensorFormat.LINEAR

    def configure_with_format(
        self,
        input_shapes: list[Dims],
        output_shapes: list[Dims],
        dtype: DataType,
        format: TensorFormat,  # noqa: A002
        max_batch_size: int,
    ) -> None:
        """Receive the chosen shapes, type and format once at build time."""

    def initialize(self) -> int:
        """Acquire resources (device memory, handles); 0 means success."""
        return 0

    def terminate(self) -> None:
        """Release what :meth:`initialize` acquired."""

    def get_workspace_size(self, *args: Any) -> int:
        """Scratch bytes needed by :meth:`execute_async` (IPluginV2 signature:
        ``max_batch_size``; IPluginV2DynamicExt: ``input_desc, output_desc``). Default 0."""
        return 0

    def serialize(self) -> bytes | str:
        """The plugin's state, read back by the creator's ``deserialize_plugin`` (which gets bytes).

        Return bytes, any bytes-like object, or a ``str`` (stored as its UTF-8 bytes), as
        TensorRT's binding accepts.
        """
        return b""

    @property
    def serialization_size(self) -> int:
        """Bytes :meth:`serialize` writes: ``get_serialization_size()`` when the class defines
        it, else an assigned value, else the length of what ``serialize()`` returns."""
        return declared_serialization_size(self)

    @serialization_size.setter
    def serialization_size(self, value: int) -> None:
        self.__dict__["_serialization_size"] = value

    def destroy(self) -> None:
        """Called once when the owner (network, builder or engine) lets the plugin go."""


class IPluginV2Ext(IPluginV2):
    """IPluginV2 plus output types and a richer ``configure_plugin``."""

    def get_output_data_type(self, index: int, input_types: list[DataType]) -> DataType:
        """Type of output ``index``. Default: the first input's type (FLOAT without inputs)."""
        return input_types[0] if input_types else DataType.FLOAT

    def configure_plugin(self, *args: Any) -> None:
        """Receive the chosen shapes, types and format (IPluginV2Ext signature:
        ``input_shapes, output_shapes, input_types, output_types, input_is_broadcasted,
        output_is_broadcasted, format, max_batch_size``). Default: calls ``configure_with_format``.

        (Declared with ``*args`` because IPluginV2DynamicExt redefines it with
        descriptors, as TensorRT does.)
        """
        input_shapes, output_shapes, input_types, output_types, _, _, fmt, max_batch_size = args
        dtype = input_types[0] if input_types else (output_types[0] if output_types else DataType.FLOAT)
        self.configure_with_format(input_shapes, output_shapes, dtype, fmt, max_batch_size)

    def attach_to_context(self, resource_context: Any) -> None:
        """Called when a clone joins an execution context."""

    def detach_from_context(self) -> None:
        """Called before a clone leaves its execution context."""


class IPluginV2DynamicExtBase(IPluginV2):
    """TensorRT's name for the C++ side of :class:`IPluginV2DynamicExt` (plugins of that family,
    including built-in ones, are instances of it). Subclass :class:`IPluginV2DynamicExt`."""


class IPluginV2DynamicExt(IPluginV2DynamicExtBase, IPluginV2Ext):
    """A dynamic-shape plugin: shapes are expressions, formats chosen per position.

    A Python plugin may define ``get_serialization_size()``; TensorRT (and plugrt) then
    call it before ``serialize()`` and the two must agree.
    """

    #: Most type/format combinations TensorRT offers ``supports_format_combination`` (TensorRT's value).
    FORMAT_COMBINATION_LIMIT: int = 100

    def get_output_dimensions(self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder) -> DimsExprs:
        """Output dims as expressions of the input dims. Required."""
        missing_hook(self, "get_output_dimensions", "IPluginV2DynamicExt")

    def supports_format_combination(self, pos: int, in_out: list[PluginTensorDesc], num_inputs: int) -> bool:
        """Whether position ``pos`` may take ``in_out[pos]`` given positions ``< pos``. Required."""
        missing_hook(self, "supports_format_combination", "IPluginV2DynamicExt")

    def enqueue(
        self,
        input_desc: list[PluginTensorDesc],
        output_desc: list[PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> int | None:
        """Run on buffer addresses with the given descriptors. Required."""
        missing_hook(self, "enqueue", "IPluginV2DynamicExt")

    def get_output_datatype(self, index: int, input_types: list[DataType]) -> DataType:
        """Type of output ``index``; defaults to :meth:`get_output_data_type`."""
        return self.get_output_data_type(index, input_types)

    def configure_plugin(self, pos_in: list[DynamicPluginTensorDesc], pos_out: list[DynamicPluginTensorDesc]) -> None:  # type: ignore[override]
        """Receive descriptors with profile ranges; called again when shapes change."""

    def get_workspace_size(self, input_desc: list[PluginTensorDesc], output_desc: list[PluginTensorDesc]) -> int:  # type: ignore[override]
        """Scratch bytes for these (maximum) shapes. Default 0."""
        return 0
