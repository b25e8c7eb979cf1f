"""The shared mechanism of optional and required plugin hooks."""

from __future__ import annotations

from typing import NoReturn

from ..core.errors import MissingHookError

__all__ = ["is_overridden", "missing_hook"]


def missing_hook(obj: object, hook: str, interface: str) -> NoReturn:
    """Raise the error for a required hook the class of ``obj`` does not define."""
    raise MissingHookError(
        f"{type(obj).__name__} does not implement {interface}.{hook}(), which is required; "
        f"define {hook} on {type(obj).__name__}"
    )


def is_overridden(obj: object, hook: str, base: type) -> bool:
    """True when ``type(obj)`` defines ``hook`` itself instead of inheriting ``base``'s."""
    return getattr(type(obj), hook, None) is not getattr(base, hook, None)
