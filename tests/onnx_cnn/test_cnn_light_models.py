"""The nine "light" CNN models shipped with onnx give their stored outputs through ``plugrt.onnx.backend``.

Each model is a full-size architecture whose weights are ``ConstantOfShape``
nodes; ONNX's backend test runner feeds it ``arange(n) / n`` and compares with
``light_<model>_output_0.pb`` (made by the reference evaluator) at the
tolerances of ``onnx.backend.test.case.model``. Those outputs are softmaxes of
logits around 1e10 that are equal in exact arithmetic, so they hold only when
identical filters are rounded identically; OpenBLAS does so for these models
with its default threading (a single-threaded OpenBLAS rounds SqueezeNet's last
1x1 convolution's rows differently and flips its softmax).
"""

from __future__ import annotations

import math
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import plugrt.onnx.backend as backend

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
#: (model, rtol) as onnx.backend.test.case.model lists them; atol is 1e-7 for all.
MODELS = [
    ("bvlc_alexnet", 1e-3),
    ("densenet121", 2e-3),
    ("inception_v1", 1e-3),
    ("inception_v2", 1e-3),
    ("resnet50", 1e-3),
    ("shufflenet", 1e-3),
    ("squeezenet", 1e-3),
    ("vgg19", 1e-3),
    ("zfnet512", 1e-3),
]


def _runner_inputs(model: onnx.ModelProto) -> list[np.ndarray]:
    """What ONNX's backend test runner feeds a light model: ``arange(n).reshape(shape) / n`` per graph input."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in value.type.tensor_type.shape.dim)
        count = math.prod(shape)
        inputs.append((np.arange(count).reshape(shape) / count).astype(np.float32))
    return inputs


@pytest.mark.slow
@pytest.mark.parametrize("name, rtol", MODELS, ids=[m for m, _ in MODELS])
def test_light_model_gives_the_stored_output(name: str, rtol: float) -> None:
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"this onnx install has no {os.path.basename(path)}")
    model = onnx.load(path)
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    outputs = backend.prepare(model).run(_runner_inputs(model))
    assert outputs[0].shape == expected.shape
    np.testing.assert_allclose(outputs[0], expected, rtol=rtol, atol=1e-7)
