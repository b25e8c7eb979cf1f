"""``plugrt exec`` build step: ONNX file → plan, with profiles from trtexec's shape flags."""

from __future__ import annotations

import sys
import time
from typing import Any

from ..backends.registry import DEFAULT_DEVICE
from ..builder.builder import Builder
from ..builder.config import BuilderFlag, IProgressMonitor
from ..core.errors import BuildError
from ..core.logger import ILogger, Severity
from .errors import UsageError

__all__ = ["BarMonitor", "build_from_onnx"]


class BarMonitor(IProgressMonitor):
    """Build progress: a one-line bar on stderr on a terminal, and with a logger, VERBOSE log lines.

    The log lines (shown by ``--verbose``) say each tenth of the layers built and how long the
    phase took, so a long build is never silent in a log file either.
    """

    def __init__(self, enabled: bool, logger: ILogger | None = None) -> None:
        super().__init__()
        self.enabled = enabled
        self.logger = logger
        self.total = 0
        self.started = 0.0
        self.next_report = 0

    def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
        self.total = num_steps
        self.started = time.perf_counter()
        self.next_report = 1
        self._log(f"{phase_name}: {num_steps} layers")

    def step_complete(self, phase_name: str, step: int) -> bool:
        if self.enabled and self.total:
            done = int(30 * (step + 1) / self.total)
            sys.stderr.write(f"\r[{'=' * done}{' ' * (30 - done)}] {phase_name} {step + 1}/{self.total}")
            sys.stderr.flush()
        if self.total and (step + 1) * 10 >= self.next_report * self.total:
            self.next_report = (step + 1) * 10 // self.total + 1
            elapsed = time.perf_counter() - self.started
            self._log(f"{phase_name}: {step + 1}/{self.total} layers after {elapsed:.1f} s")
        return True

    def phase_finish(self, phase_name: str) -> None:
        if self.enabled and self.total:
            sys.stderr.write("\n")
        self._log(f"{phase_name}: finished in {time.perf_counter() - self.started:.1f} s")

    def _log(self, message: str) -> None:
        if self.logger is not None:
            self.logger.emit(Severity.VERBOSE, message)


def build_from_onnx(args: Any, logger: ILogger, shapes: dict[str, dict[str, tuple[int, ...]]]) -> tuple[bytes, float]:
    """Parse ``args.onnx`` and build it; returns (plan bytes, build seconds)."""
    try:
        from ..onnx.parser import OnnxParser
    except ImportError as exc:
        raise UsageError(f"ONNX import is not available in this installation: {exc}") from exc
    builder = Builder(logger, getattr(args, "device", DEFAULT_DEVICE))
    network = builder.create_network(0)
    parser = OnnxParser(network, logger)
    started = time.perf_counter()
    if not parser.parse_from_file(args.onnx):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BuildError(f"cannot import {args.onnx!r}: {errors}")
    logger.emit(
        Severity.VERBOSE,
        f"imported {args.onnx!r}: {network.num_layers} layers in {time.perf_counter() - started:.1f} s",
    )
    ranks_of = {network.get_input(i).name: tuple(network.get_input(i).shape) for i in range(network.num_inputs)}
    for flag, given in shapes.items():  # names and ranks: usage errors, before the build
        option = "--shapes" if flag == "shapes" else f"--{flag}Shapes"
        unknown = sorted(set(given) - set(ranks_of))
        if unknown:
            raise UsageError(
                f"{option} names {unknown}, which are not inputs of {args.onnx!r}; its inputs are {list(ranks_of)}"
            )
        for name, dims in given.items():
            if len(dims) != len(ranks_of[name]):
                raise UsageError(
                    f"{option} {name}: {'x'.join(map(str, dims))} has rank {len(dims)}; {name!r} has rank "
                    f"{len(ranks_of[name])} {list(ranks_of[name])}"
                )
    config = builder.create_builder_config()
    if args.fp16:
        config.set_flag(BuilderFlag.FP16)
    if args.int8:
        config.set_flag(BuilderFlag.INT8)
    config.progress_monitor = BarMonitor(sys.stderr.isatty(), logger)
    dynamic = {network.get_input(i).name: tuple(network.get_input(i).shape) for i in range(network.num_inputs)}
    dynamic = {name: shape for name, shape in dynamic.items() if any(d < 0 for d in shape)}
    if dynamic:
        profile = builder.create_optimization_profile()
        for name, declared in dynamic.items():
            fixed = shapes["shapes"].get(name)
            lo, opt, hi = (shapes[k].get(name, fixed) for k in ("min", "opt", "max"))
            if lo is None or opt is None or hi is None:
                raise UsageError(
                    f"input {name!r} has dynamic shape {list(declared)}; give --shapes={name}:... or "
                    f"--minShapes/--optShapes/--maxShapes for it"
                )
            profile.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    return bytes(plan), builder.last_build_seconds  # the builder's own measure, the one its log line reports
