"""The schema of a decorator-API plugin: read from the ``register`` function's type hints.

Inputs are the leading ``TensorDesc`` parameters; the rest are attributes whose hint
is their type: ``int``, ``float``, ``str``, ``bool``, ``bytes`` or a 1-D
``numpy.typing.NDArray[dtype]``. The schema drives the creator's ``field_names``,
the checks of every call, and the fields a plugin serializes.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import FieldError, PluginDefinitionError
from ..interfaces.fields import PluginField, PluginFieldType
from ._autotune import AutoTuneCombination
from ._desc import TensorDesc
from ._tensor import Tensor

__all__ = ["AttrType", "Schema", "check_hook", "parse_register"]

RESERVED_NAMESPACES = frozenset({"", "trt", "tensorrt", "std"})
RESERVED_ATTRIBUTES = frozenset({"outputs", "stream", "tactic"})
_BUILTIN_FIELDS: dict[type, PluginFieldType] = {
    int: PluginFieldType.INT64,
    float: PluginFieldType.FLOAT64,
    bool: PluginFieldType.INT8,
    str: PluginFieldType.CHAR,
    bytes: PluginFieldType.UNKNOWN,
}
_ARRAY_FIELDS: dict[np.dtype, PluginFieldType] = {
    np.dtype(np.int8): PluginFieldType.INT8,
    np.dtype(np.int16): PluginFieldType.INT16,
    np.dtype(np.int32): PluginFieldType.INT32,
    np.dtype(np.int64): PluginFieldType.INT64,
    np.dtype(np.float16): PluginFieldType.FLOAT16,
    np.dtype(np.float32): PluginFieldType.FLOAT32,
    np.dtype(np.float64): PluginFieldType.FLOAT64,
    np.dtype(np.bool_): PluginFieldType.INT8,
}
_SUPPORTED = (
    "int, float, str, bool, bytes or numpy.typing.NDArray[dtype] (dtype: "
    + ", ".join(str(d) for d in _ARRAY_FIELDS)
    + ")"
)


@dataclass(frozen=True)
class AttrType:
    """One attribute's type: a builtin, or a NumPy array of ``dtype``."""

    builtin: type | None = None
    dtype: np.dtype | None = None

    @property
    def field_type(self) -> PluginFieldType:
        """The plugin field type it is stored as."""
        if self.builtin is not None:
            return _BUILTIN_FIELDS[self.builtin]
        return _ARRAY_FIELDS[np.dtype(self.dtype)]

    def describe(self) -> str:
        return self.builtin.__name__ if self.builtin is not None else f"NDArray[{np.dtype(self.dtype)}]"


@dataclass
class Schema:
    """What a ``register`` function declares."""

    plugin_id: str
    namespace: str
    name: str
    function: str
    tensor_names: list[str]
    attrs: dict[str, AttrType]
    num_outputs: int

    # --- values <-> fields -----------------------------------------------------------
    def check_value(self, name: str, value: Any) -> Any:
        """``value`` for attribute ``name``, checked against its declared type."""
        declared = self.attrs[name]
        if declared.builtin is not None:
            if type(value) is not declared.builtin:
                raise PluginDefinitionError(
                    f"QDP plugin {self.plugin_id!r}: attribute {name!r} is declared {declared.describe()} in "
                    f"{self.function}, got {type(value).__name__} {value!r}"
                )
            return value
        if not isinstance(value, np.ndarray) or value.ndim != 1:
            raise PluginDefinitionError(
                f"QDP plugin {self.plugin_id!r}: attribute {name!r} is declared {declared.describe()} in {self.function}; "
                f"pass a 1-D numpy array, got {type(value).__name__}"
                + (f" of {value.ndim} dimensions" if isinstance(value, np.ndarray) else "")
            )
        if value.dtype != declared.dtype:
            raise PluginDefinitionError(
                f"QDP plugin {self.plugin_id!r}: attribute {name!r} is declared {declared.describe()} in "
                f"{self.function}, got an array of {value.dtype}"
            )
        return value

    def to_field(self, name: str, value: Any) -> PluginField:
        """Attribute ``name`` as a plugin field."""
        declared = self.attrs[name]
        if declared.builtin is str:
            return PluginField(name, value.encode("utf-8"), PluginFieldType.CHAR)
        if declared.builtin is bytes:
            return PluginField(name, value, PluginFieldType.UNKNOWN)
        if declared.builtin is not None:
            return PluginField(name, np.array([value]), declared.field_type)
        data = value.astype(np.int8) if value.dtype == np.bool_ else value
        return PluginField(name, data, declared.field_type)

    def from_field(self, field: PluginField) -> Any:
        """The attribute value a field holds (the field may come from ONNX, so types are converted)."""
        declared = self.attrs[field.name]
        data = field.data
        try:
            if declared.builtin is str:
                return data.astype(np.uint8).tobytes().split(b"\0", 1)[0].decode("utf-8")
            if declared.builtin is bytes:
                return data.tobytes()
            if field.type in (PluginFieldType.CHAR, PluginFieldType.UNKNOWN):
                raise FieldError("it holds text or raw bytes")
            if declared.builtin is not None:
                if data.size != 1:
                    raise FieldError(f"it holds {data.size} values, expected exactly 1")
                value = data[0].item()
                if declared.builtin in (int, bool) and data.dtype.kind not in "iub":
                    raise FieldError(f"it holds {data.dtype} data")
                return declared.builtin(value)
            target = np.dtype(declared.dtype)
            if data.dtype.kind == "f" and target.kind in "iub":
                raise FieldError(f"it holds {data.dtype} data")
            converted = data.astype(target)
            if target.kind in "iu" and not np.array_equal(converted.astype(np.int64), data.astype(np.int64)):
                raise FieldError(f"values {data[:8].tolist()} do not fit {target}")
            return converted
        except (FieldError, UnicodeDecodeError, ValueError, TypeError) as exc:
            raise FieldError(
                f"QDP plugin {self.plugin_id!r}: field {field.name!r} ({field.type.name}) does not fit attribute "
                f"type {declared.describe()} declared in {self.function}: {exc}"
            ) from None

    def field_names(self) -> list[PluginField]:
        """Empty fields naming every attribute with its field type (the creator's ``field_names``)."""
        return [PluginField(name, None, t.field_type) for name, t in self.attrs.items()]


def split_id(plugin_id: Any) -> tuple[str, str]:
    """``"namespace::name"`` -> (namespace, name), validated."""
    if not isinstance(plugin_id, str) or plugin_id.count("::") != 1:
        raise PluginDefinitionError(f"a QDP plugin id has the form 'namespace::name', got {plugin_id!r}")
    namespace, name = plugin_id.split("::")
    for label, part in (("namespace", namespace), ("name", name)):
        if "." in part:
            raise PluginDefinitionError(f"plugin id {plugin_id!r}: the {label} {part!r} cannot contain '.'")
    if namespace in RESERVED_NAMESPACES:
        raise PluginDefinitionError(
            f"plugin id {plugin_id!r}: namespace {namespace!r} is reserved; choose your project's name "
            f"(reserved: {sorted(RESERVED_NAMESPACES)})"
        )
    if not name.isidentifier():
        raise PluginDefinitionError(f"plugin id {plugin_id!r}: the name {name!r} must be a Python identifier")
    return namespace, name


def signature_of(func: Callable[..., Any], who: str) -> inspect.Signature:
    """The signature with string annotations resolved."""
    if not callable(func):
        raise PluginDefinitionError(f"{who}: decorate a function, got {type(func).__name__}")
    try:
        return inspect.signature(func, eval_str=True)
    except NameError as exc:
        raise PluginDefinitionError(f"{who}: a type hint of {func.__name__} cannot be resolved: {exc}") from None


def _array_dtype(annotation: Any) -> np.dtype | None:
    """The dtype of ``numpy.typing.NDArray[dtype]``; None for anything else.

    ``NDArray`` is a generic alias of ``np.ndarray[shape, np.dtype[scalar]]`` up to NumPy 2.4 and a
    generic type alias (``type NDArray[T] = ...``, whose origin is the alias) from NumPy 2.5 on.
    """
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    scalar: Any = None
    if origin is np.ndarray and len(args) == 2 and typing.get_args(args[1]):
        scalar = typing.get_args(args[1])[0]
    elif len(args) == 1 and typing.get_origin(getattr(origin, "__value__", None)) is np.ndarray:
        scalar = args[0]
    if scalar is None:
        return None
    try:
        return np.dtype(scalar)
    except TypeError:
        return None


def attr_type(annotation: Any) -> AttrType | None:
    """The attribute type a hint names, or None when it names none we can store."""
    if annotation in _BUILTIN_FIELDS:
        return AttrType(builtin=annotation)
    dtype = _array_dtype(annotation)
    if dtype is not None and dtype in _ARRAY_FIELDS:
        return AttrType(dtype=dtype)
    return None


def _is_subclass(annotation: Any, base: type) -> bool:
    return inspect.isclass(annotation) and issubclass(annotation, base)


def parse_register(plugin_id: str, func: Callable[..., Any]) -> Schema:
    """The schema of a ``register`` function (raises naming the plugin and the function)."""
    namespace, name = split_id(plugin_id)
    who = f"register function {getattr(func, '__name__', func)!r} of QDP plugin {plugin_id!r}"
    sig = signature_of(func, who)
    tensors: list[str] = []
    attrs: dict[str, AttrType] = {}
    for index, (pname, param) in enumerate(sig.parameters.items()):
        if param.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            raise PluginDefinitionError(
                f"{who}: parameter {pname!r} must be a plain or keyword-only parameter, not {param.kind.description}"
            )
        if param.annotation is inspect.Parameter.empty:
            raise PluginDefinitionError(
                f"{who}: parameter {pname!r} has no type hint; mark it trtp.TensorDesc or an attribute type ({_SUPPORTED})"
            )
        if param.default is not inspect.Parameter.empty:
            raise PluginDefinitionError(f"{who}: parameter {pname!r} has a default value; attributes take no defaults")
        if _is_subclass(param.annotation, TensorDesc):
            if attrs:
                raise PluginDefinitionError(
                    f"{who}: tensor {pname!r} comes after attributes; TensorDesc parameters come first"
                )
            tensors.append(pname)
            continue
        if index == 0:
            raise PluginDefinitionError(
                f"{who}: the first parameter {pname!r} must be a trtp.TensorDesc (inputs come first)"
            )
        if pname in RESERVED_ATTRIBUTES:
            raise PluginDefinitionError(
                f"{who}: {pname!r} cannot be an attribute name (reserved: {sorted(RESERVED_ATTRIBUTES)})"
            )
        kind = attr_type(param.annotation)
        if kind is None:
            raise PluginDefinitionError(
                f"{who}: attribute {pname!r} has type {param.annotation!r}, which cannot be serialized; use {_SUPPORTED}"
            )
        attrs[pname] = kind
    return Schema(plugin_id, namespace, name, who, tensors, attrs, _count_outputs(sig, who))


def _count_outputs(sig: inspect.Signature, who: str) -> int:
    returned = sig.return_annotation
    if returned is inspect.Signature.empty:
        raise PluginDefinitionError(
            f"{who}: no return type hint; declare -> trtp.TensorDesc or -> Tuple[trtp.TensorDesc, ...]"
        )
    if typing.get_origin(returned) is tuple:
        args = typing.get_args(returned)
        if args and all(_is_subclass(a, TensorDesc) for a in args):
            return len(args)
    elif _is_subclass(returned, TensorDesc):
        return 1
    raise PluginDefinitionError(
        f"{who}: returns {returned!r}; declare -> trtp.TensorDesc or -> Tuple[trtp.TensorDesc, ...]"
    )


_HOOKS = {
    # kind: (trailing parameters, tensor annotation class, optional trailing parameter)
    "impl": (("outputs", "stream"), Tensor, "tactic"),
    "autotune": (("outputs",), TensorDesc, None),
    "aot_impl": (("outputs", "tactic"), TensorDesc, None),
}


def check_hook(kind: str, func: Callable[..., Any], schema: Schema) -> tuple[list[str], bool]:
    """Check an ``impl`` / ``autotune`` / ``aot_impl`` function against the schema.

    Returns the attribute names it takes (in registration order) and whether it takes
    the optional ``tactic``. Type hints are optional but checked when given.
    """
    trailing, tensor_class, optional = _HOOKS[kind]
    who = f"{kind} function {getattr(func, '__name__', func)!r} of QDP plugin {schema.plugin_id!r}"
    sig = signature_of(func, who)
    names = list(sig.parameters)
    takes_optional = optional is not None and bool(names) and names[-1] == optional
    attrs = [n for n in schema.attrs if n in names]
    expected = [*schema.tensor_names, *attrs, *trailing] + ([optional] if takes_optional else [])
    if names != expected:
        listed = ", ".join(schema.attrs) or "none"
        extra = f"[, {optional}]" if optional else ""
        raise PluginDefinitionError(
            f"{who}: parameters ({', '.join(names)}) differ from register's; expected the tensors "
            f"({', '.join(schema.tensor_names)}), any of the attributes in registration order (of: {listed}), "
            f"then {', '.join(trailing)}{extra}"
        )
    for pname, param in sig.parameters.items():
        hint = param.annotation
        if hint is inspect.Parameter.empty:
            continue
        if pname in schema.tensor_names:
            ok = _is_subclass(hint, tensor_class)
            wanted = f"trtp.{tensor_class.__name__}"
        elif pname in schema.attrs:
            ok = attr_type(hint) == schema.attrs[pname]
            wanted = schema.attrs[pname].describe() + " (as in register)"
        elif pname == "outputs":
            ok = typing.get_origin(hint) is tuple and all(
                _is_subclass(a, tensor_class) or a is Ellipsis for a in typing.get_args(hint)
            )
            wanted = f"Tuple[trtp.{tensor_class.__name__}]"
        else:  # stream, tactic
            ok = hint is int
            wanted = "int"
        if not ok:
            raise PluginDefinitionError(f"{who}: parameter {pname!r} is hinted {hint!r}; expected {wanted}")
    _check_return(kind, sig, who)
    return attrs, takes_optional


def _check_return(kind: str, sig: inspect.Signature, who: str) -> None:
    returned = sig.return_annotation
    if returned is inspect.Signature.empty:
        return
    if kind == "impl":
        ok = returned is None or returned is type(None)
        wanted = "None"
    elif kind == "autotune":
        ok = _is_subclass(returned, AutoTuneCombination) or (
            typing.get_origin(returned) is list
            and all(_is_subclass(a, AutoTuneCombination) for a in typing.get_args(returned))
        )
        wanted = "List[trtp.AutoTuneCombination]"
    else:
        ok = typing.get_origin(returned) is tuple and len(typing.get_args(returned)) == 4
        wanted = "Tuple[str | bytes, str | bytes, trtp.KernelLaunchParams, trtp.SymExprs]"
    if not ok:
        raise PluginDefinitionError(f"{who}: returns {returned!r}; expected {wanted}")
