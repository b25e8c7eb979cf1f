"""Mirrors TensorRT's ``samples/python/python_plugin/circ_pad_plugin_inetdef_cuda_python.py`` (+ ``plugin_utils.py``).

The V2 plugin is created through the registry's creator and added with ``add_plugin_v2`` to a
network from Polygraphy's ``create_network(strongly_typed=True)``; ``initialize`` acquires the
shared "cuda_ctx" resource (the samples' ``CudaCtxManager``, an ``IPluginResource`` whose
``clone`` creates the context) and device scratch, ``terminate`` frees both; the application
holds its own reference around everything. CUDA driver calls become ``plugrt.device_malloc``
and NumPy. The built engine also goes through Polygraphy's ``SaveEngine`` and ``EngineFromBytes``.
"""

from __future__ import annotations

import numpy as np
import pytest
from compat_helpers import infer

pytest.importorskip("polygraphy")

import plugrt.compat

plugrt.compat.install()

import tensorrt as trt  # noqa: E402
from polygraphy.backend.common import BytesFromPath  # noqa: E402
from polygraphy.backend.trt import CreateConfig, EngineFromBytes, SaveEngine, create_network, engine_from_network  # noqa: E402
from polygraphy.json import from_json, to_json  # noqa: E402

CONTEXTS: list[str] = []  # what the resource did, in order


class CudaCtxManager(trt.IPluginResource):
    def __init__(self, device=None):
        trt.IPluginResource.__init__(self)
        self.device = device
        self.cuda_ctx = None

    def clone(self):
        cloned = CudaCtxManager()
        cloned.__dict__.update(self.__dict__)
        # as in the samples, the context is created in clone(): only the clone is registered
        cloned.cuda_ctx = f"context on device {self.device}"
        CONTEXTS.append("create")
        return cloned

    def release(self):
        CONTEXTS.append("destroy")
        self.cuda_ctx = None


class CircPadPlugin(trt.IPluginV2DynamicExt):
    def __init__(self, fc=None):
        trt.IPluginV2DynamicExt.__init__(self)
        self.pads = []
        self.N = 0
        self.all_pads_d = None
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.plugin_type = "CompatCircPadInetdef"
        self.plugin_version = "1"
        self.cuDevice = None
        if fc is not None:
            assert {f.name for f in fc} == {"pads", "N"}, "Field collection invalid"
            for f in fc:
                if f.name == "pads":
                    self.pads = f.data
                elif f.name == "N":
                    self.N = int(f.data[0])

    def initialize(self):
        self.cuDevice = 0
        ctx = trt.get_plugin_registry().acquire_plugin_resource("cuda_ctx", CudaCtxManager(self.cuDevice))
        assert ctx.cuda_ctx == "context on device 0"
        self.all_pads_d = trt.device_malloc(np.int32().itemsize * self.N * 2)

    def get_output_datatype(self, index, input_types):
        return input_types[0]

    def get_output_dimensions(self, output_index, inputs, exprBuilder):
        output_dims = trt.DimsExprs(inputs[0])
        for i in range(np.size(self.pads) // 2):
            output_dims[len(output_dims) - i - 1] = exprBuilder.operation(
                trt.DimensionOperation.SUM,
                inputs[0][len(output_dims) - i - 1],
                exprBuilder.constant(self.pads[i * 2] + self.pads[i * 2 + 1]),
            )
        return output_dims

    def serialize(self):
        return to_json({"pads": self.pads, "N": self.N})

    def configure_plugin(self, inp, out):
        all_pads = np.zeros((self.N * 2,), dtype=np.int32)
        for i in range(np.size(self.pads) // 2):
            all_pads[self.N * 2 - 2 * i - 2] = self.pads[i * 2]
            all_pads[self.N * 2 - 2 * i - 1] = self.pads[i * 2 + 1]
        if self.all_pads_d:  # cuMemcpyHtoD in the sample
            self.all_pads_d.as_array((self.N * 2,), np.int32)[...] = all_pads

    def supports_format_combination(self, pos, in_out, num_inputs):
        desc = in_out[pos]
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 0:
            return desc.type == trt.DataType.FLOAT or desc.type == trt.DataType.HALF
        return in_out[0].type == desc.type

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        all_pads = self.all_pads_d.as_array((self.N * 2,), np.int32)  # read back from "device" memory
        x = trt.as_array(inputs[0], input_desc[0])
        widths = [(int(all_pads[2 * k]), int(all_pads[2 * k + 1])) for k in range(self.N)]
        trt.as_array(outputs[0], output_desc[0])[...] = np.pad(x, widths, mode="wrap")

    def clone(self):
        cloned_plugin = CircPadPlugin()
        cloned_plugin.__dict__.update(self.__dict__)
        return cloned_plugin

    def terminate(self):
        if self.all_pads_d:
            self.all_pads_d.free()
            self.all_pads_d = None
        trt.get_plugin_registry().release_plugin_resource("cuda_ctx")


class CircPadPluginCreator(trt.IPluginCreator):
    def __init__(self):
        trt.IPluginCreator.__init__(self)
        self.name = "CompatCircPadInetdef"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection([
            trt.PluginField("pads", np.array([]), trt.PluginFieldType.INT32),
            trt.PluginField("N", np.array([]), trt.PluginFieldType.INT32),
        ])

    def create_plugin(self, name, fc):
        return CircPadPlugin(fc)

    def deserialize_plugin(self, name, data):
        deserialized = CircPadPlugin()
        j = dict(from_json(data))
        deserialized.__dict__.update(j)
        return deserialized


def test_circ_pad_inetdef_sample_with_shared_context(tmp_path) -> None:  # type: ignore[no-untyped-def]
    CONTEXTS.clear()
    plg_registry = trt.get_plugin_registry()
    plg_registry.acquire_plugin_resource("cuda_ctx", CudaCtxManager(0))  # the application's own reference
    my_plugin_creator = CircPadPluginCreator()
    plg_registry.register_creator(my_plugin_creator, "")
    try:
        X = np.random.default_rng(2).normal(size=(100, 2, 32, 32)).astype(np.float32)
        pads = (1, 1, 1, 1)
        builder, network = create_network(strongly_typed=True)
        plg_creator = plg_registry.get_creator("CompatCircPadInetdef", "1", "")
        pfc = trt.PluginFieldCollection([
            trt.PluginField("pads", np.array(pads, dtype=np.int32), trt.PluginFieldType.INT32),
            trt.PluginField("N", np.array([4], dtype=np.int32), trt.PluginFieldType.INT32),
        ])
        plugin = plg_creator.create_plugin("CircPadPlugin", pfc)
        input_X = network.add_input(name="X", dtype=trt.float32, shape=X.shape)
        out = network.add_plugin_v2([input_X], plugin)
        out.get_output(0).name = "Y"
        network.mark_output(tensor=out.get_output(0))
        engine = engine_from_network((builder, network), CreateConfig())
        path = str(tmp_path / "circ_pad.plan")
        SaveEngine(engine, path)()
        reloaded = EngineFromBytes(BytesFromPath(path))()
        Y_ref = np.pad(X, [[0, 0], [0, 0], [pads[0], pads[1]], [pads[2], pads[3]]], "wrap")
        for candidate in (engine, reloaded):
            np.testing.assert_array_equal(infer(candidate.create_execution_context(), {"X": X})["Y"], Y_ref)
        del engine, reloaded, candidate
    finally:
        plg_registry.deregister_creator(my_plugin_creator)
    import gc

    gc.collect()  # engines release their plugins (terminate: one release each)
    assert CONTEXTS == ["create"]  # one shared context for the app, the build and both engines
    plg_registry.release_plugin_resource("cuda_ctx")
    assert CONTEXTS == ["create", "destroy"]
