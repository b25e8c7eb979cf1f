"""The command line never misleads: one-line errors, documented exit codes, checks before long work,
example plugins only when asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from onnx import TensorProto, helper, save

from plugrt.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "plugrt.cli.main", *argv], capture_output=True, text=True, env=env,
                          timeout=120)


def test_plugins_without_the_library_lists_no_example_plugins() -> None:
    result = _cli("plugins", "--no-builtin")
    assert result.returncode == 0
    assert "CircPadPlugin" not in result.stdout and result.stdout.strip().endswith("0 creator(s)")


@pytest.fixture()
def relu_onnx(tmp_path: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    path = tmp_path / "relu.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_exec_errors_are_one_line(tmp_path: Path) -> None:
    model = tmp_path / "broken.onnx"
    model.write_bytes(b"not an onnx model")
    result = _cli("exec", "--onnx", str(model), "--shapes=x:2x4")
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("plugrt exec: error: "), result.stderr


FAST = ["--iterations", "1", "--duration", "0", "--warmUp", "0"]


@pytest.mark.parametrize("argv, message", [
    (["--onnx", "/no/such/model.onnx"], "--onnx: cannot read '/no/such/model.onnx': the file does not exist"),
    (["--onnx", "MODEL", "--shapes=x:2x4", "--saveEngine", "/no/such/dir/m.plan"], "--saveEngine '/no/such/dir/m.plan': folder"),
    (["--onnx", "MODEL", "--shapes=x:2x4", "--exportProfile", "/no/such/dir/p.json"], "--exportProfile"),
    (["--onnx", "MODEL", "--shapes=x:2x4", "--exportTimes", "TMP"], "is a directory"),
    (["--onnx", "MODEL", "--shapes=z:2x4"], "--shapes names ['z'], which are not inputs"),
    (["--onnx", "MODEL", "--shapes=x:2x4x1"], "--shapes x: 2x4x1 has rank 3; 'x' has rank 2"),
    (["--onnx", "MODEL", "--shapes=x:2x4", "--loadInputs=x:/no/such.npy"], "--loadInputs: file '/no/such.npy'"),
])
def test_exec_usage_errors_exit_2_before_building(argv: list[str], message: str, relu_onnx: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(relu_onnx) if a == "MODEL" else str(tmp_path) if a == "TMP" else a for a in argv]
    assert main(["exec", *argv, *FAST]) == 2
    err = capsys.readouterr().err
    assert message in err and "Engine built" not in err


def test_inspect_html_to_an_unwritable_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "x.plan"
    plan.write_bytes(b"nothing")
    assert main(["inspect", str(plan), "--html", "/no/such/dir/x.html"]) == 2
    assert "--html '/no/such/dir/x.html': folder" in capsys.readouterr().err


def test_exec_runs_the_chained_model(relu_onnx: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "relu.plan"
    assert main(["exec", "--onnx", str(relu_onnx), "--shapes=x:2x4", "--saveEngine", str(plan), *FAST]) == 0
    assert main(["exec", "--loadEngine", str(plan), "--shapes=x:2x4", *FAST]) == 0


def test_compile_raises_without_printing_the_error_first(capfd: pytest.CaptureFixture[str]) -> None:
    import plugrt

    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "add",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 4]),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(plugrt.PlugrtError, match="dimension 0 is 2 and 3"):
        plugrt.compile(helper.make_model(graph))
    assert "ERROR" not in capfd.readouterr().err


def test_version_flag() -> None:
    from plugrt import __version__

    result = _cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"plugrt {__version__}"


def test_exec_prints_one_summary_by_default(relu_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["exec", "--onnx", str(relu_onnx), "--shapes=x:2x4", "--iterations", "50", "--duration", "0", "--warmUp", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Average on" not in out and out.count("=== Performance summary ===") == 1
    assert main([*argv, "--avgRuns", "25"]) == 0
    assert capsys.readouterr().out.count("Average on 25 runs") == 2


def test_the_docs_example_commands_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md's commands on model.onnx run one after the other (the plan of the first serves the second)."""
    import re
    import shlex

    text = (ROOT / "docs" / "cli.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None
    commands = [shlex.split(line) for line in block.group(1).splitlines() if "model.onnx" in line or "model.plan" in line]
    assert len(commands) >= 3
    graph = helper.make_graph([helper.make_node("Relu", ["input"], ["output"])], "relu",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, 224, 224])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 3, 224, 224])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "model.onnx"))
    monkeypatch.chdir(tmp_path)
    for command in commands:
        assert command[0] == "plugrt"
        argv = command[1:] + (["--iterations=2", "--duration=0", "--warmUp=0"] if command[1] == "exec" else [])
        assert main(argv) == 0, (command, capsys.readouterr().err)
    assert (tmp_path / "model.plan").exists() and (tmp_path / "model.html").exists()


def test_demo_says_its_weights_are_synthetic_and_removes_its_temporary_folder() -> None:
    import io
    import re

    from plugrt.cli.demo import run_demo

    out = io.StringIO()
    assert run_demo(out, trace=False, iterations=1) == 0
    text = out.getvalue()
    assert "synthetic random weights" in text and re.search(r"\d+ detections \(3 of \d+ shown\)", text)
    folder = re.search(r"plans are written to (\S+) \(a temporary folder, removed at the end\)", text)
    assert folder is not None and not os.path.exists(folder.group(1))
