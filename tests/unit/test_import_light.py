"""``import plugrt`` stays light: ONNX and the checker load only when first used."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_import_does_not_load_onnx_or_the_checker() -> None:
    out = _run("import sys, plugrt; print('onnx' in sys.modules, 'plugrt.testing' in sys.modules)")
    assert out == "False False"


def test_lazy_names_resolve_on_first_use() -> None:
    import plugrt
    from plugrt.onnx.compile import compile as real_compile
    from plugrt.onnx.parser import OnnxParser
    from plugrt.testing import check_plugin

    assert plugrt.compile is real_compile
    assert plugrt.OnnxParser is OnnxParser
    assert plugrt.testing.check_plugin is check_plugin
    out = _run("from plugrt import OnnxParser, compile, testing; print(OnnxParser.__name__, compile.__name__)")
    assert out == "OnnxParser compile"


def test_unknown_attribute_names_itself() -> None:
    import plugrt

    with pytest.raises(AttributeError, match="no_such_name"):
        plugrt.no_such_name
