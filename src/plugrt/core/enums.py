"""The base of plugrt's enums: integer values as TensorRT's, printed as ``Name.MEMBER``."""

from __future__ import annotations

import enum

__all__ = ["TrtEnum"]


class TrtEnum(enum.IntEnum):
    """An IntEnum that prints as ``DataType.FLOAT`` (as TensorRT's enums do), not as a number."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"
