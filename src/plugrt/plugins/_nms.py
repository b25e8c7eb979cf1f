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


def top_k_desc(
    scores: np.ndarray, k: int, valid: np.ndarray | None = None, scratch: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` largest valid entries along the last axis, best first.

    ``scores`` ``[..., n]`` may be any view (a transposed one too); ``valid`` (default
    ``scores > -inf``) marks the candidates. Returns ``(index, found, value)`` of shape
    ``[..., min(k, n)]``: equal scores in index order; ``found`` is False past a row's
    last candidate (index 0, value -inf there). ``scratch`` (float32, ``[rows, n]``) holds
    the dense copy when most entries are candidates.

    >>> s = np.array([[0.1, 0.9, 0.5, 0.9]], np.float32)
    >>> top_k_desc(s, 3)[0].tolist()
    [[1, 3, 2]]
    """
    *lead, cols = scores.shape
    rows, k = int(np.prod(lead, dtype=np.int64)), min(int(k), cols)
    if valid is None:
        valid = scores > _NEG_INF
    if k <= 0 or rows == 0:
        empty = (*lead, max(k, 0))
        return np.zeros(empty, np.int64), np.zeros(empty, bool), np.full(empty, _NEG_INF, np.float32)
    counts = valid.sum(axis=-1).reshape(rows)
    width = int(counts.max())
    if 2 * width > cols:  # dense: rank whole rows
        dense = np.empty((rows, cols), np.float32) if scratch is None else scratch.reshape(rows, cols)
        np.copyto(dense.reshape(scores.shape), scores)
        dense[~valid.reshape(rows, cols)] = _NEG_INF
        index, found = _top_k_dense(dense, k)
        value = np.take_along_axis(dense, index, axis=1)
    else:  # sparse: pack each row's candidates to the left (index order kept), rank the packed rows
        where = np.nonzero(valid)
        row = np.ravel_multi_index(where[:-1], lead) if lead else np.zeros(where[0].size, np.int64)
        slot = np.arange(row.size) - np.repeat(np.cumsum(counts) - counts, counts)
        packed = np.full((rows, max(width, 1)), _NEG_INF, np.float32)
        packed_index = np.zeros((rows, max(width, 1)), np.int64)
        packed[row, slot] = scores[where]
        packed_index[row, slot] = where[-1]
        order, found = _top_k_dense(packed, k)
        index = np.where(found, np.take_along_axis(packed_index, order, axis=1), 0)
        value = np.take_along_axis(packed, order, axis=1)
        if index.shape[1] < k:
            pad = ((0, 0), (0, k - index.shape[1]))
            index, found = np.pad(index, pad), np.pad(found, pad)
            value = np.pad(value, pad, constant_values=_NEG_INF)
    shape = (*lead, k)
    return index.reshape(shape), found.reshape(shape), value.reshape(shape)


def _top_k_dense(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = scores.shape
    k = min(k, cols)
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
    found = np.take_along_axis(scores, index, axis=1) > _NEG_INF
    return index, found


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
        np.maximum(width, 0, out=width)  # no overlap: intersection 0, so IoU 0
        np.maximum(height, 0, out=height)
        inter = width
        inter *= height
        union = area_a + area_b
        union -= inter
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = np.divide(inter, union, out=union)
        return iou >= self.threshold if self.inclusive else iou > self.threshold


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
    ``[rows, K]`` with the invalid candidates last (never kept, suppress nothing). With
    ``labels``, only boxes of the same label suppress each other. With ``max_keep``, a
    row stops once it kept that many (later keeps would be dropped anyway).
    ``budget`` bounds the number of box pairs compared at once (memory).
    """
    rows, count = valid.shape
    keep = np.zeros((rows, count), bool)
    if rows == 0 or count == 0:
        return keep
    candidates = valid.sum(axis=1)
    by_size = np.argsort(-candidates, kind="stable")  # rows of similar size share chunks
    limit = count if max_keep is None else min(count, max_keep)
    lo = 0
    while lo < rows and candidates[by_size[lo]] > 0:
        widest = int(candidates[by_size[lo]])
        width = max(1, min(block, widest))
        chunk = by_size[lo : lo + max(1, budget // (width * (min(limit, widest) + width)))]
        lo += chunk.size
        state = _Rows(
            boxes[chunk, :widest],
            rule.areas(boxes[chunk, :widest]),
            None if labels is None else labels[chunk, :widest],
            limit + width,
        )
        for start in range(0, widest, width):
            live = np.flatnonzero((candidates[chunk] > start) & (state.kept < limit))
            if live.size == 0:
                break
            stop = start + min(width, int(candidates[chunk[live]].max()) - start)
            keep[chunk[live], start:stop] = state.step(live, start, stop, valid[chunk[live], start:stop], rule)
    return keep


class _Rows:
    """Per-row lists of the boxes kept so far, for a chunk of rows."""

    def __init__(self, boxes: np.ndarray, areas: np.ndarray, labels: np.ndarray | None, capacity: int) -> None:
        self.boxes, self.areas, self.labels = boxes, areas, labels
        rows = boxes.shape[0]
        self.kept = np.zeros(rows, np.int64)
        self.kept_boxes = np.zeros((rows, capacity, 4), np.float32)
        self.kept_areas = np.zeros((rows, capacity), np.float32)
        self.kept_labels = np.zeros((rows, capacity), np.int64)

    def step(self, live: np.ndarray, start: int, stop: int, alive: np.ndarray, rule: OverlapRule) -> np.ndarray:
        """Settle candidates ``start:stop`` of rows ``live``; returns their keep mask."""
        here = self.boxes[live, start:stop]
        here_area = self.areas[live, start:stop]
        here_label = None if self.labels is None else self.labels[live, start:stop]
        counts = self.kept[live]
        width = int(counts.max())
        if width:  # boxes kept in earlier blocks suppress
            hit = rule.suppresses(
                self.kept_boxes[live, :width, None],
                self.kept_areas[live, :width, None],
                here[:, None],
                here_area[:, None],
            )
            hit &= (np.arange(width)[None, :] < counts[:, None])[:, :, None]
            if here_label is not None:
                hit &= self.kept_labels[live, :width, None] == here_label[:, None]
            alive = alive & ~hit.any(axis=1)
        hit = rule.suppresses(here[:, :, None], here_area[:, :, None], here[:, None], here_area[:, None])
        hit &= np.triu(np.ones((stop - start, stop - start), bool), k=1)
        if here_label is not None:
            hit &= here_label[:, :, None] == here_label[:, None]
        kept = _settle(hit, alive)
        row, col = np.nonzero(kept)  # append the new keeps, in order, to each row's list
        slot = counts[row] + (np.cumsum(kept, axis=1) - 1)[row, col]
        self.kept_boxes[live[row], slot] = here[row, col]
        self.kept_areas[live[row], slot] = here_area[row, col]
        if here_label is not None:
            self.kept_labels[live[row], slot] = here_label[row, col]
        self.kept[live] += kept.sum(axis=1)
        return kept


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
