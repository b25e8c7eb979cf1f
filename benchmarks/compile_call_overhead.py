"""Per-call work of ``plugrt.compile``'s callable on a one-layer model, against the engine's run alone.

A model of one ``Relu`` over a small tensor (the kernel costs about a microsecond) is
compiled with a dynamic batch; the callable is timed with the inputs' shapes the same at
every call (the common case), with a new input array at each call (as when a model's
state is fed back), and alternating two shapes (every call sets shapes again). The
floor is ``execute_async_v3`` on an execution context whose shapes and addresses are
set once. Times are the fastest of ``--repeats`` blocks of ``--calls`` calls, on the
calling thread's CPU clock (``time.thread_time``: steady on a loaded machine).

``--silero`` times the packaged silero-vad model instead (``pip install --no-deps
silero-vad``) at batch 1 (or ``--batch``): the same inputs at every call, and its state fed
back (the last call's ``stateN`` as the next ``state``, as a stream is processed), the
latter in blocks alternating with onnxruntime's (one thread, spinning off) doing the same.

Usage: python benchmarks/compile_call_overhead.py [--calls 5000] [--repeats 7] [--size 64] [--silero [--batch 1]]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import TensorProto, helper

import plugrt


def _relu(size: int) -> object:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", size])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _per_call_us(call: Callable[[], object], calls: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.thread_time_ns() - start) / calls / 1000)
    return best


def silero_model(batch: int = 1) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    """The packaged silero-vad's path, a profile and inputs at ``batch`` (a zero state, 16 kHz)."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or spec.origin is None:
        raise SystemExit("pip install --no-deps silero-vad")
    path = os.path.join(os.path.dirname(spec.origin), "data", "silero_vad.onnx")
    shapes = {"input": ((1, 512), (1, 512), (8, 512)), "state": ((2, 1, 128), (2, 1, 128), (2, 8, 128))}
    rng = np.random.default_rng(1)
    feeds = {
        "input": rng.standard_normal((batch, 512)).astype(np.float32) * 0.1,
        "state": np.zeros((2, batch, 128), np.float32),
        "sr": np.array(16000, np.int64),
    }
    return path, shapes, feeds


def _silero(calls: int, repeats: int, batch: int) -> list[tuple[str, float]]:
    path, shapes, feeds = silero_model(batch)
    compiled = plugrt.compile(path, shapes=shapes)
    compiled(feeds)
    fed = dict(feeds)

    def stream() -> None:
        fed["state"] = compiled(fed)["stateN"]

    rows = [
        (
            "execute_async_v3, nothing set (the floor)",
            _per_call_us(lambda: compiled.context.execute_async_v3(0), calls, repeats),
        ),
        ("compiled(feeds), the same arrays each call", _per_call_us(lambda: compiled(feeds), calls, repeats)),
    ]
    try:
        import onnxruntime as ort
    except ImportError:
        return [*rows, ("compiled(feeds), the state fed back", _per_call_us(stream, calls, repeats))]
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    theirs = dict(feeds)

    def their_stream() -> None:
        theirs["state"] = session.run(None, theirs)[1]

    ours_best = theirs_best = float("inf")
    for _ in range(repeats):  # blocks of the two engines alternating
        ours_best = min(ours_best, _per_call_us(stream, calls, 1))
        theirs_best = min(theirs_best, _per_call_us(their_stream, calls, 1))
    return [
        *rows,
        ("compiled(feeds), the state fed back", ours_best),
        ("onnxruntime session.run, the state fed back (alternating with the row above)", theirs_best),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="timed blocks (the fastest is reported)")
    parser.add_argument("--size", type=int, default=64, help="elements per row of the input")
    parser.add_argument("--silero", action="store_true", help="time the packaged silero-vad model instead")
    parser.add_argument("--batch", type=int, default=1, help="silero-vad's batch")
    args = parser.parse_args()
    if args.silero:
        _report(_silero(args.calls, args.repeats, args.batch), f"silero-vad at batch {args.batch}")
        return

    compiled = plugrt.compile(_relu(args.size), shapes={"x": ((1, args.size), (1, args.size), (4, args.size))})
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal((1, args.size)).astype(np.float32)
    x2 = rng.standard_normal((2, args.size)).astype(np.float32)
    compiled(x=x1)

    context = compiled.engine.create_execution_context()
    y1 = np.empty_like(x1)
    context.set_input_shape("x", x1.shape)
    context.set_tensor_address("x", x1.ctypes.data)
    context.set_tensor_address("y", y1.ctypes.data)
    context.execute_async_v3(0)

    flip = [x1, x2]
    state = [0]

    def alternate() -> object:
        state[0] ^= 1
        return compiled(x=flip[state[0]])

    floor = _per_call_us(lambda: context.execute_async_v3(0), args.calls, args.repeats)
    rows = [
        ("execute_async_v3, nothing set (the floor)", floor),
        ("compiled(x=x), same array each call", _per_call_us(lambda: compiled(x=x1), args.calls, args.repeats)),
        (
            "compiled({'x': x}), same array each call",
            _per_call_us(lambda: compiled({"x": x1}), args.calls, args.repeats),
        ),
        (
            "compiled(x=x.copy()), a new array each call",
            _per_call_us(lambda: compiled(x=x1.copy()), args.calls, args.repeats),
        ),
        ("x.copy() alone (to subtract from the row above)", _per_call_us(lambda: x1.copy(), args.calls, args.repeats)),
        ("compiled(x=...), shapes (1, n) and (2, n) alternating", _per_call_us(alternate, args.calls, args.repeats)),
    ]
    _report(rows, f"one Relu over (n, {args.size}) float32")


def _report(rows: list[tuple[str, float]], what: str) -> None:
    floor = rows[0][1]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}")
    print(f"# load average {os.getloadavg()[0]:.2f}; {what}; thread CPU time")
    width = max(len(name) for name, _ in rows)
    for name, us in rows:
        extra = (
            ""
            if name.startswith(("execute", "x.copy", "onnxruntime"))
            else f"  (+{us - floor:.1f} us over the floor)"
        )
        print(f"{name:<{width}}  {us:7.1f} us{extra}")


if __name__ == "__main__":
    main()
