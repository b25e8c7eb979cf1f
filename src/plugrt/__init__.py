"""plugrt: TensorRT's plugin system in Python, with the engine that hosts it.

Use it exactly like TensorRT's Python API::

    import plugrt as trt

Plugins (``IPluginV2DynamicExt``, ``IPluginV3`` ...) register with
``get_plugin_registry()``, build into engines with ``Builder``, serialize to plan
bytes, deserialize with ``Runtime`` and run in an ``IExecutionContext`` on the CPU
(NumPy). Every public name is re-exported here explicitly.
"""

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .backends.memory import DeviceBuffer, device_malloc, live_allocations
from .backends.registry import active_device
from .backends.views import as_array
from .builder.builder import Builder
from .builder.calibration import (
    CalibrationAlgoType,
    IInt8Calibrator,
    IInt8EntropyCalibrator,
    IInt8EntropyCalibrator2,
    IInt8LegacyCalibrator,
    IInt8MinMaxCalibrator,
)
from .builder.config import (
    BuilderFlag,
    IBuilderConfig,
    IOptimizationProfile,
    IProgressMonitor,
    MemoryPoolType,
    ProfilingVerbosity,
)
from .core.dims import Dims, Dims2, Dims3, Dims4, DimsCHW, DimsHW, DimsNCHW, volume
from .core.enums import DeviceType, EngineCapability, PluginCreatorVersion, PreviewFeature
from .core.errors import (
    AllocationLimitError,
    BuildError,
    CreatorNotFoundError,
    DuplicateCreatorError,
    ExecutionError,
    FieldError,
    FormatNegotiationError,
    MissingBackendError,
    MissingHookError,
    NetworkError,
    PlanFormatError,
    PluginDefinitionError,
    PluginError,
    PlugrtError,
    RegistryError,
    SerializationError,
    ShapeError,
    TypeMismatchError,
)
from .core.logger import ILogger, Logger, Severity
from .core.types import DataType, PluginFormat, TensorFormat, from_nptype, nptype
from .engine.context import IExecutionContext
from .engine.engine import ICudaEngine
from .engine.host_memory import IHostMemory
from .engine.inspector import EngineInspector, LayerInformationFormat
from .engine.limits import get_allocation_limit, set_allocation_limit
from .engine.output_allocator import IOutputAllocator
from .engine.profiler import IProfiler
from .engine.runtime import Runtime
from .interfaces.creator import IPluginCreator, IPluginCreatorInterface, IPluginCreatorV3One
from .interfaces.descriptors import DynamicPluginTensorDesc, PluginTensorDesc
from .interfaces.error_recorder import ErrorCodeTRT, IErrorRecorder, SimpleErrorRecorder
from .interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType
from .interfaces.gpu_allocator import AllocatorFlag, DefaultGpuAllocator, IGpuAllocator
from .interfaces.recorder import CallRecorder, PluginCall, trace_plugin_calls
from .interfaces.registry import IPluginRegistry, get_builder_plugin_registry, get_plugin_registry
from .interfaces.resource import IPluginResource
from .interfaces.serialization import SerializationReader, SerializationWriter
from .interfaces.v2 import IPluginV2, IPluginV2DynamicExt, IPluginV2DynamicExtBase, IPluginV2Ext
from .interfaces.v3 import (
    IPluginCapability,
    IPluginResourceContext,
    IPluginV3,
    IPluginV3OneBuild,
    IPluginV3OneBuildV2,
    IPluginV3OneCore,
    IPluginV3OneRuntime,
    PluginCapabilityType,
    TensorRTPhase,
)
from .network.control_flow import (
    IConditionLayer,
    IIfConditional,
    IIfConditionalBoundaryLayer,
    IIfConditionalInputLayer,
    IIfConditionalOutputLayer,
    IIteratorLayer,
    ILoop,
    ILoopBoundaryLayer,
    ILoopOutputLayer,
    IRecurrenceLayer,
    ITripLimitLayer,
    LoopOutput,
    TripLimit,
)
from .network.definition import INetworkDefinition, NetworkDefinitionCreationFlag
from .network.layer import ILayer, IPluginV2Layer, IPluginV3Layer, LayerType
from .network.layer_enums import (
    ActivationType,
    ElementWiseOperation,
    MatrixOperation,
    ReduceOperation,
    UnaryOperation,
    Weights,
)
from .network.standard_layers import (
    IActivationLayer,
    ICastLayer,
    IConcatenationLayer,
    IConstantLayer,
    IElementWiseLayer,
    IIdentityLayer,
    IMatrixMultiplyLayer,
    IReduceLayer,
    IShuffleLayer,
    ISoftMaxLayer,
    IUnaryLayer,
)
from .network.tensor import ITensor, TensorIOMode, TensorLocation
from .plugins import init_libnvinfer_plugins
from .shape.builder import DimsExprs, IExprBuilder
from .shape.expr import DimensionOperation, IDimensionExpr

if TYPE_CHECKING:
    from . import testing
    from .onnx.compile import compile  # noqa: A004 - plugrt.compile is the high-level entry point
    from .onnx.parser import OnnxParser

# Names whose modules pull in heavy dependencies (onnx) or are only needed on demand (the checker):
# imported on first use, so ``import plugrt`` stays light.
_LAZY = {"OnnxParser": ("onnx.parser", "OnnxParser"), "compile": ("onnx.compile", "compile"), "testing": ("testing", None)}


def __getattr__(name: str) -> Any:
    """Import the lazily exported names (``OnnxParser``, ``compile``, ``testing``) on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'plugrt' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(f".{module_name}", __name__)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value

float32 = DataType.FLOAT
float16 = DataType.HALF
int8 = DataType.INT8
int32 = DataType.INT32
bool = DataType.BOOL  # noqa: A001 - TensorRT's alias
uint8 = DataType.UINT8
fp8 = DataType.FP8
bfloat16 = DataType.BF16
int64 = DataType.INT64
int4 = DataType.INT4
fp4 = DataType.FP4

__all__ = [
    "ActivationType",
    "AllocationLimitError",
    "AllocatorFlag",
    "BuildError",
    "Builder",
    "BuilderFlag",
    "CalibrationAlgoType",
    "CallRecorder",
    "CreatorNotFoundError",
    "DataType",
    "DefaultGpuAllocator",
    "DeviceBuffer",
    "DeviceType",
    "DimensionOperation",
    "Dims",
    "Dims2",
    "Dims3",
    "Dims4",
    "DimsCHW",
    "DimsExprs",
    "DimsHW",
    "DimsNCHW",
    "DuplicateCreatorError",
    "DynamicPluginTensorDesc",
    "ElementWiseOperation",
    "EngineCapability",
    "EngineInspector",
    "ErrorCodeTRT",
    "ExecutionError",
    "FieldError",
    "FormatNegotiationError",
    "IActivationLayer",
    "IBuilderConfig",
    "ICastLayer",
    "IConcatenationLayer",
    "IConditionLayer",
    "IConstantLayer",
    "ICudaEngine",
    "IDimensionExpr",
    "IElementWiseLayer",
    "IErrorRecorder",
    "IExecutionContext",
    "IExprBuilder",
    "IGpuAllocator",
    "IHostMemory",
    "IIdentityLayer",
    "IIfConditional",
    "IIfConditionalBoundaryLayer",
    "IIfConditionalInputLayer",
    "IIfConditionalOutputLayer",
    "IInt8Calibrator",
    "IInt8EntropyCalibrator",
    "IInt8EntropyCalibrator2",
    "IInt8LegacyCalibrator",
    "IInt8MinMaxCalibrator",
    "IIteratorLayer",
    "ILayer",
    "ILogger",
    "ILoop",
    "ILoopBoundaryLayer",
    "ILoopOutputLayer",
    "IMatrixMultiplyLayer",
    "INetworkDefinition",
    "IOptimizationProfile",
    "IOutputAllocator",
    "IPluginCapability",
    "IPluginCreator",
    "IPluginCreatorInterface",
    "IPluginCreatorV3One",
    "IPluginRegistry",
    "IPluginResource",
    "IPluginResourceContext",
    "IPluginV2",
    "IPluginV2DynamicExt",
    "IPluginV2DynamicExtBase",
    "IPluginV2Ext",
    "IPluginV2Layer",
    "IPluginV3",
    "IPluginV3Layer",
    "IPluginV3OneBuild",
    "IPluginV3OneBuildV2",
    "IPluginV3OneCore",
    "IPluginV3OneRuntime",
    "IProfiler",
    "IProgressMonitor",
    "IRecurrenceLayer",
    "IReduceLayer",
    "IShuffleLayer",
    "ISoftMaxLayer",
    "ITensor",
    "ITripLimitLayer",
    "IUnaryLayer",
    "LayerInformationFormat",
    "LayerType",
    "Logger",
    "LoopOutput",
    "MatrixOperation",
    "MemoryPoolType",
    "MissingBackendError",
    "MissingHookError",
    "NetworkDefinitionCreationFlag",
    "NetworkError",
    "OnnxParser",
    "PlanFormatError",
    "PluginCall",
    "PluginCapabilityType",
    "PluginCreatorVersion",
    "PluginDefinitionError",
    "PluginError",
    "PluginField",
    "PluginFieldCollection",
    "PluginFieldType",
    "PluginFormat",
    "PluginTensorDesc",
    "PlugrtError",
    "PreviewFeature",
    "ProfilingVerbosity",
    "ReduceOperation",
    "RegistryError",
    "Runtime",
    "SerializationError",
    "SerializationReader",
    "SerializationWriter",
    "Severity",
    "ShapeError",
    "SimpleErrorRecorder",
    "TensorFormat",
    "TensorIOMode",
    "TensorLocation",
    "TensorRTPhase",
    "TripLimit",
    "TypeMismatchError",
    "UnaryOperation",
    "Weights",
    "__version__",
    "active_device",
    "as_array",
    "bfloat16",
    "bool",
    "compile",
    "device_malloc",
    "float16",
    "float32",
    "fp4",
    "fp8",
    "from_nptype",
    "get_allocation_limit",
    "get_builder_plugin_registry",
    "get_plugin_registry",
    "init_libnvinfer_plugins",
    "int4",
    "int8",
    "int32",
    "int64",
    "live_allocations",
    "nptype",
    "set_allocation_limit",
    "testing",
    "trace_plugin_calls",
    "uint8",
    "volume",
]
