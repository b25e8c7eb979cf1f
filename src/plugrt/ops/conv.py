"""N-D convolution (ONNX Conv): groups, strides, dilations, explicit or automatic padding, bias.

The general strategy is im2col plus one batched matrix multiply: the kernel is
packed at build time as ``[group, M / group, C / group * prod(kernel)]``
(:func:`pack_conv_kernel`); each run copies one strided slice of the input per
kernel tap into a column buffer ``[N, C, prod(kernel), *out]`` and multiplies.
Padding is never materialised: a tap copies only the outputs that read inside
the input, and the rest of its columns stay zero from when the buffer was made
(at the first run after ``prepare``, in the memory of the run's array module;
each operator owns its buffer, so nothing else writes there). A 1x1
kernel with unit strides and no padding multiplies the input directly. HALF
inputs are computed in FLOAT and rounded once into the output.

Depthwise convolutions (every group reads one input channel) on NumPy whose
column buffer would outgrow the cache (``TAPS_MIN_COLUMN_BYTES``) skip im2col:
:class:`~plugrt.ops.conv_taps.DepthwiseTaps` sums the kernel taps as
multiply-adds over contiguous slices, in a buffer the size of the padded input
instead of ``prod(kernel)`` times it. On smaller maps im2col's copies plus
one product per channel cost less than two passes per tap, and it stays.

The builder may fold an epilogue into the layer (``builder/passes/``): a residual tensor
added after the bias (``residual``: the last input, shaped like the output), then an
activation (``activation``: one of :data:`FUSED_ACTIVATIONS`, with ``activation_alpha`` /
``activation_beta``), applied in place to the result with the activation layer's own kernel,
then a scalar affine map of the activation's result (``post_scale``, ``post_shift``:
``y * scale + shift``).

With PyTorch installed the builder also times ``torch.nn.functional.conv{1,2,3}d``
(oneDNN) per layer, epilogue included, and keeps the faster
(:mod:`plugrt.ops.torch_cpu`); there the epilogue is the pass that writes the output. A 2-D
convolution also offers oneDNN's convolution over channels-last tensors with its kernel
reordered once (tactic ``torch-nhwc``; a small 1x1 one between channels-last tensors is NumPy's product of
the rows, see :data:`~plugrt.ops.torch_channels_last.SMALL_PRODUCT_FLOPS`): where consecutive convolutions take
it, the builder stores the tensors between them channels-last (``builder/layouts.py``). There a small depthwise
convolution is a Numba-compiled loop where numba is installed (:mod:`plugrt.ops.depthwise_numba`). Bound to such a tensor
without that kernel (torch absent at run), the NumPy kernel reads and writes through linear
copies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError, ShapeError
from ..core.types import DataType, TensorFormat
from ..nodes.base import Binding
from ..shape import constant
from .activation import activation_kernel
from .base import InputShapes, InputValues, ShapeExprs, register_operator
from .blas_threads import blas_threads_for
from .conv_columns import WINDOW_COPY_MAX_BYTES, bound_convolution, vector_products, window_view
from .conv_taps import DepthwiseTaps
from .depthwise_numba import depthwise_channels_last
from .elementwise import label
from .onednn_conv import convolution_onednn
from .product_parts import matmul_parts_into
from .shared_rules import expect_float_inputs
from .spatial import Window, kernel_taps
from .torch_channels_last import convolution_channels_last
from .torch_cpu import CHANNELS_LAST_TACTIC, Kernel, TorchOperator
from .torch_cpu_kernels import convolution as torch_convolution

__all__ = ["FUSED_ACTIVATIONS", "TAPS_MIN_COLUMN_BYTES", "ConvolutionOperator", "pack_conv_kernel"]

#: activations a convolution may apply to its result in place (their kernels are in-place safe)
FUSED_ACTIVATIONS = ("RELU", "CLIP", "HARD_SWISH", "HARD_SIGMOID", "SIGMOID", "TANH", "LEAKY_RELU")

#: a depthwise convolution whose im2col buffer would be at least this large sums taps instead (measured
#: on MobileNetV2's and PP-OCR's layers: the tap sums win from ~10 MB of columns, lose below ~3 MB)
TAPS_MIN_COLUMN_BYTES = 4 << 20


def pack_conv_kernel(kernel: np.ndarray, group: int) -> np.ndarray:
    """An ONNX Conv kernel ``[M, C / group, *k]`` laid out for the matmul: ``[group, M / group, C / group * prod(k)]``."""
    kernel = np.asarray(kernel)
    m = kernel.shape[0]
    return np.ascontiguousarray(kernel.reshape(group, m // group, -1), dtype=np.float32)


@register_operator
class ConvolutionOperator(TorchOperator):
    """``out = conv(x, kernel) + bias``.

    params: ``kernel_shape``, ``strides``, ``dilations``, ``pads`` (``[begin..., end...]``),
    ``auto_pad``, ``group``, ``num_output_maps`` (M), ``has_bias``, ``uniform_kernel`` (every
    kernel element is the same value: the output maps of a group are then equal, and are made
    bit-identical, which BLAS does not guarantee for equal rows).
    weights: ``kernel`` (packed by :func:`pack_conv_kernel`) and ``bias`` ``[M]``; without
    ``kernel`` the kernel is input 1 (``[M, C / group, *k]``), and without ``bias`` but with
    ``has_bias`` the bias is the next input. Fused epilogue (see the module's note): ``residual``
    (the last input is added), ``activation``, ``activation_alpha``, ``activation_beta``.
    """

    kind = "convolution"
    channels_last = True

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self.window = Window.from_params(self.params, f"convolution {self.name!r}")
        self.group = int(self.params.get("group", 1))
        self.maps = int(self.param("num_output_maps"))
        if self.group < 1 or self.maps % self.group:
            raise NetworkError(
                f"convolution: num_output_maps {self.maps} must be a multiple of group {self.group} (group >= 1)"
            )
        self.has_bias = bool(self.params.get("has_bias", "bias" in self.weights))
        self.uniform = bool(self.params.get("uniform_kernel", False))
        #: an activation fused in by the builder (see builder/fusion.py): "" or one of FUSED_ACTIVATIONS
        self.activation = str(self.params.get("activation", ""))
        if self.activation not in ("", *FUSED_ACTIVATIONS):
            raise NetworkError(
                f"convolution: unknown fused activation {self.activation!r}; valid: {', '.join(FUSED_ACTIVATIONS)}"
            )
        self.activation_range = (
            float(self.params.get("activation_alpha", 0.0)),
            float(self.params.get("activation_beta", 0.0)),
        )
        #: a residual tensor (the last input) added after the bias, before the activation
        self.residual = bool(self.params.get("residual", False))
        #: the scalar affine map after the activation: y * post_scale + post_shift
        self.post_affine = (float(self.params.get("post_scale", 1.0)), float(self.params.get("post_shift", 0.0)))
        self._inputs = 1 + ("kernel" not in self.weights) + (self.has_bias and "bias" not in self.weights)
        #: where the bias input is (None: a weight, or no bias)
        self.bias_input = self._inputs - 1 if self.has_bias and "bias" not in self.weights else None
        self._inputs += self.residual
        self._shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        #: (index into the column buffer, index into the input) per kernel tap that reads inside the input
        self._plan: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
        self._cols_shape: tuple[int, ...] | None = None
        #: (array module, column buffer as [N, group, rows, positions], [(tap's view of it, input index)])
        self._bound: tuple[Any, Any, list[tuple[Any, tuple[Any, ...]]]] | None = None
        #: where every window lies inside the input (no padding): the input's stride multipliers of the window
        #: view ``[N, C, *kernel, *out]`` that fills the column buffer in one copy, and that view (input, view)
        self._windows: tuple[int, ...] | None = None
        self._window_view: tuple[Any, Any] | None = None
        self._bias: np.ndarray | None = None
        #: the bound run of a one-group convolution on NumPy (see conv_columns.bound_convolution), else None
        self._fast: Any = None
        #: the tap-sum plan of a depthwise convolution (NumPy runs), else None
        self._depthwise: DepthwiseTaps | None = None
        if self.has_bias and "bias" in self.weights:
            self._bias = np.asarray(self.weights["bias"], dtype=np.float32).reshape(-1, 1)

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_float_inputs(self, input_types, self._inputs)
        return [input_types[0]]

    def output_shapes(self, input_shapes: InputShapes, input_values: InputValues) -> list[ShapeExprs]:
        x = input_shapes[0]
        rank = self.window.rank
        if len(x) != rank + 2:
            raise ShapeError(
                f"{label(self)}: input has rank {len(x)}; a {rank}-D convolution takes [N, C, {rank} spatial dims]"
            )
        channels = self._kernel_channels(input_shapes) * self.group
        if x[1].is_constant() and x[1].get_constant_value() != channels:
            raise ShapeError(
                f"{label(self)}: input has {x[1].get_constant_value()} channels, the kernel expects "
                f"{channels} (group {self.group} x {channels // self.group} per group)"
            )
        out = [x[0], constant(self.maps), *self.window.output_dims(x[2:])]
        if self.residual:
            residual = input_shapes[-1]
            if len(residual) != len(out) or any(not (r == o) for r, o in zip(residual, out)):
                raise ShapeError(
                    f"{label(self)}: the residual input has shape {[str(d) for d in residual]}; it must be the "
                    f"output's {[str(d) for d in out]}"
                )
        return [out]

    def _kernel_channels(self, input_shapes: Sequence[ShapeExprs]) -> int:
        if "kernel" in self.weights:
            packed = self.weights["kernel"]
            return int(packed.shape[2]) // math.prod(self.window.kernel)
        kernel = input_shapes[1]
        if len(kernel) != self.window.rank + 2 or not all(d.is_constant() for d in kernel[1:]):
            raise ShapeError(f"{label(self)}: the kernel input must have a known shape [M, C / group, *kernel_shape]")
        return kernel[1].get_constant_value()

    # --- kernel -------------------------------------------------------------------------
    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """FLOAT 1-, 2- and 3-D convolutions (a uniform kernel's maps made bit-identical after the library's
        convolution, see :func:`~plugrt.ops.torch_cpu_kernels.convolution`)."""
        return super().torch_supports(types, shapes, constant) and self.window.rank <= 3

    def channels_last_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """2-D convolutions with the kernel (and bias) as weights
        (see :func:`~plugrt.ops.torch_cpu_kernels.convolution_channels_last`); on a GPU cuDNN's NHWC kernels
        through :func:`~plugrt.ops.torch_cpu_kernels.convolution` on channels-last views (HALF convolutions run
        there without the reorders cuDNN's NCHW path makes around each one)."""
        return self.window.rank == 2 and "kernel" in self.weights and self.bias_input is None

    def channels_last_positions(self, inputs: int, outputs: int) -> list[int]:
        """The input, the residual and the output."""
        return [0, *([inputs - 1] if self.residual else []), inputs]

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """FLOAT 1-D and 2-D convolutions with the kernel (and bias) as weights
        (:func:`~.onednn_conv.convolution_onednn`)."""
        return self.window.rank in (1, 2) and "kernel" in self.weights and self.bias_input is None

    def direct_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        """oneDNN's convolution called directly (``ops/onednn_conv.py``), channels-last or through channels-last
        copies of LINEAR tensors."""
        if self.tactic == CHANNELS_LAST_TACTIC:
            positions = self.channels_last_positions(len(inputs), len(outputs))
            formats = [self.formats[p] for p in positions]
        elif any(f != TensorFormat.LINEAR for f in self.formats):
            return None
        else:
            formats = self.formats
        return convolution_onednn(self, inputs[0], outputs[0], inputs[-1] if self.residual else None, formats)

    def torch_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        residual = inputs[-1] if self.residual else None
        if self.tactic == CHANNELS_LAST_TACTIC:
            positions = self.channels_last_positions(len(inputs), len(outputs))
            formats = [self.formats[p] for p in positions]
            if self.xp is not np:  # cuDNN takes channels-last tensors as they are: NHWC kernels, no reorders
                return torch_convolution(self, inputs[0], None, None, outputs[0], residual, formats)
            loop = depthwise_channels_last(self, inputs[0], outputs[0], residual, formats)
            if loop is not None:  # a small depthwise layer: Numba's compiled loop (ops/depthwise_numba.py)
                return loop
            return convolution_channels_last(self, inputs[0], outputs[0], residual, formats)
        if any(f != TensorFormat.LINEAR for f in self.formats):
            return None
        kernel = None if "kernel" in self.weights else inputs[1]
        bias = None if self.bias_input is None else inputs[self.bias_input]
        return torch_convolution(self, inputs[0], kernel, bias, outputs[0], residual)

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """As :meth:`TorchOperator.bind`; a one-group convolution on NumPy gets its column copies, product, bias
        and epilogue bound to these arrays once (:func:`~plugrt.ops.conv_columns.bound_convolution`)."""
        super().bind(inputs, outputs, workspace)
        self._fast = None
        if self._torch_call is None and self._relaid is None and self.xp is np:
            self._fast = bound_convolution(self, *self._bound_args[:2])

    def launch(self, stream: int) -> None:
        if self._fast is not None:
            self._fast()
        else:
            super().launch(stream)

    def prepared_launch(self, stream: int) -> tuple[Any, tuple[Any, ...]]:
        if self._fast is not None:
            return self._fast, ()
        return super().prepared_launch(stream)

    def prepare(self, input_shapes: Sequence[tuple[int, ...]], output_shapes: Sequence[tuple[int, ...]]) -> None:
        x_shape, out_shape = tuple(input_shapes[0]), tuple(output_shapes[0])
        if self._shapes == (x_shape, out_shape):
            return
        self._shapes = None
        spatial, out_spatial = x_shape[2:], out_shape[2:]
        _, begins, _ = self.window.resolve(spatial)
        w = self.window
        pointwise = all(k == 1 for k in w.kernel) and all(s == 1 for s in w.strides) and spatial == out_spatial
        pointwise = pointwise and not any(begins)
        self._plan = []
        self._bound = None
        self._cols_shape = None
        self._depthwise = None
        if not pointwise:
            self._plan_taps(x_shape, out_shape, begins)
            columns = 4 * math.prod(self._cols_shape or ())
            if x_shape[1] == self.group and math.prod(out_shape) > 0 and columns >= TAPS_MIN_COLUMN_BYTES:
                self._depthwise = DepthwiseTaps(w, x_shape, out_shape, begins, self.maps // self.group)
        self._shapes = (x_shape, out_shape)

    def _plan_taps(self, x_shape: tuple[int, ...], out_shape: tuple[int, ...], begins: Sequence[int]) -> None:
        """Where each kernel tap copies the input in the column buffer (only outputs that read inside it)."""
        w = self.window
        spatial, out_spatial = x_shape[2:], out_shape[2:]
        taps = math.prod(w.kernel)
        self._cols_shape = (*x_shape[:2], taps, *out_spatial)
        inside = not any(begins) and all(
            (o - 1) * s + (k - 1) * d + 1 <= n for o, s, k, d, n in zip(out_spatial, w.strides, w.kernel, w.dilations, spatial)
        )
        per_tap = 4 * math.prod((*x_shape[:2], *out_spatial))  # bytes a tap's copy moves
        small = taps > 1 and 0 < per_tap <= WINDOW_COPY_MAX_BYTES  # the calls cost more than the bytes
        self._windows = (*w.dilations, *w.strides) if inside and small else None
        self._window_view = None
        every: tuple[Any, ...] = (slice(None), slice(None))
        for t, pairs in kernel_taps(w, spatial, out_spatial, begins):
            self._plan.append(((*every, t, *(p[0] for p in pairs)), (*every, *(p[1] for p in pairs))))

    def _bind(self, xp: Any) -> tuple[Any, Any, list[tuple[Any, tuple[Any, ...]]]]:
        """The column buffer in ``xp``'s memory (zeros where taps read padding) and each tap's view of it."""
        assert self._cols_shape is not None
        shape = self._cols_shape
        cols = xp.zeros(shape, dtype=np.float32)
        taps = [(cols[dst], src) for dst, src in self._plan]
        self._bound = (xp, cols.reshape(shape[0], self.group, -1, math.prod(shape[3:])), taps)
        return self._bound

    def _columns(self, x: Any, xp: Any) -> Any:
        """The FLOAT columns ``[N, group, rows, positions]`` of input ``x`` (``x`` itself for a pointwise kernel)."""
        if self._cols_shape is None:
            cols = x.reshape(x.shape[0], self.group, -1, math.prod(x.shape[2:]))
            return cols if cols.dtype == np.float32 else cols.astype(np.float32)
        bound = self._bound
        if bound is None or bound[0] is not xp:
            bound = self._bind(xp)
        if self._windows is not None and xp is np:  # one copy of every window, not one per tap
            view = self._window_view
            if view is None or view[0] is not x:
                view = (x, window_view(x, self.window.kernel, self._windows, self._cols_shape[3:]))
                self._window_view = view
            np.copyto(bound[1].reshape(view[1].shape), view[1])
            return bound[1]
        for dst, src in bound[2]:
            xp.copyto(dst, x[src])
        return bound[1]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        x, out = inputs[0], outputs[0]
        if self._shapes is None or self._shapes != (x.shape, out.shape):
            self.prepare([a.shape for a in inputs], [out.shape])
        if "kernel" in self.weights:
            kernel = self.weight("kernel", xp)
        else:
            kernel = inputs[1].reshape(self.group, self.maps // self.group, -1)
            if kernel.dtype != np.float32:
                kernel = kernel.astype(np.float32)
        target = out
        if out.dtype != np.float32:
            target = self.scratch("acc", out.shape, np.float32, xp)
        if self._depthwise is not None and xp is np:
            self._run_depthwise(inputs, kernel, target)
        else:
            self._run_im2col(inputs, kernel, target, xp)
        if target is not out:
            xp.copyto(out, target, casting="unsafe")

    def _bias_input(self, inputs: Sequence[Any], xp: Any) -> Any:
        """The bias as ``[M, 1]`` float32 in ``xp``'s memory, or None without one."""
        if not self.has_bias:
            return None
        if self._bias is not None:
            return self.on_device("bias", self._bias, xp)
        assert self.bias_input is not None
        return inputs[self.bias_input].astype(np.float32).reshape(-1, 1)

    def _activate(self, target: Any, xp: Any, residual: Any = None) -> None:
        """The fused epilogue, in place: the residual added, then the activation (the activation layer's kernel),
        then the scalar affine map (a multiply, then an add, as the layers it replaces)."""
        if residual is not None:
            xp.add(target, residual, out=target)
        if self.activation:
            activation_kernel(self.activation)(xp, target, target, *self.activation_range)
        scale, shift = self.post_affine
        if scale != 1.0:
            xp.multiply(target, scale, out=target)
        if shift != 0.0:
            xp.add(target, shift, out=target)

    def _run_depthwise(self, inputs: Sequence[Any], kernel: np.ndarray, target: np.ndarray) -> None:
        plan = self._depthwise
        assert plan is not None
        bias = self._bias_input(inputs, np)
        if self.residual:  # the tap sums hand over blocks of the output: the epilogue runs on the whole
            rows = None if bias is None else plan.bias_rows(bias)
            plan.run(inputs[0], plan.weight_rows(kernel), rows, target, lambda block: None)
            self._activate(target, np, self._residual(inputs, target))
            return
        plan.run(
            inputs[0],
            plan.weight_rows(kernel),
            None if bias is None else plan.bias_rows(bias),
            target,
            lambda block: self._activate(block, np),
        )

    def _residual(self, inputs: Sequence[Any], target: Any) -> Any:
        """The residual input as ``target``'s type, or None without one."""
        if not self.residual:
            return None
        residual = inputs[-1]
        return residual if residual.dtype == target.dtype else residual.astype(target.dtype)

    def _run_im2col(self, inputs: Sequence[Any], kernel: Any, target: Any, xp: Any) -> None:
        x = inputs[0]
        n = x.shape[0]
        cols = self._columns(x, xp)
        grouped = target.reshape(n, self.group, self.maps // self.group, -1)
        vectors = vector_products(kernel[0], cols[:, 0], grouped[:, 0]) if xp is np and self.group == 1 else None
        if vectors is not None:  # as the bound run computes it
            with blas_threads_for(2.0 * kernel.size * cols.shape[-1] * n):
                for column, result in vectors:
                    np.matmul(kernel[0], column, out=result)
        else:  # on the CPU a large product as blocks on two threads, as the bound run and the engine's products
            matmul_parts_into(xp, kernel[None], cols, grouped)
        if self.uniform:
            grouped[:, :, 1:] = grouped[:, :, :1]
        bias = self._bias_input(inputs, xp)
        if bias is not None:
            flat = target.reshape(n, self.maps, -1)
            xp.add(flat, bias, out=flat)
        self._activate(target, xp, self._residual(inputs, target))
