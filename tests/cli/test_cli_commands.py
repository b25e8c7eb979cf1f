"""The ``plugrt`` command: inspect, plugins and exec on engines built through the API."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import plugrt as trt
from plugrt.cli.main import main
from plugrt.cli.plan_summary import summarize_plan
from plugrt.examples import circ_pad_v2

from testing_plugins import build, fields

PLUGIN_FILE = "from plugrt.examples import circ_pad_v2\ncirc_pad_v2.register()\n"


@pytest.fixture()
def plan_file(tmp_path: Path) -> Path:
    creator = circ_pad_v2.register()
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    network.name = "cli_net"
    x = network.add_input("x", trt.float32, (-1, 4))
    pad = network.add_plugin_v2([x], creator.create_plugin("pad", fields(pads=[1, 1])))
    pad.name = "pad"
    relu = network.add_activation(pad.get_output(0), trt.ActivationType.RELU)
    relu.name = "relu"
    relu.get_output(0).name = "y"
    network.mark_output(relu.get_output(0))
    path = tmp_path / "net.plan"
    path.write_bytes(build(network, builder, [{"x": ((1, 4), (2, 4), (8, 4))}]))
    return path


@pytest.fixture()
def plugin_file(tmp_path: Path) -> Path:
    path = tmp_path / "plugins.py"
    path.write_text(PLUGIN_FILE)
    return path


def test_inspect_text_and_json(plan_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(plan_file)]) == 0
    text = capsys.readouterr().out
    assert "engine 'cli_net'" in text and "plugin CircPadPlugin v1" in text and "x [1, 4]..[8, 4]" in text
    assert main(["inspect", str(plan_file), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [layer["name"] for layer in summary["layers"]] == ["pad", "relu"]
    assert summary["layers"][0]["plugin"]["name"] == "CircPadPlugin"
    assert summary["profiles"][0]["shapes"]["x"] == {"min": [1, 4], "opt": [2, 4], "max": [8, 4]}
    assert summary["profiles"][0]["arena_bytes"] > 0


def test_inspect_and_the_engine_inspector_describe_layers_alike(plan_file: Path) -> None:
    summary = summarize_plan(plan_file.read_bytes())
    engine = trt.Runtime(trt.Logger(trt.Logger.ERROR)).deserialize_cuda_engine(plan_file.read_bytes())
    inspector = engine.create_engine_inspector()
    pad, relu = summary["layers"]
    assert pad["plugin"].pop("payload_hex")  # the summary adds what the plugin's bytes hold
    assert summary["layers"] == [inspector.layer_info(i) for i in range(engine.num_layers)]
    assert pad["plugin"]["family"] == "v2_dynamic" and pad["workspace"] == 0 and pad["tactic"] == 0
    assert relu["kind"] == "activation" and relu["inputs"][0]["role"] == "internal"
    with pytest.raises(trt.ExecutionError, match=r"layer index 2 is out of range; the engine has 2 layers"):
        inspector.layer_info(2)


def test_inspect_html_is_a_wellformed_page_with_the_graph(plan_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "engine.html"
    assert main(["inspect", str(plan_file), "--html", str(out)]) == 0
    page = out.read_text()

    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)

    collector = Collect()
    collector.feed(page)
    assert {"html", "head", "body", "svg", "rect", "line", "title"} <= set(collector.tags)
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    svg = ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    ns = "{http://www.w3.org/2000/svg}"
    nodes = svg.findall(f"{ns}g")
    kinds = sorted(g.get("data-kind") or "" for g in nodes)
    assert kinds == ["activation", "input", "output", "plugin"]
    assert len(svg.findall(f"{ns}line")) == 3  # x -> pad -> relu -> y


def test_inspect_errors_have_exit_codes(tmp_path: Path, plan_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "missing.plan")]) == 2
    assert "cannot read plan file" in capsys.readouterr().err
    damaged = tmp_path / "damaged.plan"
    damaged.write_bytes(plan_file.read_bytes()[:50])
    assert main(["inspect", str(damaged)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("plugrt inspect: error: plan is truncated") and err.count("\n") == 1


def test_plugins_lists_loaded_creators(plugin_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--no-builtin", "--load", str(plugin_file), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    pad = next(r for r in rows if r["name"] == "CircPadPlugin")
    assert pad["interface"] == "IPluginV2DynamicExt" and pad["fields"] == [{"name": "pads", "type": "INT32", "default": None}]
    assert main(["plugins", "--no-builtin", "--load", str(plugin_file.with_name("nope.py"))]) == 2
    assert "cannot load plugin library" in capsys.readouterr().err


def test_exec_load_engine_reports_latency_and_exports(
    plan_file: Path, plugin_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 6
    np.save(tmp_path / "x.npy", x)
    times, output, profile = tmp_path / "times.json", tmp_path / "out.json", tmp_path / "profile.json"
    code = main(
        [
            "exec",
            "--loadEngine",
            str(plan_file),
            "--staticPlugins",
            str(plugin_file),
            "--shapes=x:3x4",
            f"--loadInputs=x:{tmp_path / 'x.npy'}",
            "--iterations",
            "5",
            "--duration",
            "0",
            "--warmUp",
            "0",
            "--avgRuns",
            "2",
            "--exportTimes",
            str(times),
            "--exportOutput",
            str(output),
            "--dumpProfile",
            "--exportProfile",
            str(profile),
            "--dumpLayerInfo",
            "--trace",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "[I] === Performance summary ===" in text and "percentile(99%)" in text and "Throughput:" in text
    assert "Average on 2 runs" in text and "pad [CircPadPlugin v1]" in text
    assert "deserialize" in text and "CircPadPlugin v1.enqueue" in text  # --trace
    assert len(json.loads(times.read_text())) >= 5
    [exported] = json.loads(output.read_text())
    assert exported["name"] == "y" and exported["dimensions"] == "3x6"
    np.testing.assert_array_equal(
        np.array(exported["values"]).reshape(3, 6), np.maximum(np.pad(x, [(0, 0), (1, 1)], mode="wrap"), 0)
    )
    assert {row["name"] for row in json.loads(profile.read_text())} == {"pad", "relu"}


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["exec"], 2, "exactly one of --onnx FILE or --loadEngine FILE"),
        (["exec", "--loadEngine", "PLAN", "--shapes=x:3xq"], 2, "must look like 1x3x224x224"),
        (["exec", "--loadEngine", "PLAN", "--shapes=z:3x4"], 2, "['z'] are not inputs of the engine"),
        (["exec", "--loadEngine", "PLAN", "--shapes=x:99x4"], 2, "outside the engine's profile"),
        (["exec", "--loadEngine", "PLAN", "--iterations", "0"], 2, "--iterations and --avgRuns must be >= 1"),
        (["exec", "--loadEngine", "/no/such.plan"], 2, "cannot read '/no/such.plan'"),
    ],
)
def test_exec_usage_errors(
    argv: list[str], code: int, message: str, plan_file: Path, plugin_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(plan_file) if a == "PLAN" else a for a in argv]
    if "--loadEngine" in argv:
        argv += ["--staticPlugins", str(plugin_file), "--duration", "0", "--warmUp", "0"]
    assert main(argv) == code
    assert message in capsys.readouterr().err


def test_exec_unregistered_plugin_is_a_model_error(plan_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = trt.get_plugin_registry()
    creator = circ_pad_v2.register()
    registry.deregister_creator(creator)
    try:
        assert main(["exec", "--loadEngine", str(plan_file), "--duration", "0", "--warmUp", "0"]) == 3
        assert "no plugin creator for 'CircPadPlugin' version '1'" in capsys.readouterr().err
    finally:
        registry.register_creator(creator, "")
