"""The ``plugrt`` command: one module per subcommand, listed in ``SUBCOMMANDS``.

A subcommand module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Exit codes: 0 success, 1 a check or comparison failed,
2 usage error, 3 model/plan error, 4 runtime error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .errors import report

__all__ = ["SUBCOMMANDS", "main"]

#: Modules of ``plugrt.cli`` implementing subcommands, in help order.
SUBCOMMANDS = ["demo", "exec_cmd", "inspect_cmd", "plugins_cmd", "check"]


def _parser() -> tuple[argparse.ArgumentParser, dict[str, object]]:
    parser = argparse.ArgumentParser(
        prog="plugrt", description="TensorRT's plugin system in Python: build, run, check and inspect engines."
    )
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"plugrt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    modules: dict[str, object] = {}
    for module_name in SUBCOMMANDS:
        module = importlib.import_module(f"plugrt.cli.{module_name}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        modules[module.NAME] = module
    return parser, modules


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser, modules = _parser()
    args = parser.parse_args(argv)
    try:
        return int(modules[args.command].run(args))  # type: ignore[attr-defined]
    except BrokenPipeError:  # output piped into a command that stopped reading
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # every failure becomes one clear line and an exit code
        return report(args.command, exc, bool(getattr(args, "verbose", False)))


if __name__ == "__main__":
    sys.exit(main())
