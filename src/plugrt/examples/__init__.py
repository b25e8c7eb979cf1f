"""Example plugins written against TensorRT's Python API, shipped so the demo and docs can run them.

Each module registers its creator with the global registry when imported.
"""

from typing import Any

import plugrt as trt


def register_once(creator_class: type, namespace: str = "") -> Any:
    """Register a ``creator_class()`` under ``namespace`` unless one of that name already is; return it."""
    registry = trt.get_plugin_registry()
    name = creator_class().name
    for creator in registry.all_creators:
        if creator.name == name and creator.plugin_namespace == namespace:
            return creator
    creator = creator_class()
    registry.register_creator(creator, namespace)
    return creator

