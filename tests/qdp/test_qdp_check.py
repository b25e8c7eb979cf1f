"""``check_plugin`` and ``plugrt check`` take a decorator-API plugin id and run every check on it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from qdp_samples import circ_pad_reference

from plugrt.cli.main import main
from plugrt.plugin import _lib
from plugrt.testing import check_plugin
from plugrt.testing.spec import CheckUsageError


def test_check_plugin_runs_every_check_on_the_samples() -> None:
    pads = np.array([1, 1, 2, 0], np.int32)
    report = check_plugin(
        "sample::circ_pad_plugin",
        {"pads": pads},
        [((1, 3, 6, 5), (2, 3, 6, 5), (4, 3, 6, 5))],
        reference=lambda x: circ_pad_reference(x, pads),
    )
    assert report.ok, str(report)
    assert report.family == "IPluginV3" and "circ_pad_plugin v1 (namespace 'sample')" in report.plugin
    assert {r.id for r in report.results if r.status == "pass"} >= {
        "shape-hooks-pure",
        "format-consistency",
        "format-no-lookahead",
        "serialization-roundtrip",
        "reference",
    }
    for plugin_id, fields, shapes in [
        ("sample::elemwise_add_plugin", {"block_size": "256"}, [(2, 3)]),
        ("sample::elemwise_add_plugin_tuned", {"block_size": 64}, [((1, 4), (2, 4), (3, 4))]),
        ("sample::non_zero_plugin", {}, [((1, 1), (4, 4), (8, 8))]),
        ("sample::elemwise_add_plugin_", {"delta": 3}, [((1, 3, 4, 4), (2, 3, 4, 4), (3, 3, 4, 4))]),
    ]:
        report = check_plugin(plugin_id, fields, shapes)
        assert report.ok, str(report)


def test_check_plugin_misuse_with_a_qdp_id() -> None:
    with pytest.raises(CheckUsageError, match=r"check_plugin\('sample::nope'\): no such QDP plugin is registered"):
        check_plugin("sample::nope", {}, [(2, 3)])


QDP_FILE = textwrap.dedent(
    """
    import numpy as np
    import plugrt.plugin as trtp


    @trtp.register("cli_qdp::double")
    def double_desc(x: trtp.TensorDesc, factor: float) -> trtp.TensorDesc:
        return x.like()


    @trtp.impl("cli_qdp::double")
    def double_impl(x: trtp.Tensor, factor: float, outputs: tuple[trtp.Tensor], stream: int) -> None:
        np.multiply(np.asarray(x), factor, out=np.asarray(outputs[0]))
    """
)


def test_plugrt_check_takes_a_qdp_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cli_qdp_double.py"
    path.write_text(QDP_FILE)
    try:
        code = main(["check", str(path), "--plugin", "cli_qdp::double", "--field", "factor=2", "--shapes", "x:2x3"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert out.startswith("plugrt check: double v1 (namespace 'cli_qdp') (IPluginV3)")
        assert "  PASS  serialization-roundtrip" in out
    finally:
        _lib.forget("cli_qdp::double")
