"""A call trace starts after the releases the garbage collector queued before it."""

from __future__ import annotations

import gc

import numpy as np

import plugrt as trt
from plugrt.core.finalizers import pending_count
from plugrt.examples import circ_pad_v2

from testing_plugins import build, fields, run


def test_releases_queued_by_a_collection_run_before_the_trace_starts() -> None:
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 4))
    layer = network.add_plugin_v2([x], circ_pad_v2.register().create_plugin("pad", fields(pads=[1, 1])))
    layer.name = "queued"
    network.mark_output(layer.get_output(0))
    engine = trt.Runtime(logger).deserialize_cuda_engine(build(network, builder))
    context = engine.create_execution_context()
    run(context, {"x": np.ones((2, 4), np.float32)})
    context.cycle = context  # only the collector frees them: their releases wait for a safe point
    engine.cycle = engine
    del context, engine
    gc.collect()
    assert pending_count() > 0
    with trt.trace_plugin_calls() as trace:
        pass
    assert trace.calls == []
    assert pending_count() == 0
