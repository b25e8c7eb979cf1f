"""Every ```python block in README.md and docs/*.md runs."""

from __future__ import annotations

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ["README.md"] + [
    os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")
]


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for name in FILES:
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            text = f.read()
        for i, match in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S)):
            found.append((name, i, match.group(1)))
    return found


@pytest.mark.parametrize(
    ("name", "index", "code"), _blocks(), ids=lambda v: str(v)[:30] if isinstance(v, str) else str(v)
)
def test_doc_example_runs(name: str, index: int, code: str) -> None:
    exec(compile(code, f"{name}[{index}]", "exec"), {"__name__": f"doc_example_{index}"})
