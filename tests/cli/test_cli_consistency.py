"""``plugrt plugins`` and ``plugrt check`` name interface families alike; ``exec`` reports one build time."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.cli.main import main
from plugrt.interfaces.creator import interface_family

FAST = ["--duration", "0", "--warmUp", "0", "--iterations", "2"]

# a V2DynamicExt plugin whose creator says nothing about what it makes (no annotations)
UNANNOTATED = textwrap.dedent(
    """
    import plugrt as trt


    class FamilyScale(trt.IPluginV2DynamicExt):
        def __init__(self):
            trt.IPluginV2DynamicExt.__init__(self)
            self.num_outputs = 1
            self.plugin_type = "FamilyScale"
            self.plugin_version = "1"
            self.plugin_namespace = ""

        def get_output_datatype(self, index, input_types):
            return input_types[0]

        def get_output_dimensions(self, output_index, inputs, exprBuilder):
            return inputs[0]

        def supports_format_combination(self, pos, in_out, num_inputs):
            return True

        def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
            return 0

        def serialize(self):
            return b""

        def clone(self):
            return FamilyScale()


    class FamilyScaleCreator(trt.IPluginCreator):
        def __init__(self):
            trt.IPluginCreator.__init__(self)
            self.name = "FamilyScale"
            self.plugin_version = "1"
            self.plugin_namespace = ""

        def create_plugin(self, name, fc):
            return FamilyScale()

        def deserialize_plugin(self, name, data):
            return FamilyScale()


    trt.get_plugin_registry().register_creator(FamilyScaleCreator(), "")
    """
)
EXAMPLES = "from plugrt.examples import circ_pad_v2, circ_pad_v3\ncirc_pad_v2.register()\ncirc_pad_v3.register()\n"


@pytest.fixture()
def registry_restored() -> Iterator[None]:
    """Deregister the creators the test's ``plugrt plugins --load`` registered."""
    registry = trt.get_plugin_registry()
    before = {id(c) for c in registry.all_creators}
    yield
    for creator in registry.all_creators:
        if id(creator) not in before:
            registry.deregister_creator(creator)


def _write_model(path: Path) -> Path:
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32) * 2, "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _listed(capsys: pytest.CaptureFixture[str], *load: str) -> dict[str, str]:
    assert main(["plugins", "--no-builtin", *(f"--load={f}" for f in load), "--json"]) == 0
    return {row["name"]: row["interface"] for row in json.loads(capsys.readouterr().out)}


def _checked_family(capsys: pytest.CaptureFixture[str], file: Path, *args: str) -> str:
    main(["check", str(file), *args, "--check", "identity", "--json"])
    captured = capsys.readouterr()
    assert captured.out, captured.err
    family: str = json.loads(captured.out)["family"]
    return family


@pytest.mark.parametrize("name, args, expected", [
    ("FamilyScale", ("--shapes", "x:1x4:2x4:8x4"), "IPluginV2DynamicExt"),
    ("CircPadPlugin", ("--field", "pads=1,1", "--shapes", "x:1x4:2x4:8x4"), "IPluginV2DynamicExt"),
    ("CircPadPluginV3", ("--field", "pads=1,1", "--shapes", "x:1x4:2x4:8x4"), "IPluginV3"),
])
def test_plugins_and_check_name_the_family_alike(
        registry_restored: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, args: tuple[str, ...], expected: str) -> None:
    file = tmp_path / ("family_scale.py" if name == "FamilyScale" else "examples.py")
    file.write_text(UNANNOTATED if name == "FamilyScale" else EXAMPLES)
    assert _checked_family(capsys, file, "--plugin", name, *args) == expected
    assert _listed(capsys, str(file))[name] == expected


def test_builtin_creators_are_named_by_the_plugin_class_they_make() -> None:
    trt.init_libnvinfer_plugins(None, "")
    creators = {c.name: c for c in trt.get_plugin_registry().all_creators}
    assert interface_family(creators["BatchedNMS_TRT"]) == "IPluginV2Ext"
    assert interface_family(creators["BatchedNMSDynamic_TRT"]) == "IPluginV2DynamicExt"
    plugin = creators["BatchedNMSDynamic_TRT"].plugin_class
    assert interface_family(plugin.__new__(plugin)) == "IPluginV2DynamicExt"


def test_a_v2_creator_of_unknown_plugins_is_named_by_the_family_base() -> None:
    class Silent(trt.IPluginCreator):
        def create_plugin(self, name, fc):  # type: ignore[no-untyped-def]  # unannotated, and refuses no fields
            raise ValueError("needs fields")

    assert interface_family(Silent()) == "IPluginV2"
    assert interface_family(Silent(), probe=True) == "IPluginV2"
    assert interface_family(object()) == "object"


def test_exec_reports_one_build_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write_model(tmp_path / "m.onnx")
    assert main(["exec", f"--onnx={model}", "--shapes=x:2x4", "--verbose", *FAST]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    printed = re.findall(r"Engine built in ([\d.]+) ms", text)
    logged = re.findall(r"bytes in ([\d.]+) ms", text)
    assert len(printed) == 1 and len(logged) == 1, text
    assert printed == logged
