"""The ``plugrt`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plugrt", description="TensorRT's plugin system in Python: build, run and inspect engines."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="build, serialize, reload and run a network of TensorRT-style plugins on the CPU"
    )
    demo.add_argument("--no-trace", action="store_true", help="do not print the plugin call trace")
    demo.add_argument("--iterations", type=int, default=50, help="timed runs per shape (default 50)")
    demo.add_argument(
        "--save-plan", metavar="PATH", help="where to write the plan file (default: a temporary directory)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for usage errors)."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        try:
            return run_demo(sys.stdout, trace=not args.no_trace, iterations=args.iterations, plan_path=args.save_plan)
        except BrokenPipeError:  # output piped into a command that stopped reading
            return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
