"""Decorator-API plugins of the shape of TensorRT's quickly-deployable-plugin samples, with NumPy impls.

Importing this module registers them (namespace ``sample``). Each impl records what it
was called with in ``CALLS`` so tests can see types, formats and tactics.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

import plugrt as trt
import plugrt.plugin as trtp

CALLS: list[dict[str, Any]] = []


def _record(plugin: str, inp: trtp.Tensor, out: trtp.Tensor, **extra: Any) -> None:
    CALLS.append({"plugin": plugin, "dtype": inp.dtype, "format": inp.format, "out_dtype": out.dtype, **extra})


# --- elementwise add (adds 1), with a block_size attribute the NumPy impl does not need ---------
@trtp.register("sample::elemwise_add_plugin")
def add_plugin_desc(inp0: trtp.TensorDesc, block_size: int) -> trtp.TensorDesc:
    return inp0.like()


@trtp.impl("sample::elemwise_add_plugin")
def add_plugin_impl(inp0: trtp.Tensor, block_size: int, outputs: tuple[trtp.Tensor], stream: int) -> None:
    _record("add", inp0, outputs[0], block_size=block_size)
    np.add(np.asarray(inp0), 1, out=np.asarray(outputs[0]))


# --- the same with autotune over FP32|FP16 ------------------------------------------------------
@trtp.register("sample::elemwise_add_plugin_tuned")
def tuned_add_desc(inp0: trtp.TensorDesc, block_size: int) -> trtp.TensorDesc:
    return inp0.like()


@trtp.autotune("sample::elemwise_add_plugin_tuned")
def tuned_add_autotune(inp0: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc]) -> list[trtp.AutoTuneCombination]:
    return [trtp.AutoTuneCombination("FP32|FP16, FP32|FP16")]


@trtp.impl("sample::elemwise_add_plugin_tuned")
def tuned_add_impl(inp0: trtp.Tensor, outputs: tuple[trtp.Tensor], stream: int) -> None:
    _record("tuned_add", inp0, outputs[0])
    np.add(np.asarray(inp0), 1, out=np.asarray(outputs[0]))


# --- in-place add: the output is the input's buffer -------------------------------------------
@trtp.register("sample::elemwise_add_plugin_")
def inplace_add_desc(inp0: trtp.TensorDesc, delta: int) -> trtp.TensorDesc:
    return inp0.aliased()


@trtp.autotune("sample::elemwise_add_plugin_")
def inplace_add_autotune(inp0, outputs) -> list[trtp.AutoTuneCombination]:  # type: ignore[no-untyped-def]
    return [
        trtp.AutoTuneCombination("FP32, FP32", "LINEAR*HWC"),
        trtp.AutoTuneCombination("FP32|FP16, FP32|FP16", "LINEAR"),
    ]


@trtp.impl("sample::elemwise_add_plugin_")
def inplace_add_impl(inp0, delta: int, outputs, stream) -> None:  # type: ignore[no-untyped-def]
    _record(
        "inplace_add",
        inp0,
        outputs[0],
        aliased=outputs[0].get_aliased() is inp0 and inp0.get_aliased() is outputs[0],
        shared=outputs[0].data_ptr == inp0.data_ptr,
        pointers=(inp0.data_ptr, outputs[0].data_ptr),
    )
    x = np.asarray(inp0)
    x += delta


# --- non-zero: a data-dependent output and its size tensor --------------------------------------
@trtp.register("sample::non_zero_plugin")
def non_zero_plugin_reg(inp0: trtp.TensorDesc) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
    upper_bound = inp0.shape_expr[0] * inp0.shape_expr[1]
    st = trtp.size_tensor(upper_bound // 2, upper_bound)
    st.dtype = trt.int64
    return trtp.from_shape_expr((st.expr(), 2), dtype=trt.int32), st


@trtp.autotune("sample::non_zero_plugin")
def non_zero_plugin_autotune(inp0, outputs) -> list[trtp.AutoTuneCombination]:  # type: ignore[no-untyped-def]
    return [trtp.AutoTuneCombination("FP32|FP16, INT32, INT64")]


@trtp.impl("sample::non_zero_plugin")
def non_zero_plugin_impl(inp0, outputs, stream) -> None:  # type: ignore[no-untyped-def]
    _record("non_zero", inp0, outputs[0], data_dependent=outputs[0].is_data_dependent)
    found = np.argwhere(np.asarray(inp0)).astype(np.int32)
    np.asarray(outputs[0].aliased(found.shape))[...] = found
    np.asarray(outputs[1]).reshape(-1)[0] = found.shape[0]


# --- circular pad: an NDArray[int32] attribute and two tactics ----------------------------------
class Tactic(IntEnum):
    NUMPY_PAD = 1
    GATHER = 2


@trtp.register("sample::circ_pad_plugin")
def circ_pad_plugin_desc(inp0: trtp.TensorDesc, pads: npt.NDArray[np.int32]) -> trtp.TensorDesc:
    ndim = inp0.ndim
    out_desc = inp0.like()
    for i in range(np.size(pads) // 2):
        out_desc.shape_expr[ndim - i - 1] += int(pads[i * 2] + pads[i * 2 + 1])
    return out_desc


@trtp.autotune("sample::circ_pad_plugin")
def circ_pad_plugin_autotune(inp0: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc]) -> list[trtp.AutoTuneCombination]:
    c = trtp.AutoTuneCombination()
    c.pos([0, 1], "FP32|FP16")
    c.tactics([int(Tactic.NUMPY_PAD), int(Tactic.GATHER)])
    return [c]


def circ_pad_reference(x: np.ndarray, pads: np.ndarray) -> np.ndarray:
    """``torch.nn.functional.pad(x, pads, mode="circular")``: pairs from the last dimension backwards."""
    return np.pad(x, _widths(x.ndim, pads), mode="wrap")


@trtp.impl("sample::circ_pad_plugin")
def circ_pad_plugin_impl(
    inp0: trtp.Tensor, pads: npt.NDArray[np.int32], outputs: tuple[trtp.Tensor], stream: int, tactic: int
) -> None:
    _record("circ_pad", inp0, outputs[0], tactic=tactic, pads=pads.tolist())
    x, y = np.asarray(inp0), np.asarray(outputs[0])
    if tactic == Tactic.NUMPY_PAD:
        y[...] = circ_pad_reference(x, pads)
    else:
        index = np.ix_(
            *[(np.arange(n) - before) % m for n, m, (before, _) in zip(y.shape, x.shape, _widths(x.ndim, pads))]
        )
        y[...] = x[index]


def _widths(ndim: int, pads: np.ndarray) -> list[tuple[int, int]]:
    widths = [(0, 0)] * ndim
    for i in range(len(pads) // 2):
        widths[ndim - i - 1] = (int(pads[2 * i]), int(pads[2 * i + 1]))
    return widths
