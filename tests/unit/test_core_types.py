"""Tests for plugrt.core: data types, formats, dims, the logger and tensor layouts."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
from plugrt.core.dims import Dims, Dims2, Dims3, Dims4, DimsCHW, DimsHW, DimsNCHW, volume
from plugrt.core.errors import MissingHookError, PlugrtError, ShapeError, TypeMismatchError
from plugrt.core.layouts import SUPPORTED_FORMATS, format_min_rank, from_storage, storage_shape, to_storage
from plugrt.core.logger import ILogger, Logger, Severity
from plugrt.core.types import DataType, PluginFormat, TensorFormat, from_nptype, nptype

# ---------------------------------------------------------------------------
# DataType
# ---------------------------------------------------------------------------

TENSORRT_DATATYPE_VALUES = {
    "FLOAT": 0,
    "HALF": 1,
    "INT8": 2,
    "INT32": 3,
    "BOOL": 4,
    "UINT8": 5,
    "FP8": 6,
    "BF16": 7,
    "INT64": 8,
    "INT4": 9,
    "FP4": 10,
}


def test_datatype_members_and_values_match_tensorrt() -> None:
    assert {m.name: int(m) for m in DataType} == TENSORRT_DATATYPE_VALUES


@pytest.mark.parametrize("name", sorted(TENSORRT_DATATYPE_VALUES))
def test_datatype_round_trips_through_its_integer_value(name: str) -> None:
    member = DataType[name]
    assert DataType(TENSORRT_DATATYPE_VALUES[name]) is member
    assert member == TENSORRT_DATATYPE_VALUES[name]


def test_datatype_from_unknown_integer_is_rejected() -> None:
    with pytest.raises(ValueError, match="11 is not a valid DataType"):
        DataType(11)


@pytest.mark.parametrize(
    ("alias", "member"),
    [
        ("float32", DataType.FLOAT),
        ("float16", DataType.HALF),
        ("int8", DataType.INT8),
        ("int32", DataType.INT32),
        ("bool", DataType.BOOL),
        ("uint8", DataType.UINT8),
        ("fp8", DataType.FP8),
        ("bfloat16", DataType.BF16),
        ("int64", DataType.INT64),
        ("int4", DataType.INT4),
        ("fp4", DataType.FP4),
    ],
)
def test_module_level_aliases_are_the_datatype_members(alias: str, member: DataType) -> None:
    assert getattr(trt, alias) is member
    assert alias in trt.__all__


NUMPY_EQUIVALENTS = [
    (DataType.FLOAT, np.float32),
    (DataType.HALF, np.float16),
    (DataType.INT8, np.int8),
    (DataType.INT32, np.int32),
    (DataType.BOOL, np.bool_),
    (DataType.UINT8, np.uint8),
    (DataType.INT64, np.int64),
]


@pytest.mark.parametrize(("dtype", "np_type"), NUMPY_EQUIVALENTS)
def test_nptype_function_and_method_agree(dtype: DataType, np_type: type) -> None:
    assert nptype(dtype) is np_type
    assert dtype.nptype() is np_type
    assert trt.nptype(dtype) is np_type


@pytest.mark.parametrize(("dtype", "np_type"), NUMPY_EQUIVALENTS)
def test_nptype_accepts_plain_integers(dtype: DataType, np_type: type) -> None:
    assert nptype(int(dtype)) is np_type


@pytest.mark.parametrize(("dtype", "np_type"), NUMPY_EQUIVALENTS)
def test_from_nptype_inverts_nptype(dtype: DataType, np_type: type) -> None:
    assert from_nptype(np_type) is dtype
    assert from_nptype(np.dtype(np_type)) is dtype
    assert from_nptype(np.dtype(np_type).name) is dtype
    assert trt.from_nptype(np_type) is dtype


@pytest.mark.parametrize("dtype", [DataType.FP8, DataType.BF16, DataType.INT4, DataType.FP4])
def test_nptype_of_types_without_numpy_equivalent_raises(dtype: DataType) -> None:
    with pytest.raises(TypeMismatchError, match=rf"DataType\.{dtype.name} has no NumPy equivalent") as info:
        nptype(dtype)
    # the message lists the types that do have an equivalent
    assert "FLOAT" in str(info.value) and "INT64" in str(info.value)
    with pytest.raises(TypeMismatchError, match=rf"DataType\.{dtype.name}"):
        dtype.nptype()


def test_nptype_error_is_a_type_error_and_a_plugrt_error() -> None:
    with pytest.raises(TypeError):
        nptype(DataType.BF16)
    with pytest.raises(PlugrtError):
        nptype(DataType.BF16)


def test_nptype_of_invalid_value_raises_value_error() -> None:
    with pytest.raises(ValueError, match="42 is not a valid DataType"):
        nptype(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("np_type", [np.float64, np.complex64, np.uint16, np.int16, np.uint64])
def test_from_nptype_of_unsupported_numpy_dtype_raises(np_type: type) -> None:
    name = np.dtype(np_type).name
    with pytest.raises(TypeMismatchError, match=rf"NumPy dtype {name} has no DataType; supported: float32"):
        from_nptype(np_type)


@pytest.mark.parametrize(
    ("dtype", "size"),
    [
        (DataType.FLOAT, 4),
        (DataType.HALF, 2),
        (DataType.INT8, 1),
        (DataType.INT32, 4),
        (DataType.BOOL, 1),
        (DataType.UINT8, 1),
        (DataType.FP8, 1),
        (DataType.BF16, 2),
        (DataType.INT64, 8),
        (DataType.INT4, 0.5),
        (DataType.FP4, 0.5),
    ],
)
def test_itemsize(dtype: DataType, size: float) -> None:
    assert dtype.itemsize == size


@pytest.mark.parametrize(("dtype", "np_type"), NUMPY_EQUIVALENTS)
def test_itemsize_matches_numpy(dtype: DataType, np_type: type) -> None:
    assert dtype.itemsize == np.dtype(np_type).itemsize


# ---------------------------------------------------------------------------
# TensorFormat / PluginFormat
# ---------------------------------------------------------------------------


def test_tensor_format_values_match_tensorrt() -> None:
    assert {m.name: int(m) for m in TensorFormat} == {
        "LINEAR": 0,
        "CHW2": 1,
        "HWC8": 2,
        "CHW4": 3,
        "CHW16": 4,
        "CHW32": 5,
        "DHWC8": 6,
        "CDHW32": 7,
        "HWC": 8,
        "DLA_LINEAR": 9,
        "DLA_HWC4": 10,
        "HWC16": 11,
        "DHWC": 12,
    }


def test_plugin_format_is_tensor_format() -> None:
    assert PluginFormat is TensorFormat
    assert trt.PluginFormat is trt.TensorFormat
    assert trt.PluginFormat.CHW32 is TensorFormat.CHW32


# ---------------------------------------------------------------------------
# Dims
# ---------------------------------------------------------------------------


def test_dims_basic_sequence_protocol() -> None:
    d = Dims((2, -1, 4))
    assert len(d) == 3
    assert d.nbDims == 3
    assert d[0] == 2 and d[1] == -1 and d[-1] == 4
    assert d[1:] == [-1, 4]
    assert list(d) == [2, -1, 4]
    assert repr(d) == "(2, -1, 4)"


def test_dims_default_is_empty_scalar_shape() -> None:
    d = Dims()
    assert len(d) == 0
    assert d == ()
    assert d.is_static()
    assert repr(d) == "()"


def test_dims_single_element_repr_has_trailing_comma() -> None:
    assert repr(Dims([7])) == "(7,)"


def test_dims_accepts_numpy_integers_and_other_dims() -> None:
    d = Dims([np.int64(3), np.int32(4)])
    assert d == (3, 4)
    assert all(type(v) is int for v in d)
    copy = Dims(d)
    assert copy == d
    copy[0] = 9
    assert d[0] == 3


@pytest.mark.parametrize("other", [(2, 3), [2, 3], Dims((2, 3))])
def test_dims_equals_tuples_lists_and_dims(other: object) -> None:
    d = Dims((2, 3))
    assert d == other
    assert not (d != other)


@pytest.mark.parametrize("other", [(2,), (2, 3, 1), [3, 2], Dims((2, 4))])
def test_dims_not_equal_to_different_shapes(other: object) -> None:
    assert Dims((2, 3)) != other


def test_dims_not_equal_to_unrelated_types() -> None:
    d = Dims((2, 3))
    assert d != "23"
    assert d != 23
    assert d != {2: 3}
    assert d.__eq__(5) is NotImplemented


def test_dims_equality_with_non_integer_items_is_false_and_does_not_raise() -> None:
    assert (Dims((1,)) == ("a",)) is False
    assert (Dims((1,)) == (1.5,)) is False


def test_dims_hash_matches_equal_dims() -> None:
    assert hash(Dims((1, 2))) == hash(Dims([1, 2]))
    assert len({Dims((1, 2)), Dims((1, 2)), Dims((2, 1))}) == 2


def test_dims_setitem_validates() -> None:
    d = Dims((1, 2))
    d[1] = -1
    d[0] = np.int16(5)
    assert d == (5, -1)
    assert not d.is_static()
    with pytest.raises(ShapeError, match=r"a dimension must be >= -1 \(-1 means dynamic\), got -3"):
        d[0] = -3
    with pytest.raises(ShapeError, match="a dimension must be an integer, got 'x'"):
        d[0] = "x"  # type: ignore[assignment]
    assert d == (5, -1)


def test_dims_is_static() -> None:
    assert Dims((0, 1, 5)).is_static()
    assert not Dims((3, -1)).is_static()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (-2, "a dimension must be >= -1 \\(-1 means dynamic\\), got -2"),
        (-100, "got -100"),
        ("a", "a dimension must be an integer, got 'a'"),
        (1.5, "a dimension must be an integer, got 1.5"),
        (None, "a dimension must be an integer, got None"),
        (2.0, "a dimension must be an integer, got 2.0"),
    ],
)
def test_dims_rejects_bad_dimensions(bad: object, message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        Dims((1, bad))  # type: ignore[list-item]


def test_dims_shape_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        Dims((-5,))


def test_dims_max_dims() -> None:
    assert Dims.MAX_DIMS == 8
    assert len(Dims(range(1, 9))) == 8
    with pytest.raises(ShapeError, match="Dims holds at most 8 dimensions, got 9"):
        Dims([1] * 9)


def test_dims_rejects_non_iterable() -> None:
    with pytest.raises(TypeError):
        Dims(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cls", "rank"), [(Dims2, 2), (Dims3, 3), (Dims4, 4), (DimsHW, 2), (DimsCHW, 3), (DimsNCHW, 4)]
)
def test_fixed_rank_dims_from_varargs_and_iterable(cls: type, rank: int) -> None:
    values = tuple(range(2, 2 + rank))
    a = cls(*values)
    b = cls(values)
    c = cls(list(values))
    assert a == b == c == values
    assert len(a) == rank
    assert isinstance(a, Dims)


@pytest.mark.parametrize(
    ("cls", "rank"), [(Dims2, 2), (Dims3, 3), (Dims4, 4), (DimsHW, 2), (DimsCHW, 3), (DimsNCHW, 4)]
)
@pytest.mark.parametrize("delta", [-1, 1])
def test_fixed_rank_dims_reject_wrong_rank(cls: type, rank: int, delta: int) -> None:
    values = [1] * (rank + delta)
    with pytest.raises(ShapeError, match=rf"{cls.__name__} takes {rank} dimensions, got {rank + delta}"):
        cls(*values)
    with pytest.raises(ShapeError, match=rf"{cls.__name__} takes {rank} dimensions, got {rank + delta}"):
        cls(values)


def test_fixed_rank_dims_single_integer_is_wrong_rank() -> None:
    with pytest.raises(ShapeError, match="Dims2 takes 2 dimensions, got 1"):
        Dims2(5)


def test_fixed_rank_dims_validate_values() -> None:
    with pytest.raises(ShapeError, match="got -2"):
        Dims3(1, -2, 3)
    with pytest.raises(ShapeError, match="must be an integer, got 'a'"):
        Dims2("ab")


def test_dims_hw_getters_and_setters() -> None:
    d = DimsHW(3, 4)
    assert (d.h, d.w) == (3, 4)
    d.h = 10
    d.w = -1
    assert d == (10, -1)
    with pytest.raises(ShapeError, match="got -7"):
        d.w = -7
    assert d.w == -1


def test_dims_chw_getters_and_setters() -> None:
    d = DimsCHW(3, 4, 5)
    assert (d.c, d.h, d.w) == (3, 4, 5)
    d.c, d.h, d.w = 6, 7, 8
    assert d == [6, 7, 8]
    with pytest.raises(ShapeError, match="must be an integer"):
        d.c = "three"


def test_dims_nchw_getters_and_setters() -> None:
    d = DimsNCHW(1, 2, 3, 4)
    assert (d.n, d.c, d.h, d.w) == (1, 2, 3, 4)
    d.n = 8
    d.c = 16
    d.h = 32
    d.w = 64
    assert d == (8, 16, 32, 64)
    assert isinstance(d, Dims4)


def test_dims_classes_are_exported() -> None:
    for name in ("Dims", "Dims2", "Dims3", "Dims4", "DimsHW", "DimsCHW", "DimsNCHW", "volume"):
        assert getattr(trt, name) is globals()[name]


@pytest.mark.parametrize(
    ("shape", "expected"),
    [((), 1), ((5,), 5), ((2, 3, 4), 24), ((3, 0, 7), 0), (Dims((2, 2)), 4), ([np.int64(3), 3], 9)],
)
def test_volume(shape: object, expected: int) -> None:
    assert volume(shape) == expected  # type: ignore[arg-type]
    assert isinstance(volume(shape), int)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Logger
# ---------------------------------------------------------------------------


class Collecting(ILogger):
    def __init__(self, min_severity: Severity = Severity.VERBOSE) -> None:
        super().__init__(min_severity)
        self.messages: list[tuple[Severity, str]] = []

    def log(self, severity: Severity, msg: str) -> None:
        self.messages.append((severity, msg))


def test_severity_values_match_tensorrt() -> None:
    assert {m.name: int(m) for m in Severity} == {
        "INTERNAL_ERROR": 0,
        "ERROR": 1,
        "WARNING": 2,
        "INFO": 3,
        "VERBOSE": 4,
    }
    assert ILogger.Severity is Severity
    assert ILogger.WARNING is Severity.WARNING
    assert Logger.ERROR is Severity.ERROR
    assert trt.Logger.VERBOSE is Severity.VERBOSE


def test_user_logger_receives_every_severity_by_default() -> None:
    logger = Collecting()
    for severity in Severity:
        logger.emit(severity, f"message {severity.name}")
    assert logger.messages == [(s, f"message {s.name}") for s in Severity]
    assert all(isinstance(s, Severity) for s, _ in logger.messages)


@pytest.mark.parametrize("minimum", list(Severity))
def test_emit_filters_by_min_severity(minimum: Severity) -> None:
    logger = Collecting(minimum)
    for severity in Severity:
        assert logger.enabled(severity) == (severity <= minimum)
        logger.emit(severity, severity.name)
    assert [s for s, _ in logger.messages] == [s for s in Severity if s <= minimum]


def test_min_severity_can_be_changed_after_construction() -> None:
    logger = Collecting(Severity.ERROR)
    logger.emit(Severity.INFO, "dropped")
    logger.min_severity = Severity.INFO
    logger.emit(Severity.INFO, "kept")
    assert logger.messages == [(Severity.INFO, "kept")]


def test_min_severity_accepts_integers() -> None:
    logger = Collecting(2)  # type: ignore[arg-type]
    assert logger.min_severity is Severity.WARNING


def test_min_severity_rejects_unknown_value() -> None:
    with pytest.raises(ValueError, match="9 is not a valid Severity"):
        Collecting(9)  # type: ignore[arg-type]


def test_logger_subclass_without_super_init_sees_everything() -> None:
    class NoInit(ILogger):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def log(self, severity: Severity, msg: str) -> None:
            self.seen.append(msg)

    logger = NoInit()
    logger.emit(Severity.VERBOSE, "v")
    assert logger.seen == ["v"]


def test_ilogger_subclass_without_log_raises_missing_hook_naming_the_class() -> None:
    class ForgotLog(ILogger):
        pass

    logger = ForgotLog()
    with pytest.raises(MissingHookError, match=r"ForgotLog must implement ILogger\.log\(severity, msg\)"):
        logger.emit(Severity.ERROR, "boom")
    with pytest.raises(MissingHookError, match="ForgotLog"):
        logger.log(Severity.ERROR, "boom")


def test_ilogger_subclass_without_log_is_silent_for_filtered_messages() -> None:
    class ForgotLog(ILogger):
        pass

    ForgotLog(Severity.ERROR).emit(Severity.INFO, "never delivered")


def test_default_logger_writes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    logger = Logger()
    assert logger.min_severity is Severity.WARNING
    logger.emit(Severity.WARNING, "careful")
    logger.emit(Severity.ERROR, "broken")
    logger.emit(Severity.INFO, "chatty")
    logger.emit(Severity.VERBOSE, "very chatty")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["[plugrt] WARNING: careful", "[plugrt] ERROR: broken"]


def test_default_logger_with_verbose_minimum(capsys: pytest.CaptureFixture[str]) -> None:
    logger = trt.Logger(trt.Logger.VERBOSE)
    logger.emit(Severity.VERBOSE, "details")
    logger.emit(Severity.INTERNAL_ERROR, "bug")
    assert capsys.readouterr().err.splitlines() == ["[plugrt] VERBOSE: details", "[plugrt] INTERNAL_ERROR: bug"]


def test_default_logger_log_bypasses_filter(capsys: pytest.CaptureFixture[str]) -> None:
    Logger(Severity.ERROR).log(Severity.INFO, "direct")
    assert capsys.readouterr().err == "[plugrt] INFO: direct\n"


def test_default_logger_accepts_integer_severity(capsys: pytest.CaptureFixture[str]) -> None:
    Logger().log(1, "int severity")  # type: ignore[arg-type]
    assert capsys.readouterr().err == "[plugrt] ERROR: int severity\n"


# ---------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------

CHW_VECTOR = {TensorFormat.CHW2: 2, TensorFormat.CHW4: 4, TensorFormat.CHW16: 16, TensorFormat.CHW32: 32}
HWC_VECTOR = {TensorFormat.HWC8: 8, TensorFormat.HWC16: 16, TensorFormat.HWC: 1}


def test_supported_formats() -> None:
    assert SUPPORTED_FORMATS[0] is TensorFormat.LINEAR
    assert set(SUPPORTED_FORMATS) == {TensorFormat.LINEAR, *CHW_VECTOR, *HWC_VECTOR}
    assert len(SUPPORTED_FORMATS) == len(set(SUPPORTED_FORMATS))


@pytest.mark.parametrize("fmt", SUPPORTED_FORMATS)
def test_format_min_rank(fmt: TensorFormat) -> None:
    assert format_min_rank(fmt) == (0 if fmt is TensorFormat.LINEAR else 3)


@pytest.mark.parametrize(
    ("shape", "fmt", "expected"),
    [
        ((), TensorFormat.LINEAR, ()),
        ((7,), TensorFormat.LINEAR, (7,)),
        ((2, 3, 4, 5), TensorFormat.LINEAR, (2, 3, 4, 5)),
        ((2, 3, 4, 5), TensorFormat.CHW2, (2, 2, 4, 5, 2)),
        ((2, 4, 4, 5), TensorFormat.CHW2, (2, 2, 4, 5, 2)),
        ((2, 3, 4, 5), TensorFormat.CHW4, (2, 1, 4, 5, 4)),
        ((2, 5, 4, 5), TensorFormat.CHW4, (2, 2, 4, 5, 4)),
        ((1, 17, 2, 3), TensorFormat.CHW16, (1, 2, 2, 3, 16)),
        ((1, 33, 2, 3), TensorFormat.CHW32, (1, 2, 2, 3, 32)),
        ((1, 32, 2, 3), TensorFormat.CHW32, (1, 1, 2, 3, 32)),
        ((2, 3, 4, 5), TensorFormat.HWC8, (2, 4, 5, 8)),
        ((2, 9, 4, 5), TensorFormat.HWC8, (2, 4, 5, 16)),
        ((2, 9, 4, 5), TensorFormat.HWC16, (2, 4, 5, 16)),
        ((2, 17, 4, 5), TensorFormat.HWC16, (2, 4, 5, 32)),
        ((2, 3, 4, 5), TensorFormat.HWC, (2, 4, 5, 3)),
        ((3, 4, 5), TensorFormat.CHW4, (1, 4, 5, 4)),
        ((3, 4, 5), TensorFormat.HWC8, (4, 5, 8)),
        ((2, 2, 3, 4, 5), TensorFormat.CHW32, (2, 2, 1, 4, 5, 32)),
        ((2, 2, 3, 4, 5), TensorFormat.HWC, (2, 2, 4, 5, 3)),
    ],
)
def test_storage_shape(shape: tuple[int, ...], fmt: TensorFormat, expected: tuple[int, ...]) -> None:
    assert storage_shape(shape, fmt) == expected


def test_storage_shape_accepts_dims_and_numpy_ints() -> None:
    assert storage_shape(Dims((1, 5, 2, 2)), TensorFormat.CHW4) == (1, 2, 2, 2, 4)
    result = storage_shape([np.int64(1), np.int64(5), 2, 2], TensorFormat.HWC8)
    assert result == (1, 2, 2, 8)
    assert all(type(v) is int for v in result)


@pytest.mark.parametrize("fmt", [f for f in SUPPORTED_FORMATS if f is not TensorFormat.LINEAR])
@pytest.mark.parametrize("shape", [(), (4,), (3, 4)])
def test_storage_shape_rank_below_three_is_rejected(fmt: TensorFormat, shape: tuple[int, ...]) -> None:
    with pytest.raises(ShapeError, match=rf"TensorFormat\.{fmt.name} needs a tensor of rank >= 3, got shape"):
        storage_shape(shape, fmt)


@pytest.mark.parametrize(
    "fmt",
    [TensorFormat.DHWC8, TensorFormat.CDHW32, TensorFormat.DLA_LINEAR, TensorFormat.DLA_HWC4, TensorFormat.DHWC],
)
def test_storage_shape_unsupported_format(fmt: TensorFormat) -> None:
    with pytest.raises(ShapeError, match=rf"TensorFormat\.{fmt.name} is not supported by plugrt's layouts"):
        storage_shape((1, 2, 3, 4, 5), fmt)


LAYOUT_SHAPES = [(3, 5, 7), (2, 3, 4, 5), (1, 5, 2, 3), (2, 33, 2, 2), (1, 17, 1, 3), (2, 1, 3, 2, 2), (1, 8, 2, 2)]


def _convert(x: np.ndarray, fmt: TensorFormat) -> np.ndarray:
    stored = np.full(storage_shape(x.shape, fmt), 99, dtype=x.dtype)  # dirty buffer: padding must be zeroed
    to_storage(x, fmt, stored)
    return stored


@pytest.mark.parametrize("fmt", SUPPORTED_FORMATS)
@pytest.mark.parametrize("shape", LAYOUT_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_layout_round_trip(fmt: TensorFormat, shape: tuple[int, ...], dtype: type) -> None:
    rng = np.random.default_rng(hash((fmt, shape)) % 2**32)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    stored = _convert(x, fmt)
    assert stored.shape == storage_shape(shape, fmt)
    back = np.full(shape, -7, dtype=dtype)
    from_storage(stored, fmt, back)
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize("fmt", SUPPORTED_FORMATS)
def test_layout_preserves_element_count_up_to_padding(fmt: TensorFormat) -> None:
    x = np.arange(2 * 5 * 3 * 2, dtype=np.float32).reshape(2, 5, 3, 2) + 1
    stored = _convert(x, fmt)
    assert np.count_nonzero(stored) == x.size
    assert sorted(stored[stored != 0].tolist()) == sorted(x.reshape(-1).tolist())


@pytest.mark.parametrize("fmt", [TensorFormat.CHW2, TensorFormat.CHW4, TensorFormat.CHW16, TensorFormat.CHW32])
@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (1, 32, 2, 2), (2, 37, 1, 3), (3, 2, 2)])
def test_chw_vector_exact_placement(fmt: TensorFormat, shape: tuple[int, ...]) -> None:
    k = CHW_VECTOR[fmt]
    x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)
    stored = _convert(x, fmt)
    *lead, c, h, w = shape
    groups = -(-c // k)
    assert stored.shape == (*lead, groups, h, w, k)
    flat_x = x.reshape(-1, c, h, w)
    flat_s = stored.reshape(-1, groups, h, w, k)
    for n in range(flat_x.shape[0]):
        for ci in range(groups * k):
            for hi in range(h):
                for wi in range(w):
                    expected = flat_x[n, ci, hi, wi] if ci < c else 0
                    assert flat_s[n, ci // k, hi, wi, ci % k] == expected


def test_chw4_placement_spot_checks() -> None:
    # [N, C/4, H, W, 4]: element (n, c, h, w) lives at [n, c // 4, h, w, c % 4]
    x = np.arange(1 * 6 * 2 * 3, dtype=np.int32).reshape(1, 6, 2, 3) + 1
    stored = _convert(x, TensorFormat.CHW4)
    assert stored.shape == (1, 2, 2, 3, 4)
    assert stored[0, 0, 0, 0].tolist() == [x[0, 0, 0, 0], x[0, 1, 0, 0], x[0, 2, 0, 0], x[0, 3, 0, 0]]
    assert stored[0, 1, 1, 2].tolist() == [x[0, 4, 1, 2], x[0, 5, 1, 2], 0, 0]
    # the memory order is channel-innermost within each group
    assert stored.reshape(-1)[:4].tolist() == x[0, 0:4, 0, 0].tolist()


def test_chw32_placement_spot_checks() -> None:
    x = np.arange(1 * 40 * 1 * 2, dtype=np.float32).reshape(1, 40, 1, 2) + 1
    stored = _convert(x, TensorFormat.CHW32)
    assert stored.shape == (1, 2, 1, 2, 32)
    np.testing.assert_array_equal(stored[0, 0, 0, 1], x[0, :32, 0, 1])
    np.testing.assert_array_equal(stored[0, 1, 0, 0, :8], x[0, 32:, 0, 0])
    assert not stored[0, 1, :, :, 8:].any()


@pytest.mark.parametrize("fmt", [TensorFormat.HWC8, TensorFormat.HWC16, TensorFormat.HWC])
@pytest.mark.parametrize("shape", [(2, 3, 2, 4), (1, 8, 3, 1), (1, 9, 2, 2), (5, 2, 3)])
def test_hwc_exact_placement(fmt: TensorFormat, shape: tuple[int, ...]) -> None:
    k = HWC_VECTOR[fmt]
    x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)
    stored = _convert(x, fmt)
    *lead, c, h, w = shape
    padded = -(-c // k) * k
    assert stored.shape == (*lead, h, w, padded)
    np.testing.assert_array_equal(stored[..., :c], np.moveaxis(x, -3, -1))
    assert not stored[..., c:].any()


def test_hwc8_placement_spot_checks() -> None:
    # [N, H, W, ceil(C/8)*8]: element (n, c, h, w) lives at [n, h, w, c]; channels C..7 are zero
    x = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2) + 1
    stored = _convert(x, TensorFormat.HWC8)
    assert stored.shape == (2, 2, 2, 8)
    assert stored[1, 0, 1].tolist() == [x[1, 0, 0, 1], x[1, 1, 0, 1], x[1, 2, 0, 1], 0, 0, 0, 0, 0]
    assert stored.reshape(-1)[:8].tolist() == [*x[0, :, 0, 0].tolist(), 0, 0, 0, 0, 0]


def test_linear_round_trip_is_a_copy() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros_like(x)
    to_storage(x, TensorFormat.LINEAR, out)
    np.testing.assert_array_equal(out, x)
    back = np.zeros_like(x)
    from_storage(out, TensorFormat.LINEAR, back)
    np.testing.assert_array_equal(back, x)
    assert not np.shares_memory(back, x)


@pytest.mark.parametrize("convert", [to_storage, from_storage])
@pytest.mark.parametrize("fmt", [f for f in SUPPORTED_FORMATS if f is not TensorFormat.LINEAR])
def test_layout_conversion_rank_below_three_raises_shape_error(convert: object, fmt: TensorFormat) -> None:
    x = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(ShapeError, match=rf"TensorFormat\.{fmt.name} needs a tensor of rank >= 3, got shape \(2, 3\)"):
        convert(x, fmt, np.zeros((2, 3), dtype=np.float32))  # type: ignore[operator]


@pytest.mark.parametrize("convert", [to_storage, from_storage])
def test_linear_conversion_accepts_any_rank(convert: object) -> None:
    x = np.arange(3, dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)
    convert(x, TensorFormat.LINEAR, out)  # type: ignore[operator]
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize(
    "fmt",
    [TensorFormat.DHWC8, TensorFormat.CDHW32, TensorFormat.DLA_LINEAR, TensorFormat.DLA_HWC4, TensorFormat.DHWC],
)
def test_layout_conversion_of_unsupported_format_raises(fmt: TensorFormat) -> None:
    x = np.ones((1, 2, 3, 4), dtype=np.float32)
    out = np.full((1, 3, 4, 8), 5.0, dtype=np.float32)
    with pytest.raises(ShapeError, match=rf"TensorFormat\.{fmt.name} is not supported by plugrt's layouts"):
        to_storage(x, fmt, out)
    assert (out == 5.0).all()  # nothing written
    back = np.full((1, 2, 3, 4), 5.0, dtype=np.float32)
    with pytest.raises(ShapeError, match=rf"TensorFormat\.{fmt.name} is not supported by plugrt's layouts"):
        from_storage(out, fmt, back)
    assert (back == 5.0).all()
