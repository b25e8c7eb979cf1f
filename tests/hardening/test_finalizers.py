"""Engines and contexts freed by the garbage collector release their plugins at a safe point.

CPython 3.10/3.11 can crash when a finalizer sets a context variable while a collection runs
inside another ``ContextVar.set`` (NumPy's errstate and plugrt's active device are context
variables). So a release that the collector triggers waits for the next safe point.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.core import finalizers
from plugrt.engine import context as context_module
from plugrt.engine import engine as engine_module

from testing_plugins import build, circ_pad_network, run


def _engine_and_context() -> tuple[Any, Any, bytes]:
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    network = circ_pad_network(builder)
    plan = build(network, builder, [{"x": ((1, 4), (2, 4), (3, 4))}])
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    run(context, {"x": np.ones((2, 4), np.float32)})
    return engine, context, plan


class _Cycle:
    """Holds an object in a reference cycle, so only the collector frees it."""

    def __init__(self, held: Any) -> None:
        self.held = held
        self.me = self


def test_release_by_refcount_runs_at_once() -> None:
    engine, context, _ = _engine_and_context()
    with trt.trace_plugin_calls() as trace:
        del context, engine
    assert trace.methods("pad").count("destroy") == 2  # the context's clone and the engine's plugin
    assert finalizers.pending_count() == 0


def test_release_during_a_collection_waits_for_the_next_safe_point() -> None:
    engine, context, plan = _engine_and_context()
    _Cycle((engine, context))
    del engine, context
    with trt.trace_plugin_calls() as trace:
        gc.collect()
        assert "destroy" not in trace.methods("pad"), "plugin code ran inside the garbage collector"
        assert finalizers.pending_count() >= 1
        trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan)  # a safe point
    assert finalizers.pending_count() == 0
    assert trace.methods("pad").count("destroy") >= 2  # the context's clone and the engine's plugin


def test_no_context_variable_is_set_inside_a_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = engine_module.using_backend

    def recording(backend: Any) -> Any:
        seen.append(finalizers.collecting())
        return real(backend)

    monkeypatch.setattr(engine_module, "using_backend", recording)
    monkeypatch.setattr(context_module, "using_backend", recording)
    engine, context, _ = _engine_and_context()
    _Cycle((engine, context))
    del engine, context
    gc.collect()
    finalizers.run_pending()
    assert seen and not any(seen)


def test_a_failing_release_is_swallowed_like_in_a_finalizer() -> None:
    calls: list[str] = []

    def failing() -> None:
        calls.append("ran")
        raise RuntimeError("boom")

    finalizers.release_when_safe(failing)
    assert calls == ["ran"]
