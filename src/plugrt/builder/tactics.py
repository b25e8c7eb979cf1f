"""Operator tactics: each standard layer that offers several kernels runs with the fastest, timed at build.

As with plugin tactics (``interfaces/adapters/v3.py``), every kernel an operator offers
(:meth:`~plugrt.ops.base.Operator.tactics`, e.g. NumPy's and PyTorch's, see
:mod:`plugrt.ops.torch_cpu`) is timed on the layer as built (after fusion) at the opt
shapes of the first profile, on random inputs; the plan's layer records the fastest
in ``tactic`` and the engine's operator runs it. The timing alternates the kernels
and keeps each one's fastest run, for up to 7 rounds or 0.2 s (3 rounds when one kernel is
twice as fast as the others); another kernel replaces the operator's own (tactic 0)
only when it is at least :data:`MARGIN` faster, so noise never trades the default for an
equal. Layers of one configuration (kind, params, weight and input shapes) are timed
once per build. An operator that offers one tactic gets it untimed. Timing runs on the
build device (``Builder(logger, device=...)``): on a GPU each run is timed from launch to
the end of the stream's work, which is what both eager runs and graph replays wait for.

On the CPU the clock is the wall clock, except on a machine with no core to spare
(:func:`~plugrt.ops.blas_threads.machine_busy`), where it is the process's CPU time: there
every kernel's thread pool is down to one thread (the NumPy helper thread's work is
counted too), and a run that another process preempts measures its work, not the wait.
Wall times there swing by far more than the kernels differ (MobileNetV2's first depthwise
layer, 0.3 ms on torch and 1.8 ms on NumPy timed alone, measured 3-16 ms a run while being
timed on 2 cores at load 3), and the slower kernel was kept as often as not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..backends.base import Backend
from ..backends.registry import get_backend
from ..core.dims import Dims
from ..core.layouts import storage_shape
from ..core.logger import Severity
from ..core.types import TensorFormat, nptype
from ..engine.plan import LayerPlan
from ..nodes.base import Binding
from ..ops.base import Operator, create_operator, registered_operators
from ..ops.blas_threads import machine_busy
from ..ops.heap import return_freed_memory
from ..ops.linear_weights import PackedMatrix, placeholder, timed_packing
from ..ops.products import rows_first
from ..ops.torch_cpu import TORCH_TACTIC
from .config import BuilderFlag
from .state import BuildState

__all__ = ["MARGIN", "choose_tactics", "pick", "time_layer"]

#: another tactic replaces tactic 0 only when its time is below this fraction of tactic 0's (the fastest of up to
#: 7 runs each, in alternation, moves by 1-3% between builds; at 0.9 products 6-8% faster on oneDNN's packed
#: weights stayed on NumPy's: BERT-base 1.02x -> 0.97x, GPT-2 1.10x -> 1.04x, the T5 encoder 1.13x -> 1.08x of
#: onnxruntime with 0.95, one thread, docs/benchmarks.md)
MARGIN = 0.95
#: timing rounds per layer (each runs every tactic once), and the time after which rounds stop
_ROUNDS, _BUDGET_S = 7, 0.2
#: after this many rounds, a tactic this many times faster than every other ends the timing
_DECISIVE_ROUNDS, _DECISIVE = 3, 2.0


def choose_tactics(state: BuildState) -> None:
    """Time the tactics of every operator layer of ``state`` that has more than one; record the fastest (and
    every tactic's time in ``state.tactic_times``, by layer name)."""
    backend = state.backend if state.backend is not None else get_backend("cpu")
    chosen: dict[str, tuple[int, dict[int, float]]] = {}
    kinds = registered_operators()
    for layer in state.layers:
        if layer.is_plugin or not state.profiles:
            continue
        cls = kinds.get(layer.kind)
        if cls is None or cls.tactics is Operator.tactics:  # one kernel only: nothing to time
            continue
        op = create_operator(layer.kind, layer.params, {n: state.weights[k] for n, k in layer.weights.items()})
        op.name, op.xp = layer.name, backend.xp
        env = state.profiles[0].opt
        ins = [(state.tensors[i], tuple(d.evaluate(env) for d in state.tensors[i].shape)) for i in layer.inputs]
        tactics = op.tactics([t.dtype for t, _ in ins], [s for _, s in ins], [t.role == "constant" for t, _ in ins])
        if len(tactics) < 2:
            layer.tactic = tactics[0] if tactics else 0
            continue
        key = _configuration(layer, ins, op)
        if key not in chosen:
            with np.errstate(all="ignore"):  # random inputs: a log or sqrt of a negative is no one's concern
                chosen[key] = _fastest(op, layer, state, env, tactics, backend)
        layer.tactic, state.tactic_times[layer.name] = chosen[key]
        state.logger.emit(Severity.VERBOSE, f"layer {layer.name!r} ({layer.kind}): tactic {layer.tactic}")


def _configuration(layer: LayerPlan, ins: list[tuple[Any, tuple[int, ...]]], op: Operator) -> str:
    weights = {name: (list(w.shape), str(w.dtype)) for name, w in op.weights.items()}
    inputs = [(t.dtype.name, list(shape)) for t, shape in ins]
    return json.dumps([layer.kind, layer.params, weights, inputs], sort_keys=True, default=str)


def _same(dims: Dims) -> tuple[Dims, Dims, Dims]:
    return dims, dims, dims


def _bindings(
    specs: list[tuple[tuple[int, ...], Any]],
    rng: np.random.Generator,
    fill: bool,
    backend: Backend,
    formats: list[TensorFormat] | None = None,
    constant: list[bool] | None = None,
) -> list[Binding]:
    """Timing buffers of ``specs`` (shape, type), random where ``fill``, in ``formats``; ``constant``: which stand for
    engine constants (a kernel that reorders a constant once at bind may decline a tensor that is not one)."""
    result = []
    for k, (shape, dtype) in enumerate(specs):
        fmt = formats[k] if formats is not None else TensorFormat.LINEAR
        host = np.empty(storage_shape(shape, fmt), dtype=nptype(dtype))
        if fill and host.dtype in (np.float32, np.float64):  # drawn in place (a large table: no float64 copy)
            rng.standard_normal(host.shape, dtype=host.dtype, out=host)
        elif fill:
            host[...] = rng.standard_normal(host.shape) if host.dtype.kind == "f" else 0
        array = host if backend.host_memory else backend.xp.asarray(host)
        dims = Dims(shape)
        known = bool(constant and constant[k])
        binding = Binding(shape, dtype, fmt, 1.0, backend.address_of(array), array, partial(_same, dims), constant=known)
        result.append(binding)
    return result


def _fastest(
    op: Operator, layer: LayerPlan, state: BuildState, env: dict[str, int], tactics: list[int], backend: Backend
) -> tuple[int, dict[int, float]]:
    """The tactic with the fastest run of ``op`` at the opt shapes on ``backend`` (see the module's note), and
    each tactic's fastest time in seconds. A tactic is timed on tensors in the formats it asks for
    (``tactic_formats``: channels-last ones for a channels-last kernel)."""
    ins, outs = len(layer.inputs), len(layer.outputs)
    variants = [(t, op.tactic_formats(t, ins, outs) if hasattr(op, "tactic_formats") else None) for t in tactics]
    times = dict(zip(tactics, _time_variants(op, layer, state, env, variants, backend)))
    return pick(times, tactics), times


def time_layer(
    state: BuildState, layer: LayerPlan, variants: list[tuple[int, list[TensorFormat] | None]]
) -> list[float]:
    """The fastest run in seconds of ``layer``'s operator for each (tactic, formats of its inputs then outputs;
    None: LINEAR), timed in alternation as the tactics are, at the first profile's opt shapes
    (``builder/layouts.py`` times the layers at the ends of a channels-last run with the formats they get,
    against the same layer's other kernels at the same moment)."""
    backend = state.backend if state.backend is not None else get_backend("cpu")
    op = create_operator(layer.kind, layer.params, {n: state.weights[k] for n, k in layer.weights.items()})
    op.name, op.xp = layer.name, backend.xp
    with np.errstate(all="ignore"):
        return _time_variants(op, layer, state, state.profiles[0].opt, variants, backend)


def _time_variants(
    op: Operator,
    layer: LayerPlan,
    state: BuildState,
    env: dict[str, int],
    variants: list[tuple[int, list[TensorFormat] | None]],
    backend: Backend,
) -> list[float]:
    """Each (tactic, formats)'s fastest run of ``op`` in seconds, timed in alternation (see the module's note)."""
    # the last layer's timing buffers are freed by now, but glibc's heap would keep them (up to its trim threshold,
    # which it raises to 64 MiB): PP-OCR det's build held 61 MB of them
    return_freed_memory()
    specs = [
        [(tuple(d.evaluate(env) for d in state.tensors[t].shape), state.tensors[t].dtype) for t in names]
        for names in (layer.inputs, layer.outputs)
    ]
    ins = len(specs[0])
    constants = [state.tensors[t].role == "constant" for t in layer.inputs]
    bound: dict[tuple[Any, ...], tuple[list[Binding], list[Binding]]] = {}
    stream = 0 if backend.host_memory else backend.current_stream()
    # the product's weight as the engine would hold it for each tactic: packed for oneDNN, rows first for NumPy
    laid = _weight_layouts(state, layer, backend, variants)
    twins = {tactic: _twin(op, layer, state, where, make) for tactic, (where, make) in laid.items()}
    with backend.stream_scope(stream), backend.math_scope(state.config.get_flag(BuilderFlag.TF32)):
        calls = []
        for tactic, formats in variants:
            layout = laid.get(tactic)
            key = (tuple(formats) if formats is not None else (), tactic if layout is not None else None)
            if key not in bound:
                rng = np.random.default_rng(0)  # the same values in every layout
                bound[key] = (
                    _bindings(specs[0], rng, True, backend, formats and formats[:ins], constants),
                    _bindings(specs[1], rng, False, backend, formats and formats[ins:]),
                )
                if layout is not None:
                    _timed_input(bound[key][0], *layout)
            runner = twins.get(tactic, op)
            inputs, outputs = bound[key]
            runner.tactic = tactic
            runner.bind(inputs, outputs, 0)
            call, args = runner.prepared_launch(stream)
            call(*args)  # warm: buffers, caches, the first run's setup
            calls.append((call, args))
        backend.synchronize(stream)
        best = [float("inf")] * len(variants)
        clock = time.process_time if backend.host_memory and machine_busy() else time.perf_counter
        start = time.perf_counter()
        for done in range(1, _ROUNDS + 1):
            for k, (call, args) in enumerate(calls):
                begin = clock()
                call(*args)
                backend.synchronize(stream)
                best[k] = min(best[k], clock() - begin)
            ordered = sorted(best)
            decided = len(best) > 1 and done >= _DECISIVE_ROUNDS and ordered[1] > _DECISIVE * ordered[0]
            if decided or time.perf_counter() - start > _BUDGET_S:
                break
    op.release()
    for twin in twins.values():
        if twin is not op:
            twin.release()
    return best


def _weight_layouts(
    state: BuildState, layer: LayerPlan, backend: Backend, variants: list[tuple[int, list[TensorFormat] | None]]
) -> dict[int, tuple[int | str, Callable[[np.ndarray], Any]]]:
    """Per tactic, where a product's weight is laid out anew on the CPU when the layer takes that tactic
    (``ops/linear_weights.pack_product_weights``; where: :func:`~plugrt.ops.linear_weights.timed_packing`) and how:
    packed for oneDNN's linear under the PyTorch tactic, rows first for NumPy's product where it takes the weight
    as ``[N, K]``. Each tactic is timed on its layout, as the engine runs it."""
    if not backend.host_memory or backend.gpu:
        return {}
    outputs = {k for k, t in enumerate(state.tensors) if t.role == "output"}
    taken = timed_packing(state.layers, outputs, layer)
    if taken is None:
        return {}
    where, transposed = taken
    layouts: dict[int, tuple[int | str, Callable[[np.ndarray], Any]]] = {}
    for tactic in {t for t, _ in variants}:
        if tactic == TORCH_TACTIC:
            layouts[tactic] = (where, partial(_packed, transposed=transposed))
        elif transposed:
            layouts[tactic] = (where, rows_first)
    return layouts


def _packed(weight: np.ndarray, transposed: bool) -> Any:
    return placeholder(PackedMatrix(weight, transposed))


def _timed_input(inputs: list[Binding], where: int | str, make: Callable[[np.ndarray], Any]) -> None:
    """A MatMul's constant input laid out as the engine would give it (a Gemm's weight: the :func:`_twin`)."""
    if isinstance(where, int) and where < len(inputs) and isinstance(inputs[where].array, np.ndarray):
        inputs[where].array = make(np.array(inputs[where].array, dtype=np.float32))


def _twin(
    op: Operator, layer: LayerPlan, state: BuildState, where: int | str, make: Callable[[np.ndarray], Any]
) -> Operator:
    """``op`` again, its weight named ``where`` (a Gemm's ``b``) laid out by ``make``; ``op`` itself where the
    weight is an input (a MatMul's: :func:`_timed_input`)."""
    weights = {n: state.weights[k] for n, k in layer.weights.items()}
    if not isinstance(where, str) or not isinstance(weights.get(where), np.ndarray):
        return op
    weights[where] = make(np.array(weights[where], dtype=np.float32))
    twin = create_operator(layer.kind, layer.params, weights)
    twin.name, twin.xp = op.name, op.xp
    return twin


def pick(times: dict[int, float], tactics: list[int]) -> int:
    """The fastest of ``tactics`` by ``times``; another replaces the first (the operator's own) only when it
    is at least :data:`MARGIN` faster."""
    choice = min(tactics, key=times.__getitem__)
    if choice != tactics[0] and times[choice] > MARGIN * times[tactics[0]]:
        choice = tactics[0]
    return choice
