"""``plugrt inspect PLAN``: layers, tensors, profiles, plugin records and the memory plan of a plan file."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import UsageError, check_writable
from .inspect_html import render_html
from .plan_summary import summarize_plan

__all__ = ["HELP", "NAME", "add_arguments", "run"]

NAME = "inspect"
HELP = "describe a plan file (no plugins need to be registered); --json or --html for machine or visual output"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``plugrt inspect``."""
    parser.add_argument("plan", help="the plan (engine) file")
    parser.add_argument("--json", action="store_true", help="print the description as JSON")
    parser.add_argument("--html", metavar="OUT.html", help="write a self-contained page drawing the engine's graph")
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")


def run(args: argparse.Namespace) -> int:
    """Run ``plugrt inspect``."""
    check_writable(args.html, "--html")
    try:
        with open(args.plan, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UsageError(f"cannot read plan file {args.plan!r}: {exc.strerror}") from exc
    summary = summarize_plan(data)
    if args.html:
        with open(args.html, "w", encoding="utf-8") as f:
            f.write(render_html(summary))
        print(f"wrote {args.html}")
    if args.json:
        json.dump(summary, sys.stdout, indent=2, default=str)
        print()
        return 0
    if args.html:
        return 0
    print(
        f"engine {summary['name']!r}: {len(summary['layers'])} layers, {summary['bytes']} bytes, "
        f"weights {summary['weights_bytes']} bytes"
    )
    for io in summary["io"]:
        print(f"  {io['role']:<6} {io['name']}: {io['dtype']} {io['declared_shape']}")
    for p, profile in enumerate(summary["profiles"]):
        shapes = ", ".join(f"{n} {s['min']}..{s['max']}" for n, s in profile["shapes"].items())
        print(f"  profile {p}: {shapes or 'static'}; activation arena {profile['arena_bytes']} bytes")
    for layer in summary["layers"]:
        ins = ", ".join(f"{t['name']}:{t['dtype']}/{t['format']}" for t in layer["inputs"])
        outs = ", ".join(f"{t['name']}:{t['dtype']}/{t['format']}[{','.join(t['shape'])}]" for t in layer["outputs"])
        if layer["kind"] == "plugin":
            rec = layer["plugin"]
            ns = f" ns {rec['namespace']!r}" if rec["namespace"] else ""
            kind = f"plugin {rec['name']} v{rec['version']}{ns} ({rec['family']}, tactic {layer['tactic']}, workspace {layer['workspace']})"
        else:
            kind = layer["kind"] + (f" (tactic {layer['tactic_name']})" if "tactic" in layer else "")
        print(f"  [{layer['index']}] {layer['name']}: {kind}\n      ({ins}) -> ({outs})")
        if layer["kind"] == "plugin" and "fields" in layer["plugin"]:
            for name, field in layer["plugin"]["fields"].items():
                print(f"      field {name}: {field['type']} {field['value']}")
    return 0
