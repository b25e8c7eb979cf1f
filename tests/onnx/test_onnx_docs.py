"""docs/onnx.md lists exactly the ops the importer registry knows.

Run this file as a script to rewrite the list: ``python tests/onnx/test_onnx_docs.py``.
"""

from __future__ import annotations

import os
import re

from plugrt.onnx.importers.base import registered_ops

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "onnx.md")
START, END = "<!-- supported-ops:start -->", "<!-- supported-ops:end -->"


def ops_block() -> str:
    """The generated list: ops grouped by first letter, one line per letter."""
    lines: dict[str, list[str]] = {}
    for op in registered_ops():
        lines.setdefault(op[0].upper(), []).append(f"`{op}`")
    body = "\n".join(f"- **{letter}**: {', '.join(ops)}" for letter, ops in sorted(lines.items()))
    return f"{START}\n{body}\n\n{len(registered_ops())} ops.\n{END}"


def documented_block(text: str) -> str:
    match = re.search(re.escape(START) + r".*?" + re.escape(END), text, re.S)
    assert match, f"{DOC} lacks the {START} ... {END} markers"
    return match.group(0)


def test_docs_list_the_registered_ops() -> None:
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    assert documented_block(text) == ops_block(), (
        "docs/onnx.md's supported-op list is out of date; run: python tests/onnx/test_onnx_docs.py"
    )


if __name__ == "__main__":
    with open(DOC, encoding="utf-8") as f:
        content = f.read()
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(content.replace(documented_block(content), ops_block()))
    print(f"wrote {len(registered_ops())} ops to {DOC}")
