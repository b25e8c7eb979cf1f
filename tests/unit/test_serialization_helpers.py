"""Tests for the plugin byte helpers: plugrt.interfaces.serialization."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

import numpy as np
import pytest

import plugrt as trt
from plugrt.core.errors import SerializationError
from plugrt.interfaces.serialization import SerializationReader, SerializationWriter

MAGIC = 0x504C5547
KINDS = ["i8", "u8", "i32", "u32", "i64", "f32", "f64", "bool"]
STRUCT_FORMAT = {"i8": "<b", "u8": "<B", "i32": "<i", "u32": "<I", "i64": "<q", "f32": "<f", "f64": "<d", "bool": "<?"}

SCALAR_CASES = [
    ("i8", [-128, -1, 0, 127]),
    ("u8", [0, 1, 255]),
    ("i32", [-(2**31), -1, 0, 2**31 - 1]),
    ("u32", [0, 1, 2**32 - 1]),
    ("i64", [-(2**63), 0, 2**63 - 1]),
    ("f32", [0.0, -0.0, 0.5, -2.25, 3.4028234663852886e38, math.inf, -math.inf]),
    ("f64", [0.0, math.pi, -1e308, 5e-324, math.inf]),
    ("bool", [True, False]),
]


def test_exports() -> None:
    assert trt.SerializationWriter is SerializationWriter
    assert trt.SerializationReader is SerializationReader


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "values"), SCALAR_CASES)
def test_generic_scalar_round_trip(kind: str, values: list[object]) -> None:
    writer = SerializationWriter()
    for value in values:
        writer.write(kind, value)
    data = writer.to_bytes()
    assert len(data) == len(writer) == len(values) * struct.calcsize(STRUCT_FORMAT[kind])
    reader = SerializationReader(data)
    got = [reader.read(kind) for _ in values]
    reader.finish()
    assert got == values
    assert [math.copysign(1, v) for v in got if isinstance(v, float)] == [
        math.copysign(1, v) for v in values if isinstance(v, float)
    ]


@pytest.mark.parametrize(("kind", "values"), SCALAR_CASES)
def test_scalars_are_little_endian(kind: str, values: list[object]) -> None:
    writer = SerializationWriter()
    writer.write(kind, values[-1])
    assert writer.to_bytes() == struct.pack(STRUCT_FORMAT[kind], values[-1])


def test_typed_helpers_round_trip() -> None:
    writer = SerializationWriter()
    writer.write_i32(-7)
    writer.write_u32(4_000_000_000)
    writer.write_i64(-(2**40))
    writer.write_f32(0.1)
    writer.write_f64(0.1)
    writer.write_bool(1)  # type: ignore[arg-type]
    writer.write_bool(0)  # type: ignore[arg-type]
    writer.write_bool("yes")  # type: ignore[arg-type]
    reader = SerializationReader(writer.to_bytes())
    assert reader.read_i32() == -7
    assert reader.read_u32() == 4_000_000_000
    assert reader.read_i64() == -(2**40)
    f32 = reader.read_f32()
    assert f32 == float(np.float32(0.1)) and f32 != 0.1  # stored with 32-bit precision
    assert reader.read_f64() == 0.1
    assert reader.read_bool() is True
    assert reader.read_bool() is False
    assert reader.read_bool() is True
    assert reader.remaining == 0
    reader.finish()


def test_typed_readers_return_python_types() -> None:
    writer = SerializationWriter()
    writer.write_i32(1)
    writer.write_u32(2)
    writer.write_i64(3)
    writer.write_f32(4.0)
    writer.write_f64(5.0)
    writer.write_bool(True)
    reader = SerializationReader(writer.to_bytes())
    values = [reader.read_i32(), reader.read_u32(), reader.read_i64(), reader.read_f32(), reader.read_f64()]
    assert [type(v) for v in values] == [int, int, int, float, float]
    assert type(reader.read_bool()) is bool


def test_numpy_scalars_are_accepted() -> None:
    writer = SerializationWriter()
    writer.write_i32(np.int32(-5))  # type: ignore[arg-type]
    writer.write_i64(np.int64(9))  # type: ignore[arg-type]
    writer.write_f32(np.float32(1.5))  # type: ignore[arg-type]
    writer.write_bool(np.bool_(True))  # type: ignore[arg-type]
    reader = SerializationReader(writer.to_bytes())
    assert (reader.read_i32(), reader.read_i64(), reader.read_f32(), reader.read_bool()) == (-5, 9, 1.5, True)


def test_nan_round_trips() -> None:
    writer = SerializationWriter()
    writer.write_f32(math.nan)
    writer.write_f64(math.nan)
    reader = SerializationReader(writer.to_bytes())
    assert math.isnan(reader.read_f32())
    assert math.isnan(reader.read_f64())


@pytest.mark.parametrize("text", ["", "relu", "héllo wörld", "名前", "a\x00b", "🙂" * 100])
def test_str_round_trip(text: str) -> None:
    writer = SerializationWriter()
    writer.write_str(text)
    data = writer.to_bytes()
    encoded = text.encode("utf-8")
    assert data == struct.pack("<I", len(encoded)) + encoded
    reader = SerializationReader(data)
    assert reader.read_str() == text
    reader.finish()


@pytest.mark.parametrize("payload", [b"", b"\x00", bytes(range(256)), bytearray(b"abc"), memoryview(b"xyz")])
def test_bytes_round_trip(payload: bytes) -> None:
    writer = SerializationWriter()
    writer.write_bytes(payload)
    reader = SerializationReader(writer.to_bytes())
    got = reader.read_bytes()
    assert type(got) is bytes
    assert got == bytes(payload)
    reader.finish()


def test_written_bytes_are_snapshotted() -> None:
    buffer = bytearray(b"abc")
    writer = SerializationWriter()
    writer.write_bytes(buffer)
    buffer[0] = ord("z")
    assert SerializationReader(writer.to_bytes()).read_bytes() == b"abc"


ARRAYS = [
    np.arange(5, dtype=np.float32),
    np.arange(12, dtype=np.int64).reshape(3, 4),
    np.array([[True, False], [False, True]]),
    np.arange(24, dtype=np.int8).reshape(2, 3, 4) - 12,
    np.arange(6, dtype=np.uint8),
    np.array([1.5, -2.5], dtype=np.float16),
    np.array([[1e300]], dtype=np.float64),
    np.arange(6, dtype=np.int16).reshape(6, 1),
    np.arange(6, dtype=np.uint16),
    np.arange(6, dtype=np.int32).reshape(1, 2, 1, 3),
    np.arange(4, dtype=np.uint32),
    np.array([2**64 - 1], dtype=np.uint64),
    np.zeros((0, 3), dtype=np.float32),  # empty
    np.ones((1,) * 8, dtype=np.int32),  # 8 dimensions: the maximum
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}-{a.shape}")
def test_array_round_trip(array: np.ndarray) -> None:
    writer = SerializationWriter()
    writer.write_array(array)
    reader = SerializationReader(writer.to_bytes())
    got = reader.read_array()
    reader.finish()
    assert got.dtype == array.dtype
    assert got.shape == array.shape
    np.testing.assert_array_equal(got, array)
    assert got.flags.writeable
    got[...] = 0  # an independent copy


def test_zero_dim_array_round_trip_keeps_its_shape() -> None:
    writer = SerializationWriter()
    writer.write_array(np.array(3.5, dtype=np.float32))
    got = SerializationReader(writer.to_bytes()).read_array()
    assert got.shape == ()
    assert got.item() == 3.5


def test_array_non_contiguous_and_big_endian_inputs() -> None:
    transposed = np.arange(6, dtype=np.float32).reshape(2, 3).T
    big = np.array([1, 2, 258], dtype=">i4")
    writer = SerializationWriter()
    writer.write_array(transposed)
    writer.write_array(big)
    reader = SerializationReader(writer.to_bytes())
    got_t = reader.read_array()
    got_b = reader.read_array()
    np.testing.assert_array_equal(got_t, transposed)
    assert got_b.dtype == np.dtype("<i4")
    assert got_b.tolist() == [1, 2, 258]
    reader.finish()


def test_array_layout() -> None:
    writer = SerializationWriter()
    writer.write_array(np.array([[1, 2]], dtype=np.int32))
    assert writer.to_bytes() == (
        struct.pack("<I", 3) + b"<i4" + struct.pack("<I", 2) + struct.pack("<qq", 1, 2) + struct.pack("<ii", 1, 2)
    )


def test_mixed_sequence_round_trip_with_header() -> None:
    writer = SerializationWriter(magic=MAGIC, version=3)
    writer.write_i32(3)
    writer.write_str("relu")
    writer.write_array(np.arange(4, dtype=np.float32))
    writer.write_bytes(b"\x01\x02")
    writer.write_f64(0.25)
    data = writer.to_bytes()
    assert data[:8] == struct.pack("<II", MAGIC, 3)
    reader = SerializationReader(data, magic=MAGIC, version=3)
    assert reader.read_i32() == 3
    assert reader.read_str() == "relu"
    assert reader.read_array().tolist() == [0, 1, 2, 3]
    assert reader.read_bytes() == b"\x01\x02"
    assert reader.read_f64() == 0.25
    reader.finish()


def test_writer_length_and_reader_remaining() -> None:
    writer = SerializationWriter(magic=MAGIC)
    assert len(writer) == 4
    writer.write_i64(1)
    assert len(writer) == 12
    reader = SerializationReader(writer.to_bytes(), magic=MAGIC)
    assert reader.remaining == 8
    reader.read_i64()
    assert reader.remaining == 0


def test_header_only_magic_or_only_version() -> None:
    only_version = SerializationWriter(version=7)
    assert only_version.to_bytes() == struct.pack("<I", 7)
    SerializationReader(only_version.to_bytes(), version=7).finish()
    SerializationReader(SerializationWriter(magic=MAGIC).to_bytes(), magic=MAGIC).finish()


def test_reader_accepts_bytearray_and_memoryview() -> None:
    writer = SerializationWriter()
    writer.write_i32(11)
    data = writer.to_bytes()
    assert SerializationReader(bytearray(data)).read_i32() == 11
    assert SerializationReader(memoryview(data)).read_i32() == 11


def test_reader_snapshots_mutable_input() -> None:
    writer = SerializationWriter()
    writer.write_i32(11)
    buffer = bytearray(writer.to_bytes())
    reader = SerializationReader(buffer)
    buffer[0] = 0
    assert reader.read_i32() == 11


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_magic_mismatch() -> None:
    data = SerializationWriter(magic=0x11223344, version=1).to_bytes()
    with pytest.raises(
        SerializationError, match=r"bad magic number 0x11223344, expected 0x504C5547: not this plugin's data"
    ):
        SerializationReader(data, magic=MAGIC, version=1)


def test_version_mismatch() -> None:
    data = SerializationWriter(magic=MAGIC, version=2).to_bytes()
    with pytest.raises(SerializationError, match=r"serialized version 2 is not supported; expected version 1"):
        SerializationReader(data, magic=MAGIC, version=1)


@pytest.mark.parametrize("size", [0, 1, 3])
def test_data_too_short_for_magic(size: int) -> None:
    with pytest.raises(SerializationError, match=rf"serialized data too short for its magic number: {size} bytes"):
        SerializationReader(b"\x00" * size, magic=MAGIC)


def test_data_too_short_for_version() -> None:
    data = struct.pack("<I", MAGIC) + b"\x01\x00"
    with pytest.raises(SerializationError, match=r"serialized data too short for its version: 6 bytes"):
        SerializationReader(data, magic=MAGIC, version=1)


@pytest.mark.parametrize("kind", KINDS)
def test_reading_past_the_end(kind: str) -> None:
    size = struct.calcsize(STRUCT_FORMAT[kind])
    reader = SerializationReader(b"\x00" * (size - 1))
    with pytest.raises(
        SerializationError,
        match=rf"reading {kind} needs {size} bytes at offset 0, but only {size - 1} remain \(data is truncated",
    ):
        reader.read(kind)


def test_reading_past_the_end_after_valid_reads_reports_offset() -> None:
    writer = SerializationWriter()
    writer.write_i32(1)
    writer.write_i32(2)
    reader = SerializationReader(writer.to_bytes())
    reader.read_i32()
    reader.read_i32()
    with pytest.raises(SerializationError, match=r"reading i64 needs 8 bytes at offset 8, but only 0 remain"):
        reader.read_i64()
    with pytest.raises(SerializationError, match=r"reading f64 needs 8 bytes at offset 8"):
        reader.read_f64()


def test_failed_read_does_not_advance() -> None:
    reader = SerializationReader(b"\x01\x00\x00")
    with pytest.raises(SerializationError):
        reader.read_i32()
    assert reader.remaining == 3
    assert reader.read("u8") == 1


def test_truncated_bytes_and_str() -> None:
    writer = SerializationWriter()
    writer.write_bytes(b"abcdef")
    data = writer.to_bytes()
    with pytest.raises(SerializationError, match=r"reading bytes needs 6 bytes at offset 4, but only 3 remain"):
        SerializationReader(data[:-3]).read_bytes()
    with pytest.raises(SerializationError, match=r"reading u32 needs 4 bytes at offset 0, but only 2 remain"):
        SerializationReader(data[:2]).read_str()
    with pytest.raises(SerializationError, match=r"reading bytes needs 6 bytes"):
        SerializationReader(data[:-1]).read_str()


def test_invalid_utf8_string() -> None:
    writer = SerializationWriter()
    writer.write_bytes(b"\xff\xfe\xfd")
    with pytest.raises(SerializationError, match=r"serialized string is not valid UTF-8"):
        SerializationReader(writer.to_bytes()).read_str()


def test_truncated_array_data() -> None:
    writer = SerializationWriter()
    writer.write_array(np.arange(6, dtype=np.float32).reshape(2, 3))
    data = writer.to_bytes()
    with pytest.raises(
        SerializationError, match=r"reading array data of shape \[2, 3\] needs 24 bytes at offset \d+, but only 20"
    ):
        SerializationReader(data[:-4]).read_array()
    for cut in range(len(data)):
        with pytest.raises(SerializationError):
            SerializationReader(data[:cut]).read_array()


def _array_header(dtype: str, shape: list[int]) -> SerializationWriter:
    writer = SerializationWriter()
    writer.write_str(dtype)
    writer.write_u32(len(shape))
    for dim in shape:
        writer.write_i64(dim)
    return writer


@pytest.mark.parametrize("dtype", ["<c8", "|O", "<M8[s]", "bogus", ">i4", "<U3", ""])
def test_array_with_unsupported_dtype(dtype: str) -> None:
    expected = rf"serialized array has unsupported dtype {dtype!r}".replace("[", r"\[")
    with pytest.raises(SerializationError, match=expected):
        SerializationReader(_array_header(dtype, [1]).to_bytes()).read_array()


def test_array_with_too_many_dimensions() -> None:
    with pytest.raises(SerializationError, match=r"serialized array has 9 dimensions; at most 8 are allowed"):
        SerializationReader(_array_header("<f4", [1] * 9).to_bytes()).read_array()


def test_array_with_negative_dimension() -> None:
    with pytest.raises(SerializationError, match=r"serialized array has a negative dimension: \[2, -1\]"):
        SerializationReader(_array_header("<f4", [2, -1]).to_bytes()).read_array()


def test_array_with_huge_claimed_size_does_not_allocate() -> None:
    with pytest.raises(SerializationError, match=r"reading array data of shape \[1099511627776\] needs"):
        SerializationReader(_array_header("<f8", [2**40]).to_bytes()).read_array()


@pytest.mark.parametrize("extra", [1, 4, 100])
def test_finish_with_leftover_bytes(extra: int) -> None:
    writer = SerializationWriter(magic=MAGIC, version=1)
    writer.write_i32(5)
    data = writer.to_bytes() + b"\x00" * extra
    reader = SerializationReader(data, magic=MAGIC, version=1)
    reader.read_i32()
    with pytest.raises(
        SerializationError,
        match=rf"{extra} bytes left over after reading 12 of {12 + extra}: the data was written with a different",
    ):
        reader.finish()


def test_finish_on_untouched_reader_reports_everything() -> None:
    with pytest.raises(SerializationError, match=r"4 bytes left over after reading 0 of 4"):
        SerializationReader(b"abcd").finish()
    SerializationReader(b"").finish()


@pytest.mark.parametrize("kind", ["i16", "f16", "", "I32", "str"])
def test_unknown_scalar_kind(kind: str) -> None:
    message = rf"unknown scalar kind {kind!r}; choose from \['bool', 'f32', 'f64', 'i32', 'i64', 'i8', 'u32', 'u8'\]"
    with pytest.raises(SerializationError, match=message):
        SerializationWriter().write(kind, 1)
    with pytest.raises(SerializationError, match=message):
        SerializationReader(b"\x00" * 16).read(kind)


@pytest.mark.parametrize(
    ("kind", "value", "detail"),
    [
        ("i32", 2**31, "2147483648 as i32"),
        ("i32", -(2**31) - 1, "-2147483649 as i32"),
        ("u32", -1, "-1 as u32"),
        ("u32", 2**32, "4294967296 as u32"),
        ("i8", 128, "128 as i8"),
        ("u8", 256, "256 as u8"),
        ("i64", 2**63, "9223372036854775808 as i64"),
        ("i32", 1.5, "1.5 as i32"),
        ("i32", "3", "'3' as i32"),
        ("f32", "x", "'x' as f32"),
        ("f64", None, "None as f64"),
    ],
)
def test_value_out_of_range_or_wrong_type(kind: str, value: object, detail: str) -> None:
    writer = SerializationWriter()
    with pytest.raises(SerializationError, match=rf"cannot write {detail}: "):
        writer.write(kind, value)
    assert writer.to_bytes() == b""  # nothing half-written


def test_typed_writer_helpers_report_their_kind() -> None:
    with pytest.raises(SerializationError, match=r"cannot write 2147483648 as i32"):
        SerializationWriter().write_i32(2**31)
    with pytest.raises(SerializationError, match=r"cannot write -5 as u32"):
        SerializationWriter().write_u32(-5)
    with pytest.raises(SerializationError, match=r"cannot write -1 as u32"):
        SerializationWriter(magic=-1)


def test_float_out_of_range_for_f32() -> None:
    with pytest.raises(SerializationError, match=r"cannot write 1e\+40 as f32"):
        SerializationWriter().write_f32(1e40)


@pytest.mark.parametrize(
    "array",
    [np.array([1 + 2j]), np.array(["abc"]), np.zeros((1,) * 9, dtype=np.float32)],
    ids=["complex", "unicode", "9-d"],
)
def test_writer_rejects_arrays_the_reader_cannot_read(array: np.ndarray) -> None:
    with pytest.raises(SerializationError, match=r"array"):
        SerializationWriter().write_array(array)


# ---------------------------------------------------------------------------
# The lower-level pieces other formats are built from (the plan file uses them)
# ---------------------------------------------------------------------------


def test_struct_raw_and_chunks_round_trip() -> None:
    data = np.arange(4, dtype=np.uint8)
    writer = SerializationWriter()
    writer.write_struct("<BQ", 3, 2**40, what="header")
    writer.write_raw(b"tag!")
    writer.write_raw(data.data)
    data[0] = 9  # a memoryview is kept, not copied, until to_bytes
    assert len(writer) == 9 + 4 + 4
    assert b"".join(writer.chunks()) == writer.to_bytes()
    reader = SerializationReader(writer.to_bytes())
    assert reader.read_struct("<BQ", "header") == (3, 2**40)
    assert bytes(reader.read_raw(4, "tag")) == b"tag!"
    assert reader.offset == 13
    reader.seek(14)
    assert bytes(reader.read_raw(3)) == b"\x01\x02\x03"
    reader.finish()


def test_struct_write_errors_name_what_was_written() -> None:
    with pytest.raises(SerializationError, match=r"cannot write 256, 1 as header: "):
        SerializationWriter().write_struct("<BB", 256, 1, what="header")
    with pytest.raises(SerializationError, match=r"cannot write -1 as <Q: "):
        SerializationWriter().write_struct("<Q", -1)


def test_named_reads_report_their_name() -> None:
    writer = SerializationWriter()
    writer.write_bytes(b"\xff\xfe", "name")
    data = writer.to_bytes()
    with pytest.raises(SerializationError, match=r"reading name length needs 4 bytes at offset 0, but only 2 remain"):
        SerializationReader(data[:2]).read_bytes("name")
    with pytest.raises(SerializationError, match=r"reading name needs 2 bytes at offset 4, but only 1 remain"):
        SerializationReader(data[:5]).read_str("name")
    with pytest.raises(SerializationError, match=r"name is not valid UTF-8 \(invalid start byte at byte 0\)"):
        SerializationReader(data).read_str("name")
    with pytest.raises(SerializationError, match=r"reading tag needs 4 bytes at offset 0, but only 0 remain"):
        SerializationReader(b"").read_raw(4, "tag")
    with pytest.raises(SerializationError, match=r"cannot seek to negative offset -1"):
        SerializationReader(b"").seek(-1)


@pytest.mark.parametrize(
    ("write", "fragment"),
    [
        (lambda w: w.write_str(5, "plugin name"), "plugin name must be str, got int"),
        (lambda w: w.write_str("\udc80", "plugin name"), "plugin name is not valid UTF-8"),
        (lambda w: w.write_bytes("text", "payload"), "payload must be bytes, got str"),
        (lambda w: w.write_str(b"raw"), "string must be str, got bytes"),
    ],
)
def test_length_prefixed_writes_check_their_value(write: Callable[[SerializationWriter], None], fragment: str) -> None:
    writer = SerializationWriter()
    with pytest.raises(SerializationError, match=fragment):
        write(writer)
    assert writer.to_bytes() == b""
