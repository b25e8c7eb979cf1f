"""Decorator-API plugins through the network, the builder, the plan and the run: behaviour and misuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from onnx import TensorProto, helper, numpy_helper
from qdp_helpers import LOGGER, build, network_with, run

import plugrt as trt
import plugrt.plugin as trtp
from plugrt.engine.plan import EnginePlan
from plugrt.interfaces.field_codec import decode_fields
from plugrt.plugin import _lib
from plugrt.plugin._aot import decode_kernels
from plugrt.plugin._stored import AOT_KERNELS

Flag = trt.NetworkDefinitionCreationFlag


@pytest.fixture
def ids() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for plugin_id in made:
        _lib.forget(plugin_id)


def _scale(ids: list[str], plugin_id: str, jit: bool = True, aot: bool = False) -> None:
    """y = x * factor (JIT impl with NumPy; AOT impl returning a stand-in PTX)."""
    ids.append(plugin_id)

    @trtp.register(plugin_id)
    def desc(x: trtp.TensorDesc, factor: float) -> trtp.TensorDesc:
        return x.like()

    if jit:

        @trtp.impl(plugin_id)
        def run_impl(x: trtp.Tensor, factor: float, outputs: tuple[trtp.Tensor], stream: int) -> None:
            np.multiply(np.asarray(x), factor, out=np.asarray(outputs[0]))

    if aot:

        @trtp.aot_impl(plugin_id)
        def compile_impl(x: trtp.TensorDesc, outputs: tuple[trtp.TensorDesc], tactic: int) -> tuple[Any, Any, Any, Any]:
            n = x.shape_expr.numel()
            params = trtp.KernelLaunchParams(grid_x=trtp.cdiv(n, 128), block_x=128)
            params.shared_mem = 0
            extra = trtp.SymIntExprs(1)
            extra[0] = trtp.SymInt32(n)
            kind = "f32" if x.dtype == trt.float32 else "f16"
            return "scale_kernel", f"// PTX stand-in for {kind}", params, extra


def _one_plugin(
    make: Any, shape: tuple[int, ...] = (4, 3), flags: int = 0
) -> tuple[trt.Builder, trt.INetworkDefinition]:
    return network_with(lambda net, t: {"y": make(net, t["x"]).get_output(0)}, {"x": (trt.float32, shape)}, flags)


def test_add_plugin_takes_an_op_call_or_a_tuple(ids: list[str]) -> None:
    _scale(ids, "t::scale")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.scale(t, factor=2.0)))
    np.testing.assert_array_equal(run(build(builder, network), {"x": x})["y"], x * 2)
    builder, network = _one_plugin(
        lambda net, t: net.add_plugin(trtp.op.t.scale(t, factor=3.0)(_lib.QuickPluginCreationRequest.UNKNOWN))
    )
    np.testing.assert_array_equal(run(build(builder, network), {"x": x})["y"], x * 3)


def test_add_plugin_misuse(ids: list[str]) -> None:
    _scale(ids, "t::scale")
    _, network = network_with(lambda net, t: {}, {"x": (trt.float32, (2,))})
    x = network.get_input(0)
    with pytest.raises(trt.TypeMismatchError, match=r"takes a trtp.op.<namespace>.<name>\(...\) call"):
        network.add_plugin(42)
    made = trtp.op.t.scale(x, factor=1.0)(0)
    with pytest.raises(trt.NetworkError, match=r"aot= applies to a trtp.op call"):
        network.add_plugin(made, aot=True)
    with pytest.raises(trt.TypeMismatchError, match="tuple, got 2 items"):
        network.add_plugin(made[:2])
    with pytest.raises(
        E := trt.PluginDefinitionError, match=r"the AOT implementation was asked for, but no @trtp.aot_impl"
    ):
        network.add_plugin(trtp.op.t.scale(x, factor=1.0), aot=True)
    assert E


def test_jit_or_aot_choice_follows_aot_and_the_network_flags(ids: list[str]) -> None:
    _scale(ids, "t::both", jit=True, aot=True)
    _scale(ids, "t::aot_only", jit=False, aot=True)

    def layer(flags: int, plugin: trtp.PluginDef, **kw: Any) -> trtp.QuickPlugin:
        builder = trt.Builder(LOGGER)
        network = builder.create_network(flags)
        x = network.add_input("x", trt.float32, (2,))
        return network.add_plugin(plugin(x, factor=1.0), **kw).plugin  # type: ignore[no-any-return]

    with pytest.raises(trt.PluginDefinitionError, match="has both an AOT and a JIT implementation; choose with"):
        layer(0, trtp.op.t.both)
    assert layer(1 << int(Flag.PREFER_AOT_PYTHON_PLUGINS), trtp.op.t.both).aot
    assert not layer(1 << int(Flag.PREFER_JIT_PYTHON_PLUGINS), trtp.op.t.both).aot
    assert not layer(1 << int(Flag.PREFER_AOT_PYTHON_PLUGINS), trtp.op.t.both, aot=False).aot
    assert layer(0, trtp.op.t.aot_only).aot and layer(1 << int(Flag.PREFER_JIT_PYTHON_PLUGINS), trtp.op.t.aot_only).aot
    with pytest.raises(trt.PluginDefinitionError, match=r"the JIT implementation was asked for, but no @trtp.impl"):
        layer(0, trtp.op.t.aot_only, aot=False)
    both_flags = (1 << int(Flag.PREFER_AOT_PYTHON_PLUGINS)) | (1 << int(Flag.PREFER_JIT_PYTHON_PLUGINS))
    with pytest.raises(trt.NetworkError, match="both PREFER_AOT_PYTHON_PLUGINS and PREFER_JIT_PYTHON_PLUGINS"):
        layer(both_flags, trtp.op.t.both)


def test_a_plugin_without_implementation(ids: list[str]) -> None:
    _scale(ids, "t::bare", jit=False)
    _, network = network_with(lambda net, t: {}, {"x": (trt.float32, (2,))})
    with pytest.raises(trt.PluginDefinitionError, match=r"'t::bare' has no implementation; define @trtp.impl"):
        network.add_plugin(trtp.op.t.bare(network.get_input(0), factor=1.0))


def test_aot_plan_stores_kernels_and_needs_cuda_or_a_jit_impl(ids: list[str]) -> None:
    _scale(ids, "t::aot_only", jit=False, aot=True)
    _scale(ids, "t::both", jit=True, aot=True)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.aot_only(t, factor=2.0)))
    plan = build(builder, network)
    fields = decode_fields(EnginePlan.from_bytes(plan).plugins[0].payload)
    assert [f.name for f in fields] == [AOT_KERNELS], "an AOT-only plugin stores its kernel, not its attributes"
    kernel = decode_kernels(fields[0].data.tobytes())[0]
    assert kernel.name == "scale_kernel" and kernel.ptx == b"// PTX stand-in for f32"
    grid, block, shared, scalars = kernel.resolve([(40, 10)], "test")
    assert grid == (4, 1, 1) and block == (128, 1, 1) and shared == 0 and scalars == [400]
    assert scalars[0].dtype == np.int32
    engine = trt.Runtime(LOGGER).deserialize_cuda_engine(plan)
    with pytest.raises(
        trt.PluginError, match=r"'t::aot_only' was built with its AOT implementation .* on the CPU it needs its JIT"
    ):
        engine.create_execution_context()
    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.both(t, factor=2.0), aot=True))
    plan = build(builder, network)
    names = [f.name for f in decode_fields(EnginePlan.from_bytes(plan).plugins[0].payload)]
    assert names == ["factor", AOT_KERNELS]
    np.testing.assert_array_equal(run(plan, {"x": x})["y"], x * 2), "the CPU runs the JIT impl of an AOT plan"


def test_aot_tactics_need_a_gpu_to_be_timed(ids: list[str]) -> None:
    _scale(ids, "t::aot_tactics", jit=False, aot=True)

    @trtp.autotune("t::aot_tactics")
    def tune(x, outputs):  # type: ignore[no-untyped-def]
        return [trtp.AutoTuneCombination("FP32, FP32", "LINEAR", [1, 2])]

    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.aot_tactics(t, factor=2.0)))
    with pytest.raises(trt.PluginError, match="'t::aot_tactics': its AOT kernels can be timed only on a GPU"):
        build(builder, network)


def test_aot_impl_result_is_checked(ids: list[str]) -> None:
    ids.append("t::bad_aot")

    @trtp.register("t::bad_aot")
    def desc(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x.like()

    results: list[Any] = []

    @trtp.aot_impl("t::bad_aot")
    def compile_impl(x, outputs, tactic):  # type: ignore[no-untyped-def]
        return results[0]

    cases = [
        (("k", "ptx", trtp.KernelLaunchParams()), "expected \\(kernel_name, ptx, KernelLaunchParams, SymIntExprs\\)"),
        ((1, "ptx", trtp.KernelLaunchParams(), trtp.SymIntExprs(0)), "the kernel name must be a str or bytes"),
        (("k", "ptx", {}, trtp.SymIntExprs(0)), "launch parameters must be a trtp.KernelLaunchParams"),
        (("k", "ptx", trtp.KernelLaunchParams(), [1]), "scalar arguments must be a trtp.SymIntExprs"),
        (
            ("k", "ptx", trtp.KernelLaunchParams(), trtp.SymExprs(1)),
            "scalar argument 0 is NoneType; wrap it as trtp.SymInt32",
        ),
    ]
    for result, message in cases:
        results[:] = [result]
        builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.bad_aot(t)))
        with pytest.raises(trt.PlugrtError, match=message):
            build(builder, network)


def test_user_function_failures_name_the_plugin_and_function(ids: list[str]) -> None:
    ids.append("t::fails")
    state = {"register": False, "impl": False, "outputs": 1}

    @trtp.register("t::fails")
    def fails_desc(x: trtp.TensorDesc) -> trtp.TensorDesc:
        if state["register"]:
            raise RuntimeError("no shapes today")
        return x.like() if state["outputs"] == 1 else (x.like(), x.like())  # type: ignore[return-value]

    @trtp.impl("t::fails")
    def fails_impl(x, outputs, stream):  # type: ignore[no-untyped-def]
        if state["impl"]:
            raise ValueError("kernel exploded")
        np.copyto(np.asarray(outputs[0]), np.asarray(x))

    def attempt() -> bytes:
        builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.fails(t)))
        return build(builder, network)

    state["register"] = True
    with pytest.raises(
        trt.PluginError, match="'t::fails': register function fails_desc raised RuntimeError: no shapes today"
    ):
        attempt()
    state["register"], state["outputs"] = False, 2
    with pytest.raises(trt.PluginDefinitionError, match=r"returned .*; its return hint declares 1 TensorDesc"):
        attempt()
    state["outputs"] = 1
    plan = attempt()
    state["impl"] = True
    with pytest.raises(
        trt.ExecutionError, match="'t::fails': impl function fails_impl raised ValueError: kernel exploded"
    ):
        run(plan, {"x": np.zeros((4, 3), np.float32)})


def test_autotune_misuse_is_reported_at_build(ids: list[str]) -> None:
    ids.append("t::tune")
    answer: list[Any] = []

    @trtp.register("t::tune")
    def desc(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x.like()

    @trtp.autotune("t::tune")
    def tune(x, outputs):  # type: ignore[no-untyped-def]
        assert x.has_shape and x.shape == (4, 3) and x.format == trt.TensorFormat.LINEAR
        return answer[0]()

    @trtp.impl("t::tune")
    def tune_impl(x, outputs, stream):  # type: ignore[no-untyped-def]
        np.copyto(np.asarray(outputs[0]), np.asarray(x))

    cases = [
        (lambda: [trtp.AutoTuneCombination("FP64, FP32")], "'t::tune', autotune function tune: .*unknown type 'FP64'"),
        (lambda: "FP32", "autotune function tune returned 'FP32'; expected a list of trtp.AutoTuneCombination"),
        (lambda: [trtp.AutoTuneCombination("FP32, FP32, FP32")], "describes 3 I/O positions but the plugin has 2"),
        (lambda: [trtp.AutoTuneCombination("FP32, FP32", "CHW4")], "accepts no type/format combination"),
    ]
    for make, message in cases:
        answer[:] = [make]
        builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.tune(t)))
        with pytest.raises(trt.PlugrtError, match=message):
            build(builder, network)
    answer[:] = [lambda: trtp.AutoTuneCombination("FP32, FP32")]  # a single combination is accepted too
    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.tune(t)))
    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(run(build(builder, network), {"x": x})["y"], x)


def test_autotune_sees_concrete_shape_ranges(ids: list[str]) -> None:
    ids.append("t::ranges")
    seen: dict[str, Any] = {}

    @trtp.register("t::ranges")
    def desc(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x.like()

    @trtp.autotune("t::ranges")
    def tune(x, outputs):  # type: ignore[no-untyped-def]
        out = outputs[0]
        seen.update(dynamic=x.is_dynamic, shape=tuple(x.shape), min=x.shape.min, opt=x.shape.opt, max=x.shape.max)
        seen.update(format=x.format, scale=x.scale, out_dynamic=out.is_dynamic, out_max=out.shape.max)
        return [trtp.AutoTuneCombination("FP32, FP32")]

    @trtp.impl("t::ranges")
    def ranges_impl(x, outputs, stream):  # type: ignore[no-untyped-def]
        np.copyto(np.asarray(outputs[0]), np.asarray(x))

    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.ranges(t)), shape=(-1, 3))
    build(builder, network, {"x": ((1, 3), (2, 3), (5, 3))})
    assert seen == {
        "dynamic": True,
        "shape": (-1, 3),
        "min": (1, 3),
        "opt": (2, 3),
        "max": (5, 3),
        "format": trt.TensorFormat.LINEAR,
        "scale": 1.0,
        "out_dynamic": True,
        "out_max": (5, 3),
    }


def test_every_attribute_type_survives_the_plan(ids: list[str]) -> None:
    ids.append("t::attrs")
    seen: dict[str, Any] = {}

    @trtp.register("t::attrs")
    def desc(
        x: trtp.TensorDesc,
        count: int,
        alpha: float,
        label: str,
        flag: bool,
        blob: bytes,
        half: npt.NDArray[np.float16],
        mask: npt.NDArray[np.bool_],
    ) -> trtp.TensorDesc:
        return x.like()

    @trtp.impl("t::attrs")
    def attrs_impl(x, count, alpha, label, flag, blob, half, mask, outputs, stream):  # type: ignore[no-untyped-def]
        seen.update(count=count, alpha=alpha, label=label, flag=flag, blob=blob, half=half, mask=mask)
        np.copyto(np.asarray(outputs[0]), np.asarray(x))

    values = dict(
        count=-(2**40),
        alpha=0.1,
        label="héllo",
        flag=True,
        blob=b"\x00\x01\xff",
        half=np.array([1.5, -2.0], np.float16),
        mask=np.array([True, False, True]),
    )
    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.attrs(t, **values)))
    run(build(builder, network), {"x": np.zeros((4, 3), np.float32)})
    for name, value in values.items():
        if isinstance(value, np.ndarray):
            assert seen[name].dtype == value.dtype and seen[name].tolist() == value.tolist(), name
        else:
            assert type(seen[name]) is type(value) and seen[name] == value, name


def test_a_qdp_plugin_needs_add_plugin(ids: list[str]) -> None:
    _scale(ids, "t::scale")
    creator = trt.get_plugin_registry().get_creator("scale", "1", "t")
    fields = trt.PluginFieldCollection([trt.PluginField("factor", np.array([2.0]), trt.PluginFieldType.FLOAT64)])
    plugin = creator.create_plugin("scale", fields, trt.TensorRTPhase.BUILD)
    builder, network = _one_plugin(lambda net, t: net.add_plugin_v3([t], [], plugin))
    with pytest.raises(
        trt.PluginError, match=r"does not know its inputs; add it with network.add_plugin\(trtp.op.t.scale"
    ):
        build(builder, network)
    with pytest.raises(trt.PluginDefinitionError, match="unknown attribute 'beta'; declared: factor"):
        creator.create_plugin("scale", trt.PluginFieldCollection([trt.PluginField("beta", np.array([1.0]))]), 0)
    with pytest.raises(trt.PluginDefinitionError, match=r"attributes \['factor'\] were not given"):
        creator.create_plugin("scale", trt.PluginFieldCollection(), trt.TensorRTPhase.BUILD)
    with pytest.raises(trt.FieldError, match=r"field 'factor' \(CHAR\) does not fit attribute type float"):
        creator.create_plugin(
            "scale", trt.PluginFieldCollection([trt.PluginField("factor", "x", trt.PluginFieldType.CHAR)]), 0
        )


def test_array_fields_are_converted_only_when_the_values_fit() -> None:
    import qdp_samples  # noqa: F401 - registers sample::circ_pad_plugin

    creator = trt.get_plugin_registry().get_creator("circ_pad_plugin", "1", "sample")

    def make(data: np.ndarray, kind: trt.PluginFieldType) -> trtp.QuickPlugin:
        fields = trt.PluginFieldCollection([trt.PluginField("pads", data, kind)])
        return creator.create_plugin("pad", fields, trt.TensorRTPhase.BUILD)  # type: ignore[no-any-return]

    pads = make(np.array([1, 2], np.int64), trt.PluginFieldType.INT64).attrs["pads"]
    assert pads.dtype == np.int32 and pads.tolist() == [1, 2]
    with pytest.raises(trt.FieldError, match=r"values \[1099511627776\] do not fit int32"):
        make(np.array([2**40], np.int64), trt.PluginFieldType.INT64)
    with pytest.raises(
        trt.FieldError, match="field 'pads' \\(FLOAT32\\) does not fit attribute type NDArray\\[int32\\]"
    ):
        make(np.array([1.5], np.float32), trt.PluginFieldType.FLOAT32)


def test_stored_run_facts_are_validated() -> None:
    import qdp_samples  # noqa: F401 - registers the samples

    creator = trt.get_plugin_registry().get_creator("elemwise_add_plugin_", "1", "sample")
    delta = trt.PluginField("delta", np.array([1]), trt.PluginFieldType.INT64)

    def revive(name: str, values: list[int]) -> Any:
        fields = trt.PluginFieldCollection(
            [delta, trt.PluginField(name, np.array(values, np.int32), trt.PluginFieldType.INT32)]
        )
        return creator.create_plugin("x", fields, trt.TensorRTPhase.RUNTIME)

    assert revive("qdp.aliases", [0]).aliases == [0]
    with pytest.raises(trt.FieldError, match=r"stored aliases \[3\] do not fit 1 outputs and 1 inputs"):
        revive("qdp.aliases", [3])
    with pytest.raises(trt.FieldError, match=r"stored data-dependent dimensions \[5, 0\] do not fit 1 outputs"):
        revive("qdp.data_dependent", [5, 0])
    with pytest.raises(trt.SerializationError, match="stored AOT kernels are malformed"):
        creator.create_plugin(
            "x",
            trt.PluginFieldCollection(
                [delta, trt.PluginField("qdp.aot_kernels", b"{no json", trt.PluginFieldType.UNKNOWN)]
            ),
            1,
        )


def test_the_lifecycle_is_the_v3_one(ids: list[str]) -> None:
    _scale(ids, "t::scale")
    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.scale(t, factor=2.0)))
    with trt.trace_plugin_calls() as recorder:
        plan = build(builder, network)
        run(plan, {"x": np.ones((4, 3), np.float32)})
    methods = [c.method for c in recorder.calls]
    order = [
        "clone",
        "get_output_data_types",
        "get_output_shapes",
        "supports_format_combination",
        "configure_plugin",
        "get_fields_to_serialize",
        "create_plugin",
        "attach_to_context",
        "on_shape_change",
        "enqueue",
    ]
    positions = [methods.index(m) for m in order]
    assert positions == sorted(positions), methods


def test_a_plan_needs_the_definition_to_revive(ids: list[str]) -> None:
    _scale(ids, "t::gone")
    builder, network = _one_plugin(lambda net, t: net.add_plugin(trtp.op.t.gone(t, factor=2.0)))
    plan = build(builder, network)
    _lib.forget("t::gone")
    with pytest.raises(trt.CreatorNotFoundError, match="gone"):
        trt.Runtime(LOGGER).deserialize_cuda_engine(plan)


def test_register_misuse_found_at_build(ids: list[str]) -> None:
    ids.extend(["t::float_size", "t::unset", "t::alias_output"])

    @trtp.register("t::float_size")
    def float_size(x: trtp.TensorDesc) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
        st = trtp.size_tensor(x.shape_expr[0], x.shape_expr[0])
        st.dtype = trt.float32
        return trtp.from_shape_expr((st.expr(),), trt.float32), st

    @trtp.register("t::unset")
    def unset(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return trtp.TensorDesc(trtp.ShapeExprs(2), trt.float32)

    @trtp.register("t::alias_output")
    def alias_output(x: trtp.TensorDesc) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
        first = x.like()
        return first, first.aliased()

    for plugin_id in ("t::float_size", "t::unset", "t::alias_output"):
        trtp.impl(plugin_id)(lambda x, outputs, stream: None)
    for plugin, message in [
        (trtp.op.t.float_size, "size tensor output 1 must be INT32 or INT64"),
        (trtp.op.t.unset, "dimension 0 of output 0 was never set"),
        (trtp.op.t.alias_output, "output 1 is aliased to something that is not an input"),
    ]:
        builder, network = _one_plugin(lambda net, t, p=plugin: net.add_plugin(p(t)))
        with pytest.raises(trt.PlugrtError, match=message):
            build(builder, network)


# --- ONNX -------------------------------------------------------------------------------------
def _onnx(op: str, attrs: dict[str, Any]) -> bytes:
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]).SerializeToString()


def _parse(model: bytes) -> tuple[trt.Builder, trt.INetworkDefinition, list[str]]:
    messages: list[str] = []

    class Collect(trt.ILogger):
        def log(self, severity: trt.Severity, msg: str) -> None:
            messages.append(msg)

    builder = trt.Builder(LOGGER)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, Collect())
    if not parser.parse(model):
        raise trt.PlugrtError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    return builder, network, messages


def test_onnx_nodes_import_as_qdp_plugins(ids: list[str]) -> None:
    _scale(ids, "t::scale", jit=True, aot=True)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    builder, network, messages = _parse(_onnx("scale", {"plugin_namespace": "t", "factor": 2.5, "aot": 0, "extra": 1}))
    plugin = network.get_layer(0).plugin
    assert isinstance(plugin, trtp.QuickPlugin) and not plugin.aot and plugin.attrs == {"factor": 2.5}
    assert any("attribute 'extra' is not a field" in m for m in messages)
    np.testing.assert_array_equal(run(build(builder, network), {"x": x})["y"], x * 2.5)
    _, network, _ = _parse(_onnx("scale", {"plugin_namespace": "t", "factor": 1.0, "aot": 1}))
    assert network.get_layer(0).plugin.aot
    with pytest.raises(trt.PlugrtError, match="attribute 'aot' of QDP plugin 't::scale' must be an INT 0 or 1"):
        _parse(_onnx("scale", {"plugin_namespace": "t", "factor": 1.0, "aot": 2}))
    with pytest.raises(trt.PlugrtError, match=r"attributes \['factor'\] were not given"):
        _parse(_onnx("scale", {"plugin_namespace": "t", "aot": 0}))
    with pytest.raises(trt.PlugrtError, match="has both an AOT and a JIT implementation"):
        _parse(_onnx("scale", {"plugin_namespace": "t", "factor": 1.0}))
    pads = numpy_helper.from_array(np.array([1, 1], np.int64))
    _scale(ids, "t::jit_only")
    with pytest.raises(trt.PlugrtError, match=r"field 'factor' \(FLOAT64\) does not fit|factor"):
        _parse(_onnx("jit_only", {"plugin_namespace": "t", "factor": pads}))
