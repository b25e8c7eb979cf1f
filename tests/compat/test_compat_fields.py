"""Gap 12: plugin fields reach plugins as one-element (or longer) 1-D arrays, as in TensorRT, on NumPy 1 and 2."""

from __future__ import annotations

import numpy as np
import pytest

import plugrt as trt


@pytest.mark.parametrize(
    ("given", "field_type", "dtype"),
    [
        (np.array(1.5, dtype=np.float32), trt.PluginFieldType.FLOAT32, np.float32),  # 0-d, as the cookbook passes it
        (np.float32(1.5), trt.PluginFieldType.FLOAT32, np.float32),
        (np.array([1.5], dtype=np.float32), trt.PluginFieldType.FLOAT32, np.float32),
        (np.array([4], dtype=np.int32), trt.PluginFieldType.INT32, np.int32),
    ],
)
def test_scalar_fields_are_one_element_arrays(given: object, field_type: trt.PluginFieldType, dtype: type) -> None:
    field = trt.PluginField("value", given, field_type)
    assert isinstance(field.data, np.ndarray) and field.data.shape == (1,) and field.data.dtype == dtype
    assert float(field.data[0]) == float(np.asarray(given).reshape(-1)[0])  # the samples' way: f.data[0]
    assert field.data.item() == field.data[0]


def test_char_fields_decode_as_the_non_zero_sample_does() -> None:
    field = trt.PluginField("backend", b"torch", trt.PluginFieldType.CHAR)
    data = field.data[:-1] if field.data[-1] == 0 else field.data
    assert data.tobytes().decode("utf-8") == "torch"
    collection = trt.PluginFieldCollection([field])
    assert [f.name for f in collection] == ["backend"] and len(collection) == 1


def test_int_of_a_one_element_field_follows_numpy() -> None:
    """``int(f.data)`` (NVIDIA's multi-tactic sample) is NumPy's business: fine on NumPy < 2.4, an error after.

    TensorRT hands the same arrays, so plugrt does not hide it; index the element instead.
    """
    field = trt.PluginField("n", np.array([3], dtype=np.int32), trt.PluginFieldType.INT32)
    major, minor = (int(part) for part in np.__version__.split(".")[:2])
    if (major, minor) >= (2, 4):
        with pytest.raises(TypeError):
            int(field.data)  # type: ignore[call-overload]
    else:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert int(field.data) == 3  # type: ignore[call-overload]
    assert int(field.data[0]) == 3
