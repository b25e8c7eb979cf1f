"""A node whose required input is omitted fails at import, naming the input's position and role."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper
from onnx_helpers import errors, model, parse, tensor_info

F = TensorProto.FLOAT


@pytest.mark.parametrize(
    ("op", "names", "needle"),
    [
        ("Relu", [""], "input 0 is missing"),
        ("Transpose", [""], "input 0 is missing"),
        ("Softmax", [""], "input 0 is missing"),
        ("Pad", ["x", ""], "input 1 (pads) is missing"),
        ("Conv", ["x", ""], "input 1 (W) is missing"),
        ("BatchNormalization", ["x", "", "x", "x", "x"], "input 1 (scale) is missing"),
    ],
)
def test_an_omitted_required_input_is_named(op: str, names: list[str], needle: str) -> None:
    proto = model(
        [helper.make_node(op, names, ["y"], name="n")],
        [tensor_info("x", F, [1, 2, 3, 3])],
        [tensor_info("y", F, None)],
        opset=18,
    )
    ok, parser, _ = parse(proto)
    assert not ok
    message = " ".join(errors(parser))
    assert needle in message and op in message
