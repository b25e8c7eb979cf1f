"""Build settings: ``IBuilderConfig``, ``IOptimizationProfile``, flags and progress."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.context_manager import DeprecatedContextManager
from ..core.dims import Dims
from ..core.enums import DeviceType, EngineCapability, PreviewFeature, TrtEnum
from ..core.errors import BuildError, ShapeError, TypeMismatchError

__all__ = [
    "BuilderFlag",
    "IBuilderConfig",
    "IOptimizationProfile",
    "IProgressMonitor",
    "MemoryPoolType",
    "ProfilingVerbosity",
]


class BuilderFlag(TrtEnum):
    """Build options (TensorRT's names; the ones plugrt acts on are documented)."""

    FP16 = 0
    INT8 = 1
    DEBUG = 2
    GPU_FALLBACK = 3
    REFIT = 5
    DISABLE_TIMING_CACHE = 6
    TF32 = 7
    SPARSE_WEIGHTS = 8
    SAFETY_SCOPE = 9
    OBEY_PRECISION_CONSTRAINTS = 10
    PREFER_PRECISION_CONSTRAINTS = 11
    DIRECT_IO = 12
    REJECT_EMPTY_ALGORITHMS = 13
    VERSION_COMPATIBLE = 14
    EXCLUDE_LEAN_RUNTIME = 15
    FP8 = 16
    BF16 = 17


class MemoryPoolType(TrtEnum):
    """Memory pools whose size the builder limits."""

    WORKSPACE = 0
    DLA_MANAGED_SRAM = 1
    DLA_LOCAL_DRAM = 2
    DLA_GLOBAL_DRAM = 3
    TACTIC_DRAM = 4
    TACTIC_SHARED_MEMORY = 5


class ProfilingVerbosity(TrtEnum):
    """How much layer detail the engine inspector shows."""

    LAYER_NAMES_ONLY = 0
    NONE = 1
    DETAILED = 2


def _dims(value: Any, what: str) -> Dims:
    try:
        return Dims(value)
    except (TypeError, ShapeError) as exc:
        raise ShapeError(f"{what}: {exc}") from None


class IOptimizationProfile:
    """The min/opt/max shape of each dynamic input for one range of use."""

    def __init__(self) -> None:
        self._shapes: dict[str, tuple[Dims, Dims, Dims]] = {}

    def set_shape(self, input: str, min: Sequence[int], opt: Sequence[int], max: Sequence[int]) -> None:  # noqa: A002
        """Set the shape range of network input ``input``; requires min <= opt <= max."""
        if not isinstance(input, str):
            raise TypeMismatchError(f"set_shape: input must be the input tensor's name, got {type(input).__name__}")
        lo, mid, hi = (_dims(v, f"set_shape({input!r}) {n}") for v, n in ((min, "min"), (opt, "opt"), (max, "max")))
        if not len(lo) == len(mid) == len(hi):
            raise ShapeError(f"set_shape({input!r}): min {lo}, opt {mid} and max {hi} must have the same rank")
        for axis, (a, b, c) in enumerate(zip(lo, mid, hi)):
            if a < 0 or b < 0 or c < 0:
                raise ShapeError(
                    f"set_shape({input!r}): axis {axis} has a negative value (min {lo}, opt {mid}, max {hi})"
                )
            if not a <= b <= c:
                raise ShapeError(f"set_shape({input!r}): axis {axis} needs min <= opt <= max, got {a}, {b}, {c}")
        self._shapes[input] = (lo, mid, hi)

    def get_shape(self, input: str) -> list[Dims]:  # noqa: A002
        """[min, opt, max] of ``input`` (empty list when not set)."""
        shapes = self._shapes.get(input)
        return [Dims(d) for d in shapes] if shapes else []

    @property
    def inputs(self) -> list[str]:
        """Names of the inputs this profile sets."""
        return list(self._shapes)

    def __bool__(self) -> bool:
        return True


class IProgressMonitor:
    """Receives build progress; return False from :meth:`step_complete` to cancel."""

    def __init__(self) -> None:
        pass

    def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
        """A phase with ``num_steps`` steps starts."""

    def step_complete(self, phase_name: str, step: int) -> bool:
        """A step finished; False cancels the build."""
        return True

    def phase_finish(self, phase_name: str) -> None:
        """A phase ended."""


class IBuilderConfig(DeprecatedContextManager):
    """How to build: flags, memory limits, optimization profiles, progress monitor."""

    def __init__(self) -> None:
        self.flags = 1 << int(BuilderFlag.TF32)  # as in TensorRT: TF32 allowed until cleared (``backends/tf32.py``)
        self._pool_limits: dict[MemoryPoolType, int] = {MemoryPoolType.WORKSPACE: 1 << 40}
        self._profiles: list[IOptimizationProfile] = []
        self.progress_monitor: IProgressMonitor | None = None
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY
        self.builder_optimization_level = 3
        self.avg_timing_iterations = 1
        self._preview_features: set[PreviewFeature] = set()
        self._dla_core = -1
        self._default_device_type = DeviceType.GPU
        self._engine_capability = EngineCapability.STANDARD
        self._algorithm_selector: Any = None
        self._int8_calibrator: Any = None
        self._calibration_profile: IOptimizationProfile | None = None

    @property
    def algorithm_selector(self) -> Any:
        """None: plugrt chooses tactics by timing and takes no algorithm selector."""
        return self._algorithm_selector

    @algorithm_selector.setter
    def algorithm_selector(self, value: Any) -> None:
        if value is not None:
            raise BuildError(
                f"algorithm_selector = {type(value).__name__}: plugrt has no algorithm selection (plugin tactics are "
                "timed; TensorRT deprecates selectors too); leave it None"
            )
        self._algorithm_selector = None

    @property
    def int8_calibrator(self) -> Any:
        """The INT8 calibrator (an ``IInt8Calibrator``) or None.

        With ``BuilderFlag.INT8`` set, the builder runs it before building (or reads its cache) and
        gives every tensor without a dynamic range its calibrated one (see ``docs/int8.md``).
        """
        return self._int8_calibrator

    @int8_calibrator.setter
    def int8_calibrator(self, value: Any) -> None:
        from .calibration import IInt8Calibrator

        if value is not None and not isinstance(value, IInt8Calibrator):
            raise TypeMismatchError(
                f"int8_calibrator must be an IInt8Calibrator (IInt8EntropyCalibrator2, IInt8MinMaxCalibrator, ...) "
                f"or None, got {type(value).__name__}"
            )
        self._int8_calibrator = value

    def set_calibration_profile(self, profile: IOptimizationProfile) -> bool:
        """The shapes calibration runs with (its opt shapes); without one, the first optimization profile's.

        Returns True, as TensorRT does for a valid profile.
        """
        if not isinstance(profile, IOptimizationProfile):
            raise TypeMismatchError(
                f"set_calibration_profile takes an IOptimizationProfile, got {type(profile).__name__}"
            )
        self._calibration_profile = profile
        return True

    def get_calibration_profile(self) -> IOptimizationProfile | None:
        """The profile set with :meth:`set_calibration_profile`, or None."""
        return self._calibration_profile

    # --- preview features -------------------------------------------------------------
    def set_preview_feature(self, feature: PreviewFeature, enable: bool) -> None:
        """Turn preview ``feature`` on or off (all are off by default, as in TensorRT 10)."""
        if not isinstance(feature, PreviewFeature):
            raise TypeMismatchError(f"set_preview_feature: feature must be a PreviewFeature, got {feature!r}")
        if enable:
            self._preview_features.add(feature)
        else:
            self._preview_features.discard(feature)

    def get_preview_feature(self, feature: PreviewFeature) -> bool:
        """Whether preview ``feature`` is on."""
        if not isinstance(feature, PreviewFeature):
            raise TypeMismatchError(f"get_preview_feature: feature must be a PreviewFeature, got {feature!r}")
        return feature in self._preview_features

    # --- device placement: plugrt has no DLA ----------------------------------------------
    @property
    def DLA_core(self) -> int:
        """The DLA core to build for: always -1 (none); plugrt has no DLA."""
        return self._dla_core

    @DLA_core.setter
    def DLA_core(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeMismatchError(f"DLA_core must be an int, got {value!r}")
        if value != -1:
            raise BuildError(f"DLA_core = {value}: plugrt has no DLA; only -1 (no DLA core, TensorRT's default) is valid")
        self._dla_core = value

    @property
    def default_device_type(self) -> DeviceType:
        """Where layers run by default: ``DeviceType.GPU`` (the engine's device, CPU or CUDA)."""
        return self._default_device_type

    @default_device_type.setter
    def default_device_type(self, value: DeviceType) -> None:
        if not isinstance(value, DeviceType):
            raise TypeMismatchError(f"default_device_type must be a DeviceType, got {value!r}")
        if value != DeviceType.GPU:
            raise BuildError(f"default_device_type = {value}: plugrt has no DLA; only DeviceType.GPU is valid")
        self._default_device_type = value

    @property
    def engine_capability(self) -> EngineCapability:
        """What the engine is built for: ``EngineCapability.STANDARD`` only."""
        return self._engine_capability

    @engine_capability.setter
    def engine_capability(self, value: EngineCapability) -> None:
        if not isinstance(value, EngineCapability):
            raise TypeMismatchError(f"engine_capability must be an EngineCapability, got {value!r}")
        if value != EngineCapability.STANDARD:
            raise BuildError(
                f"engine_capability = {value}: plugrt builds standard engines only (no safety runtime, no DLA); "
                "use EngineCapability.STANDARD"
            )
        self._engine_capability = value

    def set_device_type(self, layer: Any, device_type: DeviceType) -> None:
        """Where ``layer`` runs: only ``DeviceType.GPU`` is valid (plugrt has no DLA)."""
        if not isinstance(device_type, DeviceType):
            raise TypeMismatchError(f"set_device_type: device_type must be a DeviceType, got {device_type!r}")
        if device_type != DeviceType.GPU:
            raise BuildError(f"set_device_type({device_type}): plugrt has no DLA; only DeviceType.GPU is valid")

    def get_device_type(self, layer: Any) -> DeviceType:
        """Where ``layer`` runs: always ``DeviceType.GPU``."""
        return DeviceType.GPU

    def can_run_on_DLA(self, layer: Any) -> bool:
        """False: plugrt has no DLA."""
        return False


    def set_flag(self, flag: BuilderFlag) -> None:
        """Turn ``flag`` on."""
        self.flags |= 1 << int(BuilderFlag(flag))

    def clear_flag(self, flag: BuilderFlag) -> None:
        """Turn ``flag`` off."""
        self.flags &= ~(1 << int(BuilderFlag(flag)))

    def get_flag(self, flag: BuilderFlag) -> bool:
        """Whether ``flag`` is on."""
        return bool(self.flags & (1 << int(BuilderFlag(flag))))

    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        """Limit pool ``pool`` to ``pool_size`` bytes (WORKSPACE bounds plugin workspace)."""
        if not isinstance(pool_size, int) or pool_size < 0:
            raise TypeMismatchError(f"set_memory_pool_limit: pool_size must be a non-negative int, got {pool_size!r}")
        self._pool_limits[MemoryPoolType(pool)] = pool_size

    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int:
        """The limit of ``pool`` in bytes."""
        return self._pool_limits.get(MemoryPoolType(pool), 1 << 40)

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        """Add a profile; returns its index."""
        if not isinstance(profile, IOptimizationProfile):
            raise TypeMismatchError(
                f"add_optimization_profile takes an IOptimizationProfile, got {type(profile).__name__}"
            )
        self._profiles.append(profile)
        return len(self._profiles) - 1

    @property
    def num_optimization_profiles(self) -> int:
        """Number of profiles added."""
        return len(self._profiles)

    def get_optimization_profile(self, index: int) -> IOptimizationProfile:
        """Profile ``index``."""
        return self._profiles[index]
