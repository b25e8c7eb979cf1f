"""Calling plugin hooks from the checker: failures become :class:`HookError` naming the hook.

Each hook belongs to the check that is about it: when the plugin cannot even run
because, say, ``configure_plugin`` raised, the ``reconfigure`` check reports it and
the checks that only needed a working run are skipped instead of repeating it.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import PlugrtError

__all__ = ["HookError", "call", "check_status", "hint_for", "owner_of"]

#: Which check owns a failure inside each hook.
_OWNERS: dict[str, str] = {
    "create_plugin": "fields-roundtrip",
    "clone": "clone-independence",
    "attach_to_context": "clone-independence",
    "get_output_datatype": "output-shapes",
    "get_output_data_type": "output-shapes",
    "get_output_data_types": "output-shapes",
    "get_output_dimensions": "output-shapes",
    "get_output_shape": "output-shapes",
    "get_output_shapes": "output-shapes",
    "get_capability_interface": "identity",
    "supports_format": "format-accepts-something",
    "supports_format_combination": "format-accepts-something",
    "configure_plugin": "reconfigure",
    "configure_with_format": "reconfigure",
    "on_shape_change": "reconfigure",
    "get_workspace_size": "workspace",
    "get_valid_tactics": "output-shapes",
    "set_tactic": "output-shapes",
    "initialize": "initialize-terminate",
    "terminate": "initialize-terminate",
    "destroy": "initialize-terminate",
    "detach_from_context": "initialize-terminate",
    "enqueue": "output-shapes",
    "execute_async": "output-shapes",
    "serialize": "serialization-size",
    "get_serialization_size": "serialization-size",
    "get_fields_to_serialize": "serialization-roundtrip",
    "deserialize_plugin": "serialization-roundtrip",
}


_CONFIGURE_HINT = (
    "Fix: configure runs at build time with -1 for dynamic dimensions (the range is in min/opt/max) and again "
    "with concrete shapes before enqueue; it must not assume fixed shapes"
)
_HINTS: dict[str, str] = {
    "configure_plugin": _CONFIGURE_HINT,
    "configure_with_format": _CONFIGURE_HINT,
    "on_shape_change": _CONFIGURE_HINT,
    "create_plugin": "Fix: create_plugin must accept the fields its field_names declares",
    "clone": "Fix: clone() must return a new plugin of the same class carrying the same state",
    "attach_to_context": "Fix: attach_to_context must return a new plugin (usually self.clone())",
    "initialize": "Fix: initialize() must succeed and return 0 (or None)",
    "get_workspace_size": "Fix: get_workspace_size must return a non-negative int",
    "supports_format": "Fix: accept at least FLOAT/LINEAR (or the types your kernel handles)",
    "supports_format_combination": (
        "Fix: accept at least one type/format per position, judging position pos by in_out[:pos + 1] only"
    ),
}


def hint_for(hook: str) -> str:
    """How to fix a failure inside ``hook`` ('' when the error says it all)."""
    return _HINTS.get(hook, "")


class HookError(PlugrtError):
    """A plugin hook raised, or returned something TensorRT would not accept."""

    def __init__(self, hook: str, message: str, owner: str | None = None) -> None:
        super().__init__(message)
        self.hook = hook
        self.owner = owner or owner_of(hook)


def owner_of(hook: str) -> str:
    """The check id that reports a failure inside ``hook``."""
    return _OWNERS.get(hook, "output-shapes")


def call(target: Any, hook: str, *args: Any) -> Any:
    """``target.hook(*args)``; any exception becomes a :class:`HookError` naming the hook."""
    try:
        method = getattr(target, hook)
    except AttributeError:
        raise HookError(hook, f"{type(target).__name__} has no {hook}() hook") from None
    try:
        return method(*args)
    except HookError:
        raise
    except Exception as exc:
        raise HookError(hook, f"{hook}() raised {type(exc).__name__}: {exc}") from exc


def check_status(hook: str, status: Any) -> None:
    """TensorRT's status convention: None, True or 0 is success; anything else fails."""
    if status is None or status is True or (isinstance(status, int) and not isinstance(status, bool) and status == 0):
        return
    raise HookError(hook, f"{hook}() returned {status!r}; 0 or None means success")
