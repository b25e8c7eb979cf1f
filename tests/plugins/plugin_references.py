"""Independent references for the library plugins, written from TensorRT's documented semantics.

Plain loops over images, classes and boxes; no code shared with ``plugrt.plugins``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


# --- BatchedNMS ---------------------------------------------------------------------------------
def _sorted_corners(box: np.ndarray) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = (float(v) for v in box)
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def batched_nms_iou(a: np.ndarray, b: np.ndarray, normalized: bool, caffe: bool) -> float:
    """IoU as TensorRT's allClassNMS kernel computes it."""
    ax1, ay1, ax2, ay2 = _sorted_corners(a)
    bx1, by1, bx2, by2 = _sorted_corners(b)
    if bx1 > ax2 or bx2 < ax1 or by1 > ay2 or by2 < ay1:
        ix1 = iy1 = ix2 = iy2 = 0.0  # no intersection: an empty box at the origin
    else:
        ix1, iy1, ix2, iy2 = max(ax1, bx1), max(ay1, by1), min(ax2, bx2), min(ay2, by2)
    extra = 1.0 if (caffe and not normalized) else 0.0
    iw, ih = ix2 - ix1 + extra, iy2 - iy1 + extra
    if iw <= 0 or ih <= 0:
        return 0.0
    pad = 0.0 if normalized else 1.0
    area_a = (ax2 - ax1 + pad) * (ay2 - ay1 + pad)
    area_b = (bx2 - bx1 + pad) * (by2 - by1 + pad)
    inter = iw * ih
    return inter / (area_a + area_b - inter)


def batched_nms(boxes: np.ndarray, scores: np.ndarray, p: dict[str, Any]) -> dict[str, np.ndarray]:
    """BatchedNMS outputs for boxes ``[B, N, L, 4]`` and scores ``[B, N, C]``."""
    batch, num_boxes, classes = scores.shape
    keep_top = p["keepTopK"]
    out = {
        "num": np.zeros((batch, 1), np.int32),
        "boxes": np.zeros((batch, keep_top, 4), np.float32),
        "scores": np.zeros((batch, keep_top), np.float32),
        "classes": np.full((batch, keep_top), -1, np.float32),
    }
    threshold = float(np.float32(p["scoreThreshold"]))
    for b in range(batch):
        detections = []
        for c in range(classes):
            if c == p["backgroundLabelId"]:
                continue
            loc = 0 if p["shareLocation"] else c
            candidates = [(float(scores[b, n, c]), n) for n in range(num_boxes) if float(scores[b, n, c]) > threshold]
            candidates.sort(key=lambda t: (-t[0], t[1]))
            kept: list[tuple[float, int]] = []
            for score, n in candidates[: p["topK"]]:
                if all(
                    batched_nms_iou(boxes[b, k, loc], boxes[b, n, loc], p["isNormalized"], p["caffeSemantics"])
                    <= p["iouThreshold"]
                    for _, k in kept
                ):
                    kept.append((score, n))
            detections += [(score, c, rank, n) for rank, (score, n) in enumerate(kept)]
        detections.sort(key=lambda d: (-d[0], d[1], d[2]))
        for i, (score, c, _, n) in enumerate(detections[:keep_top]):
            box = boxes[b, n, 0 if p["shareLocation"] else c].astype(np.float32)
            out["boxes"][b, i] = np.clip(box, 0, 1) if p["clipBoxes"] else box
            out["scores"][b, i] = score
            out["classes"][b, i] = c
        out["num"][b, 0] = min(len(detections), keep_top)
    return out


# --- EfficientNMS ---------------------------------------------------------------------------------
def efficient_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two corner boxes (corners in either order); 0 without overlap."""
    ax1, ay1, ax2, ay2 = _sorted_corners(a)
    bx1, by1, bx2, by2 = _sorted_corners(b)
    iw, ih = min(ax2, bx2) - max(ax1, bx1), min(ay2, by2) - max(ay1, by1)
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return inter / union if union > 0 else 0.0


def decode_box(box: np.ndarray, anchor: np.ndarray | None, coding: int) -> np.ndarray:
    """The README's box decoding: corners add reordered anchors; center-size scales and exponentiates."""
    box = box.astype(np.float64)
    if anchor is not None:
        anchor = anchor.astype(np.float64)
        if coding == 0:
            box = np.array(_sorted_corners(box)) + np.array(_sorted_corners(anchor))
        else:
            box = np.array(
                [
                    anchor[0] + box[0] * anchor[2],
                    anchor[1] + box[1] * anchor[3],
                    anchor[2] * math.exp(box[2]),
                    anchor[3] * math.exp(box[3]),
                ]
            )
    if coding == 1:
        box = np.array([box[0] - box[2] / 2, box[1] - box[3] / 2, box[0] + box[2] / 2, box[1] + box[3] / 2])
    return box


def efficient_nms(
    boxes: np.ndarray, scores: np.ndarray, anchors: np.ndarray | None, p: dict[str, Any]
) -> dict[str, np.ndarray]:
    """EfficientNMS outputs for boxes ``[B, N, 4]`` or ``[B, N, C, 4]``, scores ``[B, N, C]``."""
    batch, num_boxes, classes = scores.shape
    top = p["max_output_boxes"]
    out = {
        "num": np.zeros((batch, 1), np.int32),
        "boxes": np.zeros((batch, top, 4), np.float32),
        "scores": np.zeros((batch, top), np.float32),
        "classes": np.zeros((batch, top), np.int32),
    }
    sigmoid = p["score_activation"]
    for b in range(batch):
        candidates = []
        for n in range(num_boxes):
            for c in range(classes):
                raw = float(scores[b, n, c])
                score = 1 / (1 + math.exp(-raw)) if sigmoid else raw
                if c != p["background_class"] and score >= p["score_threshold"]:
                    candidates.append((raw, n * classes + c))
        candidates.sort(key=lambda t: (-t[0], t[1]))
        kept: list[tuple[float, int, np.ndarray]] = []
        for raw, pair in candidates[:4096]:
            n, c = divmod(pair, classes)
            box = boxes[b, n, c] if boxes.ndim == 4 and boxes.shape[2] > 1 else boxes[b, n].reshape(-1, 4)[0]
            anchor = None if anchors is None else anchors[0 if anchors.shape[0] == 1 else b, n]
            box = decode_box(box, anchor, p["box_coding"])
            if any(
                (p["class_agnostic"] or kc == c) and efficient_iou(kb, box) >= p["iou_threshold"] for _, kc, kb in kept
            ):
                continue
            kept.append((raw, c, box))
            if len(kept) == top:
                break
        for i, (raw, c, box) in enumerate(kept):
            out["boxes"][b, i] = box
            out["scores"][b, i] = 1 / (1 + math.exp(-raw)) if sigmoid else raw
            out["classes"][b, i] = c
        out["num"][b, 0] = len(kept)
    return out


# --- normalizations -------------------------------------------------------------------------------
def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, axis: int) -> np.ndarray:
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = x.shape[axis % x.ndim :]
    return (x64 - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


def instance_norm(
    x: np.ndarray, scales: np.ndarray, bias: np.ndarray, eps: float, relu: int, alpha: float
) -> np.ndarray:
    y = np.empty(x.shape, np.float64)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            v = x[n, c].astype(np.float64)
            y[n, c] = scales[c] * (v - v.mean()) / math.sqrt(v.var() + eps) + bias[c]
    if relu > 0:
        y = np.where(y < 0, y * alpha, y)
    return y


def group_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float, groups: int) -> np.ndarray:
    y = np.empty(x.shape, np.float64)
    per = x.shape[1] // groups
    for n in range(x.shape[0]):
        for g in range(groups):
            v = x[n, g * per : (g + 1) * per].astype(np.float64)
            y[n, g * per : (g + 1) * per] = (v - v.mean()) / math.sqrt(v.var() + eps)
    return y * scale.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)


# --- ROIAlign (ONNX RoiAlign) ----------------------------------------------------------------------
def _bilinear(plane: np.ndarray, y: float, x: float, average: bool) -> np.ndarray:
    height, width = plane.shape[1:]
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return np.zeros(plane.shape[0])
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= height - 1:
        y0 = y1 = height - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= width - 1:
        x0 = x1 = width - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    terms = [
        hy * hx * plane[:, y0, x0],
        hy * lx * plane[:, y0, x1],
        ly * hx * plane[:, y1, x0],
        ly * lx * plane[:, y1, x1],
    ]
    return sum(terms) if average else np.maximum.reduce(terms)


def roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    oh, ow = p["output_height"], p["output_width"]
    out = np.zeros((rois.shape[0], x.shape[1], oh, ow))
    half_pixel = p["coordinate_transformation_mode"] == 1
    average = p["mode"] == 1
    for r in range(rois.shape[0]):
        plane = x[batch_indices[r]].astype(np.float64)
        x1, y1, x2, y2 = (float(v) * p["spatial_scale"] - (0.5 if half_pixel else 0.0) for v in rois[r])
        rw, rh = x2 - x1, y2 - y1
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = p["sampling_ratio"] if p["sampling_ratio"] > 0 else max(math.ceil(rh / oh), 0)
        gw = p["sampling_ratio"] if p["sampling_ratio"] > 0 else max(math.ceil(rw / ow), 0)
        for ph in range(oh):
            for pw in range(ow):
                samples = [
                    _bilinear(plane, y1 + ph * bh + (iy + 0.5) * bh / gh, x1 + pw * bw + (ix + 0.5) * bw / gw, average)
                    for iy in range(gh)
                    for ix in range(gw)
                ]
                if samples:
                    out[r, :, ph, pw] = sum(samples) / len(samples) if average else np.maximum.reduce(samples)
    return out


def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    out = data.copy()
    flat_idx = indices.reshape(-1, indices.shape[-1])
    flat_upd = updates.reshape(flat_idx.shape[0], *data.shape[indices.shape[-1] :])
    for i, idx in enumerate(flat_idx):
        out[tuple(int(v) for v in idx)] = flat_upd[i]
    return out
