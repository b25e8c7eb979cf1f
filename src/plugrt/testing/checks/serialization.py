"""Checks on the serialized form: ``serialization-size``, ``serialization-roundtrip``,
``serialization-rejects-damage``.

IPluginV2 plugins serialize bytes (``serialization_size`` + ``serialize``, read
back by the creator's ``deserialize_plugin``); IPluginV3 plugins serialize fields
(``get_fields_to_serialize``, read back by ``create_plugin(..., RUNTIME)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..context import CheckContext, compare_outputs
from ..hooks import HookError, call
from ..report import CheckFailedError, CheckSkippedError, CheckWarningError
from ..state import describe_change, snapshot

__all__ = ["check_serialization_rejects_damage", "check_serialization_roundtrip", "check_serialization_size"]


@contextmanager
def _built(ctx: CheckContext) -> Iterator[list[tuple[str, Any]]]:
    """A fresh plugin, and a configured, initialized build instance when the plugin can be configured."""
    plugins = [("a fresh plugin", ctx.fresh())]
    try:
        session = ctx.session()
    except HookError:
        yield plugins
        return
    plugins.append(("the configured, initialized build instance", session.engine))
    try:
        yield plugins
    finally:
        session.close()


def check_serialization_size(ctx: CheckContext) -> str:
    """serialization_size equals len(serialize()); serialize is repeatable and changes nothing."""
    driver = ctx.driver
    if not driver.serializes_bytes:
        raise CheckSkippedError(
            "IPluginV3 serializes fields (get_fields_to_serialize); there is no byte count to declare"
        )
    found: dict[str, list[str]] = {}  # problem -> the plugins showing it
    sizes: list[int] = []
    with _built(ctx) as plugins:
        for label, plugin in plugins:
            for problem in _size_problems(ctx, plugin, sizes):
                found.setdefault(problem, []).append(label)
    if found:
        raise CheckFailedError("; ".join(f"{' and '.join(labels)}: {problem}" for problem, labels in found.items()))
    return f"serialization_size matches the {' and '.join(map(str, sorted(set(sizes))))} byte(s) serialize() writes"


def _size_problems(ctx: CheckContext, plugin: Any, sizes: list[int]) -> list[str]:
    driver = ctx.driver
    problems = []
    declared = driver.declared_size(plugin)
    before = snapshot(plugin)
    data = driver.payload(plugin)
    again = driver.payload(plugin)
    sizes.append(len(data))
    if declared != len(data):
        problems.append(
            f"serialization_size says {declared} bytes but serialize() wrote {len(data)}; TensorRT "
            "allocates serialization_size bytes and serialize() writes into them, so one byte off corrupts the "
            "plan or the heap. Fix: compute the size from the same fields serialize() writes (or drop the "
            "override: the default is len(self.serialize()))"
        )
    if data != again:
        problems.append("serialize() returned different bytes on two calls")
    change = describe_change(plugin, before, snapshot(plugin))
    if change:
        problems.append(f"serialize() changed {change}; it must only read the plugin")
    return problems


def check_serialization_roundtrip(ctx: CheckContext) -> str:
    """The plugin recreated from its serialized form has the same identity, state and outputs."""
    if ctx.creator is None:
        raise CheckSkippedError("no creator to deserialize with")
    baseline = ctx.require_baseline("serialization-roundtrip")
    ctx.require_deterministic()
    driver = ctx.driver
    how = (
        "deserialize_plugin" if driver.serializes_bytes else "create_plugin(..., RUNTIME) from get_fields_to_serialize"
    )
    try:
        session = ctx.session(via_payload=True)
    except HookError as exc:
        if exc.hook in ("serialize", "get_serialization_size"):
            ctx.blame("serialization-roundtrip", exc)
        raise CheckFailedError(f"recreating the plugin through {how} failed: {exc}") from None
    problems = []
    with session:
        original = driver.raw_identity(session.network)
        revived = driver.raw_identity(session.engine)
        if revived != original:
            problems.append(f"the recreated plugin's identity is {revived}, not {original}")
        again = driver.payload(session.engine)
        if again != session.payload:
            problems.append(
                "the recreated plugin serializes differently from the original "
                f"({len(again)} bytes vs {len(session.payload or b'')}): some state is not restored"
            )
    for base in baseline.values():
        try:
            with ctx.session(via_payload=True) as session:  # fresh per shape set: reconfiguring is another check
                run = session.run(base.shape_set.shapes, base.inputs)
        except HookError as exc:
            problems.append(f"at {base.shape_set}: the recreated plugin failed: {exc}")
            break
        difference = compare_outputs(base.first.outputs, run.outputs)
        if difference:
            problems.append(f"at {base.shape_set}: the recreated plugin's {difference}")
    if problems:
        fix = (
            "write every field that enqueue needs in serialize() and read all of them back in deserialize_plugin"
            if driver.serializes_bytes
            else "return every field enqueue needs from get_fields_to_serialize and read them in create_plugin"
        )
        raise CheckFailedError("; ".join(problems[:4]) + f". The engine's plugin comes from {how}. Fix: {fix}")
    return f"the plugin recreated through {how} gives identical outputs"


def _truncations(size: int) -> list[int]:
    if size <= 64:
        return list(range(size))
    points = set(range(9)) | {size // 4, size // 2, 3 * size // 4} | set(range(size - 8, size))
    return sorted(p for p in points if 0 <= p < size)


def _flips(size: int) -> list[int]:
    return list(range(size)) if size <= 64 else sorted({i * size // 64 for i in range(64)})


def _deserialize(ctx: CheckContext, data: bytes) -> str:
    """'rejected', 'accepted', or what went badly wrong."""
    try:
        plugin = call(ctx.creator, "deserialize_plugin", ctx.name, data)
    except HookError as exc:
        cause = exc.__cause__
        if isinstance(cause, (MemoryError, RecursionError)):
            return f"crashed with {type(cause).__name__}"
        return "rejected"
    if plugin is None:
        return "returned None"
    try:
        ctx.driver.destroy(plugin)
    except HookError:
        pass
    return "accepted"


def check_serialization_rejects_damage(ctx: CheckContext) -> str:
    """Truncated, extended or re-headed payloads raise; corrupted bytes never crash."""
    if not ctx.driver.serializes_bytes:
        raise CheckSkippedError(
            "an IPluginV3 payload is its fields, which plugrt encodes and checksums itself; damage is caught "
            "before the creator sees it"
        )
    if ctx.creator is None:
        raise CheckSkippedError("no creator to deserialize with")
    with _built(ctx) as plugins:
        label, plugin = plugins[-1]
        try:
            payload = ctx.driver.payload(plugin)
        except HookError as exc:
            ctx.blame("serialization-rejects-damage", exc)
            raise
    if not payload:
        raise CheckSkippedError("serialize() writes no bytes: there is nothing to damage")
    must_reject = [(f"truncated to {n} of {len(payload)} bytes", payload[:n]) for n in _truncations(len(payload))]
    must_reject += [
        ("with 1 extra byte", payload + b"\x00"),
        ("with 4 extra bytes", payload + b"\xde\xad\xbe\xef"),
    ]
    header = ("with its first 4 bytes inverted", bytes(b ^ 0xFF for b in payload[:4]) + payload[4:])
    accepted, crashes = [], []
    for what, data in [*must_reject, header]:
        outcome = _deserialize(ctx, data)
        if outcome == "accepted":
            accepted.append(what)
        elif outcome != "rejected":
            crashes.append(f"{what}: {outcome}")
    no_magic = header[0] in accepted
    accepted = [what for what in accepted if what != header[0]]
    for position in _flips(len(payload)):
        data = payload[:position] + bytes([payload[position] ^ 0xFF]) + payload[position + 1 :]
        outcome = _deserialize(ctx, data)
        if outcome not in ("accepted", "rejected"):
            crashes.append(f"byte {position} inverted: {outcome}")
    problems = []
    if accepted:
        shown = ", ".join(accepted[:3]) + (f" and {len(accepted) - 3} more" if len(accepted) > 3 else "")
        problems.append(
            f"deserialize_plugin accepted the payload {shown}; a truncated or extended payload must raise, not "
            "build a plugin from garbage. Fix: check the length, e.g. read with trt.SerializationReader(data) and "
            "end with reader.finish()"
        )
    if crashes:
        problems.append("deserialize_plugin crashed on damaged bytes: " + "; ".join(crashes[:3]))
    if problems:
        raise CheckFailedError("; ".join(problems))
    tried = len(must_reject) + 1 + len(_flips(len(payload)))
    if no_magic:
        raise CheckWarningError(
            f"deserialize_plugin accepted the {len(payload)}-byte payload ({label}) with its first 4 bytes inverted: "
            "it starts with no magic number, so a foreign payload of the right length is read as this plugin's "
            "(TensorRT's own BatchedNMS does the same; lengths are checked). To catch it: "
            "trt.SerializationReader(data, magic=..., version=...)"
        )
    return f"{tried} damaged copies of the {len(payload)}-byte payload ({label}) rejected or read safely"
