"""The plugin conformance checker: catches the classic plugin mistakes on any machine.

``check_plugin(creator_or_plugin, fields, input_shapes)`` drives a plugin through
TensorRT's lifecycle on buffers it owns (poisoned outputs, guard bytes) and
returns a :class:`CheckReport` with one :class:`CheckResult` per check id in
:data:`CHECK_IDS`. ``plugrt check FILE.py --plugin NAME ...`` does the same from
the command line. See ``docs/check.md``.
"""

from __future__ import annotations

from .checker import check_plugin
from .checks import CHECK_IDS
from .report import CheckReport, CheckResult
from .spec import CheckUsageError, InputRange

__all__ = ["CHECK_IDS", "CheckReport", "CheckResult", "CheckUsageError", "InputRange", "check_plugin"]
