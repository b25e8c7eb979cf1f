"""Dimension expressions: build, fold, evaluate and bound symbolic shapes."""

from .builder import DimsExprs, IExprBuilder, constant, operation, symbol
from .expr import DimensionOperation, IDimensionExpr

__all__ = ["DimensionOperation", "DimsExprs", "IDimensionExpr", "IExprBuilder", "constant", "operation", "symbol"]
