"""An independent NumPy reference of TensorRT's BatchedNMS semantics, for the demo's check."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["batched_nms_reference"]


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    lo = np.maximum(box[:2], others[:, :2])
    hi = np.minimum(box[2:], others[:, 2:])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=1)
    area = np.prod(box[2:] - box[:2])
    areas = np.prod(others[:, 2:] - others[:, :2], axis=1)
    return inter / np.maximum(area + areas - inter, 1e-12)


def batched_nms_reference(
    boxes: np.ndarray, scores: np.ndarray, f: dict[str, Any]
) -> list[list[tuple[float, int, np.ndarray]]]:
    """Per image: (score, class, box) detections, best first — shared boxes, normalized coordinates."""
    results = []
    for b in range(boxes.shape[0]):
        kept: list[tuple[float, int, np.ndarray]] = []
        for c in range(f["numClasses"]):
            if c == f["backgroundLabelId"]:
                continue
            candidates = np.nonzero(scores[b, :, c] > f["scoreThreshold"])[0]
            order = candidates[np.argsort(-scores[b, candidates, c], kind="stable")][: f["topK"]]
            survivors: list[int] = []
            for i in order:
                box = boxes[b, i, 0]
                if not survivors or np.all(_iou(box, boxes[b, survivors, 0]) <= f["iouThreshold"]):
                    survivors.append(int(i))
            kept += [(float(scores[b, i, c]), c, np.clip(boxes[b, i, 0], 0, 1)) for i in survivors]
        kept.sort(key=lambda item: -item[0])
        results.append(kept[: f["keepTopK"]])
    return results
