"""Snapshots of a plugin's attributes, to see whether a hook changed them.

A snapshot turns ``vars(plugin)`` into plain comparable values: NumPy arrays by
dtype, shape and bytes, containers element by element, other objects by their
own attributes (a few levels deep) or their identity.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["changed_attributes", "describe_change", "shared_mutables", "snapshot"]

_MAX_DEPTH = 4
_MAX_ITEMS = 4096


def _freeze(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return value
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes() if value.size <= 1 << 20 else id(value))
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    if isinstance(value, (bytearray, memoryview)):
        return ("bytes", bytes(value))
    if depth >= _MAX_DEPTH:
        return ("object", type(value).__name__, id(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v, depth + 1) for v in list(value)[:_MAX_ITEMS]), len(value))
    if isinstance(value, (set, frozenset)):
        return ("set", len(value), tuple(sorted(repr(v) for v in list(value)[:_MAX_ITEMS])))
    if isinstance(value, dict):
        items = list(value.items())[:_MAX_ITEMS]
        return ("dict", tuple((repr(k), _freeze(v, depth + 1)) for k, v in items), len(value))
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict) and not callable(value):
        return ("object", type(value).__name__, tuple((k, _freeze(v, depth + 1)) for k, v in attributes.items()))
    try:
        return ("value", type(value).__name__, repr(value))
    except Exception:
        return ("object", type(value).__name__, id(value))


def snapshot(obj: Any) -> dict[str, Any]:
    """A comparable copy of ``vars(obj)`` (empty for objects without attributes)."""
    attributes = getattr(obj, "__dict__", None)
    if not isinstance(attributes, dict):
        return {}
    return {name: _freeze(value, 0) for name, value in list(attributes.items())}


def changed_attributes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Names of attributes added, removed or changed between two snapshots."""
    names = sorted(set(before) | set(after))
    return [n for n in names if before.get(n, _MISSING) != after.get(n, _MISSING)]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_change(obj: Any, before: dict[str, Any], after: dict[str, Any]) -> str:
    """'self.calls, self.cache' plus the new value of the first one, for messages."""
    names = changed_attributes(before, after)
    if not names:
        return ""
    shown = ", ".join(f"self.{n}" for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    first = names[0]
    if first in getattr(obj, "__dict__", {}):
        shown += f" (self.{first} is now {_short(vars(obj)[first])})"
    return shown


def shared_mutables(a: Any, b: Any) -> list[str]:
    """Attributes of ``a`` and ``b`` that are the same mutable object (list, dict, set, array ...)."""
    va, vb = getattr(a, "__dict__", {}), getattr(b, "__dict__", {})
    shared = []
    for name, value in va.items():
        if name in vb and vb[name] is value and isinstance(value, (list, dict, set, bytearray, np.ndarray)):
            shared.append(name)
    return shared


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
