"""``LayerNorm`` version 1 (IPluginV2DynamicExt): the seeds' example of weights moved to the device.

``y = (x - mean) / sqrt(var + epsilon) * gamma + beta``, with mean and (population)
variance over the dimensions from ``axis`` to the last (ONNX LayerNormalization's
meaning of ``axis``). ``gamma`` and ``beta`` are FLOAT32 fields holding one value per
normalized element (``prod(x.shape[axis:])`` values).

The lifecycle is the point of this example:

- the creator keeps ``gamma``/``beta`` as host arrays; ``serialize`` writes them;
- ``initialize()`` copies them to backend memory with ``device_malloc`` and
  ``enqueue`` reads only those copies; ``terminate()`` frees them (so
  ``live_allocations()`` lists them exactly between the two);
- ``clone()`` of an initialized plugin uploads copies of its own — the clone's owner
  frees them with ``destroy()`` (which calls ``terminate()``, as TensorRT plugins'
  destructors do), and the original's owner frees the original's: no double free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.memory import DeviceBuffer, device_malloc
from ..core.dims import volume
from ..core.errors import ExecutionError, FieldError, ShapeError
from ..core.types import nptype
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.builder import DimsExprs, IExprBuilder
from ._base import LibraryCreator, copy_to, on_gpu
from ._norm import standardize
from ._scaffold import DynamicLibraryPlugin
from ._schema import FLOAT, FLOATS, INT, FieldSpec, Schema, at_least
from ._workspace import WorkspaceLayout

__all__ = ["LayerNormPlugin", "LayerNormPluginCreator"]

_MAGIC, _FORMAT = 0x4C4E4F52, 1  # "LNOR"


class LayerNormPlugin(DynamicLibraryPlugin):
    """Layer normalization over the trailing dimensions, with learned gamma and beta."""

    NAME, VERSION = "LayerNorm", "1"
    MAGIC, FORMAT = _MAGIC, _FORMAT
    SCHEMA = Schema(
        NAME,
        (
            FieldSpec("gamma", FLOATS, doc="scale, one value per normalized element"),
            FieldSpec("beta", FLOATS, doc="shift, one value per normalized element"),
            FieldSpec("epsilon", FLOAT, 1e-5, at_least(0.0)),
            FieldSpec("axis", INT, -1, doc="first normalized dimension (negative: from the end)"),
        ),
    )

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.gamma = np.asarray(params["gamma"], np.float32).reshape(-1)
        self.beta = np.asarray(params["beta"], np.float32).reshape(-1)
        if self.gamma.size == 0 or self.gamma.size != self.beta.size:
            raise FieldError(
                f"{self.NAME}: fields 'gamma' and 'beta' must hold the same non-zero number of values, "
                f"got {self.gamma.size} and {self.beta.size}"
            )
        self.device_gamma: DeviceBuffer | None = None
        self.device_beta: DeviceBuffer | None = None

    # --- shapes (types and formats: the scaffold's) ------------------------------------
    def get_output_dimensions(
        self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> DimsExprs:
        self._first_axis(len(inputs[0]))
        return DimsExprs(inputs[0])

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        dims = list(inp[0].desc.dims)
        normalized = dims[self._first_axis(len(dims)) :]
        if all(d >= 0 for d in normalized) and int(np.prod(normalized)) != self.gamma.size:
            raise ShapeError(
                f"{self.NAME}: gamma/beta hold {self.gamma.size} values but the normalized dims {normalized} "
                f"(axis {self.params['axis']}) have {int(np.prod(normalized))} elements"
            )

    def _first_axis(self, rank: int) -> int:
        axis = self.params["axis"]
        if not -rank <= axis < rank:
            raise ShapeError(
                f"{self.NAME}: field 'axis' must be in [{-rank}, {rank}) for a rank-{rank} input, got {axis}"
            )
        return axis % rank

    # --- resources: weights live in backend memory between initialize and terminate ---
    def initialize(self) -> int:
        if self.device_gamma is None:
            self.device_gamma = device_malloc(self.gamma.nbytes)
            self.device_beta = device_malloc(self.beta.nbytes)
            copy_to(self.device_gamma.as_array(self.gamma.shape, np.float32), self.gamma)
            copy_to(self.device_beta.as_array(self.beta.shape, np.float32), self.beta)
        return 0

    def terminate(self) -> None:
        for buffer in (self.device_gamma, self.device_beta):
            if buffer is not None:
                buffer.free()
        self.device_gamma = self.device_beta = None

    def destroy(self) -> None:
        self.terminate()

    # --- running ----------------------------------------------------------------------
    def workspace_layout(self, input_desc: Sequence[PluginTensorDesc]) -> WorkspaceLayout:
        inner = self.gamma.size
        return WorkspaceLayout().add("rows", (int(np.prod(tuple(input_desc[0].dims))) // inner, inner), np.float32)

    def enqueue(
        self,
        input_desc: list[PluginTensorDesc],
        output_desc: list[PluginTensorDesc],
        inputs: list[int],
        outputs: list[int],
        workspace: int,
        stream: int,
    ) -> int:
        if self.device_gamma is None or self.device_beta is None:
            raise ExecutionError(f"{self.NAME}: enqueue before initialize(): gamma/beta are not in backend memory")
        cols = self.gamma.size
        if on_gpu() and self._launch_cuda(input_desc[0], inputs[0], outputs[0], cols, stream):
            return 0
        # elsewhere (the CPU, or rows the kernel does not take): compute, on the engine's device
        return super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        assert self.device_gamma is not None and self.device_beta is not None
        (x,), (y,), rows = inputs, outputs, scratch["rows"]
        standardize(x.reshape(rows.shape), self.params["epsilon"], out=rows, xp=xp)
        rows *= self.device_gamma.as_array(self.gamma.shape, np.float32)
        rows += self.device_beta.as_array(self.beta.shape, np.float32)
        xp.copyto(y, rows.reshape(y.shape), casting="same_kind")

    def _launch_cuda(self, desc: PluginTensorDesc, x: int, y: int, cols: int, stream: int) -> bool:
        """On a CUDA engine, the one-pass LayerNorm kernel when it supports the shape; False otherwise."""
        from ..ops.layer_norm_cuda import layer_norm_cuda, supports

        dtype = nptype(desc.type)
        if not supports(dtype, cols) or x % 16 or y % 16:
            return False
        assert self.device_gamma is not None and self.device_beta is not None
        rows = volume(desc.dims) // cols
        layer_norm_cuda(
            x, self.device_gamma.ptr, self.device_beta.ptr, y, rows, cols, self.params["epsilon"], dtype, stream
        )
        return True

    # --- copies (serialization: the scaffold's, the fields in schema order) ----------------
    def clone(self) -> LayerNormPlugin:
        copy: LayerNormPlugin = super().clone()
        if self.device_gamma is not None:  # an initialized plugin's clone is initialized too, with its own copies
            copy.initialize()
        return copy


class LayerNormPluginCreator(LibraryCreator):
    """Creator of ``LayerNorm`` version 1 (fields gamma, beta, epsilon, axis)."""

    plugin_class = LayerNormPlugin
