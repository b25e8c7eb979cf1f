"""Dimension expressions in a plan file: a shared table (a DAG), read back with depth and size bounds."""

from __future__ import annotations

from typing import Any

from ..core.errors import PlanFormatError
from ..shape.builder import constant, operation, symbol
from ..shape.expr import DimensionOperation, IDimensionExpr

__all__ = ["MAX_EXPR_DEPTH", "MAX_EXPR_NODES", "ExprTable", "decode_expr", "decode_expr_table", "encode_expr"]

#: deepest dimension expression a plan may hold (a hostile plan cannot make evaluation or comparison explode)
MAX_EXPR_DEPTH = 512
#: entries of a plan's shared table of dimension expressions
MAX_EXPR_NODES = 1_000_000


class ExprTable:
    """Dimension expressions as a DAG: one table entry per distinct node, operands as references.

    An entry is ``["sym", name]``, ``["size", name, opt, upper]`` or ``[OP, a, b]``; an
    operand is an int (a constant) or ``["ref", k]`` for entry ``k`` (always an earlier
    one, so the table is acyclic). Shared sub-expressions are written once, so a plan's
    size grows with the number of distinct nodes, not with the expanded trees.
    """

    def __init__(self) -> None:
        self.entries: list[Any] = []
        self._index: dict[IDimensionExpr, int] = {}

    def encode(self, expr: IDimensionExpr) -> Any:
        """``expr`` as an int or a reference into the table (adding its nodes)."""
        for node in expr.nodes():
            if node.is_constant() or node in self._index:
                continue
            if node.is_size_tensor():
                opt, upper = node.size_bounds
                entry: Any = ["size", node.symbol, self._operand(opt), self._operand(upper)]
            elif node.symbol:
                entry = ["sym", node.symbol]
            else:
                assert node._op is not None
                entry = [node._op.name, *(self._operand(arg) for arg in node._args)]
            self._index[node] = len(self.entries)
            self.entries.append(entry)
        return self._operand(expr)

    def _operand(self, expr: IDimensionExpr) -> Any:
        return expr.get_constant_value() if expr.is_constant() else ["ref", self._index[expr]]


def decode_expr_table(entries: Any) -> list[IDimensionExpr]:
    """The nodes of a plan's expression table, each rebuilt (and simplified) from earlier ones."""
    if not isinstance(entries, list):
        raise PlanFormatError("plan dimension table must be a list")
    if len(entries) > MAX_EXPR_NODES:
        raise PlanFormatError(f"plan dimension table has {len(entries)} entries, more than {MAX_EXPR_NODES}")
    nodes: list[IDimensionExpr] = []
    for entry in entries:
        if not (isinstance(entry, list) and entry and entry[0] != "ref"):
            raise PlanFormatError(f"plan holds a malformed dimension table entry: {str(entry)[:80]}")
        node = decode_expr(entry, table=nodes)
        if node.depth > MAX_EXPR_DEPTH:
            raise PlanFormatError(f"plan holds a dimension expression nested deeper than {MAX_EXPR_DEPTH} levels")
        nodes.append(node)
    return nodes


def decode_expr(value: Any, depth: int = 0, table: list[IDimensionExpr] | None = None) -> IDimensionExpr:
    """A dimension from a plan: an int, ``["ref", k]`` into ``table``, or a small inline expression.

    Inline expressions (what plans before the shared table held) nest at most 64 levels.
    """
    if depth > 64:
        raise PlanFormatError("plan holds a dimension expression nested deeper than 64 levels")
    if isinstance(value, int) and not isinstance(value, bool):
        return constant(value)
    if isinstance(value, list) and value and isinstance(value[0], str):
        tag = value[0]
        if tag == "ref" and len(value) == 2:
            k = value[1]
            if table is None or not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(table):
                raise PlanFormatError(f"plan holds a dimension reference {str(value)[:80]} outside its table")
            return table[k]
        if tag == "sym" and len(value) == 2 and isinstance(value[1], str):
            return symbol(value[1])
        if tag == "size" and len(value) == 4 and isinstance(value[1], str):
            opt, upper = (decode_expr(v, depth + 1, table) for v in value[2:])
            return IDimensionExpr("size", name=value[1], args=(opt, upper))
        if tag in DimensionOperation.__members__ and len(value) == 3:
            a, b = (decode_expr(v, depth + 1, table) for v in value[1:])
            return operation(DimensionOperation[tag], a, b)
    raise PlanFormatError(f"plan holds a malformed dimension expression: {str(value)[:80]}")


def encode_expr(expr: IDimensionExpr) -> Any:
    """A dimension expression as nested JSON lists (one expression alone; plans use :class:`ExprTable`)."""
    table = ExprTable()
    top = table.encode(expr)
    if isinstance(top, int):
        return top
    nested: list[Any] = []
    for entry in table.entries:
        nested.append([nested[x[1]] if isinstance(x, list) and x[:1] == ["ref"] else x for x in entry])
    return nested[top[1]]
