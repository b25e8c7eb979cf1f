"""TensorRT's ``with`` support on its objects, kept as TensorRT 10 keeps it: deprecated, no effect.

``with trt.Builder(logger) as builder, builder.create_network() as network:`` appears in a lot
of TensorRT code; TensorRT 10 still accepts it, warns (``DeprecationWarning``) on entry and
does nothing on exit (objects are freed when their last reference goes). plugrt does the same
for the same classes: ``ILogger``, ``Builder``, ``INetworkDefinition``, ``IBuilderConfig``,
``OnnxParser``, ``Runtime``, ``ICudaEngine``, ``IExecutionContext`` and ``IHostMemory``.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

__all__ = ["DeprecatedContextManager"]

T = TypeVar("T", bound="DeprecatedContextManager")


class DeprecatedContextManager:
    """Mixin: ``__enter__`` warns and returns the object; ``__exit__`` does nothing."""

    def __enter__(self: T) -> T:
        warnings.warn(
            "Context managers for TensorRT types are deprecated. "
            "Memory will be freed automatically when the reference count reaches 0.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        """No effect, as in TensorRT 10."""
        return None
