"""``IErrorRecorder``: where TensorRT objects report errors besides the logger.

Set one on the registry (``registry.error_recorder``), a builder or a plugin's resource
context; plugrt calls ``report_error(code, description)`` for every error it reports there,
before raising. ``SimpleErrorRecorder`` keeps them in a list (a ready-made recorder).
"""

from __future__ import annotations

import threading
from typing import Any

from ..core.enums import TrtEnum
from ..core.errors import TypeMismatchError
from .hooks import missing_hook

__all__ = ["ErrorCodeTRT", "IErrorRecorder", "SimpleErrorRecorder", "check_error_recorder", "report_to"]


class ErrorCodeTRT(TrtEnum):
    """The error categories of TensorRT's ``ErrorCode`` (Python name ``ErrorCodeTRT``)."""

    SUCCESS = 0
    UNSPECIFIED_ERROR = 1
    INTERNAL_ERROR = 2
    INVALID_ARGUMENT = 3
    INVALID_CONFIG = 4
    FAILED_ALLOCATION = 5
    FAILED_INITIALIZATION = 6
    FAILED_EXECUTION = 7
    FAILED_COMPUTATION = 8
    INVALID_STATE = 9
    UNSUPPORTED_STATE = 10


class IErrorRecorder:
    """Receives errors (TensorRT's ``IErrorRecorder``). Subclasses implement every hook.

    ``report_error`` returns True when the caller should stop (plugrt raises either way).
    """

    #: Longest description TensorRT keeps (longer ones are cut by recorders that honour it).
    MAX_DESC_LENGTH: int = 127

    def __init__(self) -> None:
        pass

    def num_errors(self) -> int:
        """How many errors are stored. Required."""
        missing_hook(self, "num_errors", "IErrorRecorder")

    def get_error_code(self, index: int) -> ErrorCodeTRT:
        """The code of error ``index``. Required."""
        missing_hook(self, "get_error_code", "IErrorRecorder")

    def get_error_desc(self, index: int) -> str:
        """The description of error ``index``. Required."""
        missing_hook(self, "get_error_desc", "IErrorRecorder")

    def has_overflowed(self) -> bool:
        """Whether errors were dropped for lack of room. Required."""
        missing_hook(self, "has_overflowed", "IErrorRecorder")

    def clear(self) -> None:
        """Forget every stored error. Required."""
        missing_hook(self, "clear", "IErrorRecorder")

    def report_error(self, val: ErrorCodeTRT, desc: str) -> bool:
        """Store one error. Required."""
        missing_hook(self, "report_error", "IErrorRecorder")


class SimpleErrorRecorder(IErrorRecorder):
    """An ``IErrorRecorder`` keeping up to ``capacity`` errors (thread-safe)."""

    def __init__(self, capacity: int = 1024) -> None:
        IErrorRecorder.__init__(self)
        self.capacity = capacity
        self.errors: list[tuple[ErrorCodeTRT, str]] = []
        self.overflowed = False
        self._lock = threading.Lock()

    def num_errors(self) -> int:
        return len(self.errors)

    def get_error_code(self, index: int) -> ErrorCodeTRT:
        return self.errors[index][0]

    def get_error_desc(self, index: int) -> str:
        return self.errors[index][1]

    def has_overflowed(self) -> bool:
        return self.overflowed

    def clear(self) -> None:
        with self._lock:
            self.errors.clear()
            self.overflowed = False

    def report_error(self, val: ErrorCodeTRT, desc: str) -> bool:
        with self._lock:
            if len(self.errors) >= self.capacity:
                self.overflowed = True
            else:
                self.errors.append((ErrorCodeTRT(val), desc))
        return True


def check_error_recorder(value: Any, owner: str) -> Any:
    """``value`` when it is an IErrorRecorder or None; otherwise a TypeMismatchError naming ``owner``."""
    if value is not None and not isinstance(value, IErrorRecorder):
        raise TypeMismatchError(f"{owner}.error_recorder must be an IErrorRecorder or None, got {type(value).__name__}")
    return value


def report_to(recorder: IErrorRecorder | None, code: ErrorCodeTRT, message: str) -> None:
    """Report ``message`` to ``recorder`` (when one is set); a recorder that fails is ignored."""
    if recorder is None:
        return
    try:
        recorder.report_error(code, message)
    except Exception:  # a broken recorder must not hide the error being reported
        pass
