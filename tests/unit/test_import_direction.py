"""Dependencies point one way: no module of plugrt imports the package root (``plugrt/__init__``).

The root re-exports the public names; the modules below it import each other
directly. Two kinds of module may use the root and are named here: ``compat``,
whose job is to make ``import tensorrt`` give the root, and the shipped example
plugins, user code that shows the one-line contract (``import plugrt as trt``,
and only that line differs from a TensorRT plugin); nothing in the library
imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import plugrt

SRC = Path(plugrt.__file__).parent
ROOT_USERS = {"plugrt.compat", "plugrt.examples"}  # see the module docstring


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_submodule(name: str) -> bool:
    return (SRC / name).is_dir() or (SRC / f"{name}.py").is_file()


def root_imports(source: str, package: str) -> list[str]:
    """Each import in ``source`` (a module of ``package``) that takes a name from the package root."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            hit = any(alias.name == "plugrt" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            origin = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            origin = ".".join(p for p in (origin, node.module or "") if p)
            hit = origin == "plugrt" and any(not _is_submodule(alias.name) for alias in node.names)
        else:
            continue
        if hit:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_imports_the_package_root() -> None:
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        if module == "plugrt" or any(module == u or module.startswith(f"{u}.") for u in ROOT_USERS):
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        if found := root_imports(path.read_text(encoding="utf-8"), package):
            offenders[module] = found
    assert not offenders, f"modules importing the package root (import the module that defines the name): {offenders}"


def test_the_scan_finds_root_imports() -> None:
    """The scan itself: absolute and relative imports of the root, not of its submodules."""
    source = (
        "import plugrt as trt\nfrom .. import __version__\nfrom .. import _version\n"
        "from plugrt import Builder\nfrom plugrt.core import dims\nfrom . import errors\nimport plugrt.plugin\n"
        "def f():\n    import plugrt\n"
    )
    assert root_imports(source, "plugrt.cli") == [
        "line 1: import plugrt as trt",
        "line 2: from .. import __version__",
        "line 4: from plugrt import Builder",
        "line 9: import plugrt",
    ]
    assert root_imports("from . import __version__\n", "plugrt") == ["line 1: from . import __version__"]
    assert root_imports("from . import standard\n", "plugrt.ops") == []
