"""Parser errors as TensorRT reports them: ``ErrorCode`` and ``ParserError``."""

from __future__ import annotations

from ..core.enums import TrtEnum

__all__ = ["ErrorCode", "ParserError"]


class ErrorCode(TrtEnum):
    """Kind of a parser error (TensorRT's ``nvonnxparser::ErrorCode`` values)."""

    SUCCESS = 0
    INTERNAL_ERROR = 1
    MEM_ALLOC_FAILED = 2
    MODEL_DESERIALIZE_FAILED = 3
    INVALID_VALUE = 4
    INVALID_GRAPH = 5
    INVALID_NODE = 6
    UNSUPPORTED_GRAPH = 7
    UNSUPPORTED_NODE = 8
    UNSUPPORTED_NODE_ATTR = 9
    UNSUPPORTED_NODE_INPUT = 10
    UNSUPPORTED_NODE_DATATYPE = 11
    UNSUPPORTED_NODE_DYNAMIC = 12
    UNSUPPORTED_NODE_SHAPE = 13
    REFIT_FAILED = 14


class ParserError:
    """One error of :class:`~plugrt.OnnxParser` (TensorRT's ``IParserError``).

    ``node()`` is the node's index in the graph (-1 when the error is not about
    a node); ``str(error)`` names the node, its op type, the code and the reason.
    """

    def __init__(
        self,
        code: ErrorCode,
        desc: str,
        node: int = -1,
        node_name: str = "",
        node_operator: str = "",
        func: str = "",
    ) -> None:
        self._code = ErrorCode(code)
        self._desc = desc
        self._node = int(node)
        self._node_name = node_name
        self._node_operator = node_operator
        self._func = func

    def code(self) -> ErrorCode:
        """The :class:`ErrorCode`."""
        return self._code

    def desc(self) -> str:
        """What went wrong."""
        return self._desc

    def node(self) -> int:
        """Index of the node in the graph (-1: not about one node)."""
        return self._node

    def node_name(self) -> str:
        """The node's name ('' when unnamed or not about a node)."""
        return self._node_name

    def node_operator(self) -> str:
        """The node's op type ('' when not about a node)."""
        return self._node_operator

    def file(self) -> str:
        """Source file of the error (always '' in plugrt)."""
        return ""

    def func(self) -> str:
        """Where in the parser the error arose (e.g. ``importNode``)."""
        return self._func

    def line(self) -> int:
        """Source line of the error (always -1 in plugrt)."""
        return -1

    def local_function_stack(self) -> list[str]:
        """Local functions the node sits in (always empty: plugrt imports no local functions)."""
        return []

    def local_function_stack_size(self) -> int:
        """Length of :meth:`local_function_stack`."""
        return 0

    def __str__(self) -> str:
        where = ""
        if self._node >= 0:
            where = f"In node {self._node} with name: {self._node_name!r} and operator: {self._node_operator}"
            where += f" ({self._func}): " if self._func else ": "
        return f"{where}{self._code.name}: {self._desc}"

    def __repr__(self) -> str:
        return f"ParserError({self})"
