"""``check_plugin``: run every conformance check on one plugin and report.

>>> import plugrt as trt
>>> from plugrt.examples import circ_pad_v2
>>> from plugrt.testing import check_plugin
>>> report = check_plugin(circ_pad_v2.register(), {"pads": [1, 2]}, [((1, 3), (2, 3), (4, 5))])
>>> report.ok
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..core.errors import FieldError, PluginDefinitionError
from ..interfaces.creator import IPluginCreatorInterface, interface_family
from ..interfaces.fields import PluginFieldCollection
from .checks import CHECK_IDS, CHECKS
from .context import CheckContext, InputMaker
from .fields import make_fields
from .hooks import HookError, hint_for
from .report import (
    FAIL,
    INFO,
    PASS,
    SKIP,
    WARN,
    CheckFailedError,
    CheckInfoError,
    CheckReport,
    CheckResult,
    CheckSkippedError,
    CheckWarningError,
)
from .spec import CheckUsageError, normalize_dtypes, normalize_shapes

__all__ = ["check_plugin"]


def _select(checks: Iterable[str] | None, skip: Iterable[str]) -> list[str]:
    chosen = list(CHECK_IDS) if checks is None else list(checks)
    unknown = [c for c in [*chosen, *skip] if c not in CHECKS]
    if unknown:
        raise CheckUsageError(f"unknown check id(s) {unknown}; known: {', '.join(CHECK_IDS)}")
    return [c for c in CHECK_IDS if c in chosen and c not in set(skip)]


def _label(identity: Sequence[Any]) -> str:
    name, version, namespace = (str(v) for v in identity)
    return f"{name} v{version}" + (f" (namespace {namespace!r})" if namespace else "")


def _family(ctx: CheckContext) -> str:
    return interface_family(ctx.first)


def _unbuildable(source: Any, selected: list[str], exc: HookError) -> CheckReport:
    """The report when not even one plugin could be created."""
    if isinstance(source, IPluginCreatorInterface):
        label = _label((source.name, source.plugin_version, source.plugin_namespace))
        family = interface_family(source)
    else:
        label, family = type(source).__name__, "unknown"
    hint = hint_for(exc.hook)
    results = []
    for check_id in selected:
        if check_id == exc.owner:
            results.append(CheckResult(check_id, FAIL, f"{exc}. {hint}" if hint else str(exc)))
        else:
            results.append(CheckResult(check_id, SKIP, f"no plugin could be created; see {exc.owner}"))
    if exc.owner not in selected:
        results.insert(0, CheckResult(exc.owner, FAIL, str(exc)))
    return CheckReport(label, family, results)


def run_check(ctx: CheckContext, check_id: str) -> CheckResult:
    """One check's result; an exception escaping a check is that check's failure."""
    try:
        return CheckResult(check_id, PASS, CHECKS[check_id](ctx))
    except CheckFailedError as exc:
        return CheckResult(check_id, FAIL, str(exc))
    except CheckWarningError as exc:
        return CheckResult(check_id, WARN, str(exc))
    except CheckInfoError as exc:
        return CheckResult(check_id, INFO, str(exc))
    except CheckSkippedError as exc:
        return CheckResult(check_id, SKIP, str(exc))
    except CheckUsageError:
        raise
    except HookError as exc:
        hint = hint_for(exc.hook)
        return CheckResult(check_id, FAIL, f"{exc}. {hint}" if hint else str(exc))
    except Exception as exc:
        return CheckResult(check_id, FAIL, f"the check stopped on {type(exc).__name__}: {exc}")


def _quick_plugin(plugin_id: str, fields: Any, inputs: list[Any]) -> Any:
    """The decorator-API plugin ``plugin_id`` made from ``fields`` for inputs of these (rank, type)."""
    from ..plugin._lib import definition_of, plugin_for_check

    try:
        typed = make_fields(definition_of(plugin_id, "check_plugin").ensure_creator(), fields)
        return plugin_for_check(plugin_id, typed, inputs)
    except PluginDefinitionError as exc:
        raise CheckUsageError(str(exc)) from exc


def check_plugin(
    creator_or_plugin: Any,
    fields: Mapping[str, Any] | PluginFieldCollection | None = None,
    input_shapes: Sequence[Any] = (),
    *,
    dtypes: Any = None,
    reference: Callable[..., Any] | None = None,
    make_inputs: InputMaker | None = None,
    checks: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    name: str = "check",
) -> CheckReport:
    """Check a plugin (or the plugins a creator makes) against TensorRT's plugin contract.

    ``creator_or_plugin``: an ``IPluginCreator``/``IPluginCreatorV3One`` (plugins are
    created from ``fields``), a plugin instance (copies are made with ``clone``; its
    creator is looked up in the registry) or a decorator-API plugin id ``"ns::name"``. ``fields``: ``{name: value}`` typed by the
    creator's ``field_names`` (text is parsed: ``"1,2"``), or a PluginFieldCollection.
    ``input_shapes``: one entry per input, a shape or a ``(min, opt, max)`` triple; for
    IPluginV2/V2Ext, dim 0 is the implicit batch. ``dtypes``: one DataType (or name)
    for all inputs or one per input (default FLOAT). ``reference``: optional function
    of the input arrays returning the expected output(s); compared with a tolerance
    from the output types (FP32 1e-5, FP16 1e-2) unless ``rtol``/``atol`` are given.
    ``make_inputs(shapes, dtypes, rng)``: optional input generator (default: normal
    floats, small integers). ``checks``/``skip``: run only / leave out these ids.

    Returns a :class:`CheckReport` with one result per check. Raises
    :class:`CheckUsageError` for bad arguments.
    """
    selected = _select(checks, skip)
    ranges = normalize_shapes(input_shapes)
    types = normalize_dtypes(dtypes, len(ranges))
    if isinstance(creator_or_plugin, str):  # a decorator-API plugin id, "namespace::name"
        creator_or_plugin = _quick_plugin(creator_or_plugin, fields, [(len(r.min), t) for r, t in zip(ranges, types)])
    try:
        ctx = CheckContext(
            creator_or_plugin,
            fields,
            ranges,
            types,
            reference=reference,
            make_inputs=make_inputs,
            seed=seed,
            rtol=rtol,
            atol=atol,
            name=name,
        )
        identity = ctx.driver.raw_identity(ctx.first)
    except HookError as exc:
        if exc.hook == "create_plugin" and isinstance(exc.__cause__, FieldError):
            # the fields the caller gave do not make a plugin: a usage error, not the plugin's fault
            raise CheckUsageError(f"the given fields do not create the plugin: {exc.__cause__}") from exc
        return _unbuildable(creator_or_plugin, selected, exc)
    report = CheckReport(_label(identity), _family(ctx), shape_sets=[str(s) for s in ctx.shape_sets])
    for check_id in selected:
        report.results.append(run_check(ctx, check_id))
    return report
