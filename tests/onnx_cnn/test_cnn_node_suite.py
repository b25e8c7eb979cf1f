"""ONNX's own node tests for the CNN ops, run through ``plugrt.onnx.backend``.

The cases come from the ``onnx`` package's test-case definitions (the data of
its ``backend/test/data/node`` folders, generated in memory: this install ships
the definitions, not the folders). One test per definition module runs every
case of that module whose nodes are all CNN ops (the ``_expanded`` variants,
made of other ops, belong to those ops' suites). Three modules compute their
expected outputs with the slow reference pooling when imported; they are
marked slow. The ``pytorch-converted`` and ``pytorch-operator`` folders (opset
6, before plugrt's oldest opset) are converted to opset 11 first.
"""

from __future__ import annotations

import glob
import importlib
import os
import warnings

import numpy as np
import onnx
import pytest
from onnx import numpy_helper, version_converter

import plugrt.onnx.backend as backend

MODULES = {
    "conv": {"Conv"},
    "convtranspose": {"ConvTranspose"},
    "gemm": {"Gemm"},
    "batch_normalization": {"BatchNormalization"},
    "instance_normalization": {"InstanceNormalization"},
    "layernormalization": {"LayerNormalization"},
    "groupnormalization": {"GroupNormalization"},
    "globalmaxpool": {"GlobalMaxPool"},
    "globalaveragepool": {"GlobalAveragePool"},
    "lrn": {"LRN"},
    "pad": {"Pad"},
    "resize": {"Resize"},
    "upsample": {"Upsample"},
    "prelu": {"PRelu"},
    "maxpool": {"MaxPool"},
    "averagepool": {"AveragePool"},
    "lppool": {"LpPool"},
}
SLOW = {"maxpool", "averagepool", "lppool"}
CNN_OPS = set().union(*MODULES.values())


def _cases(module: str) -> list:
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
    ops = MODULES[module]
    return [
        case
        for case in node_cases._NodeTestCases
        if case.model.graph.node
        and {n.op_type for n in case.model.graph.node} <= CNN_OPS
        and case.model.graph.node[0].op_type in ops
    ]


def _mismatch(name: str, model: onnx.ModelProto, inputs: list, expected: list, rtol: float, atol: float) -> str:
    """'' when plugrt reproduces ``expected``, else what went wrong."""
    try:
        outputs = backend.prepare(model).run([np.asarray(a) for a in inputs])
    except Exception as exc:
        return f"{name}: {type(exc).__name__}: {exc}"
    for index, (got, want) in enumerate(zip(outputs, expected)):
        want = np.asarray(want)
        if got.shape != want.shape:
            return f"{name}: output {index} has shape {got.shape}, expected {want.shape}"
        try:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
        except AssertionError as exc:
            return f"{name}: output {index}: {exc}"
    return ""


@pytest.mark.parametrize("module", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MODULES])
def test_onnx_node_cases(module: str) -> None:
    cases = _cases(module)
    assert cases, f"no node cases found for {module}"
    failures = []
    for case in cases:
        inputs, expected = case.data_sets[0]
        problem = _mismatch(case.name, case.model, inputs, expected, case.rtol, case.atol)
        if problem:
            failures.append(problem)
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures)


DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
#: Opset 6 read the 1-D slope of these as per channel; the version converter keeps it, opset 7 aligns it right.
CONVERTER_KEEPS_OLD_SLOPE = {"test_PReLU_1d_multiparam", "test_PReLU_2d_multiparam", "test_PReLU_3d_multiparam"}


def _pytorch_cases() -> list[str]:
    found = []
    for folder in sorted(glob.glob(os.path.join(DATA, "pytorch-*", "test_*"))):
        model = onnx.load(os.path.join(folder, "model.onnx"))
        if {n.op_type for n in model.graph.node} & CNN_OPS:
            found.append(folder)
    return found


@pytest.mark.parametrize("folder", _pytorch_cases(), ids=os.path.basename)
def test_pytorch_exported_models(folder: str) -> None:
    name = os.path.basename(folder)
    if name in CONVERTER_KEEPS_OLD_SLOPE:
        pytest.skip("the opset 6 to 11 conversion keeps a per-channel PRelu slope that opset 11 broadcasts differently")
    model = onnx.load(os.path.join(folder, "model.onnx"))
    if model.opset_import[0].version < 7:
        model = version_converter.convert_version(model, 11)
    data = os.path.join(folder, "test_data_set_0")
    inputs = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(data, "input_*.pb")))]
    expected = [
        numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(os.path.join(data, "output_*.pb")))
    ]
    problem = _mismatch(name, model, inputs, expected, rtol=1e-3, atol=1e-5)
    assert not problem, problem
