"""``storage_cast``: a cast to a narrow storage type (BF16, the FP8 and FP4 families, INT4/UINT4, INT2/UINT2).

plugrt computes in FLOAT, INT8 or UINT8 where a model stores these narrow
types (as it computes DOUBLE in FLOAT); a cast *to* one of them must still give
exactly the values that type can hold. This operator converts its input to the
narrow type and back: the output type is the wide one, its values those of the
narrow type (round to nearest even; FP8 casts saturate to the largest finite
value when ``saturate`` is set, as ONNX's Cast does by default).

Conversions go through ``ml_dtypes`` (the NumPy types ONNX itself uses for
these tensors), on the host: a GPU array is copied there and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import NetworkError
from ..core.types import DataType
from .base import Operator, register_operator
from .elementwise import expect_inputs
from .shared_rules import SameShape

__all__ = ["NARROW_TYPES", "StorageCastOperator", "narrow_numpy_type"]

#: narrow type name (as ml_dtypes spells it) -> the plugrt type holding its values
NARROW_TYPES: dict[str, DataType] = {
    "bfloat16": DataType.FLOAT,
    "float8_e4m3fn": DataType.FLOAT,
    "float8_e4m3fnuz": DataType.FLOAT,
    "float8_e5m2": DataType.FLOAT,
    "float8_e5m2fnuz": DataType.FLOAT,
    "float4_e2m1fn": DataType.FLOAT,
    "int4": DataType.INT8,
    "uint4": DataType.UINT8,
    "int2": DataType.INT8,
    "uint2": DataType.UINT8,
}


def narrow_numpy_type(name: str) -> np.dtype:
    """The NumPy dtype (from ``ml_dtypes``) of narrow type ``name``."""
    import ml_dtypes

    if name not in NARROW_TYPES:
        raise NetworkError(f"unknown narrow storage type {name!r}; known: {sorted(NARROW_TYPES)}")
    return np.dtype(getattr(ml_dtypes, name))


def round_to_narrow(values: np.ndarray, name: str, saturate: bool) -> np.ndarray:
    """``values`` (NumPy) as the values narrow type ``name`` holds, in that type."""
    narrow = narrow_numpy_type(name)
    if name.startswith("float8") and saturate and values.dtype.kind == "f":
        import ml_dtypes

        largest = float(ml_dtypes.finfo(narrow).max)
        values = np.clip(values.astype(np.float32), -largest, largest)  # infinities too; NaN stays NaN
    with np.errstate(all="ignore"):
        return values.astype(narrow)


@register_operator
class StorageCastOperator(SameShape, Operator):
    """Params: ``narrow`` (a :data:`NARROW_TYPES` name) and ``saturate`` (FP8 only)."""

    kind = "storage_cast"

    def output_types(self, input_types: Sequence[DataType]) -> list[DataType]:
        expect_inputs(self, len(input_types), 1)
        name = self.param("narrow")
        if name not in NARROW_TYPES:
            raise NetworkError(
                f"storage_cast {self.name!r}: unknown narrow type {name!r}; known: {sorted(NARROW_TYPES)}"
            )
        return [NARROW_TYPES[name]]

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], xp: Any = np) -> None:
        values = inputs[0] if xp is np else xp.asnumpy(inputs[0])
        narrow = round_to_narrow(np.asarray(values), self.param("narrow"), bool(self.params.get("saturate", True)))
        wide = narrow.astype(outputs[0].dtype)
        outputs[0][...] = wide if xp is np else xp.asarray(wide)
