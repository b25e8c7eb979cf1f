"""The checker's error policy: a failing hook becomes a :class:`HookError` naming the hook.

Each hook belongs to the check that is about it: when the plugin cannot even run
because, say, ``configure_plugin`` raised, the ``reconfigure`` check reports it and
the checks that only needed a working run are skipped instead of repeating it.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import PlugrtError
from ..interfaces.recorder import ErrorPolicy, Phase, PluginCaller

__all__ = ["CHECK_ERRORS", "CheckErrors", "HookError", "call", "hint_for", "owner_of"]

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


#: Hooks whose failure belongs to another check in one phase.
_PHASE_OWNERS: dict[tuple[str, str], str] = {
    (Phase.DESERIALIZE, "create_plugin"): "serialization-roundtrip",
}


def owner_of(hook: str, phase: str = "") -> str:
    """The check id that reports a failure inside ``hook`` (called in ``phase``)."""
    return _PHASE_OWNERS.get((phase, hook)) or _OWNERS.get(hook, "output-shapes")


class CheckErrors(ErrorPolicy):
    """The checker's error policy: a failing hook becomes a :class:`HookError` for the check that owns it."""

    def raised(self, caller: PluginCaller, phase: str, method: str, exc: Exception) -> Exception:
        if isinstance(exc, HookError):
            return exc
        return HookError(method, f"{method}() raised {type(exc).__name__}: {exc}", owner_of(method, phase))

    def rejected(
        self, caller: PluginCaller, phase: str, method: str, detail: str, kind: type[PlugrtError]
    ) -> Exception:
        return HookError(method, f"{method}(){detail}", owner_of(method, phase))


#: The policy of every adapter and caller the checker makes.
CHECK_ERRORS = CheckErrors()


def call(target: Any, hook: str, *args: Any, phase: str = Phase.BUILD) -> Any:
    """``target.hook(*args)`` through a :class:`PluginCaller` with the checker's policy."""
    return PluginCaller(target, "check", type(target).__name__, None, CHECK_ERRORS)(phase, hook, *args)
