"""The checker's Python API: arguments, the report object, and misuse."""

from __future__ import annotations

import json

import numpy as np
import pytest
from broken_plugins import NoHeader, ScaleBias, ScaleBiasCreator

import plugrt as trt
from plugrt.examples import circ_pad_v2
from plugrt.testing import CHECK_IDS, CheckReport, CheckUsageError, InputRange, check_plugin
from plugrt.testing.fields import make_fields, parse_field_text
from plugrt.testing.spec import make_shape_sets, normalize_dtypes, normalize_shapes, tolerance

RANGE = [((1, 4), (2, 4), (8, 4))]


def test_report_lists_every_check_in_order() -> None:
    report = check_plugin(ScaleBiasCreator(), {"scale": 2.0, "bias": 1.0}, RANGE)
    assert isinstance(report, CheckReport)
    assert [r.id for r in report] == list(CHECK_IDS)
    assert report.ok and report.failures == [] and len(report) == len(CHECK_IDS)
    assert report["identity"].passed
    with pytest.raises(KeyError, match="no check 'nope'"):
        report["nope"]


def test_report_json_and_text() -> None:
    report = check_plugin(ScaleBiasCreator(NoHeader), {"scale": 2.0}, RANGE)
    data = json.loads(report.to_json())
    assert data["plugin"] == "CheckNoHeader v1" and data["family"] == "IPluginV2DynamicExt"
    assert data["ok"] is False
    assert data["counts"]["fail"] == 1
    assert data["shape_sets"][0] == "min 1x4"
    failed = [r for r in data["results"] if r["status"] == "fail"]
    assert [r["id"] for r in failed] == ["serialization-rejects-damage"]
    text = str(report)
    assert text.startswith("plugrt check: CheckNoHeader v1 (IPluginV2DynamicExt)")
    assert "  FAIL  serialization-rejects-damage" in text
    assert text.splitlines()[-1].startswith("FAILED: ") and "1 failed" in text


def test_checks_and_skip_select() -> None:
    report = check_plugin(ScaleBiasCreator(), {}, RANGE, checks=["identity", "stream", "guard-bytes"], skip=["stream"])
    assert [r.id for r in report] == ["identity", "guard-bytes"]
    with pytest.raises(CheckUsageError, match="unknown check id"):
        check_plugin(ScaleBiasCreator(), {}, RANGE, checks=["identiy"])


def test_shape_arguments() -> None:
    ranges = normalize_shapes(
        [(2, 3), ((1, 4), (2, 4), (8, 4)), {"min": (1,), "opt": (1,), "max": (3,)}, InputRange((1,), (1,), (1,))]
    )
    assert ranges[0] == InputRange((2, 3), (2, 3), (2, 3))
    assert str(ranges[1]) == "1x4..2x4..8x4"
    assert ranges[2].max == (3,)
    sets = make_shape_sets(ranges[1:2])
    # min+1 is 2x4, the same as opt, so it is not repeated
    assert [(s.label, s.shapes) for s in sets] == [
        ("min", ((1, 4),)),
        ("opt", ((2, 4),)),
        ("max", ((8, 4),)),
        ("max-1", ((7, 4),)),
    ]
    for bad, message in [
        ("1x2", "one entry per input"),
        ([((1, 2), (1,), (1, 2))], "same rank"),
        ([((3,), (2,), (4,))], "min <= opt <= max"),
        ([(1.5, 2)], "must be a shape"),
        ([{"min": (1,)}], "missing"),
    ]:
        with pytest.raises(CheckUsageError, match=message):
            normalize_shapes(bad)  # type: ignore[arg-type]


def test_dtype_arguments_and_tolerances() -> None:
    assert normalize_dtypes(None, 2) == [trt.float32, trt.float32]
    assert normalize_dtypes("fp16", 2) == [trt.float16, trt.float16]
    assert normalize_dtypes(["float32", np.int32], 2) == [trt.float32, trt.int32]
    with pytest.raises(CheckUsageError, match="unknown dtype 'float128'"):
        normalize_dtypes("float128", 1)
    with pytest.raises(CheckUsageError, match="got 3 dtypes for 2 inputs"):
        normalize_dtypes(["float32"] * 3, 2)
    assert tolerance([trt.float32]) == (1e-5, 1e-5)
    assert tolerance([trt.float32, trt.float16]) == (1e-2, 1e-2)
    assert tolerance([trt.int32]) == (0.0, 0.0)


def test_fields_are_typed_by_the_creator() -> None:
    creator = circ_pad_v2.register()
    fields = make_fields(creator, {"pads": "1,2", "note": "text", "alpha": 0.5, "count": 3})
    by_name = {f.name: f for f in fields}
    assert by_name["pads"].type == trt.PluginFieldType.INT32 and by_name["pads"].data.tolist() == [1, 2]
    assert by_name["note"].type == trt.PluginFieldType.CHAR and by_name["note"].as_str() == "text"
    assert by_name["alpha"].type == trt.PluginFieldType.FLOAT32
    assert by_name["count"].type == trt.PluginFieldType.INT32
    assert parse_field_text("x", "0.5,2", trt.PluginFieldType.FLOAT32) == [0.5, 2.0]
    assert parse_field_text("x", "1,2", None) == [1, 2]
    with pytest.raises(CheckUsageError, match=r"cannot read 'a,b' as PluginFieldType\.INT32"):
        make_fields(creator, {"pads": "a,b"})


def test_v2ext_needs_static_dims_apart_from_the_batch() -> None:
    from testing_plugins import ScaleV2ExtCreator

    with pytest.raises(CheckUsageError, match="only dim 0"):
        check_plugin(ScaleV2ExtCreator(), {}, [((1, 2), (1, 3), (1, 4))])


def test_not_a_plugin() -> None:
    with pytest.raises(CheckUsageError, match="is not an IPluginV2"):
        check_plugin(object(), {}, RANGE)


def test_a_creator_that_cannot_create_reports_instead_of_raising() -> None:
    class Refuses(ScaleBias):
        TYPE = "CheckRefuses"

        @classmethod
        def from_fields(cls, fc):
            raise ValueError("scale must be positive")

    report = check_plugin(ScaleBiasCreator(Refuses), {"scale": -1.0}, RANGE)
    assert report.failed_ids == ["fields-roundtrip"]
    assert "create_plugin() raised ValueError: scale must be positive" in report["fields-roundtrip"].message
    assert report["identity"].status == "skip" and "see fields-roundtrip" in report["identity"].message


def test_an_unregistered_plugin_instance_fails_identity() -> None:
    report = check_plugin(ScaleBias(2.0), None, RANGE)
    assert "no registered creator" in report["identity"].message
    assert report["serialization-roundtrip"].status == "skip"
    assert report.failed_ids == ["identity"]


def test_reference_that_raises_is_reported() -> None:
    def reference(x: np.ndarray) -> np.ndarray:
        raise ZeroDivisionError("oops")

    report = check_plugin(ScaleBiasCreator(), {}, RANGE, reference=reference, checks=["reference"])
    assert "the reference function raised ZeroDivisionError: oops" in report["reference"].message


def test_explicit_tolerances() -> None:
    def off(x: np.ndarray) -> np.ndarray:
        return x * np.float32(2.0) + np.float32(1e-3)

    strict = check_plugin(ScaleBiasCreator(), {"scale": 2.0}, RANGE, reference=off, checks=["reference"])
    loose = check_plugin(ScaleBiasCreator(), {"scale": 2.0}, RANGE, reference=off, checks=["reference"], atol=1e-2)
    assert strict.failed_ids == ["reference"] and loose.ok


def test_a_creator_returning_a_non_plugin_is_reported() -> None:
    class Confused(ScaleBiasCreator):
        def create_plugin(self, name, fc):
            return "not a plugin"

    report = check_plugin(Confused(), {}, RANGE)
    assert report.failed_ids == ["fields-roundtrip"]
    assert "create_plugin() returned str; expected an IPluginV2" in report["fields-roundtrip"].message
