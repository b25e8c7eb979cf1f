"""``plugrt check``: exit codes 0/1/2, text and JSON output, through ``plugrt.cli.main.main``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from plugrt.cli.main import main

PLUGIN_FILE = textwrap.dedent(
    """
    import numpy as np
    import plugrt as trt


    class CliScale(trt.IPluginV2DynamicExt):
        def __init__(self, scale=1.0):
            trt.IPluginV2DynamicExt.__init__(self)
            self.num_outputs = 1
            self.plugin_type = "CliScale"
            self.plugin_version = "1"
            self.plugin_namespace = ""
            self.scale = scale

        def get_output_datatype(self, index, input_types):
            return input_types[0]

        def get_output_dimensions(self, output_index, inputs, exprBuilder):
            return trt.DimsExprs(inputs[0])

        def supports_format_combination(self, pos, in_out, num_inputs):
            desc = in_out[pos]
            if desc.format != trt.TensorFormat.LINEAR:
                return False
            return desc.type in (trt.float32, trt.float16) if pos == 0 else desc.type == in_out[0].type

        def enqueue(self, input_desc, output_desc, inputs, outputs, workspace, stream):
            y = trt.as_array(outputs[0], output_desc[0])
            np.multiply(trt.as_array(inputs[0], input_desc[0]), self.scale, out=y, casting="unsafe")
            return 0

        def serialize(self):
            writer = trt.SerializationWriter(magic=0x434C4953, version=1)
            writer.write_f32(self.scale)
            return writer.to_bytes()

        def clone(self):
            return CliScale(self.scale)


    class CliScaleCreator(trt.IPluginCreator):
        def __init__(self):
            trt.IPluginCreator.__init__(self)
            self.name = "CliScale"
            self.plugin_version = "1"
            self.field_names = trt.PluginFieldCollection(
                [trt.PluginField("scale", np.float32(1), trt.PluginFieldType.FLOAT32)])

        def create_plugin(self, name, fc):
            return CliScale(next((float(f.data[0]) for f in fc if f.name == "scale"), 1.0))

        def deserialize_plugin(self, name, data):
            reader = trt.SerializationReader(data, magic=0x434C4953, version=1)
            plugin = CliScale(reader.read_f32())
            reader.finish()
            return plugin


    trt.get_plugin_registry().register_creator(CliScaleCreator(), "")
    """
)

#: The same plugin with serialization_size off by four bytes.
BROKEN_FILE = PLUGIN_FILE.replace(
    "    def clone(self):\n        return CliScale(self.scale)",
    "    @property\n    def serialization_size(self):\n        return len(self.serialize()) + 4\n\n"
    "    def clone(self):\n        return CliScale(self.scale)",
)

ARGS = ["--plugin", "CliScale", "--field", "scale=2.5", "--shapes", "x:1x4:2x4:8x4"]


@pytest.fixture
def good(tmp_path: Path) -> str:
    path = tmp_path / "cli_scale.py"
    path.write_text(PLUGIN_FILE)
    return str(path)


@pytest.fixture
def broken(tmp_path: Path) -> str:
    path = tmp_path / "cli_scale_broken.py"
    path.write_text(BROKEN_FILE)
    assert BROKEN_FILE != PLUGIN_FILE
    return str(path)


def test_passing_plugin_exits_0(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", good, *ARGS]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plugrt check: CliScale v1 (IPluginV2DynamicExt)")
    assert "  PASS  serialization-size" in out and out.rstrip().splitlines()[-1].startswith("OK: ")


def test_the_library_is_deregistered_so_the_file_can_be_checked_again(
    good: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", good, *ARGS, "--check", "identity"]) == 0
    assert main(["check", good, *ARGS, "--check", "identity"]) == 0


def test_failing_plugin_exits_1_with_json(broken: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", broken, *ARGS, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["plugin"] == "CliScale v1"
    failed = {r["id"]: r["message"] for r in report["results"] if r["status"] == "fail"}
    assert list(failed) == ["serialization-size"]
    assert "serialization_size says 16 bytes but serialize() wrote 12" in failed["serialization-size"]


def test_check_and_skip_flags(broken: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", broken, *ARGS, "--skip", "serialization-size"]) == 0
    assert "serialization-size" not in capsys.readouterr().out
    assert main(["check", broken, *ARGS, "--check", "identity", "--check", "stream", "--json"]) == 0
    ids = [r["id"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert ids == ["identity", "stream"]


def test_fp16_and_version(good: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            ["check", good, "--plugin", "CliScale:1:", "--field", "scale=2", "--shapes", "x:3x4", "--dtype", "float16"]
        )
        == 0
    )
    assert "HALF/LINEAR" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--plugin", "Nope"], "no plugin creator matches 'Nope'; available: CliScale:1"),
        (["--plugin", "CliScale:2"], "no plugin creator matches 'CliScale:2'"),
        (["--plugin", "CliScale", "--shapes", "x:1x4:2x4"], "expected NAME:SHAPE or NAME:MIN:OPT:MAX"),
        (["--plugin", "CliScale", "--shapes", "x:1xq"], "is not a shape like 2x3x4"),
        (["--plugin", "CliScale", "--shapes", "x:4x4:2x4:8x4"], "min <= opt <= max"),
        (["--plugin", "CliScale", "--shapes", "x:2x4", "--dtype", "float99"], "unknown dtype 'float99'"),
        (["--plugin", "CliScale", "--shapes", "x:2x4", "--field", "scale"], "expected KEY=VALUE"),
        (["--plugin", "CliScale", "--shapes", "x:2x4", "--field", "scale=big"], "cannot read 'big'"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    good: str, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", good, *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("plugrt check: error: ") and message in lines[0], lines


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "missing.py"), "--plugin", "X"]) == 2
    assert "cannot load plugin library" in capsys.readouterr().err


def test_file_that_raises_on_import_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "raises.py"
    path.write_text("raise RuntimeError('no GPU here')\n")
    assert main(["check", str(path), "--plugin", "X"]) == 2
    assert "no GPU here" in capsys.readouterr().err


def test_builtin_library(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("plugrt.plugins")
    argv = [
        "check",
        "builtin",
        "--plugin",
        "LayerNorm",
        "--field",
        "gamma=1,2,3",
        "--field",
        "beta=0,0,1",
        "--shapes",
        "x:1x3:2x3:4x3",
    ]
    assert main(argv) == 0
    assert "LayerNorm v1" in capsys.readouterr().out
