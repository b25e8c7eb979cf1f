"""``plugrt plugins``: what the plugin registry holds (name, version, namespace, fields)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..interfaces.creator import interface_family
from ..interfaces.registry import get_plugin_registry
from .libraries import load_libraries

__all__ = ["HELP", "NAME", "add_arguments", "describe_creators", "run"]

NAME = "plugins"
HELP = "list the plugin registry: each creator's name, version, namespace, interface and fields"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``plugrt plugins``."""
    parser.add_argument(
        "--load",
        action="append",
        default=[],
        metavar="FILE",
        help="a Python file or module that registers creators (repeatable)",
    )
    parser.add_argument("--no-builtin", action="store_true", help="do not register the built-in plugin library first")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")


def describe_creators() -> list[dict[str, Any]]:
    """Every registered creator as a dict, sorted by namespace, name and version."""
    rows = []
    for creator in get_plugin_registry().all_creators:
        interface = interface_family(creator, probe=True)
        fields = [
            {"name": f.name, "type": f.type.name, "default": f.data.tolist() if f.size else None}
            for f in getattr(creator, "field_names", [])
        ]
        rows.append(
            {
                "name": creator.name,
                "version": creator.plugin_version,
                "namespace": creator.plugin_namespace,
                "interface": interface,
                "fields": fields,
            }
        )
    return sorted(rows, key=lambda r: (r["namespace"], r["name"], r["version"]))


def run(args: argparse.Namespace) -> int:
    """Run ``plugrt plugins``."""
    if not args.no_builtin:
        load_libraries(["builtin"])
    load_libraries(args.load)
    rows = describe_creators()
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    for row in rows:
        namespace = f" (namespace {row['namespace']!r})" if row["namespace"] else ""
        print(f"{row['name']} v{row['version']}{namespace} [{row['interface']}]")
        for field in row["fields"]:
            print(f"    {field['name']}: {field['type']}")
    print(f"{len(rows)} creator(s)")
    return 0
