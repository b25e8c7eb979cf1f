"""The NMS plugins on the GPU at SSD size: CUDA engine (eager and CUDA graph) vs the CPU engine.

SSD300's 8732 priors, 91 classes (0 is background), ``topK`` 400, ``keepTopK`` /
``max_output_boxes`` 200, IoU 0.45, batch 8, with the ``dense`` (threshold 0.01) and
``sparse`` (threshold 0.3) score distributions of ``benchmarks/nms_cpu.py``. Every GPU
result is checked equal to the CPU engine's before timing. When torchvision is installed,
a per-image ``torchvision.ops.batched_nms`` loop with the same semantics is timed too.

Times are medians of CUDA-event-timed runs on one stream (inputs already on the device).

Usage: python benchmarks/nms_gpu.py [--repeats 50] [--batch 8]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from nms_cpu import CLASSES, IOU, KEEP_TOP_K, LOGGER, TOP_K, make_inputs

import plugrt as trt
from plugrt.plugins import init_libnvinfer_plugins

OUTPUTS = ["num", "boxes_out", "scores_out", "classes"]


def plan_of(name: str, fields: dict[str, Any], boxes_shape: tuple[int, ...], scores_shape: tuple[int, ...]) -> bytes:
    """A one-plugin engine plan."""
    creator = trt.get_plugin_registry().get_creator(name, "1", "")
    collection = trt.PluginFieldCollection()
    for key, value in fields.items():
        kind = trt.PluginFieldType.FLOAT32 if isinstance(value, float) else trt.PluginFieldType.INT32
        collection.append(
            trt.PluginField(key, np.array([value], np.float32 if isinstance(value, float) else np.int32), kind)
        )
    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    inputs = [
        network.add_input("boxes", trt.float32, boxes_shape),
        network.add_input("scores", trt.float32, scores_shape),
    ]
    layer = network.add_plugin_v2(inputs, creator.create_plugin(name, collection))
    for i, output in enumerate(OUTPUTS):
        layer.get_output(i).name = output
        network.mark_output(layer.get_output(i))
    return bytes(builder.build_serialized_network(network, builder.create_builder_config()))


class Bound:
    """A context with device (or host) buffers bound; ``run()`` enqueues one inference."""

    def __init__(self, plan: bytes, device: str, inputs: dict[str, np.ndarray], stream: int, graph: bool = False):
        import cupy as cp

        xp = cp if device == "cuda" else np
        self.engine = trt.Runtime(LOGGER, device=device).deserialize_cuda_engine(plan)
        self.context = self.engine.create_execution_context()
        self.context.use_cuda_graph = graph
        self.stream = stream
        self.arrays = {k: xp.asarray(v) for k, v in inputs.items()}
        for name in OUTPUTS:
            shape = tuple(self.context.get_tensor_shape(name))
            self.arrays[name] = xp.zeros(shape, trt.nptype(self.engine.get_tensor_dtype(name)))
        for name, array in self.arrays.items():
            self.context.set_tensor_address(name, int(array.data.ptr) if xp is cp else array.ctypes.data)

    def run(self) -> None:
        self.context.execute_async_v3(self.stream)

    def results(self) -> dict[str, np.ndarray]:
        import cupy as cp

        return {
            k: cp.asnumpy(self.arrays[k]) if not isinstance(self.arrays[k], np.ndarray) else self.arrays[k]
            for k in OUTPUTS
        }


def gpu_median_ms(fn: Any, stream: Any, repeats: int) -> float:
    """Median time of ``fn`` between CUDA events on ``stream``, after warm-up."""
    import cupy as cp

    for _ in range(3):
        fn()
    stream.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def torchvision_loop(boxes: Any, scores: Any, threshold: float) -> Any:
    """Per image: threshold, per-class top-K, ``batched_nms``, keep the best keepTopK (torchvision)."""
    import torch
    import torchvision

    results = []
    for b in range(scores.shape[0]):
        s = scores[b, :, 1:]
        box_index, cls = torch.nonzero(s > threshold, as_tuple=True)
        values = s[box_index, cls]
        keep = torchvision.ops.batched_nms(boxes[b, box_index, 0], values, cls, IOU)[:KEEP_TOP_K]
        results.append((box_index[keep], cls[keep] + 1, values[keep]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    import cupy as cp

    init_libnvinfer_plugins(LOGGER, "")
    rng = np.random.default_rng(0)
    boxes, scores = make_inputs(rng, args.batch)
    stream = cp.cuda.Stream(non_blocking=True)
    print(f"# NMS plugins at SSD size: batch {args.batch}, {boxes.shape[1]} boxes, {CLASSES} classes, topK {TOP_K}")
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, median of {args.repeats} runs")
    for distribution, threshold in (("dense", 0.01), ("sparse", 0.3)):
        cases = {
            "BatchedNMS_TRT (BatchedNMSDynamic_TRT)": plan_of(
                "BatchedNMSDynamic_TRT",
                dict(
                    shareLocation=1,
                    backgroundLabelId=0,
                    numClasses=CLASSES,
                    topK=TOP_K,
                    keepTopK=KEEP_TOP_K,
                    scoreThreshold=threshold,
                    iouThreshold=IOU,
                ),
                boxes.shape,
                scores.shape,
            ),
            "EfficientNMS_TRT": plan_of(
                "EfficientNMS_TRT",
                dict(score_threshold=threshold, iou_threshold=IOU, max_output_boxes=KEEP_TOP_K, background_class=0),
                boxes.shape,
                scores.shape,
            ),
        }
        inputs = {"boxes": boxes, "scores": scores}
        for name, plan in cases.items():
            cpu = Bound(plan, "cpu", inputs, 0)
            start = time.perf_counter()
            cpu.run()
            cpu_ms = (time.perf_counter() - start) * 1e3
            eager = Bound(plan, "cuda", inputs, stream.ptr)
            graph = Bound(plan, "cuda", inputs, stream.ptr, graph=True)
            eager_ms = gpu_median_ms(eager.run, stream, args.repeats)
            graph_ms = gpu_median_ms(graph.run, stream, args.repeats)
            want = cpu.results()
            for bound in (eager, graph):
                got = bound.results()
                for key in OUTPUTS:
                    np.testing.assert_allclose(got[key], want[key], atol=1e-6, err_msg=f"{name} {key}")
            detections = int(want["num"].sum())
            print(
                f"{distribution:6s} {name:40s} gpu eager {eager_ms:7.3f} ms  graph {graph_ms:7.3f} ms  "
                f"cpu engine {cpu_ms:8.1f} ms  ({detections} detections, equal to the CPU engine)"
            )
        try:
            import torch

            tb, ts = torch.as_tensor(boxes, device="cuda"), torch.as_tensor(scores, device="cuda")
            torch_stream = torch.cuda.ExternalStream(stream.ptr)
            with torch.cuda.stream(torch_stream):
                tv_ms = gpu_median_ms(
                    lambda tb=tb, ts=ts, t=threshold: torchvision_loop(tb, ts, t), stream, max(3, args.repeats // 10)
                )
            print(f"{distribution:6s} {'torchvision batched_nms loop':40s} {tv_ms:7.3f} ms")
        except ImportError as exc:
            print(f"{distribution:6s} torchvision baseline skipped: {exc}")


if __name__ == "__main__":
    main()
