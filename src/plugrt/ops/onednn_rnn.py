"""ONNX's LSTM on the CPU as oneDNN's LSTM primitive called directly (:mod:`.onednn`).

PyTorch's tactic of the recurrent operator takes this kernel first where the library is there: the primitive (one
per direction setting: forward, reverse, or both concatenated) is made at bind, ``W``, ``R`` and the two biases
reordered once from ONNX's gate order (``i o f c``) into oneDNN's (``i f c o``) and its layouts; a run is one
execution over the whole sequence, then, for two directions, ``Y`` copied from oneDNN's ``[T, N, 2H]`` into ONNX's
``[T, 2, N, H]``. oneDNN's kernel blocks the recurrent products over the batch, which PyTorch's fused LSTM and the
compiled loop (``recurrent_numba.py``) do not: one thread, bidirectional, 64 steps: 128 units at batch 8 3.29
against PyTorch's 3.93 and onnxruntime's 2.79 ms; the CRNN's 512 -> 128 cell over 32 steps 0.525 against the
loop's 0.652 and onnxruntime's 0.491 (``python benchmarks/lstm_cpu.py``, docs/benchmarks.md).

On a busy machine (``blas_threads.machine_busy``), where the primitive runs on one thread, the layer runs as
one-thread primitives over each direction and slices of its batch instead, made at its first run there, that this
thread and the engine's helper take as each is free (``onednn_parts.Parts``, :func:`_split`): the BiLSTM export at
batch 1 with another process spinning 5.9 -> 3.4 ms (``python benchmarks/busy_cpu.py``).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.types import TensorFormat
from . import onednn, onednn_parts
from .onednn_buffers import dense_strides, launcher, thread_counts
from .onednn_parts import Parts, part_count
from .torch_cpu import Kernel

if TYPE_CHECKING:
    from .recurrent import RecurrentOperator

__all__ = ["lstm_onednn"]

#: oneDNN's gate order (i, f, c, o) as indices of ONNX's gate blocks (i, o, f, c)
_GATES = (0, 2, 3, 1)
#: ``dnnl_vanilla_lstm``'s directions by ONNX's ``direction``
_DIRECTIONS = {"forward": 1, "reverse": 2, "bidirectional": 3}
_ACTIVATIONS = ["sigmoid", "tanh", "tanh"]


def lstm_onednn(op: RecurrentOperator, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
    """The LSTM over these bound arrays as oneDNN's primitive, writing ``Y`` and whichever of ``Y_h`` and ``Y_c``
    the layer has; None where it does not apply: the library absent, another cell, ONNX's batch-major layout, a clip,
    peepholes, a coupled input-forget gate, sequence lengths, activations other than the defaults, arrays that are
    not contiguous FLOAT, empty tensors, or ``W``, ``R`` and ``B`` not engine constants (they are reordered once)."""
    lib = onednn.library()
    given = dict(zip(op.inputs, inputs))
    names = [str(n).lower() for n in op.params.get("activations") or []]
    if lib is None or op.cell != "LSTM" or op.layout or op.clip is not None or op.input_forget:
        return None
    if (names and names != _ACTIVATIONS * op.num_directions) or "P" in given or "sequence_lens" in given:
        return None
    arrays = [*inputs, *outputs]
    if any(not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays):
        return None
    if not op.bound_constant or not all(op.bound_constant[op.inputs.index(n)] for n in ("W", "R", "B") if n in given):
        return None
    x, w, r = given["X"], given["W"], given["R"]
    steps, batch, width = x.shape
    dirs, hidden = r.shape[0], r.shape[2]
    if min(steps, batch, width, hidden) == 0:
        return None
    y = outputs[0]
    finals = list(outputs[1:]) + [np.empty((dirs, batch, hidden), np.float32) for _ in range(3 - len(outputs))]
    sequence = y if dirs == 1 else np.empty((steps, batch, dirs * hidden), np.float32)
    state = [1, dirs, batch, hidden]
    bias = _bias(given.get("B"), dirs, hidden)
    flops = 2.0 * steps * batch * dirs * 4 * hidden * (width + hidden)
    try:
        descs = {
            "x": onednn.Desc(lib, [steps, batch, width], dense_strides([steps, batch, width])),
            "state": onednn.Desc(lib, state, dense_strides(state)),
            "layer": onednn.Desc(lib, [1, dirs, width, 4, hidden], None),
            "iter": onednn.Desc(lib, [1, dirs, hidden, 4, hidden], None),
            "bias": onednn.Desc(lib, [1, dirs, 4, hidden], dense_strides([1, dirs, 4, hidden])),
            "y": onednn.Desc(lib, [steps, batch, dirs * hidden], dense_strides([steps, batch, dirs * hidden])),
        }
        initial = [given.get("initial_h"), given.get("initial_c")]
        make = _maker(lib, _DIRECTIONS[op.direction], descs, [s is not None for s in initial])
        primitives = onednn.fast_primitives(lib, make, None, thread_counts(flops))
        if primitives is None:
            return None
        memory = functools.partial(onednn.Memory, lib)
        args = [
            (onednn.ARG_SRC, memory(descs["x"], x.ctypes.data, hold=x)),
            (onednn.ARG_BIAS, memory(descs["bias"], bias.ctypes.data, hold=bias)),
            (onednn.ARG_DST, memory(descs["y"], sequence.ctypes.data, hold=sequence)),
            (onednn.ARG_DST_ITER, memory(descs["state"], finals[0].ctypes.data, hold=finals[0])),
            (onednn.ARG_DST_ITER_C, memory(descs["state"], finals[1].ctypes.data, hold=finals[1])),
        ]
        for arg, start in zip((onednn.ARG_SRC_ITER, onednn.ARG_SRC_ITER_C), initial):
            if start is not None:
                args.append((arg, memory(descs["state"], start.ctypes.data, hold=start)))
        for primitive in primitives:
            weights = _weights(lib, op, primitive, (w, r), f"{primitive.threads}", (batch, steps), slice(None))
            primitive.bind([*args, *weights])
    except onednn.OneDnnError:
        return None
    ordered = sequence.reshape(steps, batch, dirs, hidden).transpose(0, 2, 1, 3)  # as Y's [T, D, N, H]
    after = [] if dirs == 1 else [functools.partial(np.copyto, y, ordered)]
    split = None
    if len(primitives) > 1:
        buffers = {"x": x, "y": sequence, "h": finals[0], "c": finals[1], "h0": initial[0], "c0": initial[1]}
        split = functools.partial(_split, lib, op, buffers, w, r, bias, flops)
    return launcher(lib, primitives, flops, [], y, TensorFormat.LINEAR, after, split=split)


def _split(
    lib: Any,
    op: RecurrentOperator,
    arrays: dict[str, np.ndarray | None],
    w: np.ndarray,
    r: np.ndarray,
    bias: np.ndarray,
    flops: float,
) -> Parts | None:
    """The LSTM as one-thread primitives over its directions (one each way) and slices of its batch, for a busy
    machine (``onednn_buffers.launcher``'s ``split``): each reads and writes its slice of the layer's buffers in
    place (strided), its direction's weights reordered for it. Each direction's steps are a chain no thread can
    share, so a bidirectional layer always has its two directions apart; a batch is sliced where its work makes
    parts (:func:`~.onednn_parts.part_count` of a direction's work). None where that makes fewer than two parts or oneDNN
    has only its reference kernel for them."""
    x = arrays["x"]
    assert x is not None
    batch, dirs = x.shape[1], r.shape[0]
    most = onednn_parts.MAX_PARTS
    slices = min(batch, max(1, most // dirs), max(1, part_count(flops / dirs)))
    edges = [k * batch // slices for k in range(slices + 1)]
    if dirs * slices < 2 or most < 2:
        return None
    made = []
    try:
        for direction in range(dirs):
            code = _DIRECTIONS[op.direction] if dirs == 1 else direction + 1  # (left to right, right to left)
            for first, last in itertools.pairwise(edges):
                made.append(_part(lib, op, arrays, (w, r, bias), code, direction, first, last - first))
    except onednn.OneDnnError:
        return None
    if any(p.implementation.startswith("ref") for p in made):
        return None
    return Parts(lib, made, [])


def _part(
    lib: Any,
    op: RecurrentOperator,
    arrays: dict[str, np.ndarray | None],
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
    code: int,
    direction: int,
    first: int,
    count: int,
) -> onednn.Primitive:
    """One direction (oneDNN's ``code``) of the LSTM over ``count`` sequences of its batch from ``first``."""
    x, sequence = arrays["x"], arrays["y"]
    assert x is not None and sequence is not None
    w, r, bias = weights
    steps, batch, width = x.shape
    dirs, hidden = r.shape[0], r.shape[2]
    state = onednn.Desc(lib, [1, 1, count, hidden], [dirs * batch * hidden, batch * hidden, hidden, 1])
    descs = {
        "state": state,
        "x": onednn.Desc(lib, [steps, count, width], [batch * width, width, 1]),
        "y": onednn.Desc(lib, [steps, count, hidden], [batch * dirs * hidden, dirs * hidden, 1]),
        "layer": onednn.Desc(lib, [1, 1, width, 4, hidden], None),
        "iter": onednn.Desc(lib, [1, 1, hidden, 4, hidden], None),
        "bias": onednn.Desc(lib, [1, 1, 4, hidden], [4 * hidden, 4 * hidden, hidden, 1]),
    }
    make = _maker(lib, code, descs, [arrays[name] is not None for name in ("h0", "c0")])
    primitive = onednn.Primitive(lib, make, None, 1)
    at_state = 4 * (direction * batch + first) * hidden

    def memory(desc: Any, array: np.ndarray, offset: int) -> onednn.Memory:
        return onednn.Memory(lib, desc, array.ctypes.data + offset, hold=array)

    args = [
        (onednn.ARG_SRC, memory(descs["x"], x, 4 * first * width)),
        (onednn.ARG_DST, memory(descs["y"], sequence, 4 * (first * dirs + direction) * hidden)),
        (onednn.ARG_BIAS, memory(descs["bias"], bias, 4 * direction * 4 * hidden)),
    ]
    for arg, name in ((onednn.ARG_DST_ITER, "h"), (onednn.ARG_DST_ITER_C, "c"), (onednn.ARG_SRC_ITER, "h0"),
                      (onednn.ARG_SRC_ITER_C, "c0")):  # fmt: skip
        array = arrays[name]
        if array is not None:
            args.append((arg, memory(state, array, at_state)))
    args += _weights(lib, op, primitive, (w, r), f"part-{direction}", (count, steps), slice(direction, direction + 1))
    primitive.bind(args)
    return primitive


def _maker(lib: Any, code: int, descs: dict[str, onednn.Desc], starts: Sequence[bool]) -> Any:
    """The ``make`` of oneDNN's LSTM primitive in direction ``code`` over the descriptors ``descs`` (``x``, ``y``,
    ``state``: each initial and final state, ``layer`` and ``iter``: the weights, ``bias``), reading the initial
    hidden and cell states where ``starts`` says so."""
    state = descs["state"].handle
    initial = [state if given else None for given in starts]

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_lstm_forward_primitive_desc_create(
            pd, lib.engine, onednn.FORWARD_INFERENCE, code, descs["x"].handle, *initial, descs["layer"].handle,
            descs["iter"].handle, None, None, descs["bias"].handle, descs["y"].handle, state, state, ctypes.c_uint(0),
            attr,
        )  # fmt: skip
        return status

    return make


def _weights(
    lib: Any,
    op: RecurrentOperator,
    primitive: onednn.Primitive,
    weights: tuple[np.ndarray, np.ndarray],
    label: str,
    key: tuple[int, ...],
    directions: slice,
) -> list[tuple[int, onednn.Memory]]:
    """``W`` and ``R`` (their ``directions``) as ``primitive`` reads them: reordered into the layouts it chose, once
    per ``label`` and ``key`` (kept with the layer's derived weights across binds)."""
    args = []
    for arg, name, source in ((onednn.ARG_WEIGHTS, "layer", weights[0]), (onednn.ARG_WEIGHTS_ITER, "iter", weights[1])):
        layout = primitive.arg_desc(arg)
        packed = op.derived_weight(
            f"onednn-{name}-{label}",
            (source.ctypes.data, source.shape, *key),
            functools.partial(_packed, lib, source[directions], layout),
        )
        args.append((arg, onednn.Memory(lib, layout, packed.ctypes.data, hold=packed)))
    return args


def _gate_major(weights: np.ndarray) -> np.ndarray:
    """ONNX's ``[D, 4H, K]`` (gates ``i o f c``) as oneDNN's ``ldigo`` ``[1, D, K, 4, H]`` (gates ``i f c o``)."""
    dirs, size, width = weights.shape
    blocks = weights.reshape(dirs, 4, size // 4, width)[:, list(_GATES)]
    return np.ascontiguousarray(blocks.transpose(0, 3, 1, 2))[None]


def _packed(lib: Any, weights: np.ndarray, layout: Any) -> np.ndarray:
    """ONNX's ``W`` or ``R`` in the layout the primitive chose (made once, kept across binds)."""
    plain = _gate_major(np.asarray(weights, np.float32))
    return onednn.reorder(lib, plain, onednn.Desc(lib, plain.shape, dense_strides(plain.shape)), layout)


def _bias(b: np.ndarray | None, dirs: int, hidden: int) -> np.ndarray:
    """ONNX's ``B`` ``[D, 8H]`` (``Wb`` then ``Rb``) as oneDNN's one bias a gate, ``[1, D, 4, H]``, gates reordered."""
    if b is None:
        return np.zeros((1, dirs, 4, hidden), np.float32)
    summed = (b[:, : 4 * hidden] + b[:, 4 * hidden :]).reshape(dirs, 4, hidden)
    return np.ascontiguousarray(summed[:, list(_GATES)], np.float32)[None]
