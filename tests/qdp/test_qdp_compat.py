"""A decorator plugin written against ``tensorrt.plugin`` runs unchanged under ``plugrt.compat``."""

from __future__ import annotations

import textwrap

import numpy as np

from plugrt import compat
from plugrt.plugin import _lib

SOURCE = textwrap.dedent(
    """
    from typing import Tuple

    import numpy as np
    import tensorrt as trt
    import tensorrt.plugin as trtp


    @trtp.register("compat_qdp::add_delta")
    def add_delta_desc(inp0: trtp.TensorDesc, delta: float) -> trtp.TensorDesc:
        return inp0.like()


    @trtp.impl("compat_qdp::add_delta")
    def add_delta_impl(inp0: trtp.Tensor, delta: float, outputs: Tuple[trtp.Tensor], stream: int) -> None:
        np.add(np.asarray(inp0), delta, out=np.asarray(outputs[0]))


    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 3))
    layer = network.add_plugin(trtp.op.compat_qdp.add_delta(x, delta=0.5))
    network.mark_output(layer.get_output(0))
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    context = trt.Runtime(logger).deserialize_cuda_engine(plan).create_execution_context()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.zeros_like(a)
    context.set_tensor_address("x", a.ctypes.data)
    context.set_tensor_address(layer.get_output(0).name, b.ctypes.data)
    context.execute_async_v3(0)
    """
)


def test_tensorrt_plugin_import_runs_on_plugrt() -> None:
    namespace: dict[str, object] = {}
    try:
        with compat.installed():
            exec(compile(SOURCE, "qdp_under_compat", "exec"), namespace)
    finally:
        _lib.forget("compat_qdp::add_delta")
    a, b = namespace["a"], namespace["b"]
    np.testing.assert_array_equal(b, a + 0.5)  # type: ignore[operator]
