"""The plan file container: a versioned, checksummed binary format for engines.

Layout (integers little endian; ``str`` is a u32 byte length + UTF-8 bytes)::

    magic (8 bytes) | version u32 | section count u32 (3)
    HEAD, WGTS, PLUG sections in this order, each:
        tag (4 bytes) | payload length u64 | zlib.crc32(payload) u32 | payload
    end marker: b"PEND" | byte count before it u64 | crc32 of those bytes u32

HEAD is the header as UTF-8 JSON with sorted keys. WGTS is a u32 count, then
per array, sorted by name: str name, str dtype, u8 ndim, ndim x i64 dims, u64
offset, u64 byte length; then the little-endian data of each array at a 64-byte
aligned offset from the payload start, zero padded. PLUG is a u32 count, then
per record: str namespace, name, version, interface, then a u32-prefixed payload.

The bytes are written and read with the plugins' codec,
:class:`~plugrt.interfaces.serialization.SerializationWriter` and ``SerializationReader``.
Decoding checks every declared size against the bytes present before slicing
or allocating; anything malformed raises :class:`PlanFormatError`.
"""

from __future__ import annotations

import collections
import json
import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from plugrt.core.errors import PlanFormatError, SerializationError, TypeMismatchError
from plugrt.interfaces.serialization import SerializationReader, SerializationWriter

__all__ = [
    "PLAN_FORMAT_VERSION",
    "PLAN_MAGIC",
    "WEIGHT_DTYPES",
    "PlanContents",
    "PluginRecord",
    "decode_plan",
    "encode_plan",
]

PLAN_MAGIC: bytes = b"PLUGRTPL"
PLAN_FORMAT_VERSION: int = 2
WEIGHT_DTYPES: tuple[str, ...] = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64")

_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in WEIGHT_DTYPES}
_INTERFACES = ("v2", "v3")
_SECTIONS = (b"HEAD", b"WGTS", b"PLUG")
_ORDER = "expected HEAD, WGTS, PLUG, each once, in this order"
_END = b"PEND"
_ALIGN = 64
_MAX_DEPTH = 256  # nesting levels allowed in the header (containers + dimension expressions)
_MAX_INT_BITS = 1024  # header integers; bounds the cost of parsing long literals
_MAX_NDIM = 32
_MIN_SIZE = {"weight": 4 + 4 + 1 + 16, "plugin record": 5 * 4}  # bytes of an all-empty entry
_PLUGIN_FIELDS = ("namespace", "name", "version", "interface")
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number"}
_JSON_TYPES |= {bool: "boolean", type(None): "null"}


@dataclass(frozen=True)
class PluginRecord:
    """One serialized plugin: creator key, interface family and its own bytes."""

    namespace: str
    name: str
    version: str
    interface: str  # "v2" or "v3": which interface family revives it
    payload: bytes


@dataclass(frozen=True, eq=False)
class PlanContents:
    """Everything a plan holds; equality compares arrays by dtype name, shape and bits."""

    header: dict[str, Any]
    weights: dict[str, npt.NDArray[Any]]
    plugins: list[PluginRecord]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlanContents):
            return NotImplemented
        mine, theirs = self.weights, other.weights
        if (self.header, self.plugins, mine.keys()) != (other.header, other.plugins, theirs.keys()):
            return False
        return all(_bits(mine[k]) == _bits(theirs[k]) for k in mine)


def _bits(a: npt.NDArray[Any]) -> tuple[str, tuple[int, ...], bytes]:
    little = np.ascontiguousarray(a, a.dtype.newbyteorder("<"))
    return a.dtype.name, a.shape, little.tobytes()


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _check_json(value: object, root: str, error: type[SerializationError]) -> None:
    """Require plain JSON data: exact builtin types, finite floats, bounded depth."""
    stack: list[tuple[Any, Any, int]] = [(value, None, 0)]  # paths are (parent, key) links
    while stack:
        item, path, depth = stack.pop()
        kind, problem = type(item), ""
        if depth > _MAX_DEPTH:
            problem = f"is nested deeper than {_MAX_DEPTH} levels"
        elif kind is dict:
            bad = [k for k in item if type(k) is not str][:1]
            problem = f"has key {bad[0]!r} of type {type(bad[0]).__name__}, not str" if bad else ""
            stack.extend((sub, (path, key), depth + 1) for key, sub in item.items())
        elif kind is list:
            stack.extend((sub, (path, i), depth + 1) for i, sub in enumerate(item))
        elif kind is int and item.bit_length() > _MAX_INT_BITS:
            problem = f"is an integer of {item.bit_length()} bits; at most {_MAX_INT_BITS} allowed"
        elif kind is float and not math.isfinite(item):
            problem = f"is {item!r}, which JSON cannot represent"
        elif kind not in _JSON_TYPES:
            problem = f"has type {kind.__name__}; allowed: str, int, float, bool, None, list, dict"
        if problem:
            keys = []
            while path is not None:
                path, key = path
                keys.append(f"[{key!r}]")
            raise error(f"{root}{''.join(reversed(keys))} {problem}")


def _encode_header(header: object) -> bytes:
    if type(header) is not dict:
        raise SerializationError(f"plan header must be a dict, got {type(header).__name__}")
    _check_json(header, "header", SerializationError)
    try:
        return json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    except (ValueError, TypeError, RecursionError) as exc:
        raise SerializationError(f"plan header is not JSON-serialisable: {exc}") from None


def _encode_weights(weights: dict[str, npt.NDArray[Any]]) -> SerializationWriter:
    """The weights section; its array data is written as views, copied once, when the plan is joined."""
    items = []
    for name, arr in weights.items():
        if not isinstance(arr, np.ndarray):
            raise SerializationError(f"weight {name!r} must be a numpy array, got {type(arr).__name__}")
        if (dtype := _DTYPES.get(arr.dtype.name)) is None or arr.ndim > _MAX_NDIM:
            raise SerializationError(
                f"weight {name!r} has dtype {arr.dtype.name!r} and {arr.ndim} dims; allowed "
                f"dtypes are {', '.join(WEIGHT_DTYPES)}, with at most {_MAX_NDIM} dims"
            )
        entry = SerializationWriter()
        entry.write_str(name, f"weight name {name!r}")
        entry.write_str(arr.dtype.name, "dtype")
        entry.write_struct(f"<B{arr.ndim}q", arr.ndim, *arr.shape)
        little = np.ascontiguousarray(arr, dtype)
        if dtype.kind == "b":  # a bool array viewed from other bytes may hold values above 1
            little = np.minimum(little.view(np.uint8), 1)
        items.append((name, entry, little.reshape(-1).view(np.uint8)))  # no copy of the data
    items.sort(key=lambda item: item[0])  # code point order is UTF-8 byte order
    out = SerializationWriter()
    out.write_u32(len(items))
    index_end = end = 4 + sum(len(entry) + 16 for _, entry, _ in items)
    for _, entry, data in items:
        out.write_raw(entry.to_bytes())
        out.write_struct("<QQ", _align(end), data.nbytes)
        end = _align(end) + data.nbytes
    end = index_end
    for *_, data in items:
        out.write_raw(bytes(_align(end) - end))
        out.write_raw(data.data)
        end = _align(end) + data.nbytes
    return out


def _encode_plugins(plugins: list[PluginRecord]) -> SerializationWriter:
    out = SerializationWriter()
    out.write_u32(len(plugins))
    for i, rec in enumerate(plugins):
        if not isinstance(rec, PluginRecord):
            raise SerializationError(f"plugin record {i} must be a PluginRecord, got {type(rec).__name__}")
        if rec.interface not in _INTERFACES:
            got = f"{rec.name!r} has interface {rec.interface!r}"
            raise SerializationError(f"plugin record {i} {got}; expected 'v2' or 'v3'")
        for field in _PLUGIN_FIELDS:
            out.write_str(getattr(rec, field), f"plugin record {i} {field}")
        out.write_bytes(rec.payload, f"plugin record {i} payload")
    return out


def _crc(chunks: list[bytes | memoryview]) -> int:
    crc = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
    return crc


def encode_plan(contents: PlanContents) -> bytes:
    """Serialize ``contents``; equal contents always give identical bytes.

    Raises :class:`SerializationError` naming the offending key, array or record
    when the header is not plain JSON data, a weight dtype is outside
    :data:`WEIGHT_DTYPES`, or a plugin record is malformed.
    """
    if not isinstance(contents, PlanContents):
        raise TypeMismatchError(f"encode_plan expects PlanContents, got {type(contents).__name__}")
    for field, kind in (("weights", dict), ("plugins", list)):
        if not isinstance(value := getattr(contents, field), kind):
            raise SerializationError(f"plan {field} must be a {kind.__name__}, got {type(value).__name__}")
    header = SerializationWriter()
    header.write_raw(_encode_header(contents.header))
    sections = [header, _encode_weights(contents.weights), _encode_plugins(contents.plugins)]
    plan = SerializationWriter()
    plan.write_raw(PLAN_MAGIC)
    plan.write_struct("<II", PLAN_FORMAT_VERSION, len(_SECTIONS))
    for tag, section in zip(_SECTIONS, sections):
        plan.write_raw(tag)
        plan.write_struct("<QI", len(section), _crc(section.chunks()))
        for chunk in section.chunks():
            plan.write_raw(chunk)
    size, crc = len(plan), _crc(plan.chunks())
    plan.write_raw(_END)
    plan.write_struct("<QI", size, crc)
    return plan.to_bytes()  # the only copy of the weight data


class _Reader(SerializationReader):
    """A plan reader: errors are :class:`PlanFormatError` prefixed with where the reading happens."""

    def __init__(self, data: memoryview, prefix: str) -> None:
        super().__init__(data)
        self.prefix = prefix

    def error(self, message: str) -> PlanFormatError:
        return PlanFormatError(f"{self.prefix}: {message}")

    def shortfall(self, what: str, count: int, verb: str) -> PlanFormatError:
        return self.error(f"{what} {verb} {count} bytes but only {self.remaining} remain")

    def count(self, what: str) -> int:
        """Read an item count, rejecting one the remaining bytes cannot hold."""
        (n,) = self.read_struct("<I", f"{what} count")
        left, least = self.remaining, _MIN_SIZE[what]
        if n * least > left:
            raise self.error(f"declares {n} {what}s but only {left} bytes remain (each needs {least}+)")
        return int(n)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    counts = collections.Counter(key for key, _ in pairs)
    if len(counts) != len(pairs):
        raise ValueError(f"duplicate key {next(k for k, n in counts.items() if n > 1)!r}")
    return dict(pairs)


def _parse_int(literal: str) -> int:
    if len(literal) > _MAX_INT_BITS // 3 + 2:  # checked before int(), whose cost grows quadratically
        raise ValueError(f"integer literal of {len(literal)} characters is too long")
    return int(literal)


def _decode_header(payload: memoryview) -> dict[str, Any]:
    r = _Reader(payload, "section 'HEAD' is malformed")
    try:
        text = str(payload, "utf-8")
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_parse_int)
    except UnicodeDecodeError as exc:
        raise r.error(f"header is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise r.error("header JSON is nested too deeply to parse") from None
    except ValueError as exc:
        raise r.error(f"header is not valid JSON: {exc}") from None
    if type(value) is not dict:
        got = _JSON_TYPES.get(type(value), "value")
        raise r.error(f"header must be a JSON object at top level, got a JSON {got}")
    _check_json(value, "section 'HEAD' header", PlanFormatError)
    return value


def _decode_weights(payload: memoryview) -> dict[str, npt.NDArray[Any]]:
    r = _Reader(payload, "section 'WGTS' is malformed")
    entries: list[tuple[str, np.dtype[Any], tuple[int, ...], int, int]] = []
    names: list[str] = []
    for i in range(r.count("weight")):
        name = r.read_str(f"weight {i} name")
        if names and name <= names[-1]:  # code point order is UTF-8 byte order
            problem = "duplicate" if name in names else "unsorted (out-of-order)"
            raise r.error(f"{problem} weight name {name!r}")
        names.append(name)
        dtype_name = r.read_bytes(f"weight {name!r} dtype").decode("utf-8", "replace")
        if (dtype := _DTYPES.get(dtype_name)) is None:
            allowed = ", ".join(WEIGHT_DTYPES)
            raise r.error(f"weight {name!r} has unknown dtype {dtype_name!r} (allowed: {allowed})")
        (ndim,) = r.read_struct("<B", f"weight {name!r} ndim")
        if ndim > _MAX_NDIM:
            raise r.error(f"weight {name!r} has {ndim} dims; at most {_MAX_NDIM} allowed")
        shape: tuple[int, ...] = r.read_struct(f"<{ndim}q", f"weight {name!r} shape")
        if any(d < 0 for d in shape):
            raise r.error(f"weight {name!r} has a negative dim in shape {list(shape)}")
        offset, nbytes = r.read_struct("<QQ", f"weight {name!r} offset and length")
        if (needed := math.prod(shape) * dtype.itemsize) != nbytes:  # exact: Python ints
            raise r.error(
                f"weight {name!r} of shape {list(shape)} and dtype {dtype_name} needs "
                f"{needed} bytes but declares {nbytes}"
            )
        entries.append((name, dtype, shape, offset, nbytes))
    weights: dict[str, npt.NDArray[Any]] = {}
    for name, dtype, shape, offset, nbytes in entries:
        if offset != _align(r.offset) or any(payload[r.offset : offset]):
            raise r.error(f"weight {name!r} data is at offset {offset} (expected {_align(r.offset)}, zero padded)")
        r.seek(offset)
        data = r.read_raw(nbytes, f"weight {name!r} data", "declares")
        if dtype.kind == "b" and bytes(data).translate(None, b"\x00\x01"):
            raise r.error(f"weight {name!r} is bool but holds bytes other than 0 and 1")
        try:
            flat = np.frombuffer(data, dtype, nbytes // dtype.itemsize)
            weights[name] = flat.reshape(shape).astype(dtype.newbyteorder("="))
        except (ValueError, MemoryError) as exc:
            raise r.error(f"weight {name!r} of shape {list(shape)} is unusable: {exc}") from None
    if extra := r.remaining:
        raise r.error(f"{extra} unexpected bytes after the last array")
    return weights


def _decode_plugins(payload: memoryview) -> list[PluginRecord]:
    r = _Reader(payload, "section 'PLUG' is malformed")
    records = []
    for i in range(r.count("plugin record")):
        namespace, name, version, interface = (r.read_str(f"plugin record {i} {field}") for field in _PLUGIN_FIELDS)
        if interface not in _INTERFACES:
            raise r.error(f"plugin record {i} interface is {interface!r} (expected 'v2' or 'v3')")
        blob = r.read_bytes(f"plugin record {i} payload")
        records.append(PluginRecord(namespace, name, version, interface, blob))
    if extra := r.remaining:
        raise r.error(f"{extra} unexpected bytes after the last plugin record")
    return records


def _check_crc(data: memoryview, stored: int, where: str) -> None:
    if (computed := zlib.crc32(data)) != stored:
        raise PlanFormatError(f"plan checksum mismatch in {where} (stored 0x{stored:08x}, computed 0x{computed:08x})")


def decode_plan(data: bytes | bytearray | memoryview) -> PlanContents:
    """Parse plan bytes into :class:`PlanContents` (arrays are fresh C-contiguous copies).

    Raises :class:`PlanFormatError` for anything but an intact plan of this format
    version: wrong magic, other version, truncation, checksum mismatch, trailing
    bytes, or malformed section contents.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeMismatchError(f"decode_plan expects bytes-like data, got {type(data).__name__}")
    buf = bytes(data)
    if len(buf) < len(PLAN_MAGIC) and PLAN_MAGIC.startswith(buf):
        raise PlanFormatError(f"plan is truncated: {len(buf)} bytes, shorter than the magic")
    if (magic := buf[: len(PLAN_MAGIC)]) != PLAN_MAGIC:
        raise PlanFormatError(f"not a plugrt plan: magic bytes {magic!r} (expected {PLAN_MAGIC!r})")
    r = _Reader(memoryview(buf), "plan is truncated")
    r.seek(len(PLAN_MAGIC))
    if (version := r.read_struct("<I", "format version")[0]) != PLAN_FORMAT_VERSION:
        raise PlanFormatError(
            f"plan format version {version} is not supported; this plugrt reads version {PLAN_FORMAT_VERSION}"
        )
    if (count := r.read_struct("<I", "section count")[0]) > len(_SECTIONS):
        raise PlanFormatError(f"plan declares {count} sections; expected 3 ({_ORDER})")
    payloads: dict[bytes, memoryview] = {}
    for i in range(count):
        tag = bytes(r.read_raw(4, f"section {i} tag"))
        last = _SECTIONS.index([*payloads][-1]) if payloads else -1
        if tag not in _SECTIONS or tag in payloads or _SECTIONS.index(tag) < last:
            kind = "duplicate" if tag in payloads else "misplaced" if tag in _SECTIONS else "unknown"
            raise PlanFormatError(f"plan has {kind} section tag {tag!r} at byte {r.offset - 4} ({_ORDER})")
        name = tag.decode("ascii")
        length, stored = r.read_struct("<QI", f"section '{name}' length and checksum")
        payloads[tag] = r.read_raw(length, f"section '{name}'", "declares")
        _check_crc(payloads[tag], stored, f"section '{name}'")
    if missing := [t.decode() for t in _SECTIONS if t not in payloads]:
        raise PlanFormatError(f"plan is missing section(s) {', '.join(missing)}")
    body_end = r.offset
    tag, size, stored = r.read_struct("<4sQI", "end marker")
    if tag != _END or size != body_end:
        got, want = f"{tag!r} recording {size} bytes", f"{_END!r} recording {body_end}"
        raise PlanFormatError(f"plan end marker is {got} before it (expected {want})")
    _check_crc(memoryview(buf)[:body_end], stored, "the end marker")
    if extra := r.remaining:
        raise PlanFormatError(f"plan has {extra} unexpected trailing bytes after its end marker")
    return PlanContents(
        _decode_header(payloads[b"HEAD"]),
        _decode_weights(payloads[b"WGTS"]),
        _decode_plugins(payloads[b"PLUG"]),
    )
