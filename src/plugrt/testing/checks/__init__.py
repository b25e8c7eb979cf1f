"""The checks, in report order: ``CHECKS`` maps each stable id to its function.

A check takes the shared :class:`~plugrt.testing.context.CheckContext` and returns
a message saying what it verified, or raises ``CheckFailedError`` (what is wrong and
how to fix it) or ``CheckSkippedError`` (why it could not run).
"""

from __future__ import annotations

from collections.abc import Callable

from ..context import CheckContext
from .clones import check_clone_independence, check_concurrency
from .formats import (
    check_format_accepted_runs,
    check_format_accepts_something,
    check_format_consistency,
    check_format_no_lookahead,
)
from .identity import check_fields_roundtrip, check_identity
from .resources import check_initialize_terminate
from .runtime import (
    check_determinism,
    check_reconfigure,
    check_reference,
    check_stream,
    check_workspace,
)
from .serialization import (
    check_serialization_rejects_damage,
    check_serialization_roundtrip,
    check_serialization_size,
)
from .shapes import check_guard_bytes, check_inputs_unmodified, check_output_shapes, check_shape_hooks_pure
from .stream_gpu import check_stream_gpu

__all__ = ["CHECKS", "CHECK_IDS"]

CHECKS: dict[str, Callable[[CheckContext], str]] = {
    "identity": check_identity,
    "fields-roundtrip": check_fields_roundtrip,
    "output-shapes": check_output_shapes,
    "guard-bytes": check_guard_bytes,
    "inputs-unmodified": check_inputs_unmodified,
    "shape-hooks-pure": check_shape_hooks_pure,
    "serialization-size": check_serialization_size,
    "serialization-roundtrip": check_serialization_roundtrip,
    "serialization-rejects-damage": check_serialization_rejects_damage,
    "clone-independence": check_clone_independence,
    "format-accepts-something": check_format_accepts_something,
    "format-consistency": check_format_consistency,
    "format-no-lookahead": check_format_no_lookahead,
    "format-accepted-runs": check_format_accepted_runs,
    "reconfigure": check_reconfigure,
    "workspace": check_workspace,
    "initialize-terminate": check_initialize_terminate,
    "concurrency": check_concurrency,
    "determinism": check_determinism,
    "stream": check_stream,
    "stream-gpu": check_stream_gpu,
    "reference": check_reference,
}

#: Every check id, in report order.
CHECK_IDS: tuple[str, ...] = tuple(CHECKS)
