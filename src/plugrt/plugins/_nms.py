"""Vectorised NMS building blocks shared by the NMS plugins.

Everything works on many independent rows at once (one row per image, or per
image and class): no Python loop runs over boxes.

- :func:`top_k_desc` — the ``k`` best entries of each row, best first, ties broken by
  the lower column (what a stable radix sort gives on the GPU).
- :class:`OverlapRule` — when one box suppresses another: the IoU formula and threshold
  of a given TensorRT plugin.
- :func:`greedy_nms` — exact greedy NMS over rows of score-sorted candidates.

Greedy NMS is sequential by definition (box ``i`` survives unless a *surviving*
higher-scored box overlaps it). :func:`greedy_nms` walks the candidates in
blocks; inside a block it settles every box whose fate is already decided — a box
overlapped by a kept box is dropped, a box no undecided or kept box can overlap is
kept — and repeats. Each round settles at least the first undecided box of every
row, and in practice a handful of rounds settle a whole block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["OverlapRule", "corners", "greedy_nms", "top_k_desc"]

_NEG_INF = np.float32(-np.inf)


def top_k_desc(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Column indices of the ``k`` largest entries of each row (``-inf`` marks invalid).

    Returns ``(index, valid)`` of shape ``[rows, min(k, columns)]``: best first,
    equal scores in column order; ``valid`` is False where the score is ``-inf``.

    >>> s = np.array([[0.1, 0.9, 0.5, 0.9]], np.float32)
    >>> top_k_desc(s, 3)[0].tolist()
    [[1, 3, 2]]
    """
    rows, cols = scores.shape
    k = min(int(k), cols)
    if k <= 0 or rows == 0:
        return np.zeros((rows, max(k, 0)), np.int64), np.zeros((rows, max(k, 0)), bool)
    if 4 * k >= cols:
        index = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    else:
        part = np.argpartition(scores, cols - k, axis=1)[:, cols - k :]
        kth = np.take_along_axis(scores, part, axis=1).min(axis=1, keepdims=True)
        chosen = scores > kth
        tie = scores == kth
        need = k - chosen.sum(axis=1)
        crowded = np.flatnonzero(tie.sum(axis=1) > need)
        if crowded.size:  # more ties than places: the lowest columns win
            tie[crowded] &= np.cumsum(tie[crowded], axis=1) <= need[crowded, None]
        chosen |= tie
        columns = np.nonzero(chosen)[1].reshape(rows, k)
        values = np.take_along_axis(scores, columns, axis=1)
        index = np.take_along_axis(columns, np.argsort(-values, axis=1, kind="stable"), axis=1)
    valid = np.take_along_axis(scores, index, axis=1) > _NEG_INF
    return index, valid


def corners(boxes: np.ndarray) -> np.ndarray:
    """``[..., 4]`` boxes given by any two opposite corners → ``(min0, min1, max0, max1)`` float32."""
    boxes = boxes.astype(np.float32, copy=False)
    low = np.minimum(boxes[..., :2], boxes[..., 2:])
    high = np.maximum(boxes[..., :2], boxes[..., 2:])
    return np.concatenate([low, high], axis=-1)


@dataclass(frozen=True)
class OverlapRule:
    """When a higher-scored box suppresses a lower one.

    ``inclusive``: IoU ``>=`` threshold suppresses (EfficientNMS) instead of ``>`` (BatchedNMS).
    ``area_offset``: added to width and height of each box's area (1 for pixel coordinates
    in BatchedNMS). ``caffe_offset``: added to the intersection's width and height, also
    for disjoint boxes, whose intersection TensorRT's BatchedNMS collapses to an empty box
    first (Caffe semantics on pixel coordinates).
    """

    threshold: float
    inclusive: bool = False
    area_offset: float = 0.0
    caffe_offset: float = 0.0

    def areas(self, box: np.ndarray) -> np.ndarray:
        """Areas of sorted-corner boxes ``[..., 4]``."""
        width = box[..., 2] - box[..., 0] + self.area_offset
        height = box[..., 3] - box[..., 1] + self.area_offset
        return np.where((width > 0) & (height > 0), width * height, np.float32(0)).astype(np.float32)

    def suppresses(self, a: np.ndarray, area_a: np.ndarray, b: np.ndarray, area_b: np.ndarray) -> np.ndarray:
        """Boolean: box ``a`` suppresses box ``b`` (arrays broadcast; boxes in sorted corners)."""
        width = np.minimum(a[..., 2], b[..., 2])
        width -= np.maximum(a[..., 0], b[..., 0])
        height = np.minimum(a[..., 3], b[..., 3])
        height -= np.maximum(a[..., 1], b[..., 1])
        if self.caffe_offset:
            disjoint = (width < 0) | (height < 0)
            width[disjoint] = 0
            height[disjoint] = 0
            width += self.caffe_offset
            height += self.caffe_offset
        overlapping = (width > 0) & (height > 0)
        inter = width
        inter *= height
        union = area_a + area_b
        union -= inter
        iou = np.divide(inter, union, out=np.zeros_like(inter), where=overlapping & (union > 0))
        hit = iou >= self.threshold if self.inclusive else iou > self.threshold
        hit &= overlapping
        return hit


def greedy_nms(
    boxes: np.ndarray,
    valid: np.ndarray,
    rule: OverlapRule,
    labels: np.ndarray | None = None,
    max_keep: int | None = None,
    block: int = 128,
    budget: int = 1 << 22,
) -> np.ndarray:
    """Greedy NMS on rows of candidates sorted best first; returns the ``keep`` mask.

    ``boxes`` ``[rows, K, 4]`` in sorted corners (see :func:`corners`), ``valid``
    ``[rows, K]`` (invalid candidates are never kept and suppress nothing). With
    ``labels``, only boxes of the same label suppress each other. With ``max_keep``,
    work may stop once every row kept that many (later keeps would be dropped anyway).
    ``budget`` bounds the number of box pairs compared at once (memory).
    """
    rows, count = valid.shape
    keep = np.zeros((rows, count), bool)
    if rows == 0 or count == 0:
        return keep
    areas = rule.areas(boxes)
    block = max(1, min(block, count))
    chunk = max(1, budget // (block * (count + block)))
    for lo in range(0, rows, chunk):
        part = slice(lo, min(rows, lo + chunk))
        _nms_rows(
            boxes[part],
            areas[part],
            valid[part],
            None if labels is None else labels[part],
            rule,
            keep[part],
            max_keep,
            block,
        )
    return keep


def _nms_rows(
    boxes: np.ndarray,
    areas: np.ndarray,
    valid: np.ndarray,
    labels: np.ndarray | None,
    rule: OverlapRule,
    keep: np.ndarray,
    max_keep: int | None,
    block: int,
) -> None:
    count = valid.shape[1]
    last = int(valid.sum(axis=1).max())  # candidates are sorted: invalid ones trail
    for start in range(0, last, block):
        stop = min(count, start + block)
        alive = valid[:, start:stop].copy()
        here, here_area = boxes[:, start:stop], areas[:, start:stop]
        here_label = None if labels is None else labels[:, start:stop]
        if start:
            kept = keep[:, :start]
            width = int(kept.sum(axis=1).max())
            if width:
                order = np.argsort(~kept, axis=1, kind="stable")[:, :width]  # the kept ones, compacted
                mask = np.take_along_axis(kept, order, axis=1)
                hit = rule.suppresses(
                    np.take_along_axis(boxes[:, :start], order[..., None], axis=1)[:, :, None],
                    np.take_along_axis(areas[:, :start], order, axis=1)[:, :, None],
                    here[:, None],
                    here_area[:, None],
                )
                hit &= mask[:, :, None]
                if labels is not None and here_label is not None:
                    hit &= np.take_along_axis(labels[:, :start], order, axis=1)[:, :, None] == here_label[:, None]
                alive &= ~hit.any(axis=1)
        hit = rule.suppresses(here[:, :, None], here_area[:, :, None], here[:, None], here_area[:, None])
        hit &= np.triu(np.ones((stop - start, stop - start), bool), k=1)
        if here_label is not None:
            hit &= here_label[:, :, None] == here_label[:, None]
        keep[:, start:stop] = _settle(hit, alive)
        if max_keep is not None and bool((keep.sum(axis=1) >= max_keep).all()):
            return


def _settle(hit: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Greedy keep inside one block: ``hit[r, j, i]`` (j < i) means j suppresses i."""
    weights = hit.astype(np.float32)
    undecided = alive.copy()
    kept = np.zeros_like(alive)
    while undecided.any():
        by_kept = np.matmul(kept[:, None, :].astype(np.float32), weights)[:, 0] > 0
        undecided &= ~by_kept
        threat = np.matmul((undecided | kept)[:, None, :].astype(np.float32), weights)[:, 0] > 0
        settled = undecided & ~threat
        kept |= settled
        undecided &= ~settled
    return kept
