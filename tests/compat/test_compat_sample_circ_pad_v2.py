"""Mirrors TensorRT's ``samples/python/python_plugin/circ_pad_plugin_{cupy,torch,triton,numba,cuda_python}.py``.

An IPluginV2DynamicExt whose ``serialize()`` returns Polygraphy's ``to_json`` (a str), whose
``clone`` and ``deserialize_plugin`` go through ``__dict__.update``, in an ONNX model built and
loaded through Polygraphy's ``NetworkFromOnnxPath(strongly_typed=True)``, ``CreateConfig`` and
``EngineFromNetwork`` with ``import tensorrt`` giving plugrt (:mod:`plugrt.compat`). The CuPy
kernel becomes NumPy on the same pointers; Polygraphy's ``TrtRunner`` (CUDA only) becomes a
plain plugrt context. The ONNX model is built with ``onnx.helper`` instead of onnx-graphsurgeon.
"""

from __future__ import annotations

import numpy as np
import pytest
from compat_helpers import infer
from onnx import TensorProto, helper, save

pytest.importorskip("polygraphy")

import plugrt.compat

plugrt.compat.install()

import tensorrt as trt  # noqa: E402
from polygraphy.backend.trt import CreateConfig, EngineFromNetwork, NetworkFromOnnxPath  # noqa: E402
from polygraphy.json import from_json, to_json  # noqa: E402


def volume(d):  # the samples' plugin_utils.volume
    return np.prod(d)


class CircPadPlugin(trt.IPluginV2DynamicExt):
    def __init__(self, fc=None):
        trt.IPluginV2DynamicExt.__init__(self)
        self.pads = []
        self.X_shape = []
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.plugin_type = "CompatCircPadPluginV2"
        self.plugin_version = "1"
        if fc is not None:
            assert fc[0].name == "pads"
            self.pads = fc[0].data

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
        return to_json({"pads": self.pads})

    def configure_plugin(self, inp, out):
        X_dims = inp[0].desc.dims
        self.X_shape = np.zeros((len(X_dims),))
        for i in range(len(X_dims)):
            self.X_shape[i] = X_dims[i]
        N = len(self.X_shape)
        all_pads = np.zeros((N * 2,))
        out_dims = np.array(self.X_shape)
        for i in range(np.size(self.pads) // 2):
            out_dims[N - i - 1] += self.pads[i * 2] + self.pads[i * 2 + 1]
            all_pads[N * 2 - 2 * i - 2] = self.pads[i * 2]
            all_pads[N * 2 - 2 * i - 1] = self.pads[i * 2 + 1]
        self.all_pads = all_pads.astype(np.int32)
        self.Y_shape = out_dims.astype(np.int32)

    def supports_format_combination(self, pos, in_out, num_inputs):
        assert num_inputs == 1
        assert pos < len(in_out)
        desc = in_out[pos]
        if desc.format != trt.TensorFormat.LINEAR:
            return False
        if pos == 0:
            return desc.type == trt.DataType.FLOAT or desc.type == trt.DataType.HALF
        if pos == 1:
            return in_out[0].type == desc.type
        raise AssertionError(pos)

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        inp_dtype = trt.nptype(input_desc[0].type)
        # the sample wraps both pointers as flat CuPy arrays of volume(dims) elements; NumPy here
        a = trt.as_array(inputs[0], trt.PluginTensorDesc(trt.Dims((int(volume(input_desc[0].dims)),)), input_desc[0].type))
        c = trt.as_array(outputs[0], trt.PluginTensorDesc(trt.Dims((int(volume(output_desc[0].dims)),)), output_desc[0].type))
        assert a.dtype == inp_dtype
        orig = self.X_shape.astype(np.int64)
        i = np.arange(int(np.prod(self.Y_shape)))
        i3 = i % self.Y_shape[3]
        i2 = (i // self.Y_shape[3]) % self.Y_shape[2]
        i1 = (i // self.Y_shape[3] // self.Y_shape[2]) % self.Y_shape[1]
        i0 = i // self.Y_shape[3] // self.Y_shape[2] // self.Y_shape[1]
        j0 = (i0 - self.all_pads[0] + orig[0]) % orig[0]
        j1 = (i1 - self.all_pads[2] + orig[1]) % orig[1]
        j2 = (i2 - self.all_pads[4] + orig[2]) % orig[2]
        j3 = (i3 - self.all_pads[6] + orig[3]) % orig[3]
        c[:] = a[orig[3] * orig[2] * orig[1] * j0 + orig[3] * orig[2] * j1 + orig[3] * j2 + j3]

    def clone(self):
        cloned_plugin = CircPadPlugin()
        cloned_plugin.__dict__.update(self.__dict__)
        return cloned_plugin


class CircPadPluginCreator(trt.IPluginCreator):
    def __init__(self):
        trt.IPluginCreator.__init__(self)
        self.name = "CompatCircPadPluginV2"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection([trt.PluginField("pads", np.array([]), trt.PluginFieldType.INT32)])

    def create_plugin(self, name, fc):
        return CircPadPlugin(fc)

    def deserialize_plugin(self, name, data):
        j = dict(from_json(data.decode("utf-8")))
        deserialized = CircPadPlugin()
        deserialized.__dict__.update(j)
        return deserialized


@pytest.fixture(scope="module", autouse=True)
def creator():  # type: ignore[no-untyped-def]
    TRT_LOGGER = trt.Logger(trt.Logger.WARNING)
    trt.init_libnvinfer_plugins(TRT_LOGGER, namespace="")
    plg_registry = trt.get_plugin_registry()
    my_plugin_creator = CircPadPluginCreator()
    plg_registry.register_creator(my_plugin_creator, "")
    yield my_plugin_creator
    plg_registry.deregister_creator(my_plugin_creator)


@pytest.mark.parametrize(("precision", "elem"), [(np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16)])
def test_circ_pad_v2_sample(tmp_path, precision: type, elem: int) -> None:  # type: ignore[no-untyped-def]
    inp_shape = (100, 2, 32, 32)
    X = np.random.default_rng(0).normal(size=inp_shape).astype(precision)
    pads = (1, 1, 1, 1)
    onnx_path = str(tmp_path / "circ_pad.onnx")
    node = helper.make_node("CompatCircPadPluginV2", ["X"], ["Y"], name="CircPadPlugin", pads=list(pads))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", elem, inp_shape)], [helper.make_tensor_value_info("Y", elem, None)]
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), onnx_path)
    build_engine = EngineFromNetwork(NetworkFromOnnxPath(onnx_path, strongly_typed=True), CreateConfig())
    engine = build_engine()
    Y_ref = np.pad(X, [[0, 0], [0, 0], [pads[0], pads[1]], [pads[2], pads[3]]], "wrap")
    Y = infer(engine.create_execution_context(), {"X": X})["Y"]
    assert Y.dtype == precision
    np.testing.assert_array_equal(Y, Y_ref)
