"""Running one plan on either device with host arrays in and out (for the GPU tests)."""

from __future__ import annotations

from typing import Any

import numpy as np

import plugrt as trt

LOGGER = trt.Logger(trt.Logger.ERROR)


def run_plan(plan: bytes, device: str, inputs: dict[str, np.ndarray], graph: bool = False) -> dict[str, np.ndarray]:
    """Deserialize ``plan`` for ``device``, run it once on a fresh stream (with ``graph``:
    capture, then replay) and return every output as a host array. Outputs start as 7s, so
    an element a kernel forgets to write shows."""
    import cupy as cp

    engine = trt.Runtime(LOGGER, device=device).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    context.use_cuda_graph = graph
    xp: Any = cp if device == "cuda" else np
    arrays = {}
    for name, array in inputs.items():
        context.set_input_shape(name, array.shape)
        arrays[name] = xp.ascontiguousarray(xp.asarray(array))
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            arrays[name] = xp.full(shape, 7, trt.nptype(engine.get_tensor_dtype(name)))
    for name, array in arrays.items():
        context.set_tensor_address(name, int(array.data.ptr) if xp is cp else array.ctypes.data)
    stream = cp.cuda.Stream(non_blocking=True)
    for _ in range(2 if graph else 1):
        context.execute_async_v3(stream.ptr if device == "cuda" else 0)
    stream.synchronize()
    return {k: cp.asnumpy(v) if xp is cp else v for k, v in arrays.items() if k not in inputs}


def same_on_both(plan: bytes, inputs: dict[str, np.ndarray], atol: float = 0.0, graph: bool = False) -> dict[str, np.ndarray]:
    """Run on the CPU and the GPU; assert equal outputs (within ``atol``); return the GPU's."""
    cpu, gpu = run_plan(plan, "cpu", inputs), run_plan(plan, "cuda", inputs, graph)
    for name in cpu:
        np.testing.assert_allclose(gpu[name].astype(np.float64), cpu[name].astype(np.float64), atol=atol, err_msg=name)
    return gpu


def onnx_plan(
    model: Any, device: str, shapes: dict[str, tuple[tuple[int, ...], ...]], fp16: bool = False, tf32: bool = True
) -> bytes:
    """The plan of ONNX ``model`` (a ModelProto or its bytes) for ``device``, one profile of ``shapes``
    (input name -> (min, opt, max)), with ``BuilderFlag.FP16`` when ``fp16``, ``BuilderFlag.TF32`` cleared unless
    ``tf32``."""
    builder = trt.Builder(LOGGER, device=device)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, LOGGER)
    assert parser.parse(model if isinstance(model, bytes) else model.SerializeToString())
    config = builder.create_builder_config()
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    if not tf32:
        config.clear_flag(trt.BuilderFlag.TF32)
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in shapes.items():
        profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(profile)
    return bytes(builder.build_serialized_network(network, config))


def attention_plan(model: Any, device: str, fp16: bool = False) -> bytes:
    """The plan of ``export_graphs.masked_attention()``-shaped ``model`` (inputs x [B, 16, 64], mask [B, 16]) for
    ``device``, batch profile 1..4 (opt 2), with ``BuilderFlag.FP16`` when ``fp16``."""
    shapes = {"x": ((1, 16, 64), (2, 16, 64), (4, 16, 64)), "mask": ((1, 16), (2, 16), (4, 16))}
    return onnx_plan(model, device, shapes, fp16)
