"""The PyTorch kernel of the recurrent operator: ``torch.lstm`` / ``torch.gru`` / ``torch.rnn_*`` (see :mod:`.torch_cpu`).

PyTorch's fused recurrent layers compute ONNX's cells where their semantics match:
the default activations (LSTM sigmoid/tanh/tanh, GRU sigmoid/tanh, RNN tanh or relu,
the same in every direction), forward or bidirectional, no ``clip``, no peepholes, no
``input_forget``, no ``sequence_lens``, and for GRU ``linear_before_reset`` (PyTorch's
GRU applies the reset gate after the recurrent product, as ONNX does with that flag;
PyTorch's own exports set it). :func:`supports` says so; the NumPy step loop runs the
rest.

ONNX orders the gates ``i o f c`` (LSTM) and ``z r h`` (GRU), PyTorch ``i f g o`` and
``r z n``: the weights are reordered into PyTorch's layout once per binding, at the first
run, which is why the builder offers this kernel only when ``W``, ``R`` and ``B`` are
engine constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .torch_cpu import Kernel, torch_module, use_threads, view

if TYPE_CHECKING:
    from .recurrent import RecurrentOperator

__all__ = ["recurrent", "supports"]

#: PyTorch's gate order as indices of ONNX's gate blocks
_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2), "RNN": (0,)}
_DEFAULTS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh")}


def _function(op: RecurrentOperator) -> str | None:
    """torch's function for the operator's cell and activations, or None when PyTorch has none."""
    names = [str(n).lower() for n in op.params.get("activations") or []]
    chosen = None
    if names:
        count = len(names) // op.num_directions
        groups = {tuple(names[d * count : (d + 1) * count]) for d in range(op.num_directions)}
        if len(groups) != 1:
            return None
        chosen = groups.pop()
    if op.cell == "RNN":
        if chosen in (None, ("tanh",)):
            return "rnn_tanh"
        return "rnn_relu" if chosen == ("relu",) else None
    if chosen not in (None, _DEFAULTS[op.cell]):
        return None
    if op.cell == "GRU" and not op.linear_before_reset:
        return None
    return op.cell.lower()


def supports(op: RecurrentOperator, constant: Sequence[bool], reverse: bool = False) -> bool:
    """Whether the PyTorch kernel computes ``op`` (see the module's note); ``constant`` per input. ``reverse``: a
    reverse cell passes too (the tactic's other kernels run it: PyTorch's has no reverse-only layer and declines)."""
    given = dict(zip(op.inputs, constant))
    if (op.direction == "reverse" and not reverse) or op.clip is not None or op.input_forget or _function(op) is None:
        return False
    if "P" in given or "sequence_lens" in given:
        return False
    return all(given.get(name, True) for name in ("W", "R", "B"))


def _parameters(op: RecurrentOperator, w: Any, r: Any, b: Any) -> list[Any]:
    """torch's flat weight list (w_ih, w_hh[, b_ih, b_hh] per direction) from ONNX's W, R, B."""
    torch = torch_module()
    hidden = r.shape[2]
    order = torch.tensor([g * hidden + k for g in _ORDER[op.cell] for k in range(hidden)], dtype=torch.long)
    size = len(_ORDER[op.cell]) * hidden
    params = []
    for d in range(op.num_directions):
        params += [w[d].index_select(0, order).contiguous(), r[d].index_select(0, order).contiguous()]
        if b is not None:
            params += [b[d, :size].index_select(0, order).contiguous(), b[d, size:].index_select(0, order).contiguous()]
    return params


def recurrent(op: RecurrentOperator, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
    """The layer with torch's fused recurrent function over these arrays (None where it does not apply)."""
    function_name = _function(op)
    given = dict(zip(op.inputs, inputs))
    if function_name is None or "P" in given or "sequence_lens" in given or given["X"].size == 0:
        return None
    if op.direction == "reverse":  # (PyTorch's layers run forward or both ways only)
        return None
    torch = torch_module()
    function = getattr(torch, function_name)
    x, w, r = (view(given[name]) for name in ("X", "W", "R"))
    b = view(given["B"]) if "B" in given else None
    states = [view(given[name]) if name in given else None for name in ("initial_h", "initial_c")[: op.num_outputs - 1]]
    steps, batch = (x.shape[1], x.shape[0]) if op.layout else (x.shape[0], x.shape[1])
    dirs, hidden = op.num_directions, r.shape[2]
    y = view(outputs[0])
    finals = [view(o) for o in outputs[1:]]
    zeros = torch.zeros((dirs, batch, hidden), dtype=torch.float32)
    flops = 2.0 * steps * batch * dirs * r.shape[1] * (r.shape[2] + w.shape[2])
    cache: list[Any] = []

    def initial(state: Any) -> Any:
        if state is None:
            return zeros
        return state.transpose(0, 1).contiguous() if op.layout else state

    def run() -> None:
        use_threads(flops)
        if not cache:  # W, R and B are engine constants: reordered once per binding
            cache.append(_parameters(op, w, r, b))
        hx: Any = [initial(s) for s in states]
        hx = tuple(hx) if op.cell == "LSTM" else hx[0]
        result = function(x, hx, cache[0], b is not None, 1, 0.0, False, dirs == 2, bool(op.layout))
        sequence = result[0]
        if op.layout:  # [batch, steps, dirs * hidden] is Y's [batch, steps, dirs, hidden]
            y.view(batch, steps, dirs * hidden).copy_(sequence)
        else:  # [steps, batch, dirs, hidden] into Y's [steps, dirs, batch, hidden]
            y.copy_(sequence.view(steps, batch, dirs, hidden).transpose(1, 2))
        for out, state in zip(finals, result[1:]):
            out.copy_(state.transpose(0, 1) if op.layout else state)

    return run
