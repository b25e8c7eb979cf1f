"""Tests for the plan file container (plugrt.engine.plan_format)."""

from __future__ import annotations

import json
import random
import struct
import zlib
from typing import Any

import numpy as np
import pytest

from plugrt.core.errors import PlanFormatError, SerializationError, TypeMismatchError
from plugrt.engine.plan_format import (
    PLAN_FORMAT_VERSION,
    PLAN_MAGIC,
    WEIGHT_DTYPES,
    PlanContents,
    PluginRecord,
    decode_plan,
    encode_plan,
)

# ---------------------------------------------------------------------------
# An independent writer for the documented layout, used to craft hostile plans
# whose checksums are all valid.
# ---------------------------------------------------------------------------


def lp(data: bytes | str) -> bytes:
    """A u32 length-prefixed field."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return struct.pack("<I", len(raw)) + raw


def frame(
    sections: list[tuple[bytes, bytes]],
    *,
    magic: bytes = PLAN_MAGIC,
    version: int = PLAN_FORMAT_VERSION,
    count: int | None = None,
    end_tag: bytes = b"PEND",
    trailing: bytes = b"",
) -> bytes:
    body = magic + struct.pack("<II", version, len(sections) if count is None else count)
    for tag, payload in sections:
        body += tag + struct.pack("<QI", len(payload), zlib.crc32(payload)) + payload
    return body + end_tag + struct.pack("<QI", len(body), zlib.crc32(body)) + trailing


def weight_entry(name: bytes | str, dtype: bytes | str, shape: list[int], offset: int, nbytes: int) -> bytes:
    dims = struct.pack(f"<B{len(shape)}q", len(shape), *shape)
    return lp(name) + lp(dtype) + dims + struct.pack("<QQ", offset, nbytes)


def wgts(entries: list[bytes], data: bytes = b"", count: int | None = None) -> bytes:
    return struct.pack("<I", len(entries) if count is None else count) + b"".join(entries) + data


def padded(entries: list[bytes], data: bytes = b"", fill: bytes = b"\x00") -> bytes:
    """A weights payload whose data starts at offset 64, the first aligned offset."""
    index = wgts(entries)
    assert len(index) <= 64
    return index + fill + bytes(63 - len(index)) + data


def plug(records: list[tuple[str, str, str, str, bytes]], count: int | None = None) -> bytes:
    out = struct.pack("<I", len(records) if count is None else count)
    return out + b"".join(b"".join(lp(f) for f in rec) for rec in records)


EMPTY_WGTS = wgts([])
EMPTY_PLUG = plug([])


def raw_plan(head: bytes = b"{}", weights: bytes = EMPTY_WGTS, plugins: bytes = EMPTY_PLUG) -> bytes:
    return frame([(b"HEAD", head), (b"WGTS", weights), (b"PLUG", plugins)])


def rejects(data: bytes, *fragments: str) -> str:
    with pytest.raises(PlanFormatError) as info:
        decode_plan(data)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---------------------------------------------------------------------------
# Sample contents
# ---------------------------------------------------------------------------


def full_contents() -> PlanContents:
    rng = np.random.default_rng(0)
    weights: dict[str, np.ndarray] = {}
    for dtype in WEIGHT_DTYPES:
        if dtype.startswith("float"):
            grid = (rng.standard_normal((2, 3, 4)) * 50).astype(dtype)
        else:
            low = -100 if dtype.startswith("int") else 0
            grid = rng.integers(low, 2 if dtype == "bool" else 100, size=(2, 3, 4)).astype(dtype)
        weights[f"{dtype}/grid"] = grid
        weights[f"{dtype}/scalar"] = np.array(grid.flat[5], dtype=dtype)
        weights[f"{dtype}/empty"] = np.zeros((3, 0, 2), dtype=dtype)
    weights["flat/empty"] = np.zeros(0, dtype=np.float32)
    weights["poids/écart-µ"] = np.arange(7, dtype=np.int64)
    weights["transposed"] = np.arange(12, dtype=np.float32).reshape(3, 4).T
    weights["strided"] = np.arange(20, dtype=np.int16)[::3]
    weights["big-endian"] = np.arange(6, dtype=">f8").reshape(2, 3)
    header = {
        "name": "resnet-ish",
        "inputs": [{"name": "x", "shape": [-1, 3, 224, 224], "dtype": "float32"}],
        "profile": {"min": [1], "opt": [8], "max": [32], "nested": {"deeper": [[], {}, [None]]}},
        "flags": [True, False, None],
        "floats": [0.1, -2.5e-300, 1e300, -0.0],
        "big": [2**80, -(2**1024 - 1)],
        "unicode": "ÜberNetz ✓ 漢字",
    }
    plugins = [
        PluginRecord("", "ReluPlugin", "1", "v2", b"\x00\x01\x02"),
        PluginRecord("acme", "Empty", "2", "v3", b""),
        PluginRecord("espace-nommé", "Plugin™-Ω", "1.0-β", "v3", bytes(range(256)) * 3),
    ]
    return PlanContents(header=header, weights=weights, plugins=plugins)


def small_contents() -> PlanContents:
    return PlanContents(
        header={"engine": "tiny", "shape": [1, 2]},
        weights={"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array(1, np.int8)},
        plugins=[PluginRecord("ns", "Relu", "1", "v3", b"\x07\x08")],
    )


SMALL = encode_plan(small_contents())


# ---------------------------------------------------------------------------
# Round trip and determinism
# ---------------------------------------------------------------------------


def test_round_trip_full() -> None:
    contents = full_contents()
    decoded = decode_plan(encode_plan(contents))
    assert decoded == contents
    assert decoded.header == contents.header
    assert decoded.plugins == contents.plugins
    assert list(decoded.weights) == sorted(contents.weights)
    for name, original in contents.weights.items():
        arr = decoded.weights[name]
        assert arr.dtype == np.dtype(original.dtype.name), name
        assert arr.dtype.isnative
        assert arr.shape == original.shape
        assert arr.flags.c_contiguous
        np.testing.assert_array_equal(arr, original)


def test_round_trip_empty_and_inputs_of_every_buffer_type() -> None:
    empty = PlanContents(header={}, weights={}, plugins=[])
    data = encode_plan(empty)
    for form in (data, bytearray(data), memoryview(data)):
        assert decode_plan(form) == empty


def test_decoded_arrays_do_not_alias_the_input() -> None:
    data = bytearray(SMALL)
    decoded = decode_plan(data)
    data[:] = bytes(len(data))
    np.testing.assert_array_equal(decoded.weights["w"], np.arange(6).reshape(2, 3))


def test_encoding_is_deterministic() -> None:
    contents = full_contents()
    first = encode_plan(contents)
    assert encode_plan(contents) == first
    assert encode_plan(full_contents()) == first
    assert encode_plan(decode_plan(first)) == first
    reordered = PlanContents(
        header=dict(reversed(list(contents.header.items()))),
        weights=dict(reversed(list(contents.weights.items()))),
        plugins=contents.plugins,
    )
    assert reordered == contents
    assert encode_plan(reordered) == first


def test_layout_matches_the_documented_format() -> None:
    contents = PlanContents(
        header={"b": 1, "a": [True]},
        weights={"w": np.array([1.5, 2.5], dtype=np.float32)},
        plugins=[PluginRecord("ns", "P", "1", "v2", b"xy")],
    )
    index = weight_entry("w", "float32", [2], 64, 8)
    weights = wgts([index], bytes(64 - 4 - len(index)) + np.array([1.5, 2.5], "<f4").tobytes())
    expected = raw_plan(b'{"a":[true],"b":1}', weights, plug([("ns", "P", "1", "v2", b"xy")]))
    assert encode_plan(contents) == expected
    assert expected.startswith(b"PLUGRTPL" + struct.pack("<II", PLAN_FORMAT_VERSION, 3) + b"HEAD")


def test_bool_arrays_are_stored_as_zero_and_one() -> None:
    odd = np.array([0, 2, 255, 1], dtype=np.uint8).view(bool)
    decoded = decode_plan(encode_plan(PlanContents({}, {"m": odd}, [])))
    assert decoded.weights["m"].view(np.uint8).tolist() == [0, 1, 1, 1]


def test_equality_compares_array_bits() -> None:
    a = small_contents()
    b = small_contents()
    assert a == b
    b.weights["w"] = b.weights["w"] + 1
    assert a != b
    assert a != "not contents"


# ---------------------------------------------------------------------------
# Corruption: truncation, bit flips, random damage
# ---------------------------------------------------------------------------


def test_every_truncation_is_rejected() -> None:
    for length in range(len(SMALL)):
        with pytest.raises(PlanFormatError):
            decode_plan(SMALL[:length])


def test_truncation_messages() -> None:
    rejects(b"", "plan is truncated")
    rejects(SMALL[:10], "plan is truncated", "format version needs 4 bytes but only 2 remain")
    rejects(SMALL[:30], "plan is truncated", "section 'HEAD' length and checksum needs 12 bytes")
    rejects(SMALL[:40], "plan is truncated", "section 'HEAD' declares", "but only 8 remain")
    rejects(SMALL[:-1], "plan is truncated", "end marker needs 16 bytes but only 15 remain")


def test_every_single_bit_flip_is_detected() -> None:
    data = bytearray(SMALL)
    for pos in range(len(data)):
        for bit in range(8):
            data[pos] ^= 1 << bit
            with pytest.raises(PlanFormatError):
                decode_plan(data)
            data[pos] ^= 1 << bit
    assert decode_plan(data) == small_contents()


def test_every_byte_inversion_is_detected() -> None:
    for pos in range(len(SMALL)):
        data = bytearray(SMALL)
        data[pos] ^= 0xFF
        with pytest.raises(PlanFormatError):
            decode_plan(data)


def test_random_multi_byte_corruption_is_detected() -> None:
    rng = random.Random(1234)
    for _ in range(3000):
        data = bytearray(SMALL)
        kind = rng.randrange(3)
        if kind == 0:  # overwrite a few bytes with different values
            for pos in rng.sample(range(len(data)), rng.randint(2, 8)):
                data[pos] ^= rng.randint(1, 255)
        elif kind == 1:  # delete a range
            start = rng.randrange(len(data))
            del data[start : start + rng.randint(1, 40)]
        else:  # insert random bytes
            start = rng.randrange(len(data) + 1)
            data[start:start] = rng.randbytes(rng.randint(1, 40))
        with pytest.raises(PlanFormatError):
            decode_plan(data)


def test_checksum_messages_name_the_section() -> None:
    data = bytearray(SMALL)
    data[SMALL.index(b'"engine"')] ^= 0x01
    rejects(bytes(data), "plan checksum mismatch in section 'HEAD'", "stored 0x", "computed 0x")


@pytest.mark.parametrize("seed", range(4))
def test_mutated_sections_with_valid_checksums_never_escape(seed: int) -> None:
    """Corrupt section payloads, then re-frame them with valid checksums."""
    rng = random.Random(seed)
    full = encode_plan(full_contents())
    # recover the three payloads through the documented framing
    pos, payloads = 16, []
    for _ in range(3):
        (length,) = struct.unpack_from("<Q", full, pos + 4)
        payloads.append(full[pos + 16 : pos + 16 + length])
        pos += 16 + length
    tags = [b"HEAD", b"WGTS", b"PLUG"]
    outcomes = {"ok": 0, "rejected": 0}
    for _ in range(600):
        parts = list(payloads)
        index = rng.randrange(3)
        part = bytearray(parts[index])
        for _ in range(rng.randint(1, 4)):
            action = rng.randrange(4)
            pos = rng.randrange(len(part) + 1)
            if action == 0 and part:
                part[min(pos, len(part) - 1)] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
            elif action == 1:
                part[pos:pos] = rng.randbytes(rng.randint(1, 9))
            elif action == 2:
                del part[pos : pos + rng.randint(1, 9)]
            else:
                part[pos : pos + 4] = struct.pack("<I", rng.choice([0, 1, 2**31, 2**32 - 1]))
        parts[index] = bytes(part)
        try:
            decode_plan(frame(list(zip(tags, parts))))
            outcomes["ok"] += 1
        except PlanFormatError:
            outcomes["rejected"] += 1
    assert outcomes["rejected"] > 0


# ---------------------------------------------------------------------------
# Hostile plans with valid checksums
# ---------------------------------------------------------------------------


def test_wrong_magic() -> None:
    rejects(b"GIF89a\x00\x00" + SMALL[8:], "not a plugrt plan", "b'GIF89a\\x00\\x00'", repr(PLAN_MAGIC))
    rejects(b"PK\x03\x04", "not a plugrt plan", "b'PK\\x03\\x04'")
    rejects(b"PLUG", "plan is truncated")


def test_unknown_version_is_reported_before_anything_else() -> None:
    message = rejects(
        frame([(b"HEAD", b"{}"), (b"WGTS", EMPTY_WGTS), (b"PLUG", EMPTY_PLUG)], version=7),
        f"plan format version 7 is not supported; this plugrt reads version {PLAN_FORMAT_VERSION}",
    )
    assert "7" in message and str(PLAN_FORMAT_VERSION) in message
    rejects(PLAN_MAGIC + struct.pack("<I", PLAN_FORMAT_VERSION + 1), f"plan format version {PLAN_FORMAT_VERSION + 1} is not supported")
    rejects(PLAN_MAGIC + struct.pack("<I", 2**32 - 1) + b"junk", "version 4294967295")


def test_huge_declared_section_length() -> None:
    data = PLAN_MAGIC + struct.pack("<II", PLAN_FORMAT_VERSION, 3) + b"HEAD" + struct.pack("<QI", 2**63, 0) + b"{}"
    rejects(
        data,
        "plan is truncated: section 'HEAD' declares 9223372036854775808 bytes but only 2 remain",
    )


def test_section_count_tags_and_order() -> None:
    head, weights, plugins = (b"HEAD", b"{}"), (b"WGTS", EMPTY_WGTS), (b"PLUG", EMPTY_PLUG)
    rejects(frame([head, weights, plugins], count=2**32 - 1), "declares 4294967295 sections")
    rejects(frame([head, plugins]), "missing section(s) WGTS")
    rejects(frame([]), "missing section(s) HEAD, WGTS, PLUG")
    rejects(frame([head, (b"XTRA", b""), plugins]), "unknown section tag b'XTRA'")
    rejects(frame([head, head, plugins]), "duplicate section tag b'HEAD'")
    rejects(frame([head, plugins, weights]), "misplaced section tag b'WGTS'")


def test_end_marker_and_trailing_garbage() -> None:
    rejects(SMALL + b"\x00", "1 unexpected trailing bytes")
    rejects(SMALL + SMALL, f"{len(SMALL)} unexpected trailing bytes")
    sections = [(b"HEAD", b"{}"), (b"WGTS", EMPTY_WGTS), (b"PLUG", EMPTY_PLUG)]
    rejects(frame(sections, end_tag=b"DONE"), "end marker is b'DONE'")
    bad_size = bytearray(SMALL)
    bad_size[-12:-4] = struct.pack("<Q", 5)
    rejects(bytes(bad_size), "recording 5 bytes")
    bad_crc = bytearray(SMALL)
    bad_crc[-4:] = bytes(4)
    rejects(bytes(bad_crc), "checksum mismatch in the end marker")


@pytest.mark.parametrize(
    ("head", "fragment"),
    [
        (b"[1, 2]", "must be a JSON object at top level, got a JSON array"),
        (b'"text"', "got a JSON string"),
        (b"3", "got a JSON number"),
        (b"null", "got a JSON null"),
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b'{"a": 1} extra', "not valid JSON"),
        (b'{"a": NaN}', "header['a'] is nan"),
        (b'{"a": [Infinity]}', "header['a'][0] is inf"),
        (b'{"a": 1e400}', "inf"),
        (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
        (b'{"a": "\xff"}', "not valid UTF-8"),
        (b'{"a": ' + b"1" * 5000 + b"}", "integer literal of 5000 characters is too long"),
        (b'{"a": ' + b"9" * 340 + b"}", "header['a'] is an integer of 1130 bits; at most 1024 allowed"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a":' + b"[" * 300 + b"]" * 300 + b"}", "nested deeper than 256 levels"),
    ],
)
def test_hostile_headers(head: bytes, fragment: str) -> None:
    rejects(raw_plan(head=head), "section 'HEAD'", fragment)


def test_nesting_up_to_the_limit_round_trips() -> None:
    deep: Any = 1
    for _ in range(255):
        deep = [deep]
    contents = PlanContents({"deep": deep}, {}, [])
    assert decode_plan(encode_plan(contents)) == contents


def test_deep_object_nesting_is_rejected() -> None:
    rejects(
        raw_plan(head=b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
        "section 'HEAD'",
        "nested too deeply",
    )


F4 = "float32"


@pytest.mark.parametrize(
    ("weights", "fragment"),
    [
        (wgts([], count=2**32 - 1), "declares 4294967295 weights but only 0 bytes remain"),
        (
            wgts([struct.pack("<I", 2**32 - 1) + bytes(30)]),
            "weight 0 name declares 4294967295 bytes but only 30 remain",
        ),
        (wgts([weight_entry(b"\xff", F4, [0], 64, 0)]), "weight 0 name is not valid UTF-8"),
        (
            wgts([weight_entry("w", F4, [2**40, 2**40], 64, 16)]),
            "needs 4835703278458516698824704 bytes but declares 16",
        ),
        (
            wgts([weight_entry("w", F4, [2**30], 64, 2**32)]),
            "weight 'w' data declares 4294967296 bytes but only 0 remain",
        ),
        (wgts([weight_entry("w", F4, [-1, -4], 64, 16)]), "negative dim in shape [-1, -4]"),
        (wgts([weight_entry("w", F4, [-(2**63)], 64, 0)]), "negative dim"),
        (wgts([weight_entry("w", "object", [1], 64, 8)]), "unknown dtype 'object'"),
        (wgts([weight_entry("w", "O", [1], 64, 8)]), "unknown dtype 'O'"),
        (wgts([weight_entry("w", "<f4", [1], 64, 4)]), "unknown dtype '<f4'"),
        (wgts([weight_entry("w", "float128", [1], 64, 16)]), "unknown dtype 'float128'"),
        (wgts([weight_entry("w", b"\xff\xfe", [1], 64, 4)]), "unknown dtype"),
        (wgts([weight_entry("w", F4, [1] * 40, 64, 4)]), "40 dims"),
        (
            wgts([weight_entry("w", F4, [0], 64, 0), weight_entry("w", F4, [0], 64, 0)]),
            "duplicate weight name 'w'",
        ),
        (wgts([weight_entry("b", F4, [0], 64, 0), weight_entry("a", F4, [0], 64, 0)]), "unsorted"),
        (wgts([weight_entry("w", F4, [1], 0, 4)], bytes(100)), "data is at offset 0 (expected 64"),
        (
            wgts([weight_entry("w", F4, [1], 128, 4)], bytes(200)),
            "data is at offset 128 (expected 64",
        ),
        (padded([weight_entry("w", F4, [0], 64, 0)], fill=b"\x01"), "zero padded"),
        (padded([weight_entry("w", F4, [0, 2**62], 64, 0)]), "is unusable"),
        (
            padded([weight_entry("w", F4, [1], 64, 4)], bytes(8)),
            "4 unexpected bytes after the last array",
        ),
        (wgts([weight_entry("w", F4, [1], 2**64 - 64, 4)]), "data is at offset"),
        (wgts([]) + b"x", "1 unexpected bytes after the last array"),
        (padded([weight_entry("w", "bool", [2], 64, 2)], b"\x01\x02"), "bytes other than 0 and 1"),
        (b"", "weight count needs 4 bytes but only 0 remain"),
        (
            wgts([weight_entry("w", F4, [1, 2], 64, 8)])[:-10],
            "weight 'w' offset and length needs 16 bytes",
        ),
    ],
)
def test_hostile_weights(weights: bytes, fragment: str) -> None:
    rejects(raw_plan(weights=weights), "section 'WGTS' is malformed", fragment)


def test_crafted_weights_that_are_valid_decode() -> None:
    index = weight_entry("w", "int16", [2], 64, 4)
    data = bytes(64 - 4 - len(index)) + struct.pack("<hh", -2, 7)
    decoded = decode_plan(raw_plan(weights=wgts([index], data)))
    np.testing.assert_array_equal(decoded.weights["w"], np.array([-2, 7], dtype=np.int16))


RECORD = ("ns", "P", "1", "v3", b"payload")


@pytest.mark.parametrize(
    ("plugins", "fragment"),
    [
        (plug([], count=2**32 - 1), "declares 4294967295 plugin records but only 0 bytes remain"),
        (plug([RECORD], count=2), "declares 2 plugin records"),
        (plug([("ns", "P", "1", "v4", b"")]), "plugin record 0 interface is 'v4'"),
        (plug([("ns", "P", "1", "", b"")]), "interface is ''"),
        (plug([RECORD]) + b"!", "1 unexpected bytes after the last plugin record"),
        (plug([RECORD])[:-3], "plugin record 0 payload declares 7 bytes but only 4 remain"),
        (
            struct.pack("<I", 1) + struct.pack("<I", 2**32 - 1) + bytes(16),
            "namespace declares 4294967295 bytes",
        ),
        (struct.pack("<I", 1) + lp(b"\xc3\x28") + bytes(16), "namespace is not valid UTF-8"),
    ],
)
def test_hostile_plugins(plugins: bytes, fragment: str) -> None:
    rejects(raw_plan(plugins=plugins), "section 'PLUG' is malformed", fragment)


def test_decode_rejects_non_bytes() -> None:
    with pytest.raises(TypeMismatchError):
        decode_plan(10**12)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Encoder misuse
# ---------------------------------------------------------------------------


def contents_with(**changes: Any) -> PlanContents:
    base: dict[str, Any] = {"header": {}, "weights": {}, "plugins": []}
    base.update(changes)
    return PlanContents(**base)


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        ({"a": {1, 2}}, "header['a'] has type set"),
        ({"a": [1, (2, 3)]}, "header['a'][1] has type tuple"),
        ({"a": {"b": np.float32(1.0)}}, "header['a']['b'] has type float32"),
        ({"a": b"bytes"}, "has type bytes"),
        ({"a": float("nan")}, "header['a'] is nan"),
        ({"a": [float("inf")]}, "header['a'][0] is inf"),
        ({"a": {3: "x"}}, "header['a'] has key 3 of type int"),
        ({("t",): 1}, "has key ('t',) of type tuple"),
        ({"a": 10**5000}, "header['a'] is an integer of 16610 bits"),
        ({"a": -(2**1024)}, "header['a'] is an integer of 1025 bits"),
        ([1, 2], "plan header must be a dict, got list"),
        ({"deep": json.loads("[" * 300 + "]" * 300)}, "nested deeper than 256 levels"),
    ],
)
def test_encode_rejects_bad_headers(header: Any, fragment: str) -> None:
    with pytest.raises(SerializationError) as info:
        encode_plan(contents_with(header=header))
    assert fragment in str(info.value)
    assert not isinstance(info.value, PlanFormatError)


def test_encode_rejects_circular_header() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(SerializationError, match="nested deeper"):
        encode_plan(contents_with(header={"loop": loop}))


@pytest.mark.parametrize(
    ("weights", "fragment"),
    [
        ({"obj": np.array([object()], dtype=object)}, "weight 'obj' has dtype 'object'"),
        ({"c": np.zeros(2, np.complex64)}, "weight 'c' has dtype 'complex64'"),
        ({"s": np.array(["a"])}, "weight 's' has dtype 'str32'"),
        ({"t": np.zeros(1, "datetime64[s]")}, "weight 't' has dtype 'datetime64[s]'"),
        ({"f": np.zeros(1, np.longdouble)}, "weight 'f' has dtype"),
        ({"l": [1.0, 2.0]}, "weight 'l' must be a numpy array, got list"),
        ({3: np.zeros(1)}, "weight name 3 must be str, got int"),
        ({"\udc80": np.zeros(1)}, "not valid UTF-8"),
    ],
)
def test_encode_rejects_bad_weights(weights: dict[Any, Any], fragment: str) -> None:
    with pytest.raises(SerializationError) as info:
        encode_plan(contents_with(weights=weights))
    assert fragment in str(info.value)


TEXT: Any = "text"
FIVE: Any = 5


@pytest.mark.parametrize(
    ("plugins", "fragment"),
    [
        ([PluginRecord("ns", "P", "1", "v1", b"")], "plugin record 0 'P' has interface 'v1'"),
        ([("ns", "P", "1", "v2", b"")], "plugin record 0 must be a PluginRecord, got tuple"),
        (
            [PluginRecord("ns", "P", "1", "v2", TEXT)],
            "plugin record 0 payload must be bytes, got str",
        ),
        ([PluginRecord("ns", FIVE, "1", "v2", b"")], "plugin record 0 name must be str, got int"),
        ((), "plan plugins must be a list, got tuple"),
    ],
)
def test_encode_rejects_bad_plugins(plugins: Any, fragment: str) -> None:
    with pytest.raises(SerializationError) as info:
        encode_plan(contents_with(plugins=plugins))
    assert fragment in str(info.value)


def test_encode_rejects_non_contents() -> None:
    with pytest.raises(TypeMismatchError):
        encode_plan({"header": {}})  # type: ignore[arg-type]
