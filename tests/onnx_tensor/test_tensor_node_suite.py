"""ONNX's own node tests for the tensor and recurrent ops, run through plugrt's ONNX backend.

The cases are generated from the ``onnx`` package's test-case definitions (the
same data as its ``backend/test/data/node`` folders). Inputs that set a shape
(Slice starts, Expand's shape, TopK's K …) are graph inputs there; the backend
folds them into the engine when the model needs them at build time.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import warnings

import numpy as np
import pytest

from plugrt.onnx import backend

_MODULES = (
    "argmax argmin compress constantofshape cumsum depthtospace einsum expand flatten gather gatherelements "
    "gathernd gru lstm nonzero onehot rangeop reversesequence rnn scatter scatterelements scatternd shape size "
    "slice spacetodepth split squeeze tile topk trilu unsqueeze where"
).split()
#: Types plugrt does not have, and "expanded" variants that need ops outside this family (Loop).
_UNSUPPORTED = ("bfloat16", "range_float_type_positive_delta_expanded", "range_float16_type_positive_delta_expanded")
_UNSUPPORTED += ("range_int32_type_negative_delta_expanded",)


#: Name prefixes of the cases for this family (the case list is shared, other suites may fill it).
_PREFIXES = (
    "argmax argmin compress constantofshape cumsum depthtospace einsum expand flatten gather gru lstm nonzero "
    "onehot range reversesequence rnn simple_rnn scatter shape size slice spacetodepth split squeeze tile top_k "
    "tril triu unsqueeze where"
).split()


def _collect() -> list[object]:
    import onnx.backend.test.case.node as cases

    available = {m.name for m in pkgutil.iter_modules(cases.__path__)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in _MODULES:
            if name in available:
                importlib.import_module(f"onnx.backend.test.case.node.{name}")
    alternatives = "|".join(_PREFIXES)
    pattern = re.compile(rf"test_({alternatives})(_|$)")
    return [c for c in cases._NodeTestCases if pattern.match(c.name) and "split_to_sequence" not in c.name]


CASES = {case.name: case for case in _collect()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name: str) -> None:
    if any(marker in name for marker in _UNSUPPORTED):
        pytest.skip("needs a type or an op outside plugrt's tensor family")
    case = CASES[name]
    inputs, expected = case.data_sets[0]
    outputs = backend.prepare(case.model).run(inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        want = np.asarray(want)
        assert got.shape == want.shape
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want.astype(got.dtype))
