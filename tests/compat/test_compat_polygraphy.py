"""Gap 11: ``plugrt.compat`` lets tools that ``import tensorrt`` (Polygraphy) run on plugrt, opt-in."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import numpy as np
import pytest
from compat_helpers import infer
from onnx import TensorProto, helper, save

import plugrt
import plugrt.compat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_install_gives_plugrt_under_tensorrts_name_and_version() -> None:
    module = plugrt.compat.install()
    assert plugrt.compat.install() is module  # idempotent
    import tensorrt

    assert tensorrt is module and plugrt.compat.is_installed()
    assert tensorrt.Builder is plugrt.Builder and tensorrt.IPluginV3OneBuildV2 is plugrt.IPluginV3OneBuildV2
    assert tensorrt.__version__ == plugrt.compat.TENSORRT_API_VERSION
    assert tuple(int(p) for p in tensorrt.__version__.split(".")[:2]) >= (8, 5)  # Polygraphy's minimum
    assert tensorrt.__plugrt_version__ == plugrt.__version__
    assert "Builder" in dir(tensorrt)
    with pytest.raises(AttributeError, match=r"module 'tensorrt' .* has no attribute 'NoSuchName'; plugrt does not provide it"):
        _ = tensorrt.NoSuchName


def test_installed_context_restores_the_previous_state(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    with plugrt.compat.installed() as module:
        assert sys.modules["tensorrt"] is module
    assert "tensorrt" not in sys.modules and not plugrt.compat.is_installed()
    plugrt.compat.install()  # leave it as the other tests of this session expect


def test_device_choice_sets_the_runtime_default() -> None:
    module = plugrt.compat.install("cuda")
    try:
        assert issubclass(module.Runtime, plugrt.Runtime) and module.Runtime is not plugrt.Runtime
        assert module.Runtime.__init__.__defaults__ == (None, "cuda")
    finally:
        plugrt.compat.install("cpu")
    assert module.Runtime.__init__.__defaults__ == (None, "cpu")
    with pytest.raises(plugrt.PlugrtError, match="device must be 'cpu' or 'cuda', got 'tpu'"):
        plugrt.compat.install("tpu")


def test_a_real_tensorrt_is_never_replaced(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = types.ModuleType("tensorrt")
    real.__file__ = "/usr/lib/python3/dist-packages/tensorrt/__init__.py"
    monkeypatch.setitem(sys.modules, "tensorrt", real)
    with pytest.raises(plugrt.PlugrtError, match=r"a real 'tensorrt' module is already imported \('/usr/lib/python3/dist-packages/tensorrt"):
        plugrt.compat.install()
    assert sys.modules["tensorrt"] is real


def test_launcher_runs_a_script_with_tensorrt_as_plugrt(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "tool.py"
    script.write_text(
        "import sys\nimport tensorrt as trt\n"
        "print(trt.__version__, trt.get_plugin_registry() is __import__('plugrt').get_plugin_registry(), sys.argv[1:])\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    done = subprocess.run(
        [sys.executable, "-m", "plugrt.compat", str(script), "--flag", "x"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [plugrt.compat.TENSORRT_API_VERSION, "True", "['--flag',", "'x']"]
    usage = subprocess.run([sys.executable, "-m", "plugrt.compat"], capture_output=True, text=True, env=env, timeout=120)
    assert usage.returncode == 2 and "usage: python -m plugrt.compat" in usage.stdout


def test_polygraphy_loaders_build_save_and_load_on_the_cpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("polygraphy")
    plugrt.compat.install()
    from polygraphy.backend.common import BytesFromPath
    from polygraphy.backend.trt import (
        CreateConfig,
        EngineFromBytes,
        EngineFromNetwork,
        NetworkFromOnnxPath,
        Profile,
        SaveEngine,
    )

    path = str(tmp_path / "model.onnx")
    nodes = [helper.make_node("Relu", ["X"], ["R"]), helper.make_node("Add", ["R", "X"], ["Y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ("n", 3))], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ("n", 3))]
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    profiles = [Profile().add("X", min=(1, 3), opt=(4, 3), max=(8, 3))]
    config = CreateConfig(profiles=profiles, fp16=True, memory_pool_limits={plugrt.MemoryPoolType.WORKSPACE: 1 << 20})
    engine = EngineFromNetwork(NetworkFromOnnxPath(path), config)()
    SaveEngine(engine, str(tmp_path / "model.plan"))()
    loaded = EngineFromBytes(BytesFromPath(str(tmp_path / "model.plan")))()
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    for candidate in (engine, loaded):
        y = infer(candidate.create_execution_context(), {"X": x})["Y"]
        np.testing.assert_allclose(y, np.maximum(x, 0) + x)  # FP16 allowed; the I/O stays FLOAT
        assert y.dtype == np.float32


def test_polygraphy_command_line_converts_a_model_on_the_cpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``python -m plugrt.compat <polygraphy> convert model.onnx -o model.plan`` builds a plugrt plan."""
    pytest.importorskip("polygraphy")
    model = tmp_path / "model.onnx"
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"])], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, (2, 3))], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (2, 3))],
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), str(model))
    cli = tmp_path / "polygraphy_cli.py"  # what the `polygraphy` console script runs
    cli.write_text("import sys\nfrom polygraphy.tools import main\nsys.exit(main())\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    done = subprocess.run(
        [sys.executable, "-m", "plugrt.compat", str(cli), "convert", str(model), "-o", str(tmp_path / "model.plan")],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    engine = plugrt.Runtime(plugrt.Logger(plugrt.Logger.ERROR)).deserialize_cuda_engine((tmp_path / "model.plan").read_bytes())
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    np.testing.assert_array_equal(infer(engine.create_execution_context(), {"X": x})["Y"], np.maximum(x, 0))
