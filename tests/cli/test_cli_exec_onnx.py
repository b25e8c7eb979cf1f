"""``plugrt exec --onnx``: building from ONNX with trtexec's build flags, saving and reloading."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import plugrt as trt
from plugrt.cli.exec_build import BarMonitor
from plugrt.cli.main import main

FAST = ["--duration", "0", "--warmUp", "0", "--iterations", "2"]


def _write_model(path: Path, custom: bool = False) -> Path:
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32) * 2, "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"])]
    if custom:
        nodes.append(helper.make_node("CircPadPlugin", ["h"], ["y"], pads=[1, 1]))
    else:
        nodes.append(helper.make_node("Relu", ["h"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_onnx_build_save_and_reload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, plan = _write_model(tmp_path / "m.onnx"), tmp_path / "m.plan"
    args = ["exec", f"--onnx={model}", "--minShapes=x:1x4", "--optShapes=x:2x4", "--maxShapes=x:8x4",
            f"--saveEngine={plan}", "--fp16", "--int8", "--noDataTransfers", "--verbose", *FAST]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "[I] Engine built in" in out and f"[I] Engine saved to {plan}" in out and "Throughput" in out
    assert plan.stat().st_size > 0
    assert main(["exec", f"--loadEngine={plan}", "--shapes=x:8x4", "--useCudaGraph", *FAST]) == 0
    assert "--useCudaGraph needs --device cuda" in capsys.readouterr().out
    assert main(["exec", f"--loadEngine={plan}", "--shapes=x:9x4", *FAST]) == 2  # beyond --maxShapes
    assert "outside the engine's profile" in capsys.readouterr().err


def test_onnx_with_python_plugin_and_skip_inference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write_model(tmp_path / "custom.onnx", custom=True)
    plugin = tmp_path / "plugins.py"
    plugin.write_text("from plugrt.examples import circ_pad_v2\ncirc_pad_v2.register()\n")
    assert main(["exec", f"--onnx={model}", "--shapes=x:3x4", f"--dynamicPlugins={plugin}", "--skipInference",
                 "--trace"]) == 0
    out = capsys.readouterr().out
    assert "CircPadPlugin v1.serialize" in out and "Throughput" not in out


def test_dynamic_onnx_input_needs_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write_model(tmp_path / "m.onnx")
    assert main(["exec", f"--onnx={model}", *FAST]) == 2
    assert "give --shapes=x:..." in capsys.readouterr().err


def test_broken_onnx_is_a_model_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "broken.onnx"
    model.write_bytes(b"\x08\x07garbage")
    assert main(["exec", f"--onnx={model}", "--shapes=x:1x4", *FAST]) == 3
    assert "cannot import" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_cuda_device_without_cupy_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write_model(tmp_path / "m.onnx")
    assert main(["exec", f"--onnx={model}", "--shapes=x:1x4", "--device", "cuda", *FAST]) == 2
    assert "pip install 'plugrt[cuda]'" in capsys.readouterr().err


def test_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    bar = BarMonitor(enabled=True)
    bar.phase_start("Building engine", None, 4)
    for step in range(4):
        assert bar.step_complete("Building engine", step)
    bar.phase_finish("Building engine")
    text = stream.getvalue()
    assert "[" + "=" * 30 + "] Building engine 4/4" in text and text.endswith("\n")


def test_progress_lines_in_the_verbose_log() -> None:
    """Without a terminal, --verbose still shows the build advancing: each tenth of the layers, and the total."""
    seen: list[str] = []

    class Collect(trt.ILogger):
        def log(self, severity: trt.ILogger.Severity, msg: str) -> None:
            seen.append(msg)

    bar = BarMonitor(enabled=False, logger=Collect(trt.ILogger.Severity.VERBOSE))
    bar.phase_start("Building engine", None, 25)
    for step in range(25):
        bar.step_complete("Building engine", step)
    bar.phase_finish("Building engine")
    progress = [m for m in seen if "layers after" in m]
    assert seen[0] == "Building engine: 25 layers"
    assert len(progress) == 10 and progress[-1].startswith("Building engine: 25/25 layers after")
    assert seen[-1].startswith("Building engine: finished in ")


def test_verbose_exec_logs_import_and_build_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _write_model(tmp_path / "m.onnx")
    assert main(["exec", f"--onnx={model}", "--shapes=x:1x4", "--verbose", *FAST]) == 0
    err = capsys.readouterr().err
    assert "imported" in err and "layers in" in err
    assert "Building engine: finished in" in err


def test_inferences_launch_their_layers_unless_cuda_graphs_are_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import plugrt.cli.exec_cmd as exec_cmd

    seen: list[bool | None] = []
    made = exec_cmd._Session.__init__

    def record(self: exec_cmd._Session, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(self.run.context.use_cuda_graph)

    monkeypatch.setattr(exec_cmd._Session, "__init__", record)
    model = _write_model(tmp_path / "m.onnx")
    assert main(["exec", f"--onnx={model}", "--shapes=x:2x4", *FAST]) == 0
    assert main(["exec", f"--onnx={model}", "--shapes=x:2x4", "--useCudaGraph", *FAST]) == 0
    assert seen == [False, False]  # (graphs need --device cuda; the default context would replay one there)
