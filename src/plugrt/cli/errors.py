"""Exit codes of the ``plugrt`` command and the one-line error report."""

from __future__ import annotations

import os
import sys
import traceback

from ..core.errors import (
    BuildError,
    ExecutionError,
    MissingBackendError,
    NetworkError,
    PlugrtError,
    RegistryError,
    SerializationError,
    ShapeError,
)

__all__ = ["CHECK_FAILED", "MODEL", "OK", "RUNTIME", "USAGE", "UsageError", "check_writable", "exit_code_for", "report"]

OK = 0
CHECK_FAILED = 1
USAGE = 2
MODEL = 3
RUNTIME = 4


class UsageError(PlugrtError, ValueError):
    """A command-line argument is wrong (bad flag value, missing file, unknown name)."""


def check_writable(path: str | None, flag: str) -> None:
    """Raise :class:`UsageError` naming ``flag`` unless ``path`` can be written (checked before long work)."""
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path!r} is a directory; give a file name")
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path!r}: folder {folder!r} does not exist")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"{flag} {path!r} is not writable")
    if not os.path.exists(path) and not os.access(folder, os.W_OK):
        raise UsageError(f"{flag} {path!r}: folder {folder!r} is not writable")


def exit_code_for(exc: BaseException) -> int:
    """2 for usage errors, 3 for model/plan/plugin-library errors, 4 for run-time errors."""
    if isinstance(exc, (UsageError, MissingBackendError)):
        return USAGE
    if isinstance(exc, (ExecutionError,)):
        return RUNTIME
    if isinstance(exc, (BuildError, NetworkError, SerializationError, ShapeError, RegistryError, PlugrtError)):
        return MODEL
    return RUNTIME


def report(command: str, exc: BaseException, verbose: bool) -> int:
    """Print ``plugrt <command>: error: <message>`` (plus the traceback when verbose); return the exit code."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    print(f"plugrt {command}: error: {message}", file=sys.stderr)
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
    return exit_code_for(exc)
