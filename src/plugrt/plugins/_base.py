"""The creator every library plugin shares, and small helpers for plugin hooks (the plugins' own scaffolding: ``_scaffold.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from ..backends.registry import active_backend
from ..backends.views import as_array
from ..core.errors import ShapeError
from ..core.logger import ILogger
from ..core.types import DataType
from ..interfaces.creator import IPluginCreator
from ..interfaces.fields import PluginFieldCollection

__all__ = [
    "FLOAT_TYPES",
    "LibraryCreator",
    "check_dim",
    "copy_to",
    "host_buffers",
    "on_gpu",
    "plugin_arrays",
]

#: Element types the library's float tensors accept (kernels compute in float32 either way).
FLOAT_TYPES = (DataType.FLOAT, DataType.HALF)


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


def on_gpu() -> bool:
    """True while a GPU engine (or build) calls the plugin: its buffers are device memory and
    compiled CUDA kernels can run on them."""
    return active_backend().gpu


@contextmanager
def host_buffers(
    inputs: Sequence[int], input_desc: Sequence[Any], outputs: Sequence[int], output_desc: Sequence[Any], stream: int
) -> Iterator[tuple[list[np.ndarray], list[np.ndarray]]]:
    """The plugin's buffers as NumPy arrays, for kernels that only exist for the host.

    On the CPU these are zero-copy views (``trt.as_array``). Under a CUDA engine the
    inputs are copied to the host on ``stream``, the kernel runs on the host and the
    outputs are copied back when the block ends: correct everywhere, fast on the CPU,
    and not capturable in a CUDA graph. Only the NMS plugins still use it, for rankings
    larger than their GPU kernels handle; every other library kernel runs on the
    engine's device through :func:`plugin_arrays`.
    """
    backend = active_backend()
    ins, outs = _views(inputs, input_desc), _views(outputs, output_desc)
    if backend.host_memory:
        yield ins, outs
        return
    with backend.stream_scope(stream):
        host_outs = [np.empty(a.shape, a.dtype) for a in outs]
        yield [backend.to_host(a) for a in ins], host_outs
        for device, host in zip(outs, host_outs):
            backend.copy_from_host(device, host)


@contextmanager
def plugin_arrays(
    inputs: Sequence[int], input_desc: Sequence[Any], outputs: Sequence[int], output_desc: Sequence[Any], stream: int
) -> Iterator[tuple[Any, list[Any], list[Any]]]:
    """``(xp, ins, outs)``: the plugin's buffers as arrays of the engine's device, and their array module.

    On the CPU, NumPy and zero-copy host views. Under a CUDA engine, CuPy and zero-copy
    device views, with ``stream`` as CuPy's current stream for the whole block: a kernel
    written against ``xp`` runs on the device, on the plugin's stream, with no host copy
    (and, when it reads nothing back, can be captured in a CUDA graph).

    >>> import numpy as np, plugrt as trt
    >>> x, y = np.arange(3, dtype=np.float32), np.zeros(3, np.float32)
    >>> desc = trt.PluginTensorDesc(trt.Dims((3,)), trt.float32)
    >>> with plugin_arrays([x.ctypes.data], [desc], [y.ctypes.data], [desc], 0) as (xp, (a,), (b,)):
    ...     _ = xp.multiply(a, 2, out=b)
    >>> xp is np, y.tolist()
    (True, [0.0, 2.0, 4.0])
    """
    backend = active_backend()
    with backend.stream_scope(stream):
        yield backend.xp, _views(inputs, input_desc), _views(outputs, output_desc)


def _views(addresses: Sequence[int], descs: Sequence[Any]) -> list[Any]:
    return [as_array(p, d) for p, d in zip(addresses, descs)]


def copy_to(view: Any, values: np.ndarray) -> None:
    """Fill a NumPy or CuPy ``view`` with host ``values``."""
    if isinstance(view, np.ndarray):
        view[...] = values
    else:
        view.set(np.ascontiguousarray(values, dtype=view.dtype))
