"""The built-in plugin library: TensorRT's standard plugins, registered by ``init_libnvinfer_plugins``.

>>> import plugrt as trt
>>> from plugrt.plugins import init_libnvinfer_plugins
>>> init_libnvinfer_plugins(trt.Logger(trt.Logger.WARNING), "")
True
>>> trt.get_plugin_registry().get_creator("EfficientNMS_TRT", "1", "").name
'EfficientNMS_TRT'

The plugin modules are imported on the first call (importing :mod:`plugrt` stays light).
Each is a small, complete example of a TensorRT-style plugin; see ``docs/plugins-library.md``.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from ..core.errors import TypeMismatchError
from ..core.logger import ILogger
from ..interfaces.registry import get_plugin_registry

__all__ = ["LIBRARY", "init_libnvinfer_plugins", "library_creators"]

#: (module, creator class) of every plugin in the library, in registration order.
LIBRARY: tuple[tuple[str, str], ...] = (
    ("batched_nms", "BatchedNMSPluginCreator"),
    ("batched_nms", "BatchedNMSDynamicPluginCreator"),
    ("efficient_nms", "EfficientNMSPluginCreator"),
    ("layer_norm", "LayerNormPluginCreator"),
    ("instance_norm", "InstanceNormalizationPluginCreator"),
    ("instance_norm", "InstanceNormalizationPluginV2Creator"),
    ("group_norm", "GroupNormalizationPluginCreator"),
    ("roi_align", "ROIAlignPluginCreator"),
    ("scatter_nd", "ScatterNDPluginCreator"),
)

_LOCK = threading.Lock()


def library_creators(logger: ILogger | None = None) -> list[Any]:
    """A fresh creator object for every plugin of the library (not registered)."""
    creators = []
    for module_name, class_name in LIBRARY:
        module = importlib.import_module(f"{__name__}.{module_name}")
        creators.append(getattr(module, class_name)(logger))
    return creators


def init_libnvinfer_plugins(logger: ILogger | None, namespace: str) -> bool:
    """Register the library's creators under ``namespace`` (TensorRT's ``init_libnvinfer_plugins``).

    Idempotent per namespace: a second call for the same namespace keeps the creators
    already there (and registers any that are missing). Each namespace gets creator
    objects of its own. ``logger`` receives the creators' warnings (unknown fields,
    ambiguous defaults); None uses the registry's logger. Returns True.
    """
    if not isinstance(namespace, str):
        raise TypeMismatchError(f"init_libnvinfer_plugins: namespace must be a str, got {type(namespace).__name__}")
    registry = get_plugin_registry()
    with _LOCK:
        present = {(c.name, c.plugin_version) for c in registry.all_creators if c.plugin_namespace == namespace}
        for creator in library_creators(logger or registry.logger):
            if (creator.name, creator.plugin_version) not in present:
                registry.register_creator(creator, namespace)
    return True
