"""The NMS plugins on a CUDA engine: the host pipelines' steps with CuPy arrays and GPU kernels.

Same results as :func:`~plugrt.plugins.batched_nms_kernel.batched_nms` and
:func:`~plugrt.plugins.efficient_nms.efficient_nms` (the tests compare them), computed
entirely on the device on the engine's stream: ranking with
:func:`~plugrt.plugins._nms_cuda.top_k_rows`, suppression with
:func:`~plugrt.plugins._nms_cuda.nms_keep`, and CuPy element-wise work in between.
Shapes never depend on data, so nothing is read back and the work can be captured in a
CUDA graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.registry import gpu_backend
from ._nms_cuda import MAX_K, gather_corners, nms_keep, top_k_rows, write_detections

__all__ = ["batched_nms_device", "efficient_nms_device", "fits_device"]


def fits_device(*ks: int) -> bool:
    """True when every ranking of ``ks`` candidates fits the GPU kernels (else use the host path)."""
    return all(k <= MAX_K for k in ks)


def _corners(cp: Any, boxes: Any) -> Any:
    return cp.concatenate([cp.minimum(boxes[..., :2], boxes[..., 2:]), cp.maximum(boxes[..., :2], boxes[..., 2:])], -1)


def batched_nms_device(boxes: Any, scores: Any, config: Any, outputs: tuple[Any, Any, Any, Any]) -> None:
    """BatchedNMS on CuPy arrays (``config`` is a :class:`~plugrt.plugins.batched_nms_kernel.NMSConfig`)."""
    cp = gpu_backend().xp

    batch, num_boxes = scores.shape[:2]
    classes = config.num_classes
    k = min(config.top_k, num_boxes)
    if batch == 0 or num_boxes == 0 or k == 0:
        num_out, out_boxes, out_scores, out_classes = outputs
        num_out.fill(0)
        out_boxes.fill(0)
        out_scores.fill(0)
        out_classes.fill(-1)
        return
    # 1. per (image, class) row: the best k boxes above the threshold, background row skipped
    by_class = scores.reshape(batch, num_boxes, classes).astype(np.float32, copy=False).transpose(0, 2, 1)
    background = config.background_label_id if 0 <= config.background_label_id < classes else -1
    index, value, found = top_k_rows(by_class, k, config.score_threshold, row_skip=background)
    rows = batch * classes
    index, value, found = index.reshape(rows, k), value.reshape(rows, k), found.reshape(rows, k)
    # 2. greedy NMS per row on the candidates' boxes
    boxes4 = cp.ascontiguousarray(boxes.reshape(batch, num_boxes, -1, 4), dtype=np.float32)
    rule = config.rule
    keep = nms_keep(
        gather_corners(boxes4, index, classes, config.share_location),
        found.sum(axis=1, dtype=np.int32),
        rule.threshold,
        inclusive=rule.inclusive,
        area_offset=rule.area_offset,
        caffe_offset=rule.caffe_offset,
        max_keep=config.keep_top_k,
    )
    # 3. merge the classes of each image (class-major, then rank), keep the best keepTopK
    # (nms_keep keeps found candidates only)
    merged = cp.where(keep, value, np.float32(-np.inf)).reshape(batch, classes * k)
    best, best_score, picked = top_k_rows(merged, min(config.keep_top_k, classes * k), float("-inf"))
    # 4. write, padding the rest
    write_detections(
        best, best_score, picked, index, boxes4, classes, config.share_location, config.clip_boxes, outputs
    )


def efficient_nms_device(
    boxes: Any, scores: Any, anchors: Any, params: dict[str, Any], threshold: float, outputs: tuple[Any, ...]
) -> None:
    """EfficientNMS on CuPy arrays; ``threshold`` is the score threshold already in the scores' space."""
    cp = gpu_backend().xp

    from .efficient_nms import MAX_CANDIDATES

    num_out, out_boxes, out_scores, out_classes = outputs
    for out in outputs:
        out.fill(0)
    batch, num_boxes, classes = scores.shape[0], scores.shape[1], scores.shape[2]
    if batch == 0 or num_boxes * classes == 0:
        return
    flat = scores.reshape(batch, num_boxes * classes).astype(np.float32, copy=False)
    k = min(MAX_CANDIDATES, num_boxes * classes)
    background = params["background_class"]
    order, value, valid = top_k_rows(
        flat,
        k,
        threshold,
        inclusive=True,
        elem_mod=classes if 0 <= background < classes else 0,
        elem_skip=background,
    )
    anchor, label = order // classes, order % classes
    images = cp.arange(batch, dtype=np.int64)[:, None]
    boxes4 = boxes.reshape(batch, num_boxes, -1, 4)
    picked = boxes4[images, anchor, label if boxes4.shape[2] > 1 else 0].astype(np.float32)
    coding = params["box_coding"]
    if anchors is not None:
        priors = anchors.reshape(-1, num_boxes, 4)
        prior = priors[0 if priors.shape[0] == 1 else images, anchor].astype(np.float32)
        if coding == 0:
            picked = _corners(cp, picked) + _corners(cp, prior)
        else:
            centre = picked[..., :2] * prior[..., 2:] + prior[..., :2]
            size = prior[..., 2:] * cp.exp(picked[..., 2:])
            picked = cp.concatenate([centre, size], axis=-1)
    if coding == 1:  # center-size -> corners
        half = picked[..., 2:] * np.float32(0.5)
        picked = cp.concatenate([picked[..., :2] - half, picked[..., :2] + half], axis=-1)
    limit = params["max_output_boxes"]
    keep = nms_keep(
        _corners(cp, picked),
        valid.sum(axis=1, dtype=np.int32),
        params["iou_threshold"],
        inclusive=True,
        labels=None if params["class_agnostic"] else label,
        max_keep=limit,
    )
    # the kept candidates, in order, packed to the left of each row
    width = min(limit, k)
    slot = cp.cumsum(keep, axis=1) - 1
    target = cp.where(keep & (slot < width), slot, width)  # column `width` collects the rest
    chosen = cp.zeros((batch, width + 1), np.int64)
    chosen[images, target] = cp.arange(k, dtype=np.int64)[None, :]
    chosen = chosen[:, :width]
    count = cp.minimum(keep.sum(axis=1), width)
    found = cp.arange(width)[None, :] < count[:, None]
    chosen_scores = cp.take_along_axis(value, chosen, axis=1)
    if params["score_activation"]:
        chosen_scores = np.float32(1) / (np.float32(1) + cp.exp(-chosen_scores))
    num_out[:, 0] = count
    out_boxes[:, :width] = cp.where(found[..., None], picked[images, chosen], 0)
    out_scores[:, :width] = cp.where(found, chosen_scores, 0)
    out_classes[:, :width] = cp.where(found, cp.take_along_axis(label, chosen, axis=1), 0)
