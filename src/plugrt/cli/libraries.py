"""Loading plugin libraries named on the command line (Python files or modules)."""

from __future__ import annotations

from collections.abc import Iterable

from ..interfaces.registry import get_plugin_registry
from .errors import UsageError

__all__ = ["load_libraries"]


def load_libraries(paths: Iterable[str]) -> list[str]:
    """Load each library (comma-separated lists allowed); returns the names of the creators they registered."""
    registry = get_plugin_registry()
    names: list[str] = []
    for entry in paths:
        for path in (p.strip() for p in entry.split(",")):
            if not path:
                continue
            if path in ("libnvinfer_plugins", "builtin"):
                from ..plugins import init_libnvinfer_plugins

                init_libnvinfer_plugins(registry.logger, "")
                continue
            try:
                handle = registry.load_library(path)
            except Exception as exc:
                raise UsageError(f"cannot load plugin library {path!r}: {exc}") from exc
            names += [f"{c.name} v{c.plugin_version}" for c in handle.creators]
    return names
