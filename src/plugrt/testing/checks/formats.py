"""Checks on format negotiation: ``format-accepts-something``, ``format-consistency``,
``format-no-lookahead`` and ``format-accepted-runs``.

TensorRT asks ``supports_format_combination`` position by position, inputs
before outputs, many times and in any order; the answer for position ``pos``
may use only positions ``<= pos``. A plugin that says yes must then run
correctly with that combination.
"""

from __future__ import annotations

from typing import Any

from ..context import CheckContext
from ..hooks import HookError
from ..report import CheckFailedError, CheckSkippedError
from ..state import describe_change, snapshot
from .format_runs import check_format_accepted_runs

__all__ = [
    "check_format_accepted_runs",
    "check_format_accepts_something",
    "check_format_consistency",
    "check_format_no_lookahead",
]


def _combo(ctx: CheckContext, check_id: str) -> Any:
    try:
        return ctx.combo
    except HookError as exc:
        ctx.blame(check_id, exc)
        raise


def _role(pos: int, num_inputs: int) -> str:
    return f"input {pos}" if pos < num_inputs else f"output {pos - num_inputs}"


def check_format_accepts_something(ctx: CheckContext) -> str:
    """At least one full type/format combination is accepted."""
    combo = _combo(ctx, "format-accepts-something")
    requested = [t for t in ctx.input_types]
    got = [t for t, _ in combo.inputs]
    note = "" if got == requested else f" (the requested input types {[t.name for t in requested]} were rejected)"
    return f"accepts {combo}{note}"


def check_format_consistency(ctx: CheckContext) -> str:
    """Same question, same answer; no state changes; the declared output types are accepted."""
    combo = _combo(ctx, "format-consistency")
    driver = ctx.driver
    hook = driver.format_hook
    plugin = ctx.fresh()
    rule = ctx.rule_of(plugin, [t for t, _ in combo.inputs])
    count = len(combo.inputs)
    problems = []
    before = snapshot(plugin)
    first = driver.ask_all(driver.probe(plugin), combo, rule)
    rejected = [_role(p, count) for p, ok in enumerate(first) if not ok]
    if rejected:
        problems.append(
            f"with every position decided as {combo}, {hook} rejects {', '.join(rejected)}, although it accepted them "
            "when they were asked position by position"
        )
    descs = [driver.question_desc(p, c, rule) for p, c in enumerate(combo.positions)]
    second = [driver.supports(plugin, p, list(descs), count) for p in reversed(range(len(descs)))][::-1]
    if second != first:
        changed = [_role(p, count) for p, (a, b) in enumerate(zip(first, second)) if a != b]
        problems.append(f"{hook} answered the same questions differently the second time (at {', '.join(changed)})")
    change = describe_change(plugin, before, snapshot(plugin))
    if change:
        problems.append(
            f"{hook} changed {change}; it is asked about rejected candidates too, so state it keeps does not "
            "describe the chosen combination. Read the chosen types in configure_plugin instead"
        )
    for index, (declared, (chosen, fmt)) in enumerate(zip(rule.types, combo.outputs)):
        if declared != chosen:
            problems.append(
                f"output {index}: the type hook declares {declared.name} but {hook} rejects {declared.name}/{fmt.name} "
                f"there (it accepted {chosen.name}); TensorRT fails the build. Fix: accept the declared type, or "
                "declare the one you accept"
            )
    if problems:
        raise CheckFailedError("; ".join(problems) + f". Fix: make {hook} a pure function of its arguments")
    return f"{hook} answers consistently for {combo} and accepts the declared output types"


class _LookaheadReadError(Exception):
    """Raised by a descriptor TensorRT has not decided yet when the plugin reads it."""


class _Undecided:
    """Stands at a position after ``pos``: records and refuses every read."""

    def __init__(self, position: int, reads: list[tuple[int, str]]) -> None:
        object.__setattr__(self, "_position", position)
        object.__setattr__(self, "_reads", reads)

    def _touch(self, what: str) -> Any:
        reads: list[tuple[int, str]] = object.__getattribute__(self, "_reads")
        position: int = object.__getattribute__(self, "_position")
        reads.append((position, what))
        raise _LookaheadReadError(f"in_out[{position}]{what} is not decided yet")

    def __getattr__(self, name: str) -> Any:
        return self._touch(f".{name}")

    def __eq__(self, other: object) -> bool:
        return bool(self._touch(" compared with =="))

    def __ne__(self, other: object) -> bool:
        return bool(self._touch(" compared with !="))

    def __hash__(self) -> int:
        return int(self._touch(" hashed"))

    def __bool__(self) -> bool:
        return bool(self._touch(" tested for truth"))

    def __getitem__(self, key: Any) -> Any:
        return self._touch(f"[{key!r}]")


def check_format_no_lookahead(ctx: CheckContext) -> str:
    """The answer for position ``pos`` never reads positions after ``pos``."""
    driver = ctx.driver
    if driver.format_hook == "supports_format":
        raise CheckSkippedError("supports_format sees one type and format at a time: there is nothing to look ahead at")
    combo = _combo(ctx, "format-no-lookahead")
    plugin = ctx.fresh()
    rule = ctx.rule_of(plugin, [t for t, _ in combo.inputs])
    count = len(combo.inputs)
    descs = [driver.question_desc(p, c, rule) for p, c in enumerate(combo.positions)]
    problems = []
    for pos in range(len(descs) - 1):
        reads: list[tuple[int, str]] = []
        shown = descs[: pos + 1] + [_Undecided(p, reads) for p in range(pos + 1, len(descs))]
        try:
            driver.supports(plugin, pos, shown, count)
        except HookError:
            if not reads:
                raise
        if reads:
            later, what = reads[0]
            problems.append(
                f"asked about position {pos} ({_role(pos, count)}), it read in_out[{later}]{what} "
                f"({_role(later, count)}), which TensorRT has not decided yet"
            )
    if problems:
        raise CheckFailedError(
            "; ".join(problems) + ". TensorRT fills in_out position by position; later entries hold leftovers from "
            "other candidates. Fix: compare position pos only with positions < pos (e.g. an output with in_out[0])"
        )
    return f"answers for each of the {len(descs)} positions use only earlier positions"
