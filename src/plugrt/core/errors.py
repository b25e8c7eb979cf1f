"""The error hierarchy: every failure plugrt reports is a :class:`PlugrtError`.

Messages name the object involved (layer, plugin, tensor), the expected and the
actual value, and the valid choices where there are any.
"""

from __future__ import annotations

__all__ = [
    "AllocationLimitError",
    "BuildError",
    "CreatorNotFoundError",
    "DuplicateCreatorError",
    "ExecutionError",
    "FieldError",
    "FormatNegotiationError",
    "MissingBackendError",
    "MissingHookError",
    "NetworkError",
    "PlanFormatError",
    "PluginDefinitionError",
    "PluginError",
    "PlugrtError",
    "RegistryError",
    "SerializationError",
    "ShapeError",
    "TypeMismatchError",
]


class PlugrtError(Exception):
    """Base class of every error plugrt raises on purpose."""


class ShapeError(PlugrtError, ValueError):
    """A shape is invalid, inconsistent, or outside an optimization profile."""


class TypeMismatchError(PlugrtError, TypeError):
    """A value has the wrong data type (tensor type, field type, argument type)."""


class FieldError(PlugrtError, ValueError):
    """A plugin field is missing, unknown, of the wrong type or out of range."""


class PluginError(PlugrtError):
    """A plugin broke its contract (bad return value, exception in a hook, ...)."""


class MissingHookError(PluginError, NotImplementedError):
    """A plugin or creator class does not implement a required hook."""


class PluginDefinitionError(PluginError, ValueError):
    """A decorator-API plugin (``plugrt.plugin``) is defined, described or called wrongly."""


class FormatNegotiationError(PluginError):
    """No type/format combination is accepted by a plugin's format hooks."""


class RegistryError(PlugrtError):
    """A plugin registry operation failed."""


class DuplicateCreatorError(RegistryError):
    """A creator with the same (name, version, namespace) is already registered."""


class CreatorNotFoundError(RegistryError, LookupError):
    """No creator is registered under the requested (name, version, namespace)."""


class SerializationError(PlugrtError, ValueError):
    """Serialized bytes are malformed, truncated, or of the wrong size."""


class PlanFormatError(SerializationError):
    """A plan file is truncated, corrupted, or of an unsupported format version."""


class NetworkError(PlugrtError, ValueError):
    """A network definition is invalid (bad layer argument, unknown tensor, ...)."""


class BuildError(PlugrtError):
    """The builder could not turn a network into an engine."""


class ExecutionError(PlugrtError, RuntimeError):
    """Running an engine failed (missing address, kernel or plugin error, ...)."""


class AllocationLimitError(PlugrtError, MemoryError):
    """A tensor or activation arena would be larger than the allocation limit (``plugrt.set_allocation_limit``)."""


class MissingBackendError(PlugrtError, ImportError):
    """An optional dependency needed by a backend or kernel is not installed."""
