"""``Builder``: creates networks, configs and profiles, and builds plans."""

from __future__ import annotations

import time
from typing import Any

from ..backends.registry import DEFAULT_DEVICE, get_backend
from ..core.context_manager import DeprecatedContextManager
from ..core.errors import BuildError, PlugrtError, TypeMismatchError
from ..core.finalizers import run_pending
from ..core.logger import ILogger, Logger, Severity
from ..core.types import DataType
from ..engine.host_memory import IHostMemory
from ..engine.limits import check_plan_allocations
from ..engine.plan import EnginePlan
from ..interfaces.error_recorder import ErrorCodeTRT, check_error_recorder, report_to
from ..network.definition import INetworkDefinition
from .compile import build_plan
from .config import BuilderFlag, IBuilderConfig, IOptimizationProfile

__all__ = ["Builder"]


class Builder(DeprecatedContextManager):
    """Builds engines (TensorRT's ``Builder``).

    >>> import plugrt as trt
    >>> builder = trt.Builder(trt.Logger(trt.Logger.WARNING))
    >>> network = builder.create_network(0)
    >>> config = builder.create_builder_config()
    """

    def __init__(self, logger: ILogger | None = None, device: str = DEFAULT_DEVICE) -> None:
        """``device`` is where the build times plugin tactics: 'cpu' (the default) or 'cuda'.

        A plugrt extension: TensorRT always builds on the GPU. Any plan runs on either device,
        but under ``BuilderFlag.FP16`` the layers run in HALF only where the build device is
        faster in it (see ``builder/precision.py``), and a plugin whose ``enqueue`` launches device work
        (CuPy, Triton, torch) needs ``device="cuda"`` when it offers tactics to time.
        """
        if logger is not None and not isinstance(logger, ILogger):
            raise TypeMismatchError(f"Builder takes an ILogger, got {type(logger).__name__}")
        self.logger: ILogger = logger or Logger()
        self.device = device
        self.backend = get_backend(device)  # fails now, not at the first build, when the device is unusable
        self.last_build_seconds = 0.0
        self._error_recorder: Any = None

    @property
    def error_recorder(self) -> Any:
        """An ``IErrorRecorder`` that also receives build errors (None: the logger only)."""
        return self._error_recorder

    @error_recorder.setter
    def error_recorder(self, recorder: Any) -> None:
        self._error_recorder = check_error_recorder(recorder, "Builder")

    @property
    def num_DLA_cores(self) -> int:
        """0: plugrt has no DLA."""
        return 0

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        """A new, empty network definition."""
        return INetworkDefinition(flags)

    def create_builder_config(self) -> IBuilderConfig:
        """A new build configuration with default settings."""
        return IBuilderConfig()

    def create_optimization_profile(self) -> IOptimizationProfile:
        """A new, empty optimization profile."""
        return IOptimizationProfile()

    @property
    def platform_has_fast_fp16(self) -> bool:
        """True where the build device computes HALF faster than FLOAT (the GPU; NumPy on the CPU is not faster)."""
        return DataType.HALF in self.backend.fast_types

    @property
    def platform_has_fast_int8(self) -> bool:
        """False on the CPU backend."""
        return False

    def is_network_supported(self, network: INetworkDefinition, config: IBuilderConfig) -> bool:
        """True when ``network`` builds with ``config`` (runs a build and discards it)."""
        try:
            self.build_serialized_network(network, config)
        except PlugrtError:
            return False
        return True

    def _calibrate(self, network: INetworkDefinition, config: IBuilderConfig) -> dict[str, float] | None:
        """The calibrator's ranges ({tensor: amax}) when INT8 is on and a calibrator is set, else None."""
        calibrator = config.int8_calibrator
        if calibrator is None or not config.get_flag(BuilderFlag.INT8):
            return None
        from .calibration import calibrate_network

        profile = config.get_calibration_profile()
        if profile is None and config.num_optimization_profiles:
            profile = config.get_optimization_profile(0)
        ranges = calibrate_network(network, calibrator, device=self.device, profile=profile, apply=False)
        self.logger.emit(Severity.INFO, f"calibrated {len(ranges)} tensors with {type(calibrator).__name__}")
        return ranges

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> IHostMemory:
        """Build ``network`` into plan bytes.

        Unlike TensorRT, which returns None and logs, a failed build raises a
        :class:`~plugrt.PlugrtError` naming the layer and the problem (the
        message is logged at ERROR too).
        """
        data = self._build(network, config, serialize=True)[1]
        assert data is not None
        return IHostMemory(data)

    def build_plan(self, network: INetworkDefinition, config: IBuilderConfig) -> EnginePlan:
        """Build ``network`` into a plan in memory, for :meth:`Runtime.engine_from_plan` (a plugrt extension):
        as :meth:`build_serialized_network`, without writing the bytes. The plan reads the network's weight
        arrays where the build leaves them as they are: change them only after the engine is made."""
        return self._build(network, config, serialize=False)[0]

    def _build(
        self, network: INetworkDefinition, config: IBuilderConfig, serialize: bool
    ) -> tuple[EnginePlan, bytes | None]:
        run_pending()
        what = "build_serialized_network" if serialize else "build_plan"
        if not isinstance(network, INetworkDefinition):
            raise TypeMismatchError(f"{what} takes an INetworkDefinition, got {type(network).__name__}")
        if not isinstance(config, IBuilderConfig):
            raise TypeMismatchError(f"{what} takes an IBuilderConfig, got {type(config).__name__}")
        start = time.perf_counter()
        try:
            plan = build_plan(network, config, self.logger, self.backend, self._calibrate(network, config))
            check_plan_allocations(plan, "build")
            data = plan.to_bytes() if serialize else None
        except PlugrtError as exc:
            self.logger.emit(Severity.ERROR, f"build failed: {exc}")
            report_to(self._error_recorder, ErrorCodeTRT.INVALID_CONFIG, f"build failed: {exc}")
            raise
        except Exception as exc:
            self.logger.emit(Severity.ERROR, f"build failed: {type(exc).__name__}: {exc}")
            report_to(self._error_recorder, ErrorCodeTRT.INTERNAL_ERROR, f"build failed: {type(exc).__name__}: {exc}")
            raise BuildError(f"build failed: {type(exc).__name__}: {exc}") from exc
        self.last_build_seconds = time.perf_counter() - start
        size = f"{len(data)} bytes" if data is not None else "in memory"
        self.logger.emit(
            Severity.INFO,
            f"built {network.name!r}: {len(plan.layers)} layers, {len(plan.plugins)} plugins, "
            f"{size} in {self.last_build_seconds * 1e3:.1f} ms",
        )
        return plan, data
