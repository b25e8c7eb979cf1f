"""``AutoTuneCombination``: the type/format combinations and tactics an ``autotune`` function offers.

A combination lists, per I/O position (inputs first, then outputs), the types and
formats it accepts, as strings: ``"FP32|FP16, FP32|FP16"`` says both positions are
FP32 together or FP16 together (``|`` links choices across positions: the k-th
choices go together), ``"FP32*FP16, FP32"`` says position 0 is FP32 or FP16
independently of the rest (``*``). Layouts follow the same rules (default LINEAR).

>>> import plugrt.plugin as trtp
>>> c = trtp.AutoTuneCombination("FP32|FP16, FP32|FP16", "LINEAR", [1, 2])
>>> [[t.name for t in types] for types, _, _ in c._expand(2)]
[['FLOAT', 'FLOAT'], ['HALF', 'HALF']]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import NamedTuple

from ..core.errors import PluginDefinitionError
from ..core.types import DataType, TensorFormat

__all__ = ["AutoTuneCombination", "Combination", "parse_type"]

_TYPE_ALIASES = {"FP32": DataType.FLOAT, "FP16": DataType.HALF}


class Combination(NamedTuple):
    """One concrete choice: a type and a format per I/O position, and the tactics offered for it."""

    types: tuple[DataType, ...]
    formats: tuple[TensorFormat, ...]
    tactics: tuple[int, ...]


def parse_type(token: str) -> DataType:
    """``"FP32"``/``"FP16"`` or a ``DataType`` member name."""
    if token in _TYPE_ALIASES:
        return _TYPE_ALIASES[token]
    if token in DataType.__members__:
        return DataType[token]
    choices = ", ".join(["FP32", "FP16", *DataType.__members__])
    raise PluginDefinitionError(f"AutoTuneCombination: unknown type {token!r}; choose from {choices}")


def _parse_format(token: str) -> TensorFormat:
    if token in TensorFormat.__members__:
        return TensorFormat[token]
    raise PluginDefinitionError(
        f"AutoTuneCombination: unknown layout {token!r}; choose from {', '.join(TensorFormat.__members__)}"
    )


class _Entry(NamedTuple):
    options: tuple[str, ...]
    linked: bool  # '|' (True) or '*' / a single choice (False)


def _parse_entry(text: str, what: str) -> _Entry:
    text = text.strip()
    if "|" in text and "*" in text:
        raise PluginDefinitionError(
            f"AutoTuneCombination: {what} {text!r} mixes '|' and '*'; use one separator per position"
        )
    separator = "|" if "|" in text else "*"
    options = tuple(part.strip() for part in text.split(separator))
    if not text or any(not o for o in options):
        raise PluginDefinitionError(f"AutoTuneCombination: {what} {text!r} has an empty choice")
    return _Entry(options, separator == "|" and len(options) > 1)


def _one_side(entries: list[_Entry], what: str) -> list[tuple[str, ...]]:
    """Every choice for one side (types or layouts): linked groups together, independent ones crossed."""
    linked = {len(e.options) for e in entries if e.linked}
    if len(linked) > 1:
        raise PluginDefinitionError(
            f"AutoTuneCombination: the '|' {what} choices differ in length ({sorted(linked)}); "
            "linked positions need the same number of choices"
        )
    groups = linked.pop() if linked else 1
    free = [i for i, e in enumerate(entries) if not e.linked]
    result = []
    for k in range(groups):
        for picks in itertools.product(*(entries[i].options for i in free)):
            row = [e.options[k] if e.linked else "" for e in entries]
            for i, pick in zip(free, picks):
                row[i] = pick
            result.append(tuple(row))
    return result


def _check_tactics(tactics: Iterable[int] | None) -> tuple[int, ...]:
    if tactics is None:
        return ()
    values = tuple(tactics)
    if any(isinstance(t, bool) or not isinstance(t, int) or t <= 0 for t in values):
        raise PluginDefinitionError(f"AutoTuneCombination: tactics are positive ints, got {list(values)!r}")
    return values


class AutoTuneCombination:
    """Type/format combinations a plugin supports, and custom tactics for them."""

    def __init__(
        self, io_types: str | None = None, layouts: str | None = None, tactics: Iterable[int] | None = None
    ) -> None:
        self._types: list[_Entry | None] = []
        self._layouts: list[_Entry | None] = []
        if io_types is not None:
            if not isinstance(io_types, str):
                raise PluginDefinitionError(
                    f"AutoTuneCombination: io_types is a string like 'FP32|FP16, FP32', got {io_types!r}"
                )
            self._types = [_parse_entry(t, "type") for t in io_types.split(",")]
            texts = (layouts or "LINEAR").split(",")
            if len(texts) == 1:
                texts = texts * len(self._types)
            if len(texts) != len(self._types):
                raise PluginDefinitionError(
                    f"AutoTuneCombination: {len(self._types)} type positions but {len(texts)} layout positions; "
                    "give one layout for all or one per position"
                )
            self._layouts = [_parse_entry(t, "layout") for t in texts]
        elif layouts is not None:
            raise PluginDefinitionError("AutoTuneCombination: layouts were given without io_types")
        self._validate_tokens()
        self._tactics = _check_tactics(tactics)

    def _validate_tokens(self) -> None:
        for entry in self._types:
            for token in entry.options if entry else ():
                parse_type(token)
        for entry in self._layouts:
            for token in entry.options if entry else ():
                _parse_format(token)

    def pos(self, pos: int | Iterable[int], io_types: str, layouts: str = "LINEAR") -> None:
        """Set the types and layouts of I/O positions ``pos`` (one index or several)."""
        positions = [pos] if isinstance(pos, int) else list(pos)
        if not positions or any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in positions):
            raise PluginDefinitionError(f"AutoTuneCombination.pos: positions are ints >= 0, got {pos!r}")
        type_entry, layout_entry = _parse_entry(io_types, "type"), _parse_entry(layouts, "layout")
        top = max(positions) + 1
        self._types.extend([None] * (top - len(self._types)))
        self._layouts.extend([None] * (top - len(self._layouts)))
        for p in positions:
            if self._types[p] is not None:
                raise PluginDefinitionError(f"AutoTuneCombination.pos: position {p} already has its types")
            self._types[p], self._layouts[p] = type_entry, layout_entry
        self._validate_tokens()

    def tactics(self, tactics: Iterable[int]) -> None:
        """Custom tactics (positive ints) to time for these combinations."""
        self._tactics = _check_tactics(tactics)

    def _expand(self, num_io: int) -> list[Combination]:
        """Every concrete combination, for a plugin with ``num_io`` inputs and outputs."""
        if len(self._types) != num_io:
            raise PluginDefinitionError(
                f"AutoTuneCombination describes {len(self._types)} I/O positions but the plugin has {num_io} "
                "(inputs, then outputs)"
            )
        missing = [i for i, e in enumerate(self._types) if e is None]
        if missing:
            raise PluginDefinitionError(f"AutoTuneCombination: positions {missing} were given no types (use pos())")
        types = _one_side([e for e in self._types if e is not None], "type")
        layouts = _one_side([e for e in self._layouts if e is not None], "layout")
        return [
            Combination(tuple(parse_type(t) for t in tr), tuple(_parse_format(f) for f in lr), self._tactics)
            for tr in types
            for lr in layouts
        ]

    def __repr__(self) -> str:
        def text(entries: list[_Entry | None]) -> str:
            return ", ".join(("|" if e.linked else "*").join(e.options) if e else "?" for e in entries)

        return f"AutoTuneCombination({text(self._types)!r}, {text(self._layouts)!r}, {list(self._tactics)})"
