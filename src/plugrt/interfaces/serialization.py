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

_SCALARS = {"i8": "<b", "u8": "<B", "i32": "<i", "u32": "<I", "i64": "<q", "f32": "<f", "f64": "<d", "bool": "<?"}


class SerializationWriter:
    """Appends little-endian values to a buffer; optional magic number and version header."""

    def __init__(self, magic: int | None = None, version: int | None = None) -> None:
        self._parts: list[bytes] = []
        if magic is not None:
            self.write_u32(magic)
        if version is not None:
            self.write_u32(version)

    def write(self, kind: str, value: Any) -> None:
        """Write one scalar of ``kind`` ('i8', 'u8', 'i32', 'u32', 'i64', 'f32', 'f64', 'bool')."""
        if kind not in _SCALARS:
            raise SerializationError(f"unknown scalar kind {kind!r}; choose from {sorted(_SCALARS)}")
        try:
            self._parts.append(struct.pack(_SCALARS[kind], value))
        except (struct.error, OverflowError) as exc:
            raise SerializationError(f"cannot write {value!r} as {kind}: {exc}") from None

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

    def write_bytes(self, data: bytes) -> None:
        """Write a length-prefixed byte string."""
        self.write_u32(len(data))
        self._parts.append(bytes(data))

    def write_str(self, text: str) -> None:
        """Write a length-prefixed UTF-8 string."""
        self.write_bytes(text.encode("utf-8"))

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

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts)


_ARRAY_DTYPES = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"}


class SerializationReader:
    """Reads what :class:`SerializationWriter` wrote; checks magic, version and length."""

    def __init__(
        self, data: bytes | bytearray | memoryview, magic: int | None = None, version: int | None = None
    ) -> None:
        self._data = bytes(data)
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

    def _read_header_u32(self, what: str) -> int:
        if len(self._data) < self._pos + 4:
            raise SerializationError(f"serialized data too short for its {what}: {len(self._data)} bytes")
        return int(self.read("u32"))

    def _take(self, count: int, what: str) -> bytes:
        if count < 0 or self._pos + count > len(self._data):
            raise SerializationError(
                f"reading {what} needs {count} bytes at offset {self._pos}, but only "
                f"{len(self._data) - self._pos} remain (data is truncated or was written differently)"
            )
        chunk = self._data[self._pos : self._pos + count]
        self._pos += count
        return chunk

    def read(self, kind: str) -> Any:
        """Read one scalar of ``kind`` (see :meth:`SerializationWriter.write`)."""
        if kind not in _SCALARS:
            raise SerializationError(f"unknown scalar kind {kind!r}; choose from {sorted(_SCALARS)}")
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, self._take(struct.calcsize(fmt), kind))[0]

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

    def read_bytes(self) -> bytes:
        """Read a length-prefixed byte string."""
        return self._take(self.read_u32(), "bytes")

    def read_str(self) -> str:
        """Read a length-prefixed UTF-8 string."""
        raw = self.read_bytes()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SerializationError(f"serialized string is not valid UTF-8: {exc}") from None

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
        raw = self._take(count * dtype.itemsize, f"array data of shape {shape}")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._data) - self._pos

    def finish(self) -> None:
        """Raise if bytes are left over (the reader and writer disagree)."""
        if self._pos != len(self._data):
            raise SerializationError(
                f"{len(self._data) - self._pos} bytes left over after reading {self._pos} of "
                f"{len(self._data)}: the data was written with a different layout"
            )
