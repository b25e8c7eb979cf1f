"""Exit codes of the ``plugrt`` command and the one-line error report."""

from __future__ import annotations

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

__all__ = ["CHECK_FAILED", "MODEL", "OK", "RUNTIME", "USAGE", "UsageError", "exit_code_for", "report"]

OK = 0
CHECK_FAILED = 1
USAGE = 2
MODEL = 3
RUNTIME = 4


class UsageError(PlugrtError, ValueError):
    """A command-line argument is wrong (bad flag value, missing file, unknown name)."""


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
