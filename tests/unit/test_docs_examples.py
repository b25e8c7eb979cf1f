"""Every ```python block in README.md and docs/*.md runs.

A block whose first line is ``# GPU`` needs CuPy and a GPU: it is marked ``gpu`` (skipped
elsewhere). Blocks of one file run in order in one namespace, so a later block can use what an
earlier one made.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ["README.md"] + [
    os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")
]


def _blocks() -> list[Any]:
    found = []
    for name in FILES:
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            text = f.read()
        for i, match in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S)):
            code = match.group(1)
            marks = [pytest.mark.gpu] if code.startswith("# GPU") else []
            found.append(pytest.param(name, i, code, marks=marks, id=f"{name}[{i}]"))
    return found


_NAMESPACES: dict[str, dict[str, Any]] = {}


@pytest.mark.parametrize(("name", "index", "code"), _blocks())
def test_doc_example_runs(name: str, index: int, code: str) -> None:
    namespace = _NAMESPACES.setdefault(name, {"__name__": f"doc_example_{os.path.basename(name)}"})
    exec(compile(code, f"{name}[{index}]", "exec"), namespace)
