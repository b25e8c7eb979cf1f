"""Logging as TensorRT does it: an ``ILogger`` subclass receives every message."""

from __future__ import annotations

import sys
import threading

from ..core.enums import TrtEnum
from .context_manager import DeprecatedContextManager

__all__ = ["ILogger", "Logger", "RaisedErrorsLogger", "Severity"]


class Severity(TrtEnum):
    """Message severity; lower is more severe (TensorRT's values)."""

    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


_Level = Severity


class ILogger(DeprecatedContextManager):
    """Base class of loggers: override :meth:`log` to receive messages.

    ``min_severity`` filters what reaches :meth:`log`; plugrt asks
    :meth:`enabled` before building an expensive message.

    >>> class Collect(ILogger):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.messages = []
    ...     def log(self, severity, msg):
    ...         self.messages.append((severity, msg))
    """

    Severity = Severity
    INTERNAL_ERROR = Severity.INTERNAL_ERROR
    ERROR = Severity.ERROR
    WARNING = Severity.WARNING
    INFO = Severity.INFO
    VERBOSE = Severity.VERBOSE

    def __init__(self, min_severity: _Level = Severity.VERBOSE) -> None:
        self.min_severity = Severity(min_severity)

    def log(self, severity: _Level, msg: str) -> None:
        """Receive one message. Subclasses must implement this."""
        from .errors import MissingHookError

        raise MissingHookError(f"{type(self).__name__} must implement ILogger.log(severity, msg)")

    def enabled(self, severity: _Level) -> bool:
        """True when a message of ``severity`` would be delivered."""
        return severity <= getattr(self, "min_severity", Severity.VERBOSE)

    def emit(self, severity: _Level, msg: str) -> None:
        """Deliver ``msg`` to :meth:`log` if ``severity`` passes the filter."""
        if self.enabled(severity):
            self.log(severity, msg)


class Logger(ILogger):
    """The default logger: writes ``[plugrt] SEVERITY: message`` lines to stderr.

    >>> logger = Logger(Logger.WARNING)
    """

    _lock = threading.Lock()

    def __init__(self, min_severity: _Level = Severity.WARNING) -> None:
        super().__init__(min_severity)

    def log(self, severity: _Level, msg: str) -> None:
        """Print the message to stderr."""
        with self._lock:
            print(f"[plugrt] {Severity(severity).name}: {msg}", file=sys.stderr)


class RaisedErrorsLogger(Logger):
    """A :class:`Logger` for callers that raise every failure: errors are left to the exception.

    plugrt's builder and runtime log each failure at ERROR and then raise it
    (TensorRT logs and returns None); ``plugrt.compile`` and the command line
    raise, so printing the ERROR line too would say everything twice. Warnings
    and below print as usual.
    """

    def log(self, severity: _Level, msg: str) -> None:
        """Print the message to stderr unless it is an ERROR or INTERNAL_ERROR."""
        if Severity(severity) in (Severity.ERROR, Severity.INTERNAL_ERROR):
            return
        super().log(severity, msg)
