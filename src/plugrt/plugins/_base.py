"""The creator every library plugin shares, and small helpers for plugin hooks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from ..backends.cpu import as_array
from ..core.errors import ShapeError
from ..core.logger import ILogger
from ..core.types import DataType
from ..plugin.creator import IPluginCreator
from ..plugin.fields import PluginFieldCollection
from ..plugin.serialization import SerializationReader, SerializationWriter

__all__ = [
    "FLOAT_TYPES",
    "LibraryCreator",
    "SchemaSerialized",
    "check_dim",
    "copy_to",
    "device_buffers",
    "host_buffers",
    "to_host",
]

#: Element types the library's float tensors accept (kernels compute in float32 either way).
FLOAT_TYPES = (DataType.FLOAT, DataType.HALF)


class SchemaSerialized:
    """``serialize`` / ``deserialize`` / ``clone`` for a plugin whose whole state is ``params``.

    The class sets ``SCHEMA`` (its field schema), ``MAGIC`` and ``FORMAT`` (the header
    :class:`~plugrt.SerializationWriter` writes), and takes ``params`` in its constructor.
    """

    SCHEMA: ClassVar[Any]
    MAGIC: ClassVar[int]
    FORMAT: ClassVar[int]
    params: dict[str, Any]
    plugin_namespace: str

    def serialize(self) -> bytes:
        """Magic, format version, then every field of ``params`` in schema order."""
        writer = SerializationWriter(magic=self.MAGIC, version=self.FORMAT)
        self.SCHEMA.write(writer, self.params)
        return writer.to_bytes()

    @classmethod
    def deserialize(cls, data: bytes) -> Any:
        """The plugin :meth:`serialize` wrote; damaged or leftover bytes raise SerializationError."""
        reader = SerializationReader(data, magic=cls.MAGIC, version=cls.FORMAT)
        make: Any = cls  # the plugin class's constructor takes params
        plugin = make(cls.SCHEMA.read(reader))
        reader.finish()
        return plugin

    def clone(self) -> Any:
        """A plugin with the same params and namespace."""
        make: Any = type(self)
        copy = make(self.params)
        copy.plugin_namespace = self.plugin_namespace
        return copy


class LibraryCreator(IPluginCreator):
    """Creates ``plugin_class`` from fields (checked by its schema) or from its bytes.

    The plugin class provides ``NAME``, ``VERSION``, ``SCHEMA`` and a classmethod
    ``deserialize(data)``. Warnings (unknown fields, ambiguous defaults) go to the
    logger given to :func:`~plugrt.plugins.init_libnvinfer_plugins`.
    """

    plugin_class: ClassVar[Any]

    def __init__(self, logger: ILogger | None = None) -> None:
        IPluginCreator.__init__(self)
        self.name = self.plugin_class.NAME
        self.plugin_version = self.plugin_class.VERSION
        self.plugin_namespace = ""
        self.field_names = self.plugin_class.SCHEMA.field_collection()
        self.logger = logger

    def create_plugin(self, name: str, field_collection: PluginFieldCollection) -> Any:
        """A new plugin from fields; wrong types and out-of-range values raise, naming the field."""
        plugin = self.plugin_class(self.plugin_class.SCHEMA.parse(field_collection, self.logger))
        plugin.plugin_namespace = self.plugin_namespace
        return plugin

    def deserialize_plugin(self, name: str, serialized_plugin: bytes) -> Any:
        """The plugin a ``serialize()`` call wrote."""
        plugin = self.plugin_class.deserialize(bytes(serialized_plugin))
        plugin.plugin_namespace = self.plugin_namespace
        return plugin


def check_dim(plugin: str, what: str, actual: int, expected: int) -> None:
    """Raise a ShapeError unless a (known) dimension has the expected value; -1 passes."""
    if actual >= 0 and actual != expected:
        raise ShapeError(f"{plugin}: {what} must be {expected}, got {actual}")


@contextmanager
def host_buffers(
    inputs: Sequence[int], input_desc: Sequence[Any], outputs: Sequence[int], output_desc: Sequence[Any], stream: int
) -> Iterator[tuple[list[np.ndarray], list[np.ndarray]]]:
    """The plugin's buffers as NumPy arrays, for the library's NumPy kernels.

    On the CPU these are zero-copy views (``trt.as_array``). Under a CUDA engine the
    inputs are copied to the host on ``stream``, the kernel runs on the host and the
    outputs are copied back when the block ends: correct everywhere, fast on the CPU.
    """
    ins = [as_array(p, d) for p, d in zip(inputs, input_desc)]
    outs = [as_array(p, d) for p, d in zip(outputs, output_desc)]
    if all(isinstance(a, np.ndarray) for a in ins + outs):
        yield ins, outs
        return
    from ..backends.cuda import cupy_stream

    with cupy_stream(stream):
        host_outs = [np.empty(a.shape, a.dtype) for a in outs]
        yield [to_host(a) for a in ins], host_outs
        for device, host in zip(outs, host_outs):
            device.set(host)


@contextmanager
def device_buffers(
    inputs: Sequence[int], input_desc: Sequence[Any], outputs: Sequence[int], output_desc: Sequence[Any], stream: int
) -> Iterator[tuple[list[Any], list[Any]] | None]:
    """CuPy views of the plugin's buffers, with ``stream`` as CuPy's current stream, under a
    CUDA engine; None on the CPU (use :func:`host_buffers` then)."""
    from ..backends.memory import active_device

    if active_device() != "cuda":
        yield None
        return
    from ..backends.cuda import cupy_stream

    with cupy_stream(stream):
        yield (
            [as_array(p, d) for p, d in zip(inputs, input_desc)],
            [as_array(p, d) for p, d in zip(outputs, output_desc)],
        )


def copy_to(view: Any, values: np.ndarray) -> None:
    """Fill a NumPy or CuPy ``view`` with host ``values``."""
    if isinstance(view, np.ndarray):
        view[...] = values
    else:
        view.set(np.ascontiguousarray(values, dtype=view.dtype))


def to_host(array: Any) -> np.ndarray:
    """``array`` as a NumPy array (a copy when it lives on a device)."""
    return array if isinstance(array, np.ndarray) else array.get()
