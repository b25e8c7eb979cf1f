"""The checker drives plugins through the engine's adapters; only the error policy differs."""

from __future__ import annotations

from typing import Any

import pytest
from broken_plugins import ScaleBias, ScaleBiasCreator

import plugrt as trt
from plugrt.examples import circ_pad_v3
from plugrt.interfaces.adapters.v2_dynamic import V2DynamicAdapter
from plugrt.interfaces.recorder import ENGINE_ERRORS, ErrorPolicy, Phase, PluginCaller
from plugrt.testing import check_plugin
from plugrt.testing.hooks import CHECK_ERRORS, HookError

RANGE = [((1, 4), (2, 4), (8, 4))]
FIELDS = {"scale": 2.0, "bias": 1.0}


class ReturnsFalse(ScaleBias):
    """enqueue returns False: the binding's 0, which TensorRT (and the engine) take as success."""

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)
        return False


class ReturnsOne(ScaleBias):
    """enqueue writes its output, then reports failure."""

    def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
        super().enqueue(input_desc, output_desc, inputs, outputs, workspace, stream)
        return 1


class RaisingConfigure(ScaleBias):
    def configure_plugin(self, inp, out):
        raise ValueError("no configuration for you")


def test_enqueue_returning_false_is_success_as_in_the_engine() -> None:
    report = check_plugin(ScaleBiasCreator(ReturnsFalse), FIELDS, RANGE)
    assert report.ok, str(report)


def test_enqueue_returning_a_failure_status_fails_the_check_owning_enqueue() -> None:
    report = check_plugin(ScaleBiasCreator(ReturnsOne), FIELDS, RANGE)
    result = report["output-shapes"]
    assert result.status == "fail"
    assert "enqueue() returned 1; 0 or None means success" in result.message
    assert report["guard-bytes"].status == "skip" and "see output-shapes" in report["guard-bytes"].message


def test_a_raising_hook_is_reported_by_its_owner_and_skips_the_rest() -> None:
    report = check_plugin(ScaleBiasCreator(RaisingConfigure), FIELDS, RANGE)
    message = report["reconfigure"].message
    assert report["reconfigure"].status == "fail"
    assert "configure_plugin() raised ValueError: no configuration for you" in message
    assert report["determinism"].status == "skip" and "see reconfigure" in report["determinism"].message


def _caller(plugin: Any, policy: ErrorPolicy | None) -> PluginCaller:
    return V2DynamicAdapter("layer1", None, policy).caller(plugin)


def test_engine_policy_names_layer_plugin_and_hook() -> None:
    caller = _caller(RaisingConfigure(), None)
    assert caller.policy is ENGINE_ERRORS
    with pytest.raises(trt.PluginError, match=r"layer 'layer1', plugin CheckScaleBias v1, configure_plugin\(\) raised ValueError"):
        caller(Phase.BUILD, "configure_plugin", [], [])
    refused = caller.fail("get_workspace_size", " returned -1; expected a non-negative int")
    assert isinstance(refused, trt.PluginError)
    assert str(refused) == "layer 'layer1', plugin CheckScaleBias v1, get_workspace_size() returned -1; expected a non-negative int"


def test_check_policy_attributes_failures_to_the_owning_check() -> None:
    caller = _caller(RaisingConfigure(), CHECK_ERRORS)
    with pytest.raises(HookError, match=r"^configure_plugin\(\) raised ValueError: no configuration for you$") as info:
        caller(Phase.BUILD, "configure_plugin", [], [])
    assert (info.value.hook, info.value.owner) == ("configure_plugin", "reconfigure")
    assert isinstance(info.value.__cause__, ValueError)
    refused = caller.fail("get_workspace_size", " returned -1; expected a non-negative int")
    assert isinstance(refused, HookError) and refused.owner == "workspace"
    assert str(refused) == "get_workspace_size() returned -1; expected a non-negative int"


def test_check_policy_owner_depends_on_the_phase() -> None:
    creator = PluginCaller(ScaleBiasCreator(), "layer1", "creator", None, CHECK_ERRORS)
    assert creator.fail("create_plugin", " returned None", phase=Phase.BUILD).owner == "fields-roundtrip"  # type: ignore[attr-defined]
    assert creator.fail("create_plugin", " returned None", phase=Phase.DESERIALIZE).owner == "serialization-roundtrip"  # type: ignore[attr-defined]


def test_adapter_validation_goes_through_the_policy() -> None:
    """The adapter refuses a bad answer; which error that becomes is the caller's policy."""

    class NegativeWorkspace(ScaleBias):
        def get_workspace_size(self, inputs, outputs):
            return -1

    report = check_plugin(ScaleBiasCreator(NegativeWorkspace), FIELDS, RANGE)
    assert report["workspace"].status == "fail"
    assert "get_workspace_size() returned -1; expected a non-negative int" in report["workspace"].message
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (2, 4))
    layer = network.add_plugin_v2([x], NegativeWorkspace(2.0, 1.0))
    layer.name = "ws"
    network.mark_output(layer.get_output(0))
    with pytest.raises(trt.PluginError, match=r"layer 'ws', plugin CheckScaleBias v1, get_workspace_size\(\) returned -1"):
        builder.build_serialized_network(network, builder.create_builder_config())


def test_network_asks_the_output_count_through_the_adapter() -> None:
    """Adding a plugin layer asks the adapter (questions while a network is made are not recorded)."""

    class NoBuild(trt.IPluginV3, trt.IPluginV3OneCore):
        def __init__(self) -> None:
            trt.IPluginV3.__init__(self)
            trt.IPluginV3OneCore.__init__(self)
            self.plugin_name, self.plugin_version, self.plugin_namespace = "NoBuild", "1", ""

        def get_capability_interface(self, kind: Any) -> Any:
            return self if kind == trt.PluginCapabilityType.CORE else None

    network = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_network(0)
    x = network.add_input("x", trt.float32, (2, 4))
    with trt.trace_plugin_calls() as trace:
        layer = network.add_plugin_v2([x], ScaleBias())
    assert layer.num_outputs == 1 and trace.calls == []  # V2: the num_outputs attribute
    with trt.trace_plugin_calls() as trace:
        layer = network.add_plugin_v3([x], [], circ_pad_v3.CircPadPluginV3())
    assert layer.num_outputs == 1 and trace.calls == []  # V3: its BUILD capability, asked unrecorded
    with pytest.raises(trt.TypeMismatchError, match=r"get_capability_interface\(\) returned None for BUILD; a V3 plugin must provide IPluginV3OneBuild"):
        network.add_plugin_v3([x], [], NoBuild())
