"""The BatchedNMS computation, shared by ``BatchedNMS_TRT`` and ``BatchedNMSDynamic_TRT``.

What TensorRT's batchedNMS plugin does, per image:

1. per class (the background class skipped): keep scores ``> scoreThreshold``, sort them
   best first (ties: lower box index first) and keep the first ``topK``;
2. greedy NMS per class: a box is dropped when a kept, better box of that class has
   IoU ``> iouThreshold`` with it (corners may come in either order; on pixel coordinates
   (``isNormalized`` false) areas use ``w + 1`` and ``h + 1``, and so does the
   intersection when ``caffeSemantics`` is set);
3. merge all classes' survivors, best first (ties: lower class, then better rank), keep
   ``keepTopK``; clip boxes to ``[0, 1]`` when ``clipBoxes``;
4. pad: boxes and scores 0, classes -1; ``num_detections`` counts the real rows.

The large intermediate arrays live in the plugin's workspace (see :func:`workspace_layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._nms import OverlapRule, corners, greedy_nms, top_k_desc
from ._workspace import WorkspaceLayout

__all__ = ["FIELD_ORDER", "NMSConfig", "batched_nms", "workspace_layout"]

#: TensorRT's field names, in the order of :class:`NMSConfig`'s attributes.
FIELD_ORDER = (
    "shareLocation",
    "backgroundLabelId",
    "numClasses",
    "topK",
    "keepTopK",
    "scoreThreshold",
    "iouThreshold",
    "isNormalized",
    "clipBoxes",
    "scoreBits",
    "caffeSemantics",
)


@dataclass(frozen=True)
class NMSConfig:
    """The checked fields of a BatchedNMS plugin (TensorRT's names in snake_case)."""

    share_location: bool
    background_label_id: int
    num_classes: int
    top_k: int
    keep_top_k: int
    score_threshold: float
    iou_threshold: float
    is_normalized: bool
    clip_boxes: bool
    score_bits: int
    caffe_semantics: bool

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> NMSConfig:
        """Build from a schema's parsed values (keys are TensorRT's field names)."""
        return cls(*(params[name] for name in FIELD_ORDER))

    @property
    def rule(self) -> OverlapRule:
        """The IoU rule of TensorRT's allClassNMS kernel."""
        pixel = 0.0 if self.is_normalized else 1.0
        return OverlapRule(
            self.iou_threshold, inclusive=False, area_offset=pixel, caffe_offset=pixel if self.caffe_semantics else 0.0
        )


def workspace_layout(batch: int, num_boxes: int, config: NMSConfig) -> WorkspaceLayout:
    """Scratch of one run: the scores permuted to ``[B * C, N]`` (ranked in place when most pass the
    threshold), the per-class candidates and the scores merged per image."""
    rows, k = batch * config.num_classes, min(config.top_k, num_boxes)
    return (
        WorkspaceLayout()
        .add("class_scores", (rows, num_boxes), np.float32)
        .add("candidates", (rows, k), np.int32)
        .add("merged_scores", (batch, config.num_classes * k), np.float32)
    )


def batched_nms(
    boxes: np.ndarray,
    scores: np.ndarray,
    config: NMSConfig,
    outputs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    scratch: dict[str, np.ndarray] | None = None,
) -> None:
    """Run BatchedNMS: ``boxes`` ``[B, N, 1 or C, 4]``, ``scores`` ``[B, N, C(, 1)]``.

    Writes ``outputs`` = (num_detections ``[B, 1]``, nmsed_boxes ``[B, keepTopK, 4]``,
    nmsed_scores ``[B, keepTopK]``, nmsed_classes ``[B, keepTopK]``) in place. ``scratch``
    comes from ``workspace_layout(...).bind(workspace)``; None allocates it.
    """
    num_out, out_boxes, out_scores, out_classes = outputs
    batch, num_boxes = scores.shape[:2]
    classes = config.num_classes
    k = min(config.top_k, num_boxes)
    if scratch is None:
        scratch = workspace_layout(batch, num_boxes, config).allocate()
    out_boxes[...] = 0
    out_scores[...] = 0
    out_classes[...] = -1
    num_out[...] = 0
    if batch == 0 or num_boxes == 0 or k == 0:
        return

    # 1. per-class candidates: rows (image, class) over the boxes; background and low scores don't pass
    by_class = scores.reshape(batch, num_boxes, classes).transpose(0, 2, 1)  # a view, no copy
    passing = by_class > np.float32(config.score_threshold)
    if 0 <= config.background_label_id < classes:
        passing[:, config.background_label_id] = False
    order, valid, value = top_k_desc(by_class, k, passing, scratch["class_scores"])  # [B, C, k], best first
    order, valid = order.reshape(batch * classes, k), valid.reshape(batch * classes, k)
    candidates = scratch["candidates"]
    np.copyto(candidates, np.where(valid, order, -1))

    # 2. per-class greedy NMS on the candidates' boxes
    label = np.arange(batch * classes) % classes
    location = label if not config.share_location else np.zeros_like(label)
    boxes4 = boxes.reshape(batch, num_boxes, -1, 4)
    width = int(valid.sum(axis=1).max())  # candidates are packed left: the rest of the columns are empty
    candidate_boxes = boxes4[np.arange(batch * classes)[:, None] // classes, order[:, :width], location[:, None]]
    keep = np.zeros_like(valid)
    keep[:, :width] = greedy_nms(corners(candidate_boxes), valid[:, :width], config.rule, max_keep=config.keep_top_k)

    # 3. merge the classes of each image (class-major, then rank) and keep the best keepTopK
    merged = scratch["merged_scores"]
    np.copyto(merged, value.reshape(batch, classes * k))
    best, found, best_score = top_k_desc(merged, config.keep_top_k, keep.reshape(batch, classes * k))
    picked_class, picked_rank = np.divmod(best, k)
    rows = np.arange(batch)[:, None]
    box_index = candidates.reshape(batch, classes, k)[rows, picked_class, picked_rank]
    picked_location = picked_class if not config.share_location else np.zeros_like(picked_class)
    picked_boxes = boxes4[rows, np.maximum(box_index, 0), picked_location].astype(np.float32)
    if config.clip_boxes:
        np.clip(picked_boxes, 0, 1, out=picked_boxes)

    # 4. write, padding the rest
    width = best.shape[1]
    num_out[:, 0] = found.sum(axis=1)
    out_boxes[:, :width] = np.where(found[..., None], picked_boxes, 0)
    out_scores[:, :width] = np.where(found, best_score, 0)
    out_classes[:, :width] = np.where(found, picked_class, -1)
