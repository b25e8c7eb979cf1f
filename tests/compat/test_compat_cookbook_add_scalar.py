"""Mirrors trt-samples-for-hackathon-cn's ``cookbook/05-Plugin/PythonPlugin/add_scalar_*.py``.

The cookbook's AddScalar plugin in both forms: IPluginV3 (``add_scalar_{cupy,torch,triton,
numba,cuda_python}.py``, annotated with ``-> trt.IPluginCapability``, one tactic) and the
deprecated IPluginV2DynamicExt (``add_scalar_cuda_python-V2-deprecated.py``: ``json.dumps``
serialization with its own ``get_serialization_size``). Driven as the cookbook's
``TRTWrapperV1`` does: a dynamic ``[-1, -1, -1]`` input with a profile, ``layer.precision`` and
``tensor.dtype`` set, FP16 flag for the half case, build, save, load the plan again, and
``set_input_shape`` / ``infer_shapes`` / ``set_tensor_address`` / ``execute_async_v3``. The
kernels become NumPy on the same pointers.
"""

from __future__ import annotations

import json
from typing import List  # noqa: UP035 - the cookbook's annotations, as written there

import numpy as np
import pytest

import plugrt as trt

scalar = 1.0
shape = [3, 4, 5]


class AddScalarPlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    def __init__(self, scalar: float):
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.plugin_name = "CompatAddScalar"
        self.plugin_version = "1"
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.scalar = scalar
        self.device = 0

    def get_capability_interface(self, plugin_capability_type: trt.PluginCapabilityType) -> trt.IPluginCapability:
        return self

    def clone(self) -> trt.IPluginV3:
        cloned_plugin = AddScalarPlugin(0.0)
        cloned_plugin.__dict__.update(self.__dict__)
        return cloned_plugin

    def configure_plugin(self, dptd_in: List[trt.DynamicPluginTensorDesc], dptd_out: List[trt.DynamicPluginTensorDesc]) -> None:  # noqa: UP006
        return

    def get_output_data_types(self, input_types: List[trt.DataType]) -> List[trt.DataType]:  # noqa: UP006
        return [input_types[0]]

    def get_output_shapes(self, inputs: List[trt.DimsExprs], shape_inputs: List[trt.DimsExprs], expr_builder: trt.IExprBuilder) -> List[trt.DimsExprs]:  # noqa: UP006
        output_dims = trt.DimsExprs(inputs[0])
        return [output_dims]

    def supports_format_combination(self, pos: int, in_out: List[trt.DynamicPluginTensorDesc], num_inputs: int) -> bool:  # noqa: UP006
        res = False
        desc = in_out[pos].desc
        if pos == 0:
            res = (desc.type == trt.float32 or desc.type == trt.float16) and desc.format == trt.TensorFormat.LINEAR
        elif pos == 1:
            res = desc.type == in_out[0].desc.type and desc.format == trt.TensorFormat.LINEAR
        return res

    def get_workspace_size(self, dptd_in: List[trt.DynamicPluginTensorDesc], dptd_out: List[trt.DynamicPluginTensorDesc]) -> int:  # noqa: UP006
        return 0

    def get_valid_tactics(self) -> List[int]:  # noqa: UP006
        return [1]

    def set_tactic(self: trt.IPluginV3, tactic: int) -> None:
        return None

    def on_shape_change(self, ptd_in: List[trt.PluginTensorDesc], ptd_out: List[trt.PluginTensorDesc]) -> None:  # noqa: UP006
        return None

    def enqueue(self, input_desc: List[trt.PluginTensorDesc], output_desc: List[trt.PluginTensorDesc], inputs: List[int], outputs: List[int], workspace: int, stream: int) -> None:  # noqa: UP006
        data_type = trt.nptype(input_desc[0].type)
        n_element = int(np.prod(np.array(input_desc[0].dims)))
        flat = trt.PluginTensorDesc(trt.Dims((n_element,)), input_desc[0].type)
        p_input = trt.as_array(inputs[0], flat)
        p_output = trt.as_array(outputs[0], flat)
        assert p_input.dtype == data_type
        p_output[...] = (p_input.astype(np.float32) + np.float32(self.scalar)).astype(data_type)

    def attach_to_context(self, resource_context: trt.IPluginResourceContext) -> trt.IPluginV3:
        return self.clone()

    def get_fields_to_serialize(self) -> trt.PluginFieldCollection:
        return trt.PluginFieldCollection([trt.PluginField("scalar", np.array(self.scalar, dtype=np.float32), trt.PluginFieldType.FLOAT32)])


class AddScalarPluginCreator(trt.IPluginCreatorV3One):
    def __init__(self):
        trt.IPluginCreatorV3One.__init__(self)
        self.name = "CompatAddScalar"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.field_names = trt.PluginFieldCollection([trt.PluginField("scalar", np.array([]), trt.PluginFieldType.FLOAT32)])

    def create_plugin(self, name: str, field_collection: trt.PluginFieldCollection, phase: trt.TensorRTPhase):
        scalar = 0.0
        for f in field_collection:
            if f.name == "scalar":
                scalar = float(f.data[0])
        return AddScalarPlugin(scalar)


class AddScalarPluginV2(trt.IPluginV2DynamicExt):
    def __init__(self, scalar):
        trt.IPluginV2DynamicExt.__init__(self)
        self.plugin_type = "CompatAddScalarV2"
        self.plugin_version = "1"
        self.num_outputs = 1
        self.plugin_namespace = ""
        self.scalar = scalar
        self.device = 0

    def initialize(self) -> int:
        return 0

    def terminate(self) -> None:
        return

    def get_serialization_size(self) -> int:
        m = {"scalar": self.scalar}
        return len(json.dumps(m))

    def serialize(self) -> bytes:
        m = {"scalar": self.scalar}
        return json.dumps(m)  # a str, as the cookbook returns

    def destroy(self) -> None:
        return

    def get_output_datatype(self, output_index: int, input_types: List[trt.DataType]) -> trt.DataType:  # noqa: UP006
        if output_index == 0:
            return input_types[0]
        return None

    def clone(self) -> trt.IPluginV2DynamicExt:
        cloned_plugin = AddScalarPluginV2(0.0)
        cloned_plugin.__dict__.update(self.__dict__)
        return cloned_plugin

    def get_output_dimensions(self, output_index: int, inputs: List[trt.DimsExprs], expr_builder: trt.IExprBuilder) -> trt.DimsExprs:  # noqa: UP006
        output_dims = trt.DimsExprs(inputs[0])
        for i in range(len(inputs[0])):
            output_dims[i] = inputs[0][i]
        return output_dims

    def supports_format_combination(self, pos: int, in_out: List[trt.PluginTensorDesc], num_inputs: int) -> bool:  # noqa: UP006
        res = False
        desc = in_out[pos]
        if pos == 0:
            res = (desc.type == trt.float32 or desc.type == trt.float16) and desc.format == trt.TensorFormat.LINEAR
        elif pos == 1:
            res = desc.type == in_out[0].type and desc.format == trt.TensorFormat.LINEAR
        return res

    def configure_plugin(self, dptd_in: List[trt.DynamicPluginTensorDesc], dptd_out: List[trt.DynamicPluginTensorDesc]) -> None:  # noqa: UP006
        return

    def get_workspace_size(self, ptd_in: List[trt.PluginTensorDesc], ptd_out: List[trt.PluginTensorDesc]) -> int:  # noqa: UP006
        return 0

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream) -> None:
        n_element = int(np.prod(np.array(input_desc[0].dims)))
        flat = trt.PluginTensorDesc(trt.Dims((n_element,)), input_desc[0].type)
        x = trt.as_array(inputs[0], flat)
        trt.as_array(outputs[0], flat)[...] = (x.astype(np.float32) + np.float32(self.scalar)).astype(x.dtype)


class AddScalarPluginCreatorV2(trt.IPluginCreator):
    def __init__(self):
        trt.IPluginCreator.__init__(self)
        self.name = "CompatAddScalarV2"
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.field_names = trt.PluginFieldCollection([trt.PluginField("scalar", np.array([]), trt.PluginFieldType.FLOAT32)])

    def create_plugin(self, name, plugin_field_collection):
        scalar = 0.0
        for plugin_field in plugin_field_collection:
            if plugin_field.name == "scalar":
                scalar = float(plugin_field.data[0])
        return AddScalarPluginV2(scalar)

    def deserialize_plugin(self, name, data):
        deserialized = AddScalarPluginV2(0.0)
        m = dict(json.loads(data))
        deserialized.__dict__.update(m)
        return deserialized


@pytest.fixture(scope="module", autouse=True)
def registered():  # type: ignore[no-untyped-def]
    plugin_registry = trt.get_plugin_registry()
    creators = [AddScalarPluginCreator(), AddScalarPluginCreatorV2()]
    for creator in creators:  # "only operate the resources once": register unless present
        if creator.name not in [c.name for c in plugin_registry.all_creators]:
            plugin_registry.register_creator(creator, "")
    yield
    for creator in creators:
        plugin_registry.deregister_creator(creator)


def _test_case(tmp_path, b_FP16: bool, v2: bool) -> None:  # type: ignore[no-untyped-def]
    input_data = {"inputT0": np.arange(np.prod(shape), dtype=np.float32).reshape(shape)}
    if b_FP16:
        input_data["inputT0"] = input_data["inputT0"].astype(np.float16)
    trt_datatype = trt.float16 if b_FP16 else trt.float32
    trt_file = tmp_path / f"model-{'fp16' if b_FP16 else 'fp32'}.trt"
    logger = trt.Logger(trt.Logger.Severity.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network()
    profile = builder.create_optimization_profile()
    builder_config = builder.create_builder_config()
    builder.error_recorder = None
    builder_config.algorithm_selector = None
    builder_config.int8_calibrator = None
    builder_config.progress_monitor = None
    if b_FP16:
        builder_config.set_flag(trt.BuilderFlag.FP16)
    field_collection = trt.PluginFieldCollection([trt.PluginField("scalar", np.array(1.0, dtype=np.float32), trt.PluginFieldType.FLOAT32)])
    input_tensor = network.add_input("inputT0", trt_datatype, [-1, -1, -1])
    profile.set_shape(input_tensor.name, [1, 1, 1], shape, shape)
    if v2:
        plugin = trt.get_plugin_registry().get_plugin_creator("CompatAddScalarV2", "1", "").create_plugin("AddScalar", field_collection)
        layer = network.add_plugin_v2([input_tensor], plugin)
    else:
        creator = trt.get_plugin_registry().get_creator("CompatAddScalar", "1", "")
        plugin = creator.create_plugin("AddScalar", field_collection, trt.TensorRTPhase.BUILD)
        layer = network.add_plugin_v3([input_tensor], [], plugin)
    layer.precision = trt_datatype
    tensor = layer.get_output(0)
    tensor.dtype = trt_datatype
    tensor.name = "outputT0"
    network.mark_output(tensor)
    builder_config.add_optimization_profile(profile)
    engine_bytes = builder.build_serialized_network(network, builder_config)
    trt_file.write_bytes(engine_bytes)

    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(trt_file.read_bytes())
    context = engine.create_execution_context()
    runtime.gpu_allocator = None
    tensor_name_list = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    n_input = sum([engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT for name in tensor_name_list])
    for name, data in input_data.items():
        context.set_input_shape(name, data.shape)
    assert context.infer_shapes() == []
    buffer = {}
    for name in tensor_name_list:
        data_type = engine.get_tensor_dtype(name)
        runtime_shape = context.get_tensor_shape(name)
        n_byte = trt.volume(runtime_shape) * data_type.itemsize
        host = np.empty(runtime_shape, dtype=trt.nptype(data_type))
        assert host.nbytes == n_byte
        buffer[name] = host
    for name, data in input_data.items():
        buffer[name] = np.ascontiguousarray(data)
    for name in tensor_name_list:
        context.set_tensor_address(name, buffer[name].ctypes.data)
    context.execute_async_v3(0)
    assert n_input == 1
    assert engine.get_tensor_dtype("outputT0") == trt_datatype
    np.testing.assert_array_equal(buffer["outputT0"], input_data["inputT0"] + scalar)


@pytest.mark.parametrize("b_FP16", [False, True])
def test_add_scalar_v3(tmp_path, b_FP16: bool) -> None:  # type: ignore[no-untyped-def]
    _test_case(tmp_path, b_FP16, v2=False)


@pytest.mark.parametrize("b_FP16", [False, True])
def test_add_scalar_v2_deprecated(tmp_path, b_FP16: bool) -> None:  # type: ignore[no-untyped-def]
    _test_case(tmp_path, b_FP16, v2=True)
