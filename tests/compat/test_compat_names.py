"""Gap 10: the rest of TensorRT's bound plugin surface, name by name (pyPlugin.cpp, TensorRT 10 docs)."""

from __future__ import annotations

import threading

import pytest

import plugrt as trt


def test_v2_dynamic_ext_base_and_format_combination_limit() -> None:
    assert issubclass(trt.IPluginV2DynamicExt, trt.IPluginV2DynamicExtBase)
    assert issubclass(trt.IPluginV2DynamicExtBase, trt.IPluginV2)
    assert trt.IPluginV2DynamicExt.FORMAT_COMBINATION_LIMIT == 100
    assert trt.IPluginV3OneBuild.DEFAULT_FORMAT_COMBINATION_LIMIT == 100
    assert trt.IPluginV3OneBuild().format_combination_limit == 100


def test_plugin_creator_version_values() -> None:
    assert [(m.name, int(m)) for m in trt.PluginCreatorVersion] == [("V1", 0), ("V1_PYTHON", 64)]


def test_registry_recursive_listing_and_parent_search() -> None:
    registry = trt.get_plugin_registry()
    assert registry.all_creators_recursive == registry.all_creators
    assert registry.parent_search_enabled is True
    registry.parent_search_enabled = False
    try:
        assert registry.parent_search_enabled is False
    finally:
        registry.parent_search_enabled = True
    with pytest.raises(trt.TypeMismatchError, match="parent_search_enabled must be a bool, got 1"):
        registry.parent_search_enabled = 1  # type: ignore[assignment]


def test_registry_error_recorder_receives_failed_lookups() -> None:
    registry = trt.get_plugin_registry()
    recorder = trt.SimpleErrorRecorder()
    registry.error_recorder = recorder
    try:
        assert registry.get_creator("CompatNoSuchPlugin", "1", "") is None
        with pytest.raises(trt.CreatorNotFoundError):
            registry.require_creator("CompatNoSuchPlugin", "2", "")
        with pytest.raises(trt.RegistryError):
            registry.release_plugin_resource("compat-no-such-resource")
    finally:
        registry.error_recorder = None
    assert recorder.num_errors() == 3
    assert {recorder.get_error_code(i) for i in range(3)} == {trt.ErrorCodeTRT.INVALID_ARGUMENT}
    assert "CompatNoSuchPlugin" in recorder.get_error_desc(0) and not recorder.has_overflowed()
    recorder.clear()
    assert recorder.num_errors() == 0
    with pytest.raises(trt.TypeMismatchError, match=r"IPluginRegistry\.error_recorder must be an IErrorRecorder or None, got list"):
        registry.error_recorder = []  # type: ignore[assignment]


def test_error_recorder_interface_hooks_are_required() -> None:
    class Partial(trt.IErrorRecorder):
        def report_error(self, val, desc):
            return True

    assert trt.IErrorRecorder.MAX_DESC_LENGTH == 127
    with pytest.raises(trt.MissingHookError, match=r"IErrorRecorder.num_errors\(\)"):
        Partial().num_errors()
    assert int(trt.ErrorCodeTRT.UNSUPPORTED_STATE) == 10 and len(trt.ErrorCodeTRT) == 11


def test_builder_error_recorder_receives_build_errors() -> None:
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    recorder = trt.SimpleErrorRecorder(capacity=1)
    builder.error_recorder = recorder
    network = builder.create_network(0)
    for _ in range(2):
        with pytest.raises(trt.BuildError, match="no outputs"):
            builder.build_serialized_network(network, builder.create_builder_config())
    assert recorder.num_errors() == 1 and recorder.has_overflowed()
    assert recorder.get_error_code(0) == trt.ErrorCodeTRT.INVALID_CONFIG
    assert builder.num_DLA_cores == 0


class Copy(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
    """y = x; remembers the resource context of each attach_to_context."""

    contexts: list = []

    def __init__(self) -> None:
        trt.IPluginV3.__init__(self)
        trt.IPluginV3OneCore.__init__(self)
        trt.IPluginV3OneBuild.__init__(self)
        trt.IPluginV3OneRuntime.__init__(self)
        self.plugin_name, self.plugin_version, self.plugin_namespace = "CompatCopy", "1", ""
        self.num_outputs = 1

    def get_capability_interface(self, type):
        return self

    def get_output_data_types(self, input_types):
        return [input_types[0]]

    def get_output_shapes(self, inputs, shape_inputs, exprBuilder):
        return [inputs[0]]

    def supports_format_combination(self, pos, in_out, num_inputs):
        return in_out[pos].desc.type == trt.float32 and in_out[pos].desc.format == trt.TensorFormat.LINEAR

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        trt.as_array(outputs[0], output_desc[0])[...] = trt.as_array(inputs[0], input_desc[0])

    def attach_to_context(self, context):
        Copy.contexts.append(context)
        return self.clone()

    def get_fields_to_serialize(self):
        return trt.PluginFieldCollection([])

    def clone(self):
        return Copy()


class CopyCreator(trt.IPluginCreatorV3One):
    def __init__(self) -> None:
        trt.IPluginCreatorV3One.__init__(self)
        self.name, self.plugin_version, self.plugin_namespace = "CompatCopy", "1", ""
        self.field_names = trt.PluginFieldCollection([])

    def create_plugin(self, name, fc, phase):
        return Copy()


def test_resource_context_per_execution_context_with_allocator() -> None:
    creator = CopyCreator()
    registry = trt.get_plugin_registry()
    registry.register_creator(creator, "")
    try:
        builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
        network = builder.create_network(0)
        x = network.add_input("x", trt.float32, (2, 3))
        network.mark_output(network.add_plugin_v3([x], [], Copy()).get_output(0))
        plan = builder.build_serialized_network(network, builder.create_builder_config())
        engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan)
        Copy.contexts = []
        contexts = [engine.create_execution_context() for _ in range(2)]
    finally:
        registry.deregister_creator(creator)
    seen = Copy.contexts
    assert len(seen) == 2 and seen[0] is not seen[1]  # a different resource context per execution context
    allocator = seen[0].gpu_allocator
    assert isinstance(allocator, trt.IGpuAllocator) and seen[0].error_recorder is None
    address = allocator.allocate(100, 512, 0)
    assert address % 512 == 0
    trt.as_array(address, trt.PluginTensorDesc(trt.Dims((25,)), trt.float32))[...] = 1.0  # usable memory
    assert allocator.deallocate(address) is True and allocator.deallocate(address) is False
    with pytest.raises(trt.TypeMismatchError, match="size must be a non-negative int"):
        allocator.allocate(-1, 256, 0)
    del contexts


def test_gpu_allocator_interface() -> None:
    class Minimal(trt.IGpuAllocator):
        def __init__(self) -> None:
            trt.IGpuAllocator.__init__(self)
            self.calls: list[str] = []

        def allocate(self, size, alignment, flags):
            self.calls.append("allocate")
            return 4096

        def deallocate(self, memory):
            self.calls.append("deallocate")
            return True

    minimal = Minimal()
    assert minimal.allocate_async(8, 256, int(trt.AllocatorFlag.RESIZABLE), 0) == 4096
    assert minimal.deallocate_async(4096, 0) is True and minimal.reallocate(4096, 256, 16) == 0
    assert minimal.calls == ["allocate", "deallocate"]
    with pytest.raises(trt.MissingHookError, match=r"IGpuAllocator.allocate\(\)"):
        trt.IGpuAllocator().allocate(1, 1, 0)


def test_builder_registry_for_standard_engines_only() -> None:
    assert trt.get_builder_plugin_registry(trt.EngineCapability.STANDARD) is trt.get_plugin_registry()
    assert trt.get_builder_plugin_registry() is trt.get_plugin_registry()
    with pytest.raises(trt.RegistryError, match="standard engines only"):
        trt.get_builder_plugin_registry(trt.EngineCapability.SAFETY)
    with pytest.raises(trt.TypeMismatchError, match="takes an EngineCapability, got 0"):
        trt.get_builder_plugin_registry(0)


def test_builder_config_device_settings_accept_tensorrts_defaults_only() -> None:
    config = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_builder_config()
    assert config.DLA_core == -1
    assert config.default_device_type == trt.DeviceType.GPU
    assert config.engine_capability == trt.EngineCapability.STANDARD
    config.DLA_core = -1
    config.default_device_type = trt.DeviceType.GPU
    config.engine_capability = trt.EngineCapability.STANDARD
    config.set_device_type(None, trt.DeviceType.GPU)
    assert config.get_device_type(None) == trt.DeviceType.GPU and config.can_run_on_DLA(None) is False
    with pytest.raises(trt.BuildError, match="DLA_core = 0: plugrt has no DLA"):
        config.DLA_core = 0
    with pytest.raises(trt.BuildError, match=r"default_device_type = DeviceType\.DLA: plugrt has no DLA"):
        config.default_device_type = trt.DeviceType.DLA
    with pytest.raises(trt.BuildError, match=r"set_device_type\(DeviceType\.DLA\)"):
        config.set_device_type(None, trt.DeviceType.DLA)
    with pytest.raises(trt.BuildError, match=r"engine_capability = EngineCapability\.DLA_STANDALONE"):
        config.engine_capability = trt.EngineCapability.DLA_STANDALONE
    with pytest.raises(trt.TypeMismatchError, match="DLA_core must be an int"):
        config.DLA_core = "0"  # type: ignore[assignment]
    with pytest.raises(trt.TypeMismatchError, match="default_device_type must be a DeviceType"):
        config.default_device_type = 0  # type: ignore[assignment]
    config.algorithm_selector = None
    config.int8_calibrator = None
    with pytest.raises(trt.TypeMismatchError, match="must be an IInt8Calibrator"):
        config.int8_calibrator = object()


def test_registry_resources_are_safe_under_threads_with_creators_registering() -> None:
    """Registration and resource traffic at once do not interfere (one registry lock each)."""

    class R(trt.IPluginResource):
        def clone(self):
            return R()

        def release(self):
            pass

    registry = trt.get_plugin_registry()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for _ in range(100):
                registry.acquire_plugin_resource("compat-churn", R())
                registry.release_plugin_resource("compat-churn")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(4)]
    for thread in threads:
        thread.start()
    for _ in range(50):
        assert isinstance(registry.all_creators_recursive, list)
    for thread in threads:
        thread.join()
    assert not errors


def test_with_statement_on_tensorrt_objects_is_accepted_and_deprecated(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``with trt.Builder(...) as builder, builder.create_network() as network, ...`` (TensorRT 10: deprecated, no effect)."""
    logger = trt.Logger(trt.Logger.ERROR)
    with pytest.warns(DeprecationWarning, match="Context managers for TensorRT types are deprecated"):
        with trt.Builder(logger) as builder, builder.create_network(0) as network, builder.create_builder_config() as config:
            x = network.add_input("x", trt.float32, (2, 2))
            network.mark_output(network.add_identity(x).get_output(0))
            with trt.OnnxParser(network, logger) as parser:
                assert parser is not None
            with builder.build_serialized_network(network, config) as plan, trt.Runtime(logger) as runtime:
                with runtime.deserialize_cuda_engine(plan) as engine, engine.create_execution_context() as context:
                    assert context.engine is engine
    with pytest.warns(DeprecationWarning), logger as same:
        assert same is logger
