"""Tests for plugin fields (plugrt.interfaces.fields) and their byte codec (plugrt.interfaces.field_codec)."""

from __future__ import annotations

import random
import struct
import warnings

import numpy as np
import pytest

import plugrt as trt
from plugrt.core.errors import FieldError, SerializationError, TypeMismatchError
from plugrt.interfaces.field_codec import decode_fields, encode_fields
from plugrt.interfaces.fields import PluginField, PluginFieldCollection, PluginFieldType, field_numpy_dtype
from plugrt.interfaces.serialization import SerializationWriter

T = PluginFieldType

FIELD_MAGIC = 0x46444C50  # "PLDF", as documented by the codec
FIELD_VERSION = 1

# ---------------------------------------------------------------------------
# PluginFieldType
# ---------------------------------------------------------------------------


def test_plugin_field_type_has_tensorrt_members_and_values() -> None:
    assert {m.name: int(m) for m in PluginFieldType} == {
        "FLOAT16": 0,
        "FLOAT32": 1,
        "FLOAT64": 2,
        "INT8": 3,
        "INT16": 4,
        "INT32": 5,
        "CHAR": 6,
        "DIMS": 7,
        "UNKNOWN": 8,
        "BF16": 9,
        "INT64": 10,
        "FP8": 11,
        "INT4": 12,
        "FP4": 13,
    }
    assert len(PluginFieldType) == 14
    assert trt.PluginFieldType is PluginFieldType
    assert trt.PluginField is PluginField
    assert trt.PluginFieldCollection is PluginFieldCollection


STORAGE = {
    T.FLOAT16: np.float16,
    T.FLOAT32: np.float32,
    T.FLOAT64: np.float64,
    T.INT8: np.int8,
    T.INT16: np.int16,
    T.INT32: np.int32,
    T.CHAR: np.int8,
    T.DIMS: np.int64,
    T.UNKNOWN: np.uint8,
    T.BF16: np.uint16,
    T.INT64: np.int64,
    T.FP8: np.uint8,
    T.INT4: np.uint8,
    T.FP4: np.uint8,
}


@pytest.mark.parametrize("field_type", list(PluginFieldType))
def test_field_numpy_dtype(field_type: PluginFieldType) -> None:
    assert field_numpy_dtype(field_type) == np.dtype(STORAGE[field_type])
    assert field_numpy_dtype(int(field_type)) == np.dtype(STORAGE[field_type])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# PluginField construction
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("field_type", list(PluginFieldType))
def test_matching_numpy_array_is_kept_without_copy(field_type: PluginFieldType) -> None:
    array = np.arange(4).astype(STORAGE[field_type])
    field = PluginField("f", array, field_type)
    assert field.data is array
    assert field.type is field_type
    array[0] = 3
    assert field.data[0] == 3  # the field sees later changes: same buffer
    assert field.size == 4 and field.length == 4


def test_matching_multidimensional_array_is_flattened_as_a_view() -> None:
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    field = PluginField("m", array, T.FLOAT32)
    assert field.data.shape == (6,)
    assert np.shares_memory(field.data, array)


def test_matching_zero_dim_array_becomes_one_element() -> None:
    field = PluginField("alpha", np.float32(0.5), T.FLOAT32)
    assert field.data.shape == (1,)
    assert field.scalar() == 0.5
    assert isinstance(field.scalar(), float)


@pytest.mark.parametrize(
    ("data", "field_type", "expected"),
    [
        ([1, 2, 3], T.INT32, [1, 2, 3]),
        ((1, 2), T.INT64, [1, 2]),
        ([1, 2], T.FLOAT32, [1.0, 2.0]),
        ([0.5, 1.5], T.FLOAT16, [0.5, 1.5]),
        ([0.1], T.FLOAT64, [0.1]),
        (7, T.INT32, [7]),
        (0.25, T.FLOAT32, [0.25]),
        ([True, False], T.INT8, [1, 0]),
        ([-128, 127], T.INT8, [-128, 127]),
        ([-32768, 32767], T.INT16, [-32768, 32767]),
        ([2, 3, 4], T.DIMS, [2, 3, 4]),
        (np.array([0, 255], dtype=np.uint8), T.UNKNOWN, [0, 255]),
        (np.array([1, 2], dtype=np.int64), T.INT32, [1, 2]),
        (np.array([1, 2], dtype=np.int8), T.FLOAT32, [1.0, 2.0]),
        (np.array([0.5], dtype=np.float64), T.FLOAT32, [0.5]),
        (np.array([0x3F80], dtype=np.uint16), T.BF16, [0x3F80]),
        (np.array([7], dtype=np.uint8), T.FP8, [7]),
        (np.array([0x21], dtype=np.uint8), T.INT4, [0x21]),
        (np.array([3], dtype=np.uint8), T.FP4, [3]),
    ],
)
def test_conversion_from_lists_scalars_and_other_arrays(
    data: object, field_type: PluginFieldType, expected: list[float]
) -> None:
    field = PluginField("f", data, field_type)
    assert field.data.dtype == np.dtype(STORAGE[field_type])
    assert field.data.ndim == 1
    assert field.data.tolist() == expected


def test_converted_data_is_a_copy() -> None:
    source = np.array([1, 2], dtype=np.int64)
    field = PluginField("f", source, T.INT32)
    source[0] = 100
    assert field.data.tolist() == [1, 2]


@pytest.mark.parametrize("field_type", list(PluginFieldType))
def test_none_and_empty_data(field_type: PluginFieldType) -> None:
    candidates: list[object] = [None]
    if field_type is not T.UNKNOWN:  # UNKNOWN with data means "infer the type"
        candidates.append([])
    if field_type not in (T.UNKNOWN, T.BF16, T.FP8, T.INT4, T.FP4):
        candidates.append(np.zeros(0, dtype=np.float64))
    for data in candidates:
        field = PluginField("empty", data, field_type)
        assert field.size == 0
        assert field.type is field_type
        assert field.data.dtype == np.dtype(STORAGE[field_type])


def test_default_construction() -> None:
    field = PluginField()
    assert field.name == ""
    assert field.type is T.UNKNOWN
    assert field.size == 0
    assert repr(field).startswith("PluginField('', array([]")


def test_integer_type_values_are_accepted() -> None:
    field = PluginField("n", [1], 5)  # type: ignore[arg-type]
    assert field.type is T.INT32


def test_char_field_from_str_and_bytes() -> None:
    field = PluginField("mode", "relu", T.CHAR)
    assert field.as_str() == "relu"
    assert field.size == 4
    assert field.data.dtype == np.int8
    assert bytes(field.data.astype(np.uint8)) == b"relu"
    raw = PluginField("mode", b"gelu\x00padding", T.CHAR)
    assert raw.as_str() == "gelu"  # stops at the first NUL
    assert raw.size == 12


def test_char_field_with_non_ascii_text() -> None:
    field = PluginField("label", "héllo→", T.CHAR)
    assert field.size == len("héllo→".encode())
    assert field.as_str() == "héllo→"


def test_char_field_from_bytearray_and_memoryview() -> None:
    assert PluginField("a", bytearray(b"xy"), T.CHAR).as_str() == "xy"
    assert PluginField("b", memoryview(b"zw"), T.CHAR).as_str() == "zw"


def test_bytes_for_other_one_byte_types() -> None:
    for field_type in (T.INT8, T.UNKNOWN, T.FP8, T.INT4, T.FP4):
        field = PluginField("raw", b"\x01\xff", field_type)
        assert field.data.dtype == np.dtype(STORAGE[field_type])
        assert bytes(field.data.view(np.uint8)) == b"\x01\xff"


def test_string_for_unknown_field_is_stored_as_bytes() -> None:
    field = PluginField("blob", "abc", T.UNKNOWN)
    assert field.type is T.UNKNOWN
    assert field.data.tolist() == [97, 98, 99]
    assert field.as_str() == "abc"


def test_scalar() -> None:
    assert PluginField("n", [5], T.INT32).scalar() == 5
    assert type(PluginField("n", [5], T.INT32).scalar()) is int
    assert PluginField("x", [2.5], T.FLOAT64).scalar() == 2.5


@pytest.mark.parametrize("values", [[], [1, 2]])
def test_scalar_of_non_single_field_raises(values: list[int]) -> None:
    field = PluginField("pads", values, T.INT32)
    with pytest.raises(FieldError, match=rf"plugin field 'pads' holds {len(values)} values, expected exactly 1"):
        field.scalar()


def test_data_setter_converts_and_validates() -> None:
    field = PluginField("k", [1], T.INT32)
    field.data = [4, 5]
    assert field.data.dtype == np.int32 and field.data.tolist() == [4, 5]
    with pytest.raises(TypeMismatchError, match=r"plugin field 'k': data of type float64 does not match"):
        field.data = [1.5]
    with pytest.raises(FieldError, match=r"plugin field 'k'"):
        field.data = [2**40]
    assert field.data.tolist() == [4, 5]


# ---------------------------------------------------------------------------
# PluginField misuse
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("field_type", [T.INT8, T.INT16, T.INT32, T.INT64, T.DIMS, T.CHAR])
def test_float_data_for_integer_field_is_rejected(field_type: PluginFieldType) -> None:
    dtype = np.dtype(STORAGE[field_type])
    with pytest.raises(
        TypeMismatchError,
        match=rf"plugin field 'count': data of type float64 does not match PluginFieldType\.{field_type.name} "
        rf"\(expects {dtype} data\)",
    ):
        PluginField("count", [1.5, 2.0], field_type)


def test_float32_array_for_int32_field_names_both_types() -> None:
    with pytest.raises(TypeMismatchError, match=r"'pads'.*float32.*PluginFieldType\.INT32.*int32"):
        PluginField("pads", np.array([1, 2], dtype=np.float32), T.INT32)


@pytest.mark.parametrize(
    ("field_type", "values"),
    [
        (T.INT8, [200]),
        (T.INT8, [-129]),
        (T.INT8, [1, 2, 128]),
        (T.CHAR, [300]),
        (T.INT16, [70000]),
        (T.INT32, [2**31]),
        (T.INT32, [-(2**31) - 1]),
        (T.UNKNOWN, np.array([256], dtype=np.uint16)),
    ],
)
def test_integer_values_out_of_range_are_rejected(field_type: PluginFieldType, values: object) -> None:
    dtype = np.dtype(STORAGE[field_type])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(
            FieldError,
            match=rf"plugin field 'v': values \[.*\] do not fit PluginFieldType\.{field_type.name} \({dtype}\)",
        ):
            PluginField("v", values, field_type)


def test_out_of_range_message_lists_the_values() -> None:
    with pytest.raises(FieldError, match=r"values \[1, 2, 128\]"):
        PluginField("v", [1, 2, 128], T.INT8)


def test_float_values_out_of_range_are_rejected() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(FieldError, match=r"plugin field 'scale'.*FLOAT16"):
            PluginField("scale", [1e6], T.FLOAT16)


@pytest.mark.parametrize("field_type", [t for t in PluginFieldType if t not in (T.CHAR, T.UNKNOWN)])
def test_string_for_non_char_field_is_rejected(field_type: PluginFieldType) -> None:
    with pytest.raises(
        TypeMismatchError, match=rf"plugin field 'mode': a string needs PluginFieldType\.CHAR, not {field_type.name}"
    ):
        PluginField("mode", "relu", field_type)


@pytest.mark.parametrize("field_type", [T.FLOAT16, T.FLOAT32, T.FLOAT64, T.INT16, T.INT32, T.INT64, T.DIMS, T.BF16])
def test_bytes_for_multi_byte_field_is_rejected(field_type: PluginFieldType) -> None:
    with pytest.raises(
        TypeMismatchError,
        match=rf"plugin field 'w': data of type bytes does not match PluginFieldType\.{field_type.name}",
    ):
        PluginField("w", b"\x00\x00\x00\x00", field_type)


@pytest.mark.parametrize("field_type", [T.BF16, T.FP8, T.INT4, T.FP4])
@pytest.mark.parametrize("data", [np.array([1.0], dtype=np.float32), [1, 2], np.array([1], dtype=np.int8)])
def test_special_float_types_need_raw_unsigned_bits(field_type: PluginFieldType, data: object) -> None:
    with pytest.raises(TypeMismatchError, match=rf"plugin field 'q'.*PluginFieldType\.{field_type.name}"):
        PluginField("q", data, field_type)


def test_bf16_rejects_uint8_bits() -> None:
    with pytest.raises(TypeMismatchError, match=r"data of type uint8 does not match PluginFieldType\.BF16"):
        PluginField("q", np.array([1], dtype=np.uint8), T.BF16)


@pytest.mark.parametrize("data", [["a", "b"], [1 + 2j], [object()]])
def test_unconvertible_data_is_rejected(data: list[object]) -> None:
    with pytest.raises(TypeMismatchError, match=r"plugin field 'bad': data of type .* does not match"):
        PluginField("bad", data, T.FLOAT32)


@pytest.mark.parametrize("name", [5, None, b"name"])
def test_non_str_name_is_rejected(name: object) -> None:
    with pytest.raises(TypeMismatchError, match=rf"PluginField name must be a str, got {type(name).__name__}"):
        PluginField(name, [1], T.INT32)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_type", [14, -1, 99, "INT32"])
def test_invalid_field_type_is_rejected(bad_type: object) -> None:
    with pytest.raises(TypeMismatchError, match=rf"plugin field 'n': {bad_type!r} is not a PluginFieldType"):
        PluginField("n", [1], bad_type)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# UNKNOWN type inference
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (np.array([1.0], dtype=np.float32), T.FLOAT32),
        (np.array([1.0], dtype=np.float64), T.FLOAT64),
        (np.array([1.0], dtype=np.float16), T.FLOAT16),
        (np.array([1], dtype=np.int32), T.INT32),
        (np.array([1], dtype=np.int64), T.INT64),
        (np.array([1], dtype=np.int16), T.INT16),
        (np.array([1], dtype=np.int8), T.INT8),
        ([1, 2], T.INT64),
        ([1.5], T.FLOAT64),
        (np.float32(2.0), T.FLOAT32),
        (np.array([1], dtype=np.uint8), T.UNKNOWN),
        ([True], T.UNKNOWN),
        (b"raw", T.UNKNOWN),
        ("text", T.UNKNOWN),
    ],
)
def test_unknown_type_is_inferred_from_data(data: object, expected: PluginFieldType) -> None:
    field = PluginField("auto", data)
    assert field.type is expected
    assert field.data.dtype == np.dtype(STORAGE[expected])


def test_explicit_unknown_with_list_data_infers_the_type() -> None:
    assert PluginField("auto", [0, 255], T.UNKNOWN).type is T.INT64
    assert PluginField("auto", [1.5], T.UNKNOWN).type is T.FLOAT64
    assert PluginField("auto", [], T.UNKNOWN).type is T.FLOAT64  # NumPy's default dtype for []
    assert PluginField("auto", None, T.UNKNOWN).type is T.UNKNOWN


def test_inferred_field_keeps_the_array() -> None:
    array = np.array([1.0, 2.0], dtype=np.float32)
    assert PluginField("auto", array).data is array


def test_uninferable_data_stays_unknown_and_is_validated() -> None:
    with pytest.raises(FieldError, match=r"plugin field 'u': values \[300\] do not fit PluginFieldType\.UNKNOWN"):
        PluginField("u", np.array([300], dtype=np.uint16))
    with pytest.raises(TypeMismatchError, match=r"plugin field 'c': data of type complex128"):
        PluginField("c", [1j])


# ---------------------------------------------------------------------------
# PluginFieldCollection
# ---------------------------------------------------------------------------


def _fields() -> list[PluginField]:
    return [
        PluginField("alpha", np.float32(0.5), T.FLOAT32),
        PluginField("pads", [1, 1], T.INT32),
        PluginField("mode", "relu", T.CHAR),
    ]


def test_collection_is_list_like() -> None:
    fields = _fields()
    fc = PluginFieldCollection(fields)
    assert len(fc) == 3
    assert fc.nbFields == 3
    assert list(fc) == fields
    assert fc[0] is fields[0]
    assert fc[-1] is fields[2]
    assert fc[1:] == fields[1:]
    assert fc.names() == ["alpha", "pads", "mode"]
    assert [f.name for f in fc] == fc.names()
    assert "PluginField('alpha'" in repr(fc)


def test_collection_from_generator_and_empty() -> None:
    assert len(PluginFieldCollection()) == 0
    assert PluginFieldCollection().names() == []
    assert PluginFieldCollection(f for f in _fields()).names() == ["alpha", "pads", "mode"]


def test_collection_copies_the_list_but_not_the_fields() -> None:
    fields = _fields()
    fc = PluginFieldCollection(fields)
    fields.append(PluginField("extra"))
    assert len(fc) == 3
    assert fc[0] is fields[0]


def test_collection_setitem_and_append() -> None:
    fc = PluginFieldCollection(_fields())
    replacement = PluginField("beta", [2.0], T.FLOAT32)
    fc[0] = replacement
    assert fc[0] is replacement
    fc.append(PluginField("gamma", [1], T.INT8))
    assert fc.names() == ["beta", "pads", "mode", "gamma"]
    with pytest.raises(IndexError):
        fc[10] = replacement
    with pytest.raises(IndexError):
        _ = fc[10]


@pytest.mark.parametrize("bad", [("alpha", 1.0), {"name": "alpha"}, None, "alpha", 3])
def test_collection_rejects_non_fields(bad: object) -> None:
    kind = type(bad).__name__
    fc = PluginFieldCollection(_fields())
    with pytest.raises(TypeMismatchError, match=rf"PluginFieldCollection holds PluginField objects, got {kind}"):
        fc.append(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeMismatchError, match=rf"PluginFieldCollection holds PluginField objects, got {kind}"):
        fc[0] = bad  # type: ignore[assignment]
    with pytest.raises(TypeMismatchError, match=rf"got {kind}"):
        PluginFieldCollection([*_fields(), bad])  # type: ignore[list-item]
    assert fc.names() == ["alpha", "pads", "mode"]


# ---------------------------------------------------------------------------
# field_codec: encode/decode
# ---------------------------------------------------------------------------

SAMPLE_DATA = {
    T.FLOAT16: np.array([0.5, -2.0, 65504.0], dtype=np.float16),
    T.FLOAT32: np.array([1.25, -0.0, 3.4e38, np.inf], dtype=np.float32),
    T.FLOAT64: np.array([np.pi, -1e300], dtype=np.float64),
    T.INT8: np.array([-128, 0, 127], dtype=np.int8),
    T.INT16: np.array([-32768, 32767], dtype=np.int16),
    T.INT32: np.array([-(2**31), 2**31 - 1, 7], dtype=np.int32),
    T.CHAR: np.frombuffer("héllo".encode(), dtype=np.int8),
    T.DIMS: np.array([1, -1, 224, 224], dtype=np.int64),
    T.UNKNOWN: np.array([0, 1, 255], dtype=np.uint8),
    T.BF16: np.array([0x3F80, 0xC000, 0x7F80], dtype=np.uint16),
    T.INT64: np.array([-(2**63), 2**63 - 1], dtype=np.int64),
    T.FP8: np.array([0x38, 0xFF], dtype=np.uint8),
    T.INT4: np.array([0x7F, 0x08], dtype=np.uint8),
    T.FP4: np.array([0x12], dtype=np.uint8),
}


@pytest.mark.parametrize("field_type", list(PluginFieldType))
def test_codec_round_trip_of_each_field_type(field_type: PluginFieldType) -> None:
    data = SAMPLE_DATA[field_type]
    fc = PluginFieldCollection([PluginField(f"f_{field_type.name}", data, field_type)])
    decoded = decode_fields(encode_fields(fc))
    assert len(decoded) == 1
    field = decoded[0]
    assert field.name == f"f_{field_type.name}"
    assert field.type is field_type
    assert field.data.dtype == np.dtype(STORAGE[field_type])
    assert field.data.dtype.isnative
    np.testing.assert_array_equal(field.data, data)
    assert field.data.tobytes() == data.tobytes()


def test_codec_round_trip_of_all_types_together_keeps_order() -> None:
    fc = PluginFieldCollection(PluginField(t.name.lower(), SAMPLE_DATA[t], t) for t in PluginFieldType)
    decoded = decode_fields(encode_fields(fc))
    assert decoded.names() == fc.names()
    for before, after in zip(fc, decoded):
        assert after.type is before.type
        assert after.data.tobytes() == before.data.tobytes()
    assert decoded[fc.names().index("char")].as_str() == "héllo"


def test_codec_round_trip_of_empty_collection_and_empty_fields() -> None:
    assert len(decode_fields(encode_fields(PluginFieldCollection()))) == 0
    fc = PluginFieldCollection([PluginField("", None, T.FLOAT32), PluginField("名前", [], T.INT64)])
    decoded = decode_fields(encode_fields(fc))
    assert decoded.names() == ["", "名前"]
    assert [f.size for f in decoded] == [0, 0]
    assert [f.type for f in decoded] == [T.FLOAT32, T.INT64]


def test_decoded_data_is_writable_and_independent_of_payload() -> None:
    payload = encode_fields(PluginFieldCollection([PluginField("k", [1, 2], T.INT32)]))
    decoded = decode_fields(payload)
    decoded[0].data[0] = 42
    assert decode_fields(payload)[0].data.tolist() == [1, 2]


def test_encoding_is_little_endian_and_documented_layout() -> None:
    payload = encode_fields(PluginFieldCollection([PluginField("a", [1, 2], T.INT32)]))
    assert payload == (
        struct.pack("<III", FIELD_MAGIC, FIELD_VERSION, 1)
        + struct.pack("<I", 1)
        + b"a"
        + struct.pack("<I", int(T.INT32))
        + struct.pack("<I", 8)
        + struct.pack("<ii", 1, 2)
    )


def test_encoding_big_endian_arrays_is_little_endian() -> None:
    big = np.array([1, 256], dtype=">i4")
    field = PluginField("b", big, T.INT32)
    payload = encode_fields(PluginFieldCollection([field]))
    assert payload.endswith(struct.pack("<ii", 1, 256))
    assert decode_fields(payload)[0].data.tolist() == [1, 256]


@pytest.mark.parametrize("bad", [[], [PluginField("a")], None, b""])
def test_encode_requires_a_collection(bad: object) -> None:
    with pytest.raises(TypeMismatchError, match=rf"expected a PluginFieldCollection, got {type(bad).__name__}"):
        encode_fields(bad)  # type: ignore[arg-type]


def _payload() -> bytes:
    return encode_fields(
        PluginFieldCollection([PluginField("alpha", [0.5], T.FLOAT32), PluginField("mode", "relu", T.CHAR)])
    )


def test_every_truncation_raises_serialization_error() -> None:
    payload = _payload()
    for cut in range(len(payload)):
        with pytest.raises(SerializationError):
            decode_fields(payload[:cut])


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (0, "too short for its magic number"),
        (3, "too short for its magic number: 3 bytes"),
        (6, "too short for its version"),
        (10, r"reading u32 needs 4 bytes at offset 8, but only 2 remain"),
    ],
)
def test_truncation_messages(cut: int, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        decode_fields(_payload()[:cut])


def test_truncated_field_data_message_names_bytes() -> None:
    payload = _payload()
    with pytest.raises(SerializationError, match=r"reading bytes needs 4 bytes at offset \d+, but only 3 remain"):
        decode_fields(payload[:-1])


def test_leftover_bytes_raise() -> None:
    payload = _payload()
    expected = rf"2 bytes left over after reading {len(payload)} of {len(payload) + 2}: the data was written"
    with pytest.raises(SerializationError, match=expected):
        decode_fields(payload + b"\x00\x00")


def test_bad_magic_raises() -> None:
    payload = bytearray(_payload())
    payload[0] ^= 0xFF
    with pytest.raises(SerializationError, match=r"bad magic number 0x.{8}, expected 0x46444C50"):
        decode_fields(bytes(payload))


def test_bad_version_raises() -> None:
    payload = struct.pack("<II", FIELD_MAGIC, 2) + _payload()[8:]
    with pytest.raises(SerializationError, match="serialized version 2 is not supported; expected version 1"):
        decode_fields(payload)


def _writer(count: int) -> SerializationWriter:
    writer = SerializationWriter(magic=FIELD_MAGIC, version=FIELD_VERSION)
    writer.write_u32(count)
    return writer


@pytest.mark.parametrize("raw_type", [14, 99, 2**32 - 1])
def test_unknown_field_type_value_raises(raw_type: int) -> None:
    writer = _writer(1)
    writer.write_str("weird")
    writer.write_u32(raw_type)
    writer.write_bytes(b"")
    expected = rf"serialized field 'weird' has unknown PluginFieldType value {raw_type}"
    with pytest.raises(SerializationError, match=expected):
        decode_fields(writer.to_bytes())


def test_data_length_not_multiple_of_itemsize_raises() -> None:
    writer = _writer(1)
    writer.write_str("odd")
    writer.write_u32(int(T.FLOAT32))
    writer.write_bytes(b"\x00" * 6)
    with pytest.raises(SerializationError, match=r"serialized field 'odd': 6 bytes is not a multiple of 4 \(FLOAT32\)"):
        decode_fields(writer.to_bytes())


def test_too_many_fields_raises() -> None:
    with pytest.raises(SerializationError, match=r"claims 4097 fields; at most 4096 allowed"):
        decode_fields(_writer(4097).to_bytes())


def test_count_larger_than_payload_raises() -> None:
    writer = _writer(3)
    writer.write_str("only")
    writer.write_u32(int(T.INT8))
    writer.write_bytes(b"\x01")
    with pytest.raises(SerializationError, match=r"reading u32 needs 4 bytes"):
        decode_fields(writer.to_bytes())


def test_invalid_utf8_name_raises() -> None:
    writer = _writer(1)
    writer.write_bytes(b"\xff\xfe")
    writer.write_u32(int(T.INT8))
    writer.write_bytes(b"")
    with pytest.raises(SerializationError, match="serialized string is not valid UTF-8"):
        decode_fields(writer.to_bytes())


def test_huge_length_prefix_raises() -> None:
    writer = _writer(1)
    writer.write_u32(2**32 - 1)  # name length far past the end
    with pytest.raises(SerializationError, match=rf"reading bytes needs {2**32 - 1} bytes"):
        decode_fields(writer.to_bytes())


def test_random_corruption_never_raises_anything_but_serialization_error() -> None:
    rng = random.Random(1234)
    payload = encode_fields(PluginFieldCollection(PluginField(t.name, SAMPLE_DATA[t], t) for t in PluginFieldType))
    for _ in range(400):
        corrupted = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            corrupted[rng.randrange(len(corrupted))] = rng.randrange(256)
        try:
            result = decode_fields(bytes(corrupted))
        except SerializationError:
            continue
        assert isinstance(result, PluginFieldCollection)
