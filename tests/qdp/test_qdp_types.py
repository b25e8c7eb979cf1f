"""The value types of plugrt.plugin: symbolic expressions, shapes, descriptions, tensors, combinations."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt
import plugrt.plugin as trtp
from plugrt.shape.builder import symbol

E = trt.PluginDefinitionError


def sym(name: str) -> trtp.ShapeExpr:
    return trtp.ShapeExpr(symbol(name))


# --- symbolic expressions ---------------------------------------------------------------------
def test_shape_expr_arithmetic_folds_constants_and_builds_expressions() -> None:
    n = sym("x[0]")
    assert ((trtp.ShapeExpr(6) * 2 + 1 - 3) // 2).constant_value() == 5
    assert isinstance(n * 2, trtp.ShapeExpr) and not (n * 2).is_constant
    assert (n * 2 + 0)._expr.evaluate({"x[0]": 5}) == 10
    assert (3 + n)._expr.evaluate({"x[0]": 4}) == 7 and (10 - n)._expr.evaluate({"x[0]": 4}) == 6
    assert trtp.cdiv(n, 4)._expr.evaluate({"x[0]": 9}) == 3
    assert trtp.cdiv(10, n)._expr.evaluate({"x[0]": 4}) == 3
    assert trtp.max(n, 7)._expr.evaluate({"x[0]": 3}) == 7 and trtp.min(2, n)._expr.evaluate({"x[0]": 3}) == 2
    assert (n == 3)._expr.evaluate({"x[0]": 3}) == 1 and (n < 3)._expr.evaluate({"x[0]": 3}) == 0
    assert bool(trtp.ShapeExpr(2) == 2) and not bool(trtp.ShapeExpr(2) < 1)
    assert int(trtp.SymInt32(trtp.ShapeExpr(4) * 4)) == 16


def test_shape_expr_misuse() -> None:
    n = sym("x[0]")
    with pytest.raises(E, match="at least one argument must be a symbolic expression"):
        trtp.cdiv(4, 2)
    with pytest.raises(E, match="not a build-time constant"):
        n.constant_value()
    with pytest.raises(E, match="no truth value at build time"):
        bool(n < 3)
    with pytest.raises(E, match="operands are ints or symbolic expressions, got float"):
        _ = n * 1.5  # type: ignore[operator]
    with pytest.raises(E, match="takes an int, an IDimensionExpr"):
        trtp.ShapeExpr("3")  # type: ignore[arg-type]
    fake = trtp.ShapeExpr()
    assert fake.is_fake and (fake * 2).is_fake
    with pytest.raises(E, match="fake"):
        _ = fake.is_constant


def test_size_tensor_expressions_take_no_arithmetic() -> None:
    st = trtp.size_tensor(sym("x[0]") // 2, sym("x[0]"))
    assert st.is_size_tensor and st.dtype == trt.int32 and st.expr().is_size_tensor
    for attempt in (lambda: st.expr() + 1, lambda: 2 * st.expr(), lambda: sym("x[1]") * st.expr()):
        with pytest.raises(E, match="size tensor's expression cannot take part"):
            attempt()
    with pytest.raises(E, match="its SizeTensorDesc is not one of the plugin's outputs"):
        _ = st.expr()._expr
    with pytest.raises(E, match="size_tensor opt must be a ShapeExpr or an int"):
        trtp.size_tensor("a", 3)  # type: ignore[arg-type]


def test_expression_lists() -> None:
    shape = trtp.ShapeExprs.from_tuple((2, sym("x[1]"), 4))
    assert len(shape) == 3 and isinstance(shape[0], trtp.ShapeExpr)
    assert shape.numel()._expr.evaluate({"x[1]": 3}) == 24
    shape[0] = 5
    assert shape[0].constant_value() == 5
    with pytest.raises(IndexError, match="out of range"):
        shape[3] = 1
    with pytest.raises(E, match="takes an int or a symbolic expression, got str"):
        shape[0] = "a"
    with pytest.raises(E, match=r"at most Dims.MAX_DIMS = 8"):
        trtp.ShapeExprs(9)
    with pytest.raises(E, match="dimension 0 was never set"):
        trtp.ShapeExprs(2).numel()
    args = trtp.SymIntExprs.from_tuple([1, trtp.SymInt32(sym("x[0]"))])
    assert isinstance(args[0], trtp.SymInt32) and len(args) == 2
    with pytest.raises(E, match="takes a length >= 0"):
        trtp.SymIntExprs(-1)


# --- shapes and descriptions ------------------------------------------------------------------
def test_shape_from_descriptors() -> None:
    desc = trt.DynamicPluginTensorDesc(
        trt.PluginTensorDesc(trt.Dims((-1, 3)), trt.float32), trt.Dims((1, 3)), trt.Dims((8, 3)), trt.Dims((4, 3))
    )
    shape = trtp.Shape(desc)
    assert shape.is_dynamic and shape.min == (1, 3) and shape.opt == (4, 3) and shape.max == (8, 3)
    with pytest.raises(E, match="has a dimension that is not known yet"):
        shape.numel()
    concrete = trtp.Shape((2, 3))
    assert concrete.numel() == 6 and list(concrete) == [2, 3] and concrete == (2, 3)
    with pytest.raises(E, match="exists only for dynamic shapes"):
        _ = concrete.opt
    with pytest.raises(E, match="no range was given"):
        _ = trtp.Shape((-1, 2)).max
    with pytest.raises(E, match="Shape takes a tuple of ints"):
        trtp.Shape("2x3")  # type: ignore[arg-type]


def test_tensor_desc_like_aliased_and_read_only_inputs() -> None:
    inp = trtp.TensorDesc(trtp.ShapeExprs.from_tuple((sym("x[0]"), 4)), trt.float32)._freeze()
    assert inp.ndim == 2 and inp.dtype == trt.float32 and not inp.is_size_tensor and not inp.has_shape
    out = inp.like()
    out.shape_expr[1] += 2
    assert out.shape_expr[1].constant_value() == 6 and inp.shape_expr[1].constant_value() == 4
    out.dtype = trt.float16
    alias = inp.aliased()
    assert alias.get_aliased() is inp and alias.is_aliased and out.get_aliased() is None
    with pytest.raises(E, match="read-only"):
        inp.dtype = trt.int32
    with pytest.raises(E, match="of an input tensor is read-only"):
        inp.shape_expr[0] = 3
    with pytest.raises(E, match="read-only"):
        alias.dtype = trt.int32
    with pytest.raises(E, match="known only inside autotune and aot_impl"):
        _ = inp.shape
    with pytest.raises(E, match="known only inside autotune and aot_impl"):
        inp.numel()
    with pytest.raises(E, match="dtype must be a DataType"):
        out.dtype = np.float32  # type: ignore[assignment]
    made = trtp.from_shape_expr((sym("x[0]"), 2), dtype=trt.int32)
    assert made.ndim == 2 and made.dtype == trt.int32
    with pytest.raises(E, match="from_shape_expr: dtype must be a DataType"):
        trtp.from_shape_expr((2,), dtype="int32")  # type: ignore[arg-type]


# --- tensors ----------------------------------------------------------------------------------
def _tensor(array: np.ndarray, read_only: bool = False, device: str = "cpu") -> trtp.Tensor:
    desc = trt.PluginTensorDesc(trt.Dims(array.shape), trt.from_nptype(array.dtype))
    return trtp.Tensor._make(desc, array.ctypes.data, 0, device, read_only)


def test_tensor_is_a_zero_copy_numpy_array() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = _tensor(x)
    assert t.data_ptr == x.ctypes.data and t.shape == (3, 4) and t.dtype == trt.float32 and t.numel() == 12
    assert t.strides == (4, 1) and t.ndim == 2 and t.format == trt.TensorFormat.LINEAR
    view = np.asarray(t)
    view[1, 2] = -1
    assert x[1, 2] == -1 and view.ctypes.data == x.ctypes.data
    ro = np.asarray(_tensor(x, read_only=True))
    with pytest.raises(ValueError, match="read-only"):
        ro[0, 0] = 1
    assert np.from_dlpack(_tensor(x, read_only=True))[1, 2] == -1
    torch = pytest.importorskip("torch")
    assert torch.from_dlpack(t).data_ptr() == x.ctypes.data and t.__dlpack_device__() == (1, 0)
    with pytest.raises(E, match="read-only"):
        t.data_ptr = 0  # type: ignore[misc]


def test_tensor_aliased_views_and_data_dependent_shapes() -> None:
    buffer = np.zeros((8, 2), np.int32)
    desc = trt.PluginTensorDesc(trt.Dims((8, 2)), trt.int32)
    t = trtp.Tensor._make(desc, buffer.ctypes.data, 0, "cpu", False, data_dependent=[0])
    assert t.is_data_dependent and t.shape == (-1, 2)
    with pytest.raises(E, match="data-dependent dimension"):
        t.numel()
    with pytest.raises(E, match="data-dependent shape"):
        np.asarray(t)
    part = t.aliased((3, 2))
    np.asarray(part)[...] = 5
    assert part.get_aliased() is t and part.is_aliased and buffer[:3].sum() == 30 and buffer[3:].sum() == 0
    with pytest.raises(E, match="has 18 elements but the buffer holds 16"):
        t.aliased((9, 2))
    with pytest.raises(E, match="needs a fully known shape"):
        t.aliased(trtp.Shape((-1, 2)))
    with pytest.raises(E, match="takes a Shape, a tuple of ints"):
        t.aliased("3x2")  # type: ignore[arg-type]


def test_tensor_array_protocol_follows_the_device() -> None:
    x = np.zeros((2, 3), np.float16)
    host, device = _tensor(x), _tensor(x, device="cuda")
    assert host.__array_interface__["typestr"] == "<f2" and not hasattr(host, "__cuda_array_interface__")
    cai = device.__cuda_array_interface__
    assert cai["shape"] == (2, 3) and cai["strides"] == (6, 2) and cai["stream"] is None and cai["version"] == 3
    assert not hasattr(device, "__array_interface__")
    with pytest.raises(AttributeError, match="lives in CUDA device memory"):
        _ = device.__array_interface__
    with pytest.raises(AttributeError, match="lives in host memory"):
        _ = host.__cuda_array_interface__


def test_tensor_strides_of_channels_last() -> None:
    x = np.zeros((1, 2, 3, 4), np.float32)  # stored [N, H, W, C]
    desc = trt.PluginTensorDesc(trt.Dims((1, 4, 2, 3)), trt.float32, trt.TensorFormat.HWC)
    t = trtp.Tensor._make(desc, x.ctypes.data, 0, "cpu", False)
    assert t.strides == (24, 1, 12, 4)
    assert np.asarray(t).shape == (1, 4, 2, 3)
    vectorised = trtp.Tensor._make(
        trt.PluginTensorDesc(trt.Dims((1, 4, 2, 3)), trt.float32, trt.TensorFormat.CHW4), x.ctypes.data, 0, "cpu", False
    )
    with pytest.raises(E, match="CHW4 is not a strided layout"):
        np.asarray(vectorised)


# --- autotune combinations --------------------------------------------------------------------
def _types(c: trtp.AutoTuneCombination, n: int) -> list[tuple[str, ...]]:
    return [tuple(t.name for t in combo.types) + tuple(f.name for f in combo.formats) for combo in c._expand(n)]


def test_autotune_combination_linked_and_independent_choices() -> None:
    linked = trtp.AutoTuneCombination("FP32|FP16, FP32|FP16, FP32|FP16", "LINEAR", [1, 2])
    assert _types(linked, 3) == [("FLOAT",) * 3 + ("LINEAR",) * 3, ("HALF",) * 3 + ("LINEAR",) * 3]
    assert linked._expand(3)[0].tactics == (1, 2)
    mixed = trtp.AutoTuneCombination("FP32*FP16, FP32|FP16, FP32|FP16")
    assert len(mixed._expand(3)) == 4
    layouts = trtp.AutoTuneCombination("FP32, FP32", "LINEAR*HWC, LINEAR")
    assert [c.formats[0].name for c in layouts._expand(2)] == ["LINEAR", "HWC"]
    by_pos = trtp.AutoTuneCombination()
    by_pos.pos([0, 1], "FP32|FP16")
    by_pos.pos(2, "INT32")
    by_pos.tactics([3])
    assert _types(by_pos, 3)[1][:3] == ("HALF", "HALF", "INT32") and by_pos._expand(3)[0].tactics == (3,)
    assert _types(trtp.AutoTuneCombination("INT64, BOOL"), 2)[0][:2] == ("INT64", "BOOL")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: trtp.AutoTuneCombination("FP33, FP32"), "unknown type 'FP33'; choose from FP32, FP16, FLOAT"),
        (lambda: trtp.AutoTuneCombination("FP32", "LINEAR_X"), "unknown layout 'LINEAR_X'; choose from LINEAR"),
        (lambda: trtp.AutoTuneCombination("FP32|FP16*INT8"), "mixes '|' and '\\*'"),
        (lambda: trtp.AutoTuneCombination("FP32, FP32", "LINEAR, HWC, LINEAR"), "2 type positions but 3 layout"),
        (lambda: trtp.AutoTuneCombination("FP32,"), "has an empty choice"),
        (lambda: trtp.AutoTuneCombination("FP32", tactics=[0]), "tactics are positive ints"),
        (lambda: trtp.AutoTuneCombination(layouts="LINEAR"), "layouts were given without io_types"),
    ],
)
def test_autotune_combination_misuse(make: object, message: str) -> None:
    with pytest.raises(E, match=message):
        make()  # type: ignore[operator]


def test_autotune_combination_expansion_misuse() -> None:
    with pytest.raises(E, match="describes 2 I/O positions but the plugin has 3"):
        trtp.AutoTuneCombination("FP32, FP32")._expand(3)
    with pytest.raises(E, match="linked positions need the same number of choices"):
        trtp.AutoTuneCombination("FP32|FP16, FP32|FP16|INT8")._expand(2)
    gap = trtp.AutoTuneCombination()
    gap.pos(1, "FP32")
    with pytest.raises(E, match=r"positions \[0\] were given no types"):
        gap._expand(2)
    with pytest.raises(E, match="position 1 already has its types"):
        gap.pos(1, "FP16")
    with pytest.raises(E, match="positions are ints >= 0"):
        gap.pos(-1, "FP16")


def test_kernel_launch_params() -> None:
    params = trtp.KernelLaunchParams(grid_x=trtp.cdiv(sym("x[0]"), 256), block_x=128)
    assert isinstance(params.grid_x, trtp.SymInt32) and params.block_x.constant_value() == 128
    assert params.shared_mem.constant_value() == 0 and params.grid_y.constant_value() == 1
    params.shared_mem = 1024
    assert params.shared_mem.constant_value() == 1024
    with pytest.raises(AttributeError, match="has no field 'grid_w'"):
        params.grid_w = 1
    with pytest.raises(E, match="takes an int or a symbolic integer"):
        params.block_y = 1.5  # type: ignore[assignment]


def test_ndarray_attributes_as_a_generic_type_alias() -> None:
    """From NumPy 2.5 on, ``numpy.typing.NDArray`` is a generic type alias (``type NDArray[T] = ...``)."""
    from typing import Any, TypeVar

    import numpy as np
    import typing_extensions

    from plugrt.plugin._schema import _array_dtype

    scalar = TypeVar("scalar", bound=np.generic)
    alias = typing_extensions.TypeAliasType("NDArray", np.ndarray[Any, np.dtype[scalar]], type_params=(scalar,))
    assert _array_dtype(alias[np.int32]) == np.dtype(np.int32)
    assert _array_dtype(alias[np.float16]) == np.dtype(np.float16)
    assert _array_dtype(list[int]) is None
