"""Helpers for the plugin-library tests: field collections, and one-plugin engines run end to end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import plugrt as trt
from plugrt.plugins import init_libnvinfer_plugins

from testing_plugins import build, run

LOGGER = trt.Logger(trt.Logger.ERROR)


def creator(name: str, version: str = "1", namespace: str = "") -> Any:
    """The registered library creator (registering the library once)."""
    init_libnvinfer_plugins(LOGGER, namespace)
    found = trt.get_plugin_registry().get_creator(name, version, namespace)
    assert found is not None, f"{name} v{version} not registered"
    return found


def fc(**values: Any) -> trt.PluginFieldCollection:
    """Fields with explicit types: bool/int -> INT32, float -> FLOAT32, arrays keep float32/int32."""
    collection = trt.PluginFieldCollection()
    for name, value in values.items():
        array = np.atleast_1d(np.asarray(value))
        if array.dtype.kind == "f":
            collection.append(trt.PluginField(name, array.astype(np.float32), trt.PluginFieldType.FLOAT32))
        else:
            collection.append(trt.PluginField(name, array.astype(np.int32), trt.PluginFieldType.INT32))
    return collection


class OnePluginEngine:
    """A network of one plugin layer, built, serialized, deserialized, with one context."""

    def __init__(
        self,
        plugin: Any,
        inputs: Sequence[tuple[str, trt.DataType, Sequence[int]]],
        outputs: Sequence[str],
        profile: dict[str, tuple[Sequence[int], Sequence[int], Sequence[int]]] | None = None,
        flags: Sequence[trt.BuilderFlag] = (),
    ) -> None:
        builder = trt.Builder(LOGGER)
        network = builder.create_network(0)
        tensors = [network.add_input(name, dtype, shape) for name, dtype, shape in inputs]
        layer = network.add_plugin_v2(tensors, plugin)
        for i, name in enumerate(outputs):
            layer.get_output(i).name = name
            network.mark_output(layer.get_output(i))
        self.plan = build(network, builder, [profile] if profile else [], flags)
        self.engine = trt.Runtime(LOGGER).deserialize_cuda_engine(self.plan)
        self.context = self.engine.create_execution_context()

    def __call__(self, **arrays: np.ndarray) -> dict[str, np.ndarray]:
        return run(self.context, {k: np.ascontiguousarray(v) for k, v in arrays.items()})


def clustered_boxes(rng: np.random.Generator, shape: tuple[int, ...], clusters: int = 6) -> np.ndarray:
    """Corner boxes in [0, 1] crowded around a few centres (so NMS has work), some corners swapped."""
    centres = rng.random((clusters, 2)) * 0.8 + 0.1
    pick = centres[rng.integers(0, clusters, size=shape[:-1])]
    half = rng.random((*shape[:-1], 2)) * 0.15 + 0.02
    jitter = rng.normal(0, 0.03, size=(*shape[:-1], 2))
    boxes = np.concatenate([pick + jitter - half, pick + jitter + half], axis=-1)
    swap = rng.random(shape[:-1]) < 0.2
    boxes[swap] = boxes[swap][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)
