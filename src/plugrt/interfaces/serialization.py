"""Byte writer and reader for plugin authors (the seeds' ``write<T>`` / ``read<T>``).

>>> w = SerializationWriter(magic=0x504C5547, version=1)
>>> w.write_i32(3); w.write_f32(0.5); w.write_str("relu")
>>> r = SerializationReader(w.to_bytes(), magic=0x504C5547, version=1)
>>> r.read_i32(), r.read_f32(), r.read_str()
(3, 0.5, 'relu')
>>> r.finish()   # raises if bytes are left over
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..core.errors import SerializationError

__all__ = ["SerializationReader", "SerializationWriter"]

_U32_MAX = 2**32 - 1
_SCALARS = {"i8": "<b", "u8": "<B", "i32": "<i", "u32": "<I", "i64": "<q", "f32": "<f", "f64": "<d", "bool": "<?"}


class SerializationWriter:
    """Appends little-endian values to a buffer; optional magic number and version header."""

    def __init__(self, magic: int | None = None, version: int | None = None) -> None:
        self._parts: list[bytes | memoryview] = []
        if magic is not None:
            self.write_u32(magic)
        if version is not None:
            self.write_u32(version)

    def write(self, kind: str, value: Any) -> None:
        """Write one scalar of ``kind`` ('i8', 'u8', 'i32', 'u32', 'i64', 'f32', 'f64', 'bool')."""
        if kind not in _SCALARS:
            raise SerializationError(f"unknown scalar kind {kind!r}; choose from {sorted(_SCALARS)}")
        self.write_struct(_SCALARS[kind], value, what=kind)

    def write_struct(self, fmt: str, *values: Any, what: str = "") -> None:
        """Write ``values`` packed by the :mod:`struct` format ``fmt`` (start it with ``<``)."""
        try:
            self._parts.append(struct.pack(fmt, *values))
        except (struct.error, OverflowError) as exc:
            shown = ", ".join(map(repr, values))
            raise SerializationError(f"cannot write {shown} as {what or fmt}: {exc}") from None

    def write_i32(self, value: int) -> None:
        """Write a signed 32-bit integer."""
        self.write("i32", value)

    def write_u32(self, value: int) -> None:
        """Write an unsigned 32-bit integer."""
        self.write("u32", value)

    def write_i64(self, value: int) -> None:
        """Write a signed 64-bit integer."""
        self.write("i64", value)

    def write_f32(self, value: float) -> None:
        """Write a 32-bit float."""
        self.write("f32", value)

    def write_f64(self, value: float) -> None:
        """Write a 64-bit float."""
        self.write("f64", value)

    def write_bool(self, value: bool) -> None:
        """Write a bool as one byte."""
        self.write("bool", bool(value))

    def write_raw(self, data: bytes | memoryview) -> None:
        """Append ``data`` as it is, without a length; a memoryview is kept, not copied, until :meth:`to_bytes`."""
        self._parts.append(data if isinstance(data, memoryview) else bytes(data))

    def write_bytes(self, data: bytes, what: str = "bytes") -> None:
        """Write a length-prefixed (u32) byte string; ``what`` names it in errors."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise SerializationError(f"{what} must be bytes, got {type(data).__name__}")
        if len(data) > _U32_MAX:
            raise SerializationError(f"{what} is {len(data)} bytes; at most {_U32_MAX} allowed")
        self.write_u32(len(data))
        self._parts.append(bytes(data))

    def write_str(self, text: str, what: str = "string") -> None:
        """Write a length-prefixed UTF-8 string; ``what`` names it in errors."""
        if not isinstance(text, str):
            raise SerializationError(f"{what} must be str, got {type(text).__name__}")
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SerializationError(f"{what} is not valid UTF-8: {exc.reason}") from None
        self.write_bytes(data, what)

    def write_array(self, array: np.ndarray) -> None:
        """Write a 1-d or n-d array: dtype string, shape, then the raw little-endian data."""
        source = np.asarray(array)
        array = np.ascontiguousarray(source).reshape(source.shape)
        dtype_str = array.dtype.newbyteorder("<").str
        if dtype_str not in _ARRAY_DTYPES:
            raise SerializationError(
                f"cannot write an array of dtype {array.dtype}; supported: {sorted(_ARRAY_DTYPES)}"
            )
        if array.ndim > 8:
            raise SerializationError(f"cannot write an array of {array.ndim} dimensions; at most 8 are supported")
        self.write_str(dtype_str)
        self.write_u32(array.ndim)
        for dim in map(int, array.shape):
            self.write_i64(dim)
        self._parts.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())

    def to_bytes(self) -> bytes:
        """Everything written so far."""
        return b"".join(self._parts)

    def chunks(self) -> list[bytes | memoryview]:
        """The pieces written so far, in order and not joined (no copy of :meth:`write_raw` data)."""
        return list(self._parts)

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)


_ARRAY_DTYPES = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"}


class SerializationReader:
    """Reads what :class:`SerializationWriter` wrote; checks magic, version and length.

    Every read checks the bytes remaining first and raises (advancing nothing) when
    they are too few; a subclass words its errors by overriding :meth:`error` and
    :meth:`shortfall`.
    """

    def __init__(
        self, data: bytes | bytearray | memoryview, magic: int | None = None, version: int | None = None
    ) -> None:
        self._data = memoryview(data if isinstance(data, bytes) else bytes(data))
        self._pos = 0
        if magic is not None:
            found = self._read_header_u32("magic number")
            if found != magic:
                raise SerializationError(
                    f"bad magic number 0x{found:08X}, expected 0x{magic:08X}: not this plugin's data"
                )
        if version is not None:
            found = self._read_header_u32("version")
            if found != version:
                raise SerializationError(f"serialized version {found} is not supported; expected version {version}")

    def error(self, message: str) -> SerializationError:
        """The exception for malformed data described by ``message``."""
        return SerializationError(message)

    def shortfall(self, what: str, count: int, verb: str) -> SerializationError:
        """The exception for reading ``what`` of ``count`` bytes past the end (``verb``: 'needs' or 'declares')."""
        return self.error(
            f"reading {what} needs {count} bytes at offset {self._pos}, but only "
            f"{self.remaining} remain (data is truncated or was written differently)"
        )

    def _read_header_u32(self, what: str) -> int:
        if len(self._data) < self._pos + 4:
            raise SerializationError(f"serialized data too short for its {what}: {len(self._data)} bytes")
        return int(self.read("u32"))

    def read_raw(self, count: int, what: str = "bytes", verb: str = "needs") -> memoryview:
        """The next ``count`` bytes, a view of the data (no copy)."""
        if count < 0 or count > self.remaining:
            raise self.shortfall(what, count, verb)
        self._pos += count
        return self._data[self._pos - count : self._pos]

    def read_struct(self, fmt: str, what: str) -> tuple[Any, ...]:
        """Values unpacked by the :mod:`struct` format ``fmt``; ``what`` names them in errors."""
        return struct.unpack(fmt, self.read_raw(struct.calcsize(fmt), what))

    def read(self, kind: str) -> Any:
        """Read one scalar of ``kind`` (see :meth:`SerializationWriter.write`)."""
        if kind not in _SCALARS:
            raise SerializationError(f"unknown scalar kind {kind!r}; choose from {sorted(_SCALARS)}")
        return self.read_struct(_SCALARS[kind], kind)[0]

    def read_i32(self) -> int:
        """Read a signed 32-bit integer."""
        return int(self.read("i32"))

    def read_u32(self) -> int:
        """Read an unsigned 32-bit integer."""
        return int(self.read("u32"))

    def read_i64(self) -> int:
        """Read a signed 64-bit integer."""
        return int(self.read("i64"))

    def read_f32(self) -> float:
        """Read a 32-bit float."""
        return float(self.read("f32"))

    def read_f64(self) -> float:
        """Read a 64-bit float."""
        return float(self.read("f64"))

    def read_bool(self) -> bool:
        """Read a one-byte bool."""
        return bool(self.read("bool"))

    def read_bytes(self, what: str | None = None) -> bytes:
        """Read a length-prefixed byte string; ``what`` names it in errors (else 'bytes', its length 'u32')."""
        (count,) = self.read_struct("<I", f"{what} length" if what else "u32")
        return bytes(self.read_raw(count, what or "bytes", "declares"))

    def read_str(self, what: str | None = None) -> str:
        """Read a length-prefixed UTF-8 string; ``what`` names it in errors."""
        raw = self.read_bytes(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            where = f"({exc.reason} at byte {exc.start})"
            raise self.error(f"{what or 'serialized string'} is not valid UTF-8 {where}") from None

    def read_array(self) -> np.ndarray:
        """Read an array written by :meth:`SerializationWriter.write_array`."""
        dtype_str = self.read_str()
        if dtype_str not in _ARRAY_DTYPES:
            raise SerializationError(f"serialized array has unsupported dtype {dtype_str!r}")
        ndim = self.read_u32()
        if ndim > 8:
            raise SerializationError(f"serialized array has {ndim} dimensions; at most 8 are allowed")
        shape = [self.read_i64() for _ in range(ndim)]
        if any(d < 0 for d in shape):
            raise SerializationError(f"serialized array has a negative dimension: {shape}")
        dtype = np.dtype(dtype_str)
        count = 1
        for dim in shape:
            count *= dim
        raw = self.read_raw(count * dtype.itemsize, f"array data of shape {shape}")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return max(0, len(self._data) - self._pos)

    @property
    def offset(self) -> int:
        """Bytes read (or skipped) so far."""
        return self._pos

    def seek(self, offset: int) -> None:
        """Continue reading at ``offset`` (past the end, every later read fails)."""
        if offset < 0:
            raise self.error(f"cannot seek to negative offset {offset}")
        self._pos = offset

    def finish(self) -> None:
        """Raise if bytes are left over (the reader and writer disagree)."""
        if self._pos != len(self._data):
            raise SerializationError(
                f"{len(self._data) - self._pos} bytes left over after reading {self._pos} of "
                f"{len(self._data)}: the data was written with a different layout"
            )
