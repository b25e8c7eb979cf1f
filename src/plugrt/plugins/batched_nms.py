"""``BatchedNMS_TRT`` (IPluginV2Ext, implicit batch) and ``BatchedNMSDynamic_TRT`` (IPluginV2DynamicExt).

Inputs: boxes ``[B, N, 1 or numClasses, 4]`` and scores ``[B, N, numClasses]`` (or
``[..., 1]``); outputs num_detections ``[B, 1]`` INT32, nmsed_boxes ``[B, keepTopK, 4]``,
nmsed_scores and nmsed_classes ``[B, keepTopK]`` in the input's float type. The
implicit-batch variant sees every shape without ``B``. The computation is in
:mod:`plugrt.plugins.batched_nms_kernel`; this module shows the two interface styles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.dims import Dims
from ..core.errors import FieldError, SerializationError, ShapeError, TypeMismatchError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..interfaces.serialization import SerializationReader, SerializationWriter
from ..interfaces.v2 import IPluginV2Ext
from ..shape.builder import DimsExprs, IExprBuilder
from ._base import FLOAT_TYPES, LibraryCreator, check_dim
from ._nms_device import batched_nms_device, fits_device
from ._scaffold import DynamicLibraryPlugin, LibraryPlugin, launch
from ._schema import BOOL, FLOAT, INT, FieldSpec, Schema, at_least, between
from ._workspace import WorkspaceLayout
from .batched_nms_kernel import NMSConfig, batched_nms, workspace_layout

__all__ = ["BatchedNMSDynamicPlugin", "BatchedNMSDynamicPluginCreator", "BatchedNMSPlugin", "BatchedNMSPluginCreator"]

FIELDS = (
    FieldSpec("shareLocation", BOOL, doc="boxes shared by all classes ([B, N, 1, 4])"),
    FieldSpec("backgroundLabelId", INT, check=at_least(-1), doc="class to skip; -1 for none"),
    FieldSpec("numClasses", INT, check=at_least(1)),
    FieldSpec("topK", INT, check=between(1, 4096), doc="candidates per class fed to NMS"),
    FieldSpec("keepTopK", INT, check=at_least(1), doc="detections kept per image"),
    FieldSpec("scoreThreshold", FLOAT),
    FieldSpec("iouThreshold", FLOAT, check=between(0.0, 1.0)),
    FieldSpec(
        "isNormalized",
        BOOL,
        True,
        ambiguous="TensorRT's batchedNMSPlugin README says the default is true, NvInferPluginUtils.h says false; "
        "set isNormalized explicitly",
    ),
    FieldSpec("clipBoxes", BOOL, True, doc="clip output boxes to [0, 1]"),
    FieldSpec("scoreBits", INT, 16, doc="radix-sort precision on the GPU; no effect here"),
    FieldSpec("caffeSemantics", BOOL, True, doc="+1 on pixel-coordinate intersections"),
)
_MAGIC, _FORMAT = 0x424E4D53, 1  # "BNMS"


def _check_fields(plugin: str, params: dict[str, Any]) -> NMSConfig:
    config = NMSConfig.from_params(params)
    if config.keep_top_k > config.top_k:
        raise FieldError(f"{plugin}: field 'keepTopK' must be <= topK ({config.top_k}), got {config.keep_top_k}")
    if config.background_label_id >= config.num_classes:
        raise FieldError(
            f"{plugin}: field 'backgroundLabelId' must be -1 or in [0, numClasses={config.num_classes}), "
            f"got {config.background_label_id}"
        )
    return config


def _output_type(index: int, input_types: list[DataType]) -> DataType:
    return DataType.INT32 if index == 0 else input_types[0]


class _BatchedNMS(LibraryPlugin):
    """What both interface styles share: the fields, the bytes (the plugin's name first) and the run.

    A run uses the GPU kernels on a CUDA engine when they take ``topK`` and
    ``keepTopK``, the NumPy pipeline otherwise (on host copies under CUDA).
    """

    VERSION, MAGIC, FORMAT, NUM_OUTPUTS = "1", _MAGIC, _FORMAT, 4

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        self.config = _check_fields(self.NAME, self.params)

    def workspace_layout(self, input_desc: Sequence[PluginTensorDesc]) -> WorkspaceLayout:
        scores = input_desc[1].dims
        return workspace_layout(scores[0], scores[1], self.config)

    def runs_on_host(self) -> bool:
        return not fits_device(self.config.top_k, self.config.keep_top_k)

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        boxes, scores = inputs
        if xp is np:
            batched_nms(boxes, scores, self.config, tuple(outputs), scratch)  # type: ignore[arg-type]
        else:
            batched_nms_device(boxes, scores, self.config, tuple(outputs))  # type: ignore[arg-type]


class BatchedNMSDynamicPlugin(_BatchedNMS, DynamicLibraryPlugin):
    """BatchedNMS with dynamic shapes: any batch size and box count within the profile."""

    NAME = TAG = "BatchedNMSDynamic_TRT"
    SCHEMA = Schema(NAME, FIELDS)

    def get_output_datatype(self, index: int, input_types: list[DataType]) -> DataType:
        return _output_type(index, input_types)

    def get_output_dimensions(
        self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> DimsExprs:
        if len(inputs) != 2 or len(inputs[0]) != 4 or len(inputs[1]) not in (3, 4):
            ranks = [len(i) for i in inputs]
            raise ShapeError(
                f"{self.NAME}: expects boxes [B, N, L, 4] and scores [B, N, C(, 1)], got ranks {ranks}"
            )
        batch, keep = inputs[0][0], exprBuilder.constant(self.config.keep_top_k)
        dims = [[batch, exprBuilder.constant(1)], [batch, keep, exprBuilder.constant(4)], [batch, keep], [batch, keep]]
        return DimsExprs(dims[output_index])

    def supports_format_combination(self, pos: int, in_out: list[PluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos]
        if desc.format != TensorFormat.LINEAR:
            return False
        if pos == num_inputs:  # num_detections
            return desc.type == DataType.INT32
        return desc.type in FLOAT_TYPES and desc.type == in_out[0].type

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        boxes, scores = inp[0].desc.dims, inp[1].desc.dims
        locations = 1 if self.config.share_location else self.config.num_classes
        check_dim(self.NAME, "boxes dim 2 (1 if shareLocation else numClasses)", boxes[2], locations)
        check_dim(self.NAME, "boxes dim 3", boxes[3], 4)
        check_dim(self.NAME, "scores dim 2 (numClasses)", scores[2], self.config.num_classes)
        if len(scores) == 4:
            check_dim(self.NAME, "scores dim 3", scores[3], 1)
        check_dim(self.NAME, "scores dim 1 (number of boxes)", scores[1], boxes[1])


class BatchedNMSPlugin(_BatchedNMS, IPluginV2Ext):
    """BatchedNMS with implicit batch: shapes are per image; the batch size comes with each run."""

    NAME = TAG = "BatchedNMS_TRT"
    SCHEMA = Schema(NAME, FIELDS)

    def __init__(self, params: dict[str, Any]) -> None:
        super().__init__(params)
        # What configure_plugin learns and execute_async needs (serialized with the fields).
        self.num_boxes, self.locations, self.dtype = 0, 1, DataType.FLOAT
        self._descs: dict[int, tuple[PluginTensorDesc, ...]] = {}

    def get_output_shape(self, index: int, input_shapes: list[Dims]) -> Dims:
        boxes, scores = input_shapes
        if len(boxes) != 3 or len(scores) not in (2, 3):
            raise ShapeError(
                f"{self.NAME}: expects per-image boxes [N, L, 4] and scores [N, C(, 1)], got {boxes} and {scores}"
            )
        keep = self.config.keep_top_k
        return Dims([[1], [keep, 4], [keep], [keep]][index])

    def get_output_data_type(self, index: int, input_types: list[DataType]) -> DataType:
        return _output_type(index, input_types)

    def supports_format(self, dtype: DataType, format: TensorFormat) -> bool:  # noqa: A002
        return dtype in (*FLOAT_TYPES, DataType.INT32) and format == TensorFormat.LINEAR

    def configure_plugin(
        self,
        input_shapes: Any,
        output_shapes: Any,
        input_types: Any,
        output_types: Any,
        input_is_broadcasted: Any,
        output_is_broadcasted: Any,
        format: Any,  # noqa: A002 - TensorRT's parameter name
        max_batch_size: int,
    ) -> None:
        boxes, scores = input_shapes
        if input_types[0] not in FLOAT_TYPES:
            raise TypeMismatchError(f"{self.NAME}: boxes must be FLOAT or HALF, got {input_types[0].name}")
        self.locations = 1 if self.config.share_location else self.config.num_classes
        check_dim(self.NAME, "boxes dim 1 (1 if shareLocation else numClasses)", boxes[1], self.locations)
        check_dim(self.NAME, "boxes dim 2", boxes[2], 4)
        check_dim(self.NAME, "scores dim 1 (numClasses)", scores[1], self.config.num_classes)
        check_dim(self.NAME, "scores dim 0 (number of boxes)", scores[0], boxes[0])
        self.num_boxes, self.dtype = boxes[0], input_types[0]

    def get_workspace_size(self, max_batch_size: int) -> int:
        return workspace_layout(max_batch_size, self.num_boxes, self.config).nbytes

    def execute_async(
        self, batch_size: int, inputs: list[int], outputs: list[int], workspace: int, stream_handle: int
    ) -> int:
        descs = self._descs.get(batch_size) or self._make_descs(batch_size)
        launch(self, descs[:2], descs[2:], inputs, outputs, workspace, stream_handle)
        return 0

    def _make_descs(self, batch: int) -> tuple[PluginTensorDesc, ...]:
        keep, classes = self.config.keep_top_k, self.config.num_classes
        shapes = [(self.num_boxes, self.locations, 4), (self.num_boxes, classes), (1,), (keep, 4), (keep,), (keep,)]
        types = [self.dtype, self.dtype, DataType.INT32, self.dtype, self.dtype, self.dtype]
        self._descs[batch] = tuple(PluginTensorDesc(Dims((batch, *s)), t) for s, t in zip(shapes, types))
        return self._descs[batch]

    def write_state(self, writer: SerializationWriter) -> None:
        """What configure_plugin learned: the box count and the float type."""
        writer.write_i32(self.num_boxes)
        writer.write_i32(int(self.dtype))

    def read_state(self, reader: SerializationReader) -> None:
        self.num_boxes, dtype = reader.read_i32(), reader.read_i32()
        if self.num_boxes < 0 or dtype not in (int(t) for t in FLOAT_TYPES):
            raise SerializationError(f"{self.NAME}: serialized shape/type ({self.num_boxes}, {dtype}) is invalid")
        self.dtype = DataType(dtype)
        self.locations = 1 if self.config.share_location else self.config.num_classes

    def clone(self) -> BatchedNMSPlugin:
        copy: BatchedNMSPlugin = super().clone()
        copy.num_boxes, copy.locations, copy.dtype = self.num_boxes, self.locations, self.dtype
        return copy


class BatchedNMSDynamicPluginCreator(LibraryCreator):
    """Creator of ``BatchedNMSDynamic_TRT`` version 1."""

    plugin_class = BatchedNMSDynamicPlugin


class BatchedNMSPluginCreator(LibraryCreator):
    """Creator of ``BatchedNMS_TRT`` version 1."""

    plugin_class = BatchedNMSPlugin
