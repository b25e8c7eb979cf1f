"""On the GPU: ``BuilderFlag.TF32`` decides whether FLOAT products and convolutions may round to TF32.

The inputs are built so that TF32 shows: 1 + 2**-11 has no TF32 form (10 mantissa bits) and becomes 1, while
every partial sum of 1024 such terms is exact in FP32. A product or 1x1 convolution over 1024 of them gives
1024.5 in FP32 and 1024 where TF32 ran. The caller's PyTorch settings are left as they were. The flag allows TF32,
it does not require it: the product always runs cuBLAS through PyTorch (TF32 there), a convolution's tactic is
timed (CuPy's own product, strict, may win), so there only the cleared flag's strict result is pinned.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from export_graphs import onnx_model
from gpu_helpers import onnx_plan, run_plan

pytestmark = [pytest.mark.gpu, pytest.mark.tf32_default]
n = helper.make_node
K = 1024
TERM = np.float32(1 + 2.0**-11)


def _matmul():  # type: ignore[no-untyped-def]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 128, K])
    return onnx_model([n("MatMul", ["x", "w"], ["y"])], [x], ["y"], {"w": np.ones((K, 128), np.float32)})


def _conv():  # type: ignore[no-untyped-def]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", K, 16, 16])
    return onnx_model([n("Conv", ["x", "w"], ["y"])], [x], ["y"], {"w": np.ones((64, K, 1, 1), np.float32)})


CASES = {
    "matmul": (_matmul, (128, K), {"x": ((1, 128, K), (2, 128, K), (2, 128, K))}),
    "conv": (_conv, (K, 16, 16), {"x": ((1, K, 16, 16), (2, K, 16, 16), (2, K, 16, 16))}),
}


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_tf32_only_where_the_flag_allows_it(case: str, graph: bool) -> None:
    torch = pytest.importorskip("torch")
    make, shape, shapes = CASES[case]
    x = np.full((2, *shape), TERM, np.float32)
    settings = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    strict = run_plan(onnx_plan(make(), "cuda", shapes, tf32=False), "cuda", {"x": x}, graph)["y"]
    assert np.all(strict == np.float32(K + 0.5)), np.unique(strict)
    allowed = run_plan(onnx_plan(make(), "cuda", shapes), "cuda", {"x": x}, graph)["y"]
    if case == "matmul":
        assert np.all(allowed == np.float32(K)), np.unique(allowed)
    else:
        assert set(np.unique(allowed).tolist()) <= {K, K + 0.5}
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == settings
