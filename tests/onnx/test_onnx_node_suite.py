"""ONNX's own backend node tests (the ``node`` cases that ship inside the ``onnx`` package) on plugrt.

Tests listed in ``node_test_expected_failures.txt`` are expected to fail
(xfail, non-strict: one that starts passing is reported, not failed); any other
failure fails the suite. Regenerate the list and print the pass count with
``python benchmarks/onnx_node_report.py --write``.
"""

from __future__ import annotations

import os
import warnings

import pytest

import plugrt.onnx.backend as plugrt_backend

HERE = os.path.dirname(os.path.abspath(__file__))
LIST = os.path.join(HERE, "node_test_expected_failures.txt")


def load_expected_failures(path: str = LIST) -> dict[str, str]:
    """Test names (without the device suffix) mapped to the reason after '#'."""
    found: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            name, _, comment = line.partition("#")
            if name.strip():
                found[name.strip()] = comment.strip()
    return found


EXPECTED_FAILURES = load_expected_failures()

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the case generators warn about their own inf/nan arithmetic
    import onnx.backend.test

    _suite = onnx.backend.test.BackendTest(plugrt_backend, __name__)
_suite.exclude(r"_cuda$")  # the CPU run is the reference; GPU results are checked against it elsewhere
OnnxBackendNodeModelTest = _suite.test_cases["OnnxBackendNodeModelTest"]
NODE_TESTS = sorted(name.removesuffix("_cpu") for name in vars(OnnxBackendNodeModelTest) if name.endswith("_cpu"))

for _name, _reason in EXPECTED_FAILURES.items():
    _method = getattr(OnnxBackendNodeModelTest, f"{_name}_cpu", None)
    if _method is not None:
        setattr(
            OnnxBackendNodeModelTest,
            f"{_name}_cpu",
            pytest.mark.xfail(strict=False, reason=_reason or "listed in node_test_expected_failures.txt")(_method),
        )


def test_expected_failure_list_names_existing_tests() -> None:
    unknown = sorted(set(EXPECTED_FAILURES) - set(NODE_TESTS))
    assert not unknown, f"node_test_expected_failures.txt lists tests ONNX does not have: {unknown[:20]}"


def test_node_suite_is_the_whole_node_directory() -> None:
    assert len(NODE_TESTS) > 1000, f"only {len(NODE_TESTS)} node tests were found"
