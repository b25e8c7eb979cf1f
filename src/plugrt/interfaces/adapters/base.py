"""What every plugin adapter shares: ports, descriptors and format negotiation.

An adapter drives one plugin family through TensorRT's call order. The builder
and the executor talk only to adapters, never to plugins directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...core.errors import FormatNegotiationError, MissingHookError, TypeMismatchError
from ...core.layouts import SUPPORTED_FORMATS, format_min_rank
from ...core.types import DataType
from ...nodes.ports import BuildRequest, IOChoice, Port
from ..recorder import Phase, PluginCaller

__all__ = [
    "CANDIDATE_TYPES",
    "BuildRequest",
    "IOChoice",
    "Port",
    "candidate_list",
    "check_status",
    "format_answer",
    "negotiate_combination",
    "plugin_label",
]

#: Types plugrt offers plugins during format negotiation (those NumPy can hold).
CANDIDATE_TYPES: tuple[DataType, ...] = (
    DataType.FLOAT,
    DataType.HALF,
    DataType.INT32,
    DataType.INT64,
    DataType.INT8,
    DataType.UINT8,
    DataType.BOOL,
)


def plugin_label(name: str, version: str, namespace: str) -> str:
    """'Name v1' or 'Name v1 (namespace 'ns')' for messages."""
    return f"{name} v{version}" + (f" (namespace {namespace!r})" if namespace else "")


def check_status(caller: PluginCaller, method: str, status: Any, phase: str = Phase.BUILD) -> None:
    """Raise when a hook that returns a status returned failure.

    TensorRT's convention: None, True, 0 and False (the binding's 0) are success.
    """
    if status is None or status is True:
        return
    if isinstance(status, (int, np.integer, np.bool_)) and status == 0:  # False is TensorRT's 0: success
        return
    shown = f"a {type(status).__name__}" if not isinstance(status, (int, np.integer, np.bool_, str)) else repr(status)
    raise caller.fail(method, f" returned {shown}; 0 or None means success", phase=phase)


def candidate_list(preferred: IOChoice | None, rank: int, fp16: bool) -> list[IOChoice]:
    """Type/format candidates for one position, most preferred first."""
    formats = [f for f in SUPPORTED_FORMATS if rank >= format_min_rank(f)]
    types = list(CANDIDATE_TYPES)
    if fp16:
        types.remove(DataType.HALF)
        types.insert(0, DataType.HALF)
    ordered: list[IOChoice] = []
    if fp16 and preferred is not None and preferred[0] == DataType.FLOAT:
        ordered.append((DataType.HALF, preferred[1]))
    if preferred is not None:
        ordered.append(preferred)
    for fmt in formats:
        for dtype in types:
            if (dtype, fmt) not in ordered:
                ordered.append((dtype, fmt))
    return ordered


def negotiate_combination(
    ask: Callable[[int, list[Any], int], bool],
    candidates: Sequence[Sequence[IOChoice]],
    make_desc: Callable[[int, IOChoice], Any],
    num_inputs: int,
    caller: PluginCaller,
    limit: int = 20000,
) -> list[IOChoice]:
    """Choose one (type, format) per position, asking position by position.

    Inputs come before outputs; the question for position ``p`` shows the
    choices made for positions ``< p``; later positions hold a placeholder the
    plugin must not read. Backtracks when a later position rejects everything.
    ``ask`` gives the plugin's (validated) answer; failures are raised through ``caller``.
    """
    method = "supports_format_combination"
    count = len(candidates)
    descs = [make_desc(pos, cands[0]) for pos, cands in enumerate(candidates)]
    chosen: list[IOChoice] = []
    asked = 0
    deepest = (-1, [])  # type: tuple[int, list[IOChoice]]

    def search(pos: int) -> bool:
        nonlocal asked, deepest
        if pos == count:
            return True
        rejected: list[IOChoice] = []
        for cand in candidates[pos]:
            asked += 1
            if asked > limit:
                raise caller.fail(
                    method,
                    f": format negotiation gave up after {limit} supports_format_combination calls",
                    FormatNegotiationError,
                )
            descs[pos] = make_desc(pos, cand)
            if ask(pos, list(descs), num_inputs):
                chosen.append(cand)
                if search(pos + 1):
                    return True
                chosen.pop()
            else:
                rejected.append(cand)
        if pos >= deepest[0]:
            deepest = (pos, rejected)
        descs[pos] = make_desc(pos, candidates[pos][0])
        return False

    if not search(0):
        pos, rejected = deepest
        role = f"input {pos}" if pos < num_inputs else f"output {pos - num_inputs}"
        tried = ", ".join(f"{t.name}/{f.name}" for t, f in rejected[:12])
        more = f" and {len(rejected) - 12} more" if len(rejected) > 12 else ""
        raise caller.fail(
            method,
            ": supports_format_combination accepts no type/format combination; "
            f"position {pos} ({role}) rejected every candidate tried: {tried}{more}",
            FormatNegotiationError,
        )
    return chosen


def format_answer(caller: PluginCaller, method: str, answer: Any) -> bool:
    """A format hook's answer, which must be a bool (or 0/1)."""
    if not isinstance(answer, (bool, int, np.bool_, np.integer)) or answer not in (0, 1):
        raise caller.fail(method, f": {method} must return a bool, got {answer!r}", TypeMismatchError)
    return bool(answer)


def checked_enqueue(caller: PluginCaller, method: str) -> Callable[..., None]:
    """The inference-path call of ``method`` (enqueue / execute_async): bound once, status checked."""
    hook = caller.bound(Phase.INFERENCE, method)

    def run(*args: Any) -> None:
        status = hook(*args)
        if status is not None and status is not False and not (type(status) is int and status == 0):
            check_status(caller, method, status, Phase.INFERENCE)

    return run


def require_hooks(caller: PluginCaller, hooks: Sequence[str], interface: type, family: str) -> None:
    """Raise :class:`MissingHookError` for the first required hook the class of ``caller``'s plugin lacks.

    The message names the interface class that declares the hook (e.g. ``IPluginV2.clone``)
    and the adapter ``family`` that requires it.
    """
    from ..hooks import missing_hook

    plugin = caller.plugin
    for hook in hooks:
        declared = [
            base for base in type(plugin).__mro__ if base.__module__.startswith("plugrt.interfaces.") and hook in vars(base)
        ]
        implementation = getattr(type(plugin), hook, None)
        if implementation is None or any(implementation is vars(base)[hook] for base in declared):
            try:
                missing_hook(plugin, hook, declared[-1].__name__ if declared else interface.__name__)
            except MissingHookError as exc:
                raise caller.fail(hook, f" ({family}): {exc}", MissingHookError) from None

