"""``EfficientNMS_TRT`` version 1 (IPluginV2DynamicExt): NMS over all classes of an image at once.

Inputs: boxes ``[B, N, 4]`` (or ``[B, N, 1 or C, 4]``), scores ``[B, N, C]`` (or
``[..., 1]``) and, optionally, anchors ``[1 or B, N, 4]`` (the boxes are then decoded
against them). Outputs: num_detections ``[B, 1]`` INT32, detection_boxes
``[B, max_output_boxes, 4]`` (always corners), detection_scores ``[B, max_output_boxes]``,
detection_classes ``[B, max_output_boxes]`` INT32; unused rows are all zeros.

What TensorRT's kernel does, per image: keep (box, class) pairs with score ``>=
score_threshold`` (the background class skipped; with ``score_activation`` the threshold
is compared in logit space and only output scores get the sigmoid), sort them best
first and take the best 4096, decode their boxes, then greedy NMS: a pair is dropped
when a kept, better pair of the same class (any class with ``class_agnostic``) has IoU
``>= iou_threshold``; stop at ``max_output_boxes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import ShapeError
from ..core.types import DataType, TensorFormat
from ..interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from ..shape.builder import DimsExprs, IExprBuilder
from ._base import FLOAT_TYPES, LibraryCreator, check_dim
from ._nms import OverlapRule, corners, greedy_nms, top_k_desc
from ._nms_device import efficient_nms_device
from ._scaffold import DynamicLibraryPlugin
from ._schema import BOOL, FLOAT, INT, FieldSpec, Schema, at_least, between, one_of
from ._workspace import WorkspaceLayout

__all__ = ["EfficientNMSPlugin", "EfficientNMSPluginCreator", "efficient_nms", "score_threshold"]

MAX_CANDIDATES = 4096  # TensorRT's numSelectedBoxes: the best pairs that enter NMS
_MAGIC, _FORMAT = 0x45464E4D, 1  # "EFNM"


def workspace_layout(batch: int, num_pairs: int) -> WorkspaceLayout:
    """Scratch: a float32 copy of the pair scores ``[B, N * C]`` (ranked in place when most pairs
    pass the threshold) and the sorted candidates."""
    candidates = min(MAX_CANDIDATES, num_pairs)
    return WorkspaceLayout().add("scores", (batch, num_pairs), np.float32).add("order", (batch, candidates), np.int32)


def score_threshold(params: dict[str, Any]) -> np.float32:
    """The threshold raw scores are compared with: ``score_threshold``, or its logit with ``score_activation``."""
    threshold = np.float32(params["score_threshold"])
    if params["score_activation"]:
        return np.float32(-32768.0) if threshold <= 0 else np.float32(np.log(threshold / (np.float32(1) - threshold)))
    return threshold


def efficient_nms(
    boxes: np.ndarray,
    scores: np.ndarray,
    anchors: np.ndarray | None,
    params: dict[str, Any],
    outputs: tuple[np.ndarray, ...],
    scratch: dict[str, np.ndarray] | None = None,
) -> None:
    """Run EfficientNMS, writing ``outputs`` (num_detections, boxes, scores, classes) in place."""
    num_out, out_boxes, out_scores, out_classes = outputs
    for out in outputs:
        out[...] = 0
    batch, num_boxes, classes = scores.shape[0], scores.shape[1], scores.shape[2]
    if batch == 0 or num_boxes * classes == 0:
        return
    if scratch is None:
        scratch = workspace_layout(batch, num_boxes * classes).allocate()
    flat = scores.reshape(batch, num_boxes * classes)  # pair p = box * classes + class, as TensorRT indexes them
    passing = flat >= score_threshold(params)
    if 0 <= params["background_class"] < classes:
        passing.reshape(batch, num_boxes, classes)[:, :, params["background_class"]] = False
    order, valid, value = top_k_desc(flat, MAX_CANDIDATES, passing, scratch["scores"])
    scratch["order"][...] = order
    anchor, label = np.divmod(order, classes)
    rows = np.arange(batch)[:, None]
    boxes4 = boxes.reshape(batch, num_boxes, -1, 4)
    picked = boxes4[rows, anchor, label if boxes4.shape[2] > 1 else 0].astype(np.float32)
    coding = params["box_coding"]
    if anchors is not None:
        priors = anchors.reshape(-1, num_boxes, 4)
        picked = _decode(picked, priors[0 if priors.shape[0] == 1 else rows, anchor].astype(np.float32), coding)
    if coding == 1:  # center-size -> corners
        half = picked[..., 2:] * np.float32(0.5)
        picked = np.concatenate([picked[..., :2] - half, picked[..., :2] + half], axis=-1)
    limit = params["max_output_boxes"]
    keep = greedy_nms(
        corners(picked),
        valid,
        OverlapRule(params["iou_threshold"], inclusive=True),
        labels=None if params["class_agnostic"] else label,
        max_keep=limit,
    )
    keep &= np.cumsum(keep, axis=1) <= limit
    chosen = np.argsort(~keep, axis=1, kind="stable")[:, :limit]
    found = np.take_along_axis(keep, chosen, axis=1)
    width = chosen.shape[1]
    chosen_scores = np.take_along_axis(value, chosen, axis=1)
    if params["score_activation"]:
        chosen_scores = np.float32(1) / (np.float32(1) + np.exp(-chosen_scores))
    num_out[:, 0] = found.sum(axis=1)
    out_boxes[:, :width] = np.where(found[..., None], picked[rows, chosen], 0)
    out_scores[:, :width] = np.where(found, chosen_scores, 0)
    out_classes[:, :width] = np.where(found, label[rows, chosen], 0)


def _decode(deltas: np.ndarray, priors: np.ndarray, coding: int) -> np.ndarray:
    if coding == 0:  # corners: both reordered, then added
        return corners(deltas) + corners(priors)
    centre = deltas[..., :2] * priors[..., 2:] + priors[..., :2]
    size = priors[..., 2:] * np.exp(deltas[..., 2:])
    return np.concatenate([centre, size], axis=-1)


class EfficientNMSPlugin(DynamicLibraryPlugin):
    """EfficientNMS: standard mode with 2 inputs, fused box decoder with 3 (anchors)."""

    NAME, VERSION = "EfficientNMS_TRT", "1"
    MAGIC, FORMAT, NUM_OUTPUTS = _MAGIC, _FORMAT, 4
    SCHEMA = Schema(
        NAME,
        (
            FieldSpec("score_threshold", FLOAT, 0.5, at_least(0.0)),
            FieldSpec("iou_threshold", FLOAT, 0.5, between(0.0, 1.0)),
            FieldSpec("max_output_boxes", INT, 100, at_least(1)),
            FieldSpec("background_class", INT, -1, at_least(-1)),
            FieldSpec("score_activation", BOOL, False),
            FieldSpec("class_agnostic", BOOL, False),
            FieldSpec("box_coding", INT, 0, one_of(0, 1), doc="0 = BoxCorner, 1 = BoxCenterSize"),
        ),
    )

    def get_output_datatype(self, index: int, input_types: list[DataType]) -> DataType:
        return DataType.INT32 if index in (0, 3) else input_types[0]

    def get_output_dimensions(
        self, output_index: int, inputs: list[DimsExprs], exprBuilder: IExprBuilder
    ) -> DimsExprs:
        ranks = [len(i) for i in inputs]
        if len(inputs) not in (2, 3) or ranks[0] not in (3, 4) or ranks[1] not in (3, 4) or ranks[2:] not in ([], [3]):
            raise ShapeError(
                f"{self.NAME}: expects boxes [B, N(, C), 4], scores [B, N, C] and optional anchors [1 or B, N, 4]; "
                f"got ranks {ranks}"
            )
        batch, top = inputs[0][0], exprBuilder.constant(self.params["max_output_boxes"])
        dims = [[batch, exprBuilder.constant(1)], [batch, top, exprBuilder.constant(4)], [batch, top], [batch, top]]
        return DimsExprs(dims[output_index])

    def supports_format_combination(self, pos: int, in_out: list[PluginTensorDesc], num_inputs: int) -> bool:
        desc = in_out[pos]
        if desc.format != TensorFormat.LINEAR:
            return False
        if pos - num_inputs in (0, 3):  # num_detections, detection_classes
            return desc.type == DataType.INT32
        return desc.type in FLOAT_TYPES and desc.type == in_out[0].type

    def configure_plugin(self, inp: list[DynamicPluginTensorDesc], out: list[DynamicPluginTensorDesc]) -> None:
        boxes, scores = inp[0].desc.dims, inp[1].desc.dims
        check_dim(self.NAME, "boxes last dim", boxes[len(boxes) - 1], 4)
        check_dim(self.NAME, "scores dim 1 (number of boxes)", scores[1], boxes[1])
        if len(scores) == 4:
            check_dim(self.NAME, "scores dim 3", scores[3], 1)
        if len(boxes) == 4 and boxes[2] != 1:
            check_dim(self.NAME, "boxes dim 2 (1 or the number of classes)", boxes[2], scores[2])
        if len(inp) == 3:
            check_dim(self.NAME, "anchors dim 1 (number of boxes)", inp[2].desc.dims[1], boxes[1])
            check_dim(self.NAME, "anchors dim 2", inp[2].desc.dims[2], 4)

    def workspace_layout(self, input_desc: Sequence[PluginTensorDesc]) -> WorkspaceLayout:
        scores = input_desc[1].dims
        return workspace_layout(scores[0], scores[1] * scores[2])

    def compute(self, xp: Any, inputs: list[Any], outputs: list[Any], scratch: dict[str, Any]) -> None:
        anchors = inputs[2] if len(inputs) == 3 else None
        if xp is not np:  # at most MAX_CANDIDATES enter NMS: always within the GPU kernels' range
            threshold = float(score_threshold(self.params))
            efficient_nms_device(inputs[0], inputs[1], anchors, self.params, threshold, tuple(outputs))
            return
        efficient_nms(inputs[0], inputs[1], anchors, self.params, tuple(outputs), scratch)


class EfficientNMSPluginCreator(LibraryCreator):
    """Creator of ``EfficientNMS_TRT`` version 1."""

    plugin_class = EfficientNMSPlugin
