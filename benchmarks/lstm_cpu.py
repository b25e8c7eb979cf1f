"""One ONNX LSTM layer on the CPU: plugrt's NumPy step loop, plugrt's PyTorch tactic (PyTorch's fused LSTM), the
compiled loop the numba extra gives the own kernel where PyTorch's tactic is off, both (PyTorch's tactic running the
compiled loop where it is the faster: ``ops/recurrent_numba.loop_is_faster``), the compiled loop forced into
PyTorch's tactic at every shape (to check that choice), the default with the oneDNN extra too (oneDNN's LSTM
primitive, ``ops/onednn_rnn.py``), and onnxruntime, interleaved in one process (onnxruntime's spinning off), on
``--threads`` threads (default one).

The recurrent models of the real-model table (the CRNN's bidirectional 512 -> 128 cell over 32 steps, the BiLSTM
encoder's 256-unit cells) spend most of their time in this layer; this isolates it. Each engine's best of five
blocks of ``--runs`` calls, ms a call; and each one's largest difference from onnxruntime's ``Y``.

Usage: python benchmarks/lstm_cpu.py [--steps 32] [--inputs 512] [--hidden 128] [--batch 1] [--forward-only]
       [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--inputs", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--forward-only", action="store_true", help="one direction (default: bidirectional)")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="threads of every engine")
    return parser.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:  # (read when NumPy's BLAS and torch load)
    for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_variable] = str(ARGS.threads)

import numpy as np  # noqa: E402


def _model(steps: int, inputs: int, hidden: int, batch: int, dirs: int) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {
        "W": rng.standard_normal((dirs, 4 * hidden, inputs)) * 0.1,
        "R": rng.standard_normal((dirs, 4 * hidden, hidden)) * 0.1,
        "B": rng.standard_normal((dirs, 8 * hidden)) * 0.1,
    }
    node = helper.make_node(
        "LSTM", ["x", "W", "R", "B"], ["Y"], hidden_size=hidden, direction="bidirectional" if dirs == 2 else "forward"
    )
    graph = helper.make_graph(
        [node],
        "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, batch, inputs])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main() -> None:
    args = ARGS if ARGS is not None else _parse()
    import onnxruntime as ort

    import plugrt
    from plugrt.ops import depthwise_numba, onednn, torch_cpu

    model = _model(args.steps, args.inputs, args.hidden, args.batch, 1 if args.forward_only else 2)
    x = np.random.default_rng(1).standard_normal((args.steps, args.batch, args.inputs)).astype(np.float32)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options)
    calls = {"onnxruntime": lambda: session.run(None, {"x": x})[0]}
    off = {onednn.ENV_SWITCH: "0"}
    switches = {"plugrt numpy": {torch_cpu.ENV_SWITCH: "0", depthwise_numba.ENV_SWITCH: "0", **off}}
    if torch_cpu.torch_module() is not None:
        switches["plugrt torch"] = {torch_cpu.ENV_SWITCH: "always", depthwise_numba.ENV_SWITCH: "0", **off}
    if depthwise_numba.loops() is not None:  # the compiled loop: the own kernel where PyTorch's tactic is off
        switches["plugrt numba"] = {torch_cpu.ENV_SWITCH: "0", depthwise_numba.ENV_SWITCH: "1", **off}
        if torch_cpu.torch_module() is not None:  # both, as installed with the torch and numba extras
            switches["plugrt torch+numba"] = {torch_cpu.ENV_SWITCH: "1", depthwise_numba.ENV_SWITCH: "1", **off}
    if torch_cpu.torch_module() is not None and onednn.available():  # oneDNN's LSTM primitive, first where installed
        switches["plugrt default"] = {
            torch_cpu.ENV_SWITCH: "1",
            depthwise_numba.ENV_SWITCH: "1",
            onednn.ENV_SWITCH: "1",
        }
    environments = {"onnxruntime": {}}
    for name, switch in switches.items():
        os.environ.update(switch)  # (read when the engine is built and when its kernels are bound, at calls)
        engine = plugrt.compile(model)
        calls[name] = lambda engine=engine: engine(x=x)["Y"]
        environments[name] = switch
    if "plugrt torch+numba" in calls:  # the compiled loop inside PyTorch's tactic whatever the shapes
        from plugrt.ops import recurrent_numba

        os.environ.update(switches["plugrt torch+numba"])
        engine, chosen = plugrt.compile(model), recurrent_numba.loop_is_faster
        recurrent_numba.loop_is_faster = lambda *shape: True
        try:
            engine(x=x)  # (bound now, kept for the calls at this shape)
        finally:
            recurrent_numba.loop_is_faster = chosen
        calls["plugrt loop"] = lambda engine=engine: engine(x=x)["Y"]
        environments["plugrt loop"] = switches["plugrt torch+numba"]
    want = calls["onnxruntime"]()
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(5):
        for name, call in calls.items():
            os.environ.update(environments[name])
            call()
            start = time.perf_counter()
            for _ in range(args.runs):
                call()
            best[name] = min(best[name], (time.perf_counter() - start) / args.runs)
    print(f"LSTM T={args.steps} input={args.inputs} hidden={args.hidden} batch={args.batch} "
          f"{'forward' if args.forward_only else 'bidirectional'}, threads {args.threads}, "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    for name, call in calls.items():
        os.environ.update(environments[name])
        print(f"  {name:18s} {best[name] * 1e3:8.3f} ms  max |diff| vs onnxruntime {np.abs(call() - want).max():.1e}")


if __name__ == "__main__":
    main()
