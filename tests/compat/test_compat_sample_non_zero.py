"""Mirrors TensorRT's ``samples/python/non_zero_plugin/non_zero_plugin.py`` (a data-dependent V3 plugin).

Output 0 holds the ``[count, 2]`` indices, output 1 is the INT64 size tensor declared with
``declare_size_tensor``; the ``backend`` CHAR field is read back as the sample does. Both of
its network paths run: ONNX through Polygraphy's ``NetworkFromOnnxPath`` and INetworkDefinition
through Polygraphy's ``create_network`` / ``engine_from_network``, with ``import tensorrt``
giving plugrt. The torch backend's ``torch.nonzero`` becomes ``np.argwhere`` on the same
pointers; the output is read through an ``IOutputAllocator`` as ``TrtRunner`` does.
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
from polygraphy.backend.trt import (  # noqa: E402
    CreateConfig,
    EngineFromNetwork,
    NetworkFromOnnxPath,
    create_network,
    engine_from_network,
)


def volume(d):
    return np.prod(d)


class NonZeroPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    def __init__(self, backend=None):
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.num_outputs = 2
        self.plugin_namespace = ""
        self.plugin_name = "CompatNonZeroPlugin"
        self.plugin_version = "1"
        if backend is not None:
            self.backend = backend.tobytes().decode("utf-8")
        else:
            self.backend = "cuda_python"

    def get_capability_interface(self, type):
        return self

    def get_output_data_types(self, input_types):
        return [trt.DataType.INT32, trt.DataType.INT64]

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
        output_dims = [trt.DimsExprs(2), trt.DimsExprs(0)]
        upper_bound = exprBuilder.operation(trt.DimensionOperation.PROD, inputs[0][0], inputs[0][1])
        opt_value = exprBuilder.operation(trt.DimensionOperation.FLOOR_DIV, upper_bound, exprBuilder.constant(2))
        num_non_zero_size_tensor = exprBuilder.declare_size_tensor(1, opt_value, upper_bound)
        output_dims[0][0] = num_non_zero_size_tensor
        output_dims[0][1] = exprBuilder.constant(2)
        return output_dims

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([trt.PluginField("backend", self.backend.encode(), trt.PluginFieldType.CHAR)])

    def configure_plugin(self, inp, out):
        pass

    def on_shape_change(self, inp, out):
        pass

    def supports_format_combination(self, pos, in_out, num_inputs):
        assert num_inputs == 1
        assert pos < len(in_out)
        type_ok = False
        if pos == 0:
            type_ok = in_out[0].desc.type == trt.DataType.FLOAT or in_out[0].desc.type == trt.DataType.HALF
        elif pos == 1:
            type_ok = in_out[1].desc.type == trt.DataType.INT32
        else:
            type_ok = in_out[2].desc.type == trt.DataType.INT64
        return in_out[pos].desc.format == trt.TensorFormat.LINEAR and type_ok

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        inp_dtype = trt.nptype(input_desc[0].type)
        if self.backend != "torch":
            raise ValueError(f"backend not valid here: {self.backend}")
        a = trt.as_array(inputs[0], trt.PluginTensorDesc(input_desc[0].dims, input_desc[0].type))
        assert a.dtype == inp_dtype
        out = np.argwhere(a)  # torch.nonzero
        out_mem = trt.as_array(outputs[0], trt.PluginTensorDesc(trt.Dims((int(2 * volume(input_desc[0].dims)),)), trt.int32))
        out_1_mem = trt.as_array(outputs[1], trt.PluginTensorDesc(trt.Dims((1,)), trt.int64))
        out_mem[: volume(out.shape)] = np.reshape(out, (-1,))
        out_1_mem[...] = np.reshape(np.asarray([out.shape[0]]), (-1,))

    def attach_to_context(self, context):
        return self.clone()

    def set_tactic(self, tactic):
        pass

    def clone(self):
        cloned_plugin = NonZeroPlugin()
        cloned_plugin.__dict__.update(self.__dict__)
        return cloned_plugin


class NonZeroPluginCreator(trt.IPluginCreatorV3One):
    def __init__(self):
        trt.IPluginCreatorV3One.__init__(self)
        self.name = "CompatNonZeroPlugin"
        self.plugin_namespace = ""
        self.plugin_version = "1"
        self.field_names = trt.PluginFieldCollection([trt.PluginField("backend", np.array([]), trt.PluginFieldType.CHAR)])

    def create_plugin(self, name, fc, phase):
        backend = None
        for f in fc:
            if f.name == "backend":
                backend = f.data[:-1] if f.data[-1] == 0 else f.data
        return NonZeroPlugin(backend)


@pytest.fixture(scope="module", autouse=True)
def registered():  # type: ignore[no-untyped-def]
    plg_registry = trt.get_plugin_registry()
    my_plugin_creator = NonZeroPluginCreator()
    plg_registry.register_creator(my_plugin_creator, "")
    yield plg_registry
    plg_registry.deregister_creator(my_plugin_creator)


def _input(precision: type) -> np.ndarray:
    rng = np.random.default_rng(1)
    inp_shape = (128, 128)
    X = rng.normal(size=inp_shape).astype(precision)
    indices = rng.choice(np.prod(inp_shape), replace=False, size=rng.integers(0, np.prod(inp_shape) + 1))
    X[np.unravel_index(indices, inp_shape)] = 0
    return X


def _check(engine, X: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    Y_ref = np.transpose(np.nonzero(X))
    Y = infer(engine.create_execution_context(), {"X": X})["Y"]
    Y = Y[np.lexsort(np.fliplr(Y).T)]
    np.testing.assert_array_equal(Y, Y_ref)


@pytest.mark.parametrize(("precision", "elem"), [(np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16)])
def test_non_zero_sample_onnx(tmp_path, precision: type, elem: int) -> None:  # type: ignore[no-untyped-def]
    X = _input(precision)
    onnx_path = str(tmp_path / "non_zero.onnx")
    node = helper.make_node("CompatNonZeroPlugin", ["X"], ["Y", "Y_num"], name="NonZeroPlugin", backend=b"torch")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", elem, X.shape)], [helper.make_tensor_value_info("Y", TensorProto.INT32, None)]
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), onnx_path)
    build_engine = EngineFromNetwork(NetworkFromOnnxPath(onnx_path, strongly_typed=True), CreateConfig())
    _check(build_engine(), X)


def test_non_zero_sample_inetdef(registered) -> None:  # type: ignore[no-untyped-def]
    X = _input(np.float32)
    builder, network = create_network(strongly_typed=True)
    plg_creator = registered.get_creator("CompatNonZeroPlugin", "1", "")
    pfc = trt.PluginFieldCollection([trt.PluginField("backend", b"torch", trt.PluginFieldType.CHAR)])
    plugin = plg_creator.create_plugin("NonZeroPlugin", pfc, trt.TensorRTPhase.BUILD)
    inputX = network.add_input(name="X", dtype=trt.float32, shape=X.shape)
    out = network.add_plugin_v3([inputX], [], plugin)
    out.get_output(0).name = "Y"
    network.mark_output(tensor=out.get_output(0))
    build_engine = engine_from_network((builder, network), CreateConfig())
    _check(build_engine, X)
