"""Each deliberately broken plugin fails exactly the check about its mistake, with a useful message."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broken_cases import CASES, Case

import plugrt as trt
from plugrt.testing import CHECK_IDS, check_plugin


@pytest.fixture(autouse=True)
def _free_leaks() -> Iterator[None]:
    """The leaking plugins leak on purpose; free what they left so other tests see a clean slate."""
    before = set(trt.live_allocations())
    yield
    for buffer in set(trt.live_allocations()) - before:
        buffer.free()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_broken_plugin_fails_its_check(case: Case) -> None:
    report = check_plugin(case.creator, case.fields, case.shapes, **case.options)
    result = report[case.check]
    assert result.status == "fail", str(report)
    assert case.phrase in result.message, result.message
    assert set(report.failed_ids) == {case.check, *case.also}, str(report)
    assert not report.ok


def test_every_check_has_a_broken_plugin() -> None:
    covered = {case.check for case in CASES}
    # stream-gpu needs a GPU; the CPU variant of the stream check has its own broken plugin.
    assert covered == set(CHECK_IDS) - {"stream-gpu"}


def test_failure_messages_say_how_to_fix() -> None:
    for case in CASES:
        report = check_plugin(case.creator, case.fields, case.shapes, checks=[case.check], **case.options)
        message = report[case.check].message
        assert "Fix" in message or "must" in message, (case.id, message)
