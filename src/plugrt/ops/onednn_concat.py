"""Concatenation along the channels of 4-D tensors as oneDNN's concat primitive called directly (:mod:`.onednn`).

The concatenation operator's channels-last kernel (SqueezeNet's fire modules, Inception's, DenseNet's and PP-OCR's
blocks) takes this first where the library is there: the inputs and the output in their own layouts (channels-last
or LINEAR; where they differ, the LINEAR ones staged channels-last), an HWC input read from its hand-over slot where
a PyTorch kernel left a tensor there, the primitive made at bind. Without it such a layer imported torch for ``torch.cat``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from ..core.types import TensorFormat
from . import onednn
from .onednn_buffers import AXES, bound_run, fit, one_layout
from .torch_cpu import Kernel

__all__ = ["concatenation_onednn"]


def concatenation_onednn(inputs: Sequence[Any], out: Any, formats: Sequence[TensorFormat]) -> Kernel | None:
    """``out`` = the inputs joined along their channels (logical ``[N, C, H, W]``), each buffer stored as its format
    (the inputs' then the output's, HWC or LINEAR); None where it does not apply (the library absent, other ranks or
    types, empty tensors, shapes that do not join, only oneDNN's reference kernel for the layouts)."""
    lib = onednn.library()
    if lib is None or not inputs or not fit([*inputs, out], formats):
        return None
    shapes = [[int(x.shape[a]) for a in AXES[f]] for x, f in zip(inputs, formats)]
    total = [int(out.shape[a]) for a in AXES[formats[-1]]]
    if any(s[:1] + s[2:] != total[:1] + total[2:] for s in shapes) or sum(s[1] for s in shapes) != total[1]:
        return None
    flops = float(out.size)
    try:
        sources, (target, after) = one_layout(lib, list(zip(inputs, formats, shapes)), out, formats[-1], total)
        handles = (ctypes.c_void_p * len(sources))(*(memory.desc for memory, _ in sources))
    except onednn.OneDnnError:
        return None

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_concat_primitive_desc_create(
            pd, lib.engine, target.desc, len(sources), 1, handles, attr
        )
        return status

    args = [(onednn.ARG_MULTIPLE_SRC + k, memory) for k, (memory, _) in enumerate(sources)]
    args.append((onednn.ARG_DST, target))
    reads = [(x, f, memory, move) for x, f, (memory, move) in zip(inputs, formats, sources)]
    return bound_run(lib, make, flops, args, out, formats[-1], reads, [after])
