"""``plugrt demo``: the README's main job runs, checks itself and writes its plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugrt.cli.main import main


def test_demo_runs_all_parts_and_checks_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--iterations", "1", "--plan-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1. detector (ONNX, BatchedNMSDynamic_TRT head; synthetic random weights and image)" in out and "matches the ONNX reference evaluator + NumPy NMS" in out
    assert "2. transformer block (ONNX, 2 LayerNorm plugins)" in out and "(ok)" in out and "MISMATCH" not in out
    assert "3. plugin chain" in out and out.count("matches NumPy") == 4
    assert "deserialize] pad_last_dim (IPluginV2DynamicExt): CircPadPlugin v1 creator.deserialize_plugin" in out
    assert out.rstrip().endswith("all results match their references")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["circ_pad.plan", "detector.plan", "transformer.plan"]


def test_demo_without_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--iterations", "1", "--no-trace", "--plan-dir", str(tmp_path)]) == 0
    assert "plugin call trace" not in capsys.readouterr().out
