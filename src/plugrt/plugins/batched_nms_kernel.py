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

__all__ = ["NMSConfig", "batched_nms", "workspace_layout"]


@dataclass(frozen=True)
class NMSConfig:
    """The checked fields of a BatchedNMS plugin, with TensorRT's names."""

    shareLocation: bool
    backgroundLabelId: int
    numClasses: int
    topK: int
    keepTopK: int
    scoreThreshold: float
    iouThreshold: float
    isNormalized: bool
    clipBoxes: bool
    scoreBits: int
    caffeSemantics: bool

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> NMSConfig:
        """Build from a schema's parsed values."""
        return cls(**params)

    @property
    def rule(self) -> OverlapRule:
        """The IoU rule of TensorRT's allClassNMS kernel."""
        pixel = 0.0 if self.isNormalized else 1.0
        return OverlapRule(
            self.iouThreshold, inclusive=False, area_offset=pixel, caffe_offset=pixel if self.caffeSemantics else 0.0
        )


def workspace_layout(batch: int, num_boxes: int, config: NMSConfig) -> WorkspaceLayout:
    """Scratch arrays of one run: permuted scores, per-class candidates, merged scores."""
    rows, k = batch * config.numClasses, min(config.topK, num_boxes)
    return (
        WorkspaceLayout()
        .add("class_scores", (rows, num_boxes), np.float32)
        .add("candidates", (rows, k), np.int32)
        .add("merged_scores", (batch, config.numClasses * k), np.float32)
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
    classes = config.numClasses
    k = min(config.topK, num_boxes)
    if scratch is None:
        scratch = workspace_layout(batch, num_boxes, config).allocate()
    out_boxes[...] = 0
    out_scores[...] = 0
    out_classes[...] = -1
    num_out[...] = 0
    if batch == 0 or num_boxes == 0 or k == 0:
        return

    # 1. per-class candidates: permute scores to [B*C, N], blank the background and low scores
    class_scores = scratch["class_scores"]
    np.copyto(class_scores.reshape(batch, classes, num_boxes), scores.reshape(batch, num_boxes, classes).transpose(0, 2, 1))
    class_scores[class_scores <= np.float32(config.scoreThreshold)] = -np.inf
    if 0 <= config.backgroundLabelId < classes:
        class_scores.reshape(batch, classes, num_boxes)[:, config.backgroundLabelId] = -np.inf
    active = np.flatnonzero(np.isfinite(class_scores).any(axis=1))  # rows (image, class) with candidates
    order, valid = top_k_desc(class_scores[active], k)
    candidates = scratch["candidates"]
    candidates[...] = -1
    candidates[active] = np.where(valid, order, -1)

    # 2. per-class greedy NMS on the candidates' boxes
    image, label = np.divmod(active, classes)
    location = label if not config.shareLocation else np.zeros_like(label)
    boxes4 = boxes.reshape(batch, num_boxes, -1, 4)
    candidate_boxes = boxes4[image[:, None], order, location[:, None]]
    keep = greedy_nms(corners(candidate_boxes), valid, config.rule, max_keep=config.keepTopK)

    # 3. merge the classes of each image and keep the best keepTopK
    merged = scratch["merged_scores"]
    merged[...] = -np.inf
    survivors = np.where(keep, np.take_along_axis(class_scores[active], order, axis=1), -np.inf)
    merged.reshape(batch * classes, k)[active] = survivors
    best, found = top_k_desc(merged, config.keepTopK)
    picked_class, picked_rank = np.divmod(best, k)
    rows = np.arange(batch)[:, None]
    box_index = candidates.reshape(batch, classes, k)[rows, picked_class, picked_rank]
    picked_location = picked_class if not config.shareLocation else np.zeros_like(picked_class)
    picked_boxes = boxes4[rows, np.maximum(box_index, 0), picked_location].astype(np.float32)
    if config.clipBoxes:
        np.clip(picked_boxes, 0, 1, out=picked_boxes)

    # 4. write, padding the rest
    width = best.shape[1]
    num_out[:, 0] = found.sum(axis=1)
    out_boxes[:, :width] = np.where(found[..., None], picked_boxes, 0)
    out_scores[:, :width] = np.where(found, merged[rows, best], 0)
    out_classes[:, :width] = np.where(found, picked_class, -1)
