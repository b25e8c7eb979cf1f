"""What the conformance checker returns: one :class:`CheckResult` per check, in a :class:`CheckReport`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAIL", "INFO", "PASS", "SKIP", "WARN", "CheckFailedError", "CheckInfoError", "CheckReport", "CheckResult",
           "CheckSkippedError", "CheckWarningError"]

PASS = "pass"
#: Severities of a finding: only FAIL makes a report fail (and ``plugrt check`` exit 1).
FAIL = "fail"
WARN = "warn"
INFO = "info"
SKIP = "skip"


class CheckFailedError(Exception):
    """Raised inside a check: the plugin broke the rule the check is about (a real weakness)."""


class CheckWarningError(Exception):
    """Raised inside a check: something TensorRT accepts but that is fragile or unusual (a style choice)."""


class CheckInfoError(Exception):
    """Raised inside a check: an observation worth reporting that is neither right nor wrong."""


class CheckSkippedError(Exception):
    """Raised inside a check: the check cannot run for this plugin (the message says why)."""


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: a stable ``id``, ``status`` and a message.

    ``status`` is pass, fail, warn, info or skip. A failure's (or warning's) message says
    what was wrong and how to fix it; a pass says what was verified; info reports an
    observation; a skip says why the check did not run. Only failures make a report fail.
    """

    id: str
    status: str
    message: str

    @property
    def passed(self) -> bool:
        """True for a pass."""
        return self.status == PASS

    @property
    def failed(self) -> bool:
        """True for a failure."""
        return self.status == FAIL

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return {"id": self.id, "status": self.status, "message": self.message}


@dataclass
class CheckReport:
    """Every check's result for one plugin.

    >>> report = CheckReport("Demo v1", "IPluginV2DynamicExt", [CheckResult("identity", PASS, "ok")])
    >>> report.ok, report["identity"].status
    (True, 'pass')
    """

    plugin: str
    family: str
    results: list[CheckResult] = field(default_factory=list)
    shape_sets: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed (skips do not count as failures)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks, in report order."""
        return [r for r in self.results if r.status == FAIL]

    @property
    def passed(self) -> list[CheckResult]:
        """The passed checks."""
        return [r for r in self.results if r.status == PASS]

    @property
    def warnings(self) -> list[CheckResult]:
        """The checks that warned (they do not make the report fail)."""
        return [r for r in self.results if r.status == WARN]

    @property
    def infos(self) -> list[CheckResult]:
        """The checks that reported information only."""
        return [r for r in self.results if r.status == INFO]

    @property
    def skipped(self) -> list[CheckResult]:
        """The skipped checks."""
        return [r for r in self.results if r.status == SKIP]

    @property
    def failed_ids(self) -> list[str]:
        """Ids of the failed checks."""
        return [r.id for r in self.failures]

    def __getitem__(self, check_id: str) -> CheckResult:
        for result in self.results:
            if result.id == check_id:
                return result
        raise KeyError(f"no check {check_id!r} in this report; checks: {[r.id for r in self.results]}")

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: plugin, family, ok, counts and the results."""
        return {
            "plugin": self.plugin,
            "family": self.family,
            "ok": self.ok,
            "shape_sets": list(self.shape_sets),
            "counts": {
                "pass": len(self.passed),
                "fail": len(self.failures),
                "warn": len(self.warnings),
                "info": len(self.infos),
                "skip": len(self.skipped),
            },
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self) -> str:
        """'19 passed, 1 failed, 2 skipped' (warnings and infos only when there are some)."""
        extra = "".join(
            f", {len(items)} {word}" for items, word in ((self.warnings, "warned"), (self.infos, "info")) if items
        )
        return f"{len(self.passed)} passed, {len(self.failures)} failed{extra}, {len(self.skipped)} skipped"

    def __str__(self) -> str:
        width = max((len(r.id) for r in self.results), default=0)
        lines = [f"plugrt check: {self.plugin} ({self.family})"]
        if self.shape_sets:
            lines.append(f"  shapes: {'; '.join(self.shape_sets)}")
        for result in self.results:
            text = result.message.replace("\n", "\n" + " " * (width + 9))
            lines.append(f"  {result.status.upper():<4}  {result.id:<{width}}  {text}")
        lines.append(("OK: " if self.ok else "FAILED: ") + self.summary())
        return "\n".join(lines)
