"""External weights: read from the model's folder only, refused for bytes unless a folder is named."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import plugrt as trt
from plugrt.onnx.importers.base import OnnxImportError

SECRET = np.arange(4, dtype=np.float32) + 0.5


def external_model(location: str, length: int = 16) -> onnx.ModelProto:
    """y = x + w, with w's 4 floats stored at ``location``."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def parse(data: bytes, path: str | None = None) -> tuple[bool, list[str]]:
    logger = trt.Logger(trt.Logger.INTERNAL_ERROR)
    parser = trt.OnnxParser(trt.Builder(logger).create_network(0), logger)
    ok = parser.parse(data, path)
    return ok, [parser.get_error(i).desc() for i in range(parser.num_errors)]


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model folder with weights.bin, and a working directory holding a 'credential' file."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "weights.bin").write_bytes(SECRET.tobytes())
    work = tmp_path / "work"
    (work / ".config").mkdir(parents=True)
    (work / ".config" / "credentials").write_bytes(np.full(4, 7, np.float32).tobytes())
    monkeypatch.chdir(work)
    return model_dir


def test_bytes_with_external_data_are_refused_not_read_from_the_working_directory(folder: Path) -> None:
    data = external_model(".config/credentials").SerializeToString()
    ok, errors = parse(data)
    assert not ok
    assert "tensor(s) 'w' keep their data in external files" in errors[0] and "no folder" in errors[0]
    with pytest.raises(OnnxImportError, match=r"'w' keep their data in external files.*external_data_dir"):
        trt.compile(data)


def test_bytes_read_external_data_from_a_named_folder(folder: Path) -> None:
    data = external_model("weights.bin").SerializeToString()
    ok, errors = parse(data, str(folder))
    assert ok, errors
    y = trt.compile(data, external_data_dir=folder)({"x": np.zeros(4, np.float32)})["y"]
    np.testing.assert_array_equal(y, SECRET)


def test_a_model_file_reads_external_data_from_its_own_folder(folder: Path) -> None:
    path = folder / "model.onnx"
    path.write_bytes(external_model("weights.bin").SerializeToString())
    y = trt.compile(str(path))({"x": np.ones(4, np.float32)})["y"]
    np.testing.assert_array_equal(y, SECRET + 1)


@pytest.mark.parametrize("location, message", [
    ("/etc/hostname", r"location '/etc/hostname' is absolute"),
    ("../work/.config/credentials", r"leaves the model's folder"),
    ("sub/../../work/.config/credentials", r"leaves the model's folder"),
    ("link/credentials", r"leads out of the model's folder .* symbolic link"),
    ("missing.bin", r"cannot read external data from .*missing.bin"),
])
def test_a_model_file_cannot_reach_outside_its_folder(folder: Path, location: str, message: str) -> None:
    os.symlink(folder.parent / "work" / ".config", folder / "link")
    path = folder / "model.onnx"
    path.write_bytes(external_model(location).SerializeToString())
    ok, errors = parse(path.read_bytes(), str(path))
    assert not ok
    assert any(re.search(message, e) for e in errors), errors


def test_external_data_shorter_than_declared_is_refused(folder: Path) -> None:
    path = folder / "model.onnx"
    path.write_bytes(external_model("weights.bin", length=64).SerializeToString())
    ok, errors = parse(path.read_bytes(), str(path))
    assert not ok and "holds 16 bytes at offset 0, the model says 64" in errors[0]


def test_external_data_dir_must_be_a_folder(folder: Path) -> None:
    with pytest.raises(OnnxImportError, match=r"external_data_dir must be a folder, got '.*nowhere'"):
        trt.compile(external_model("weights.bin").SerializeToString(), external_data_dir=folder / "nowhere")
