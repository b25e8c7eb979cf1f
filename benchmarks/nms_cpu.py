"""The NMS plugins on the CPU at SSD size, against a straightforward NumPy NMS, in one run.

SSD300's 8732 prior boxes (feature maps 38, 19, 10, 5, 3, 1), 91 classes (0 is the
background), a batch of 8, ``topK`` 400 and ``keepTopK`` / ``max_output_boxes`` 200, IoU
0.45. Two score distributions: ``dense`` (threshold 0.01: thousands of candidates per
class, every class fills its topK) and ``sparse`` (threshold 0.3: a few objects).

The baseline is what one writes without a library: for each image and class, threshold,
sort, then greedy NMS (keep the best box, drop the rest that overlap it, repeat). It
implements the same semantics as the plugins; the script checks that both give the same
detections before timing. plugrt runs the plugins in engines (``execute_async_v3``).

Usage: python benchmarks/nms_cpu.py [--repeats 3] [--batch 8]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import plugrt as trt
from plugrt.plugins import init_libnvinfer_plugins

CLASSES, TOP_K, KEEP_TOP_K, IOU = 91, 400, 200, 0.45
LOGGER = trt.Logger(trt.Logger.ERROR)


def ssd_priors() -> np.ndarray:
    """SSD300's 8732 default boxes as corners in [0, 1]."""
    boxes = []
    for size, scale, next_scale, ratios in [
        (38, 0.1, 0.2, (2,)),
        (19, 0.2, 0.37, (2, 3)),
        (10, 0.37, 0.54, (2, 3)),
        (5, 0.54, 0.71, (2, 3)),
        (3, 0.71, 0.88, (2,)),
        (1, 0.88, 1.05, (2,)),
    ]:
        shapes = [(scale, scale), (np.sqrt(scale * next_scale),) * 2]
        shapes += [(scale * np.sqrt(r), scale / np.sqrt(r)) for r in ratios]
        shapes += [(scale / np.sqrt(r), scale * np.sqrt(r)) for r in ratios]
        centres = (np.arange(size) + 0.5) / size
        cy, cx = np.meshgrid(centres, centres, indexing="ij")
        for w, h in shapes:
            boxes.append(np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1).reshape(-1, 4))
    order = np.concatenate(boxes)
    return np.clip(order, 0, 1).astype(np.float32)


def make_inputs(rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Boxes ``[B, 8732, 1, 4]`` (priors plus per-image jitter) and softmax scores ``[B, 8732, 91]``."""
    priors = ssd_priors()
    boxes = priors[None] + rng.normal(0, 0.01, (batch, *priors.shape)).astype(np.float32)
    logits = rng.normal(0, 1, (batch, priors.shape[0], CLASSES))
    logits[..., 0] += 4  # mostly background
    objects = rng.random((batch, priors.shape[0])) < 0.01
    logits[objects, rng.integers(1, CLASSES, int(objects.sum()))] += 8
    scores = np.exp(logits - logits.max(-1, keepdims=True))
    return boxes[:, :, None].astype(np.float32), (scores / scores.sum(-1, keepdims=True)).astype(np.float32)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    width = np.maximum(0, np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]))
    height = np.maximum(0, np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]))
    inter = width * height
    area = (box[2] - box[0]) * (box[3] - box[1])
    return inter / (area + (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1]) - inter)


def baseline_batched_nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, np.ndarray]:
    """Per image, per class: threshold, sort, topK, greedy NMS; merge classes; keepTopK."""
    batch = scores.shape[0]
    out = _empty(batch, classes_fill=-1.0, class_type=np.float32)
    for b in range(batch):
        corners = np.concatenate(
            [np.minimum(boxes[b, :, 0, :2], boxes[b, :, 0, 2:]), np.maximum(boxes[b, :, 0, :2], boxes[b, :, 0, 2:])], -1
        )
        found = []
        for c in range(1, CLASSES):
            column = scores[b, :, c]
            index = np.flatnonzero(column > threshold)
            order = index[np.argsort(-column[index], kind="stable")][:TOP_K]
            rank = 0
            while order.size:
                best, rest = order[0], order[1:]
                found.append((-column[best], c, rank, best))
                rank += 1
                order = rest[_iou(corners[best], corners[rest]) <= IOU]
        found.sort()
        for i, (neg_score, c, _, n) in enumerate(found[:KEEP_TOP_K]):
            out["boxes"][b, i], out["scores"][b, i], out["classes"][b, i] = np.clip(boxes[b, n, 0], 0, 1), -neg_score, c
        out["num"][b] = min(len(found), KEEP_TOP_K)
    return out


def baseline_efficient_nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, np.ndarray]:
    """Per image: all (box, class) pairs above the threshold, sorted, best 4096, class-wise greedy NMS."""
    batch = scores.shape[0]
    out = _empty(batch, classes_fill=0, class_type=np.int32)
    for b in range(batch):
        flat = scores[b].reshape(-1)
        pairs = np.flatnonzero((flat >= threshold) & (np.arange(flat.size) % CLASSES != 0))
        order = pairs[np.argsort(-flat[pairs], kind="stable")][:4096]
        box_of, class_of = order // CLASSES, order % CLASSES
        kept = 0
        alive = np.ones(order.size, bool)
        for i in range(order.size):
            if not alive[i]:
                continue
            box = boxes[b, box_of[i], 0]
            out["boxes"][b, kept], out["scores"][b, kept], out["classes"][b, kept] = box, flat[order[i]], class_of[i]
            kept += 1
            if kept == KEEP_TOP_K:
                break
            rest = np.flatnonzero(alive[i + 1 :] & (class_of[i + 1 :] == class_of[i])) + i + 1
            lo, hi = np.minimum(box[:2], box[2:]), np.maximum(box[:2], box[2:])
            others = boxes[b, box_of[rest], 0]
            alive[
                rest[
                    _iou(
                        np.concatenate([lo, hi]),
                        np.concatenate(
                            [np.minimum(others[:, :2], others[:, 2:]), np.maximum(others[:, :2], others[:, 2:])], -1
                        ),
                    )
                    >= IOU
                ]
            ] = False
        out["num"][b] = kept
    return out


def _empty(batch: int, classes_fill: float, class_type: type) -> dict[str, np.ndarray]:
    return {
        "num": np.zeros((batch, 1), np.int32),
        "boxes": np.zeros((batch, KEEP_TOP_K, 4), np.float32),
        "scores": np.zeros((batch, KEEP_TOP_K), np.float32),
        "classes": np.full((batch, KEEP_TOP_K), classes_fill, class_type),
    }


class PluginEngine:
    """One plugin layer built, serialized, deserialized; call with arrays, get the four outputs."""

    def __init__(self, name: str, fields: dict[str, Any], boxes_shape: tuple[int, ...], scores_shape: tuple[int, ...]):
        creator = trt.get_plugin_registry().get_creator(name, "1", "")
        collection = trt.PluginFieldCollection()
        for key, value in fields.items():
            if isinstance(value, float):
                collection.append(trt.PluginField(key, np.float32(value), trt.PluginFieldType.FLOAT32))
            else:
                collection.append(trt.PluginField(key, np.int32(value), trt.PluginFieldType.INT32))
        builder = trt.Builder(LOGGER)
        network = builder.create_network(0)
        inputs = [
            network.add_input("boxes", trt.float32, boxes_shape),
            network.add_input("scores", trt.float32, scores_shape),
        ]
        layer = network.add_plugin_v2(inputs, creator.create_plugin(name, collection))
        for i, output in enumerate(["num", "boxes_out", "scores_out", "classes"]):
            layer.get_output(i).name = output
            network.mark_output(layer.get_output(i))
        plan = builder.build_serialized_network(network, builder.create_builder_config())
        self.context = trt.Runtime(LOGGER).deserialize_cuda_engine(plan).create_execution_context()
        engine = self.context.engine
        self.outputs = {
            name: np.zeros(tuple(engine.get_tensor_shape(name)), trt.nptype(engine.get_tensor_dtype(name)))
            for name in ["num", "boxes_out", "scores_out", "classes"]
        }
        for name, array in self.outputs.items():
            self.context.set_tensor_address(name, array.ctypes.data)

    def __call__(self, boxes: np.ndarray, scores: np.ndarray) -> dict[str, np.ndarray]:
        self.context.set_tensor_address("boxes", boxes.ctypes.data)
        self.context.set_tensor_address("scores", scores.ctypes.data)
        self.context.execute_async_v3(0)
        o = self.outputs
        return {"num": o["num"], "boxes": o["boxes_out"], "scores": o["scores_out"], "classes": o["classes"]}


def _best(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _same(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    np.testing.assert_array_equal(got["num"], want["num"], err_msg=what)
    np.testing.assert_array_equal(got["classes"], want["classes"], err_msg=what)
    np.testing.assert_allclose(got["scores"], want["scores"], atol=1e-6, err_msg=what)
    np.testing.assert_allclose(got["boxes"], want["boxes"], atol=1e-6, err_msg=what)


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    init_libnvinfer_plugins(LOGGER, "")
    print(f"date: {time.strftime('%Y-%m-%d')}  machine: {_machine()}")
    print(f"command: python benchmarks/nms_cpu.py {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    print(f"{'plugin':<24}{'scores':<8}{'baseline ms':>13}{'plugrt ms':>11}{'speed-up':>10}{'detections':>12}")
    boxes, scores = make_inputs(np.random.default_rng(0), args.batch)
    for label, threshold in (("dense", 0.01), ("sparse", 0.3)):
        batched = PluginEngine(
            "BatchedNMSDynamic_TRT",
            dict(
                shareLocation=1,
                backgroundLabelId=0,
                numClasses=CLASSES,
                topK=TOP_K,
                keepTopK=KEEP_TOP_K,
                scoreThreshold=threshold,
                iouThreshold=IOU,
                isNormalized=1,
                clipBoxes=1,
            ),
            boxes.shape,
            scores.shape,
        )
        efficient = PluginEngine(
            "EfficientNMS_TRT",
            dict(score_threshold=threshold, iou_threshold=IOU, max_output_boxes=KEEP_TOP_K, background_class=0),
            boxes.shape,
            scores.shape,
        )
        for name, plugin, baseline in (
            ("BatchedNMSDynamic_TRT", batched, baseline_batched_nms),
            ("EfficientNMS_TRT", efficient, baseline_efficient_nms),
        ):
            want = baseline(boxes, scores, threshold)
            _same(plugin(boxes, scores), want, f"{name} {label}")
            slow = _best(lambda b=baseline, t=threshold: b(boxes, scores, t), args.repeats)
            fast = _best(lambda p=plugin: p(boxes, scores), args.repeats)
            count = int(want["num"].sum())
            print(f"{name:<24}{label:<8}{slow * 1e3:>13.1f}{fast * 1e3:>11.1f}{slow / fast:>9.1f}x{count:>12}")


if __name__ == "__main__":
    main()
