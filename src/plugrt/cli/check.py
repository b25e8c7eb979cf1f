"""``plugrt check``: run the plugin conformance checker on a plugin defined in a Python file.

    plugrt check my_plugin.py --plugin MyPlugin:1 --field alpha=0.5 --field pads=1,2 \\
        --shapes x:1x3x8:4x3x64:8x3x256 [--dtype float16] [--json]

The file is loaded with ``get_plugin_registry().load_library(path)`` (importing
it registers its creators); ``builtin`` checks the built-in plugin library. Exit
codes: 0 every check passed or was skipped, 1 a check failed, 2 usage error
(unknown plugin, bad shape, unknown dtype ...), reported on one line.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..interfaces.registry import get_plugin_registry
from ..testing import CHECK_IDS, CheckUsageError, check_plugin
from .errors import UsageError

__all__ = ["HELP", "NAME", "add_arguments", "find_creator", "parse_shapes", "run"]

NAME = "check"
HELP = "check a plugin against TensorRT's plugin contract (serialization, shapes, formats, clones, ...)"


def _shape(text: str, where: str) -> tuple[int, ...]:
    if text.strip().lower() in ("scalar", "()"):
        return ()
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise CheckUsageError(f"--shapes {where}: {text!r} is not a shape like 2x3x4 (or 'scalar')") from None
    if any(d < 0 for d in dims):
        raise CheckUsageError(f"--shapes {where}: {text!r} has a negative dimension")
    return dims


def parse_shapes(specs: list[str]) -> list[Any]:
    """``NAME:MIN[:OPT:MAX]`` per input (in input order) -> shapes / (min, opt, max) triples."""
    shapes: list[Any] = []
    for spec in specs:
        parts = spec.split(":")
        if len(parts) == 2:
            shapes.append(_shape(parts[1], spec))
        elif len(parts) == 4:
            shapes.append(tuple(_shape(p, spec) for p in parts[1:]))
        else:
            raise CheckUsageError(f"--shapes {spec!r}: expected NAME:SHAPE or NAME:MIN:OPT:MAX (shapes like 2x3x4)")
    return shapes


def find_creator(spec: str, loaded: list[Any]) -> Any:
    """The creator named by ``NAME[:VERSION[:NAMESPACE]]``; the library's own creators win ties.

    An omitted namespace prefers the default namespace ``""`` when several namespaces match.
    """
    name, version, namespace = [*spec.split(":"), None, None][:3]
    registry = get_plugin_registry()
    candidates = [c for c in loaded if c.name == name] or [c for c in registry.all_creators if c.name == name]
    matches = [
        c
        for c in candidates
        if (version is None or c.plugin_version == version) and (namespace is None or c.plugin_namespace == namespace)
    ]
    if len(matches) > 1 and namespace is None:  # an omitted namespace means TensorRT's default, ""
        default = [c for c in matches if c.plugin_namespace == ""]
        matches = default or matches
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(
        f"{c.name}:{c.plugin_version}" + (f":{c.plugin_namespace}" if c.plugin_namespace else "")
        for c in (loaded or registry.all_creators)
    )
    if not matches:
        raise CheckUsageError(f"no plugin creator matches {spec!r}; available: {known or 'none'}")
    raise CheckUsageError(f"{spec!r} matches {len(matches)} creators; add :VERSION[:NAMESPACE] (available: {known})")


def _fields(pairs: list[str]) -> dict[str, str]:
    fields = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CheckUsageError(f"--field {pair!r}: expected KEY=VALUE (lists as 1,2,3)")
        fields[key.strip()] = value
    return fields


def _dtypes(values: list[str]) -> list[str] | None:
    found = [v for value in values for v in value.split(",") if v]
    return found or None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``plugrt check``."""
    parser.add_argument("file", help="Python file (or module) whose import registers plugin creators")
    parser.add_argument(
        "--plugin",
        required=True,
        metavar="NAME[:VERSION[:NAMESPACE]]",
        help="the creator to check, or a decorator-API plugin id NAMESPACE::NAME",
    )
    parser.add_argument("--field", action="append", default=[], metavar="KEY=VALUE", help="a plugin field (repeat)")
    parser.add_argument(
        "--shapes", action="append", default=[], metavar="NAME:MIN[:OPT:MAX]", help="one per input, in order (repeat)"
    )
    parser.add_argument("--dtype", action="append", default=[], help="input type(s): one for all, or one per input")
    parser.add_argument("--check", action="append", default=None, choices=CHECK_IDS, help="run only these checks")
    parser.add_argument("--skip", action="append", default=[], choices=CHECK_IDS, help="leave these checks out")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (default 0)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _load(path: str) -> tuple[list[Any], Any]:
    """(creators the library registered, handle to deregister them; None for the built-in library)."""
    registry = get_plugin_registry()
    if path in ("builtin", "libnvinfer_plugins"):
        from ..plugins import init_libnvinfer_plugins

        init_libnvinfer_plugins(registry.logger, "")
        return [], None
    try:
        handle = registry.load_library(path)
    except Exception as exc:
        raise UsageError(f"cannot load plugin library {path!r}: {exc}") from exc
    return handle.creators, handle


def run(args: argparse.Namespace) -> int:
    """Run ``plugrt check``; usage errors raise :class:`UsageError` (exit code 2, one line)."""
    creators, handle = _load(args.file)
    try:
        report = check_plugin(
            args.plugin if "::" in args.plugin else find_creator(args.plugin, creators),
            _fields(args.field),
            parse_shapes(args.shapes),
            dtypes=_dtypes(args.dtype),
            checks=args.check,
            skip=args.skip,
            seed=args.seed,
        )
    except CheckUsageError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        if handle is not None:
            get_plugin_registry().deregister_library(handle)
    print(report.to_json() if args.json else str(report))
    return 0 if report.ok else 1
