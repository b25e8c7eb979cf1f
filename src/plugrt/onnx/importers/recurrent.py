"""ONNX importers: recurrent ops (LSTM, GRU, RNN), one ``recurrent`` operator each.

Every attribute ONNX defines is passed on: direction, hidden_size,
activations with their alphas and betas, clip, layout, GRU's
linear_before_reset and LSTM's input_forget. Omitted optional inputs are left
out and named in the operator's ``inputs`` parameter.
"""

from __future__ import annotations

from typing import Any

from ...ops.recurrent import RECURRENT_INPUTS
from .base import ImportContext, register_importer
from .tensor import add_op

__all__: list[str] = []

_OUTPUTS = {"LSTM": 3, "GRU": 2, "RNN": 2}


def _import_cell(ctx: ImportContext, inputs: list[Any], cell: str) -> list[Any]:
    if len(inputs) < 3 or any(t is None for t in inputs[:3]):
        ctx.fail(f"{cell} needs the X, W and R inputs")
    allowed = RECURRENT_INPUTS if cell == "LSTM" else RECURRENT_INPUTS[:6]
    if len(inputs) > len(allowed):
        ctx.fail(f"{cell} takes at most {len(allowed)} inputs ({', '.join(allowed)}), got {len(inputs)}")
    names = [name for name, tensor in zip(allowed, inputs) if tensor is not None]
    params: dict[str, Any] = {
        "cell": cell,
        "inputs": names,
        "direction": str(ctx.attr("direction", "forward")),
        "layout": int(ctx.attr("layout", 0)),
    }
    for name in ("hidden_size", "linear_before_reset", "input_forget"):
        if ctx.has_attr(name):
            params[name] = int(ctx.attr(name))
    if ctx.has_attr("clip"):
        params["clip"] = float(ctx.attr("clip"))
    if ctx.has_attr("activations"):
        params["activations"] = [str(a) for a in ctx.attr("activations")]
    for name in ("activation_alpha", "activation_beta"):
        if ctx.has_attr(name):
            params[name] = [float(v) for v in ctx.attr(name)]
    if cell != "GRU" and params.pop("linear_before_reset", 0):
        ctx.fail("linear_before_reset is a GRU attribute")
    if cell != "LSTM" and params.pop("input_forget", 0):
        ctx.fail("input_forget is an LSTM attribute")
    tensors = [t for t in inputs if t is not None]
    return add_op(ctx, "recurrent", tensors, params, num_outputs=_OUTPUTS[cell])


@register_importer("LSTM")
def import_lstm(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _import_cell(ctx, inputs, "LSTM")


@register_importer("GRU")
def import_gru(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _import_cell(ctx, inputs, "GRU")


@register_importer("RNN")
def import_rnn(ctx: ImportContext, inputs: list[Any]) -> list[Any]:
    return _import_cell(ctx, inputs, "RNN")
