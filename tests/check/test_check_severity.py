"""Checks have a severity: a missing length check fails, a missing magic number only warns, and only
failures make a report (and ``plugrt check``) fail."""

from __future__ import annotations

import json
import struct

from broken_plugins import NoHeader, ScaleBias, ScaleBiasCreator

from plugrt.testing import check_plugin

RANGE = [((1, 4), (2, 4), (8, 4))]


class NoMagic(ScaleBias):
    """Raw struct packing with a length check, as TensorRT's own BatchedNMS serializes: no magic number."""

    TYPE = "CheckNoMagic"

    def serialize(self):
        return struct.pack("<ff", self.scale, self.bias)

    @classmethod
    def from_bytes(cls, data):
        if len(data) != 8:
            raise ValueError(f"NoMagic: payload of {len(data)} bytes, expected 8")
        scale, bias = struct.unpack("<ff", data)
        return cls(scale, bias)


def test_a_payload_without_a_magic_number_warns_and_the_report_stays_ok() -> None:
    report = check_plugin(ScaleBiasCreator(NoMagic), {"scale": 2.0}, RANGE, checks=["serialization-rejects-damage"])
    result = report["serialization-rejects-damage"]
    assert result.status == "warn"
    assert "no magic number" in result.message and "BatchedNMS" in result.message
    assert report.ok and report.warnings == [result]
    data = json.loads(report.to_json())
    assert data["ok"] is True and data["counts"]["warn"] == 1 and data["counts"]["fail"] == 0
    text = str(report)
    assert "  WARN  serialization-rejects-damage" in text and text.splitlines()[-1].startswith("OK: ")
    assert "1 warned" in text


def test_a_payload_without_a_length_check_fails() -> None:
    report = check_plugin(ScaleBiasCreator(NoHeader), {"scale": 2.0}, RANGE, checks=["serialization-rejects-damage"])
    result = report["serialization-rejects-damage"]
    assert result.status == "fail" and not report.ok
    assert "truncated or extended payload must raise" in result.message and "with 1 extra byte" in result.message


def test_a_missing_required_field_is_a_usage_error(capsys) -> None:
    import pytest

    import plugrt as trt
    from plugrt.cli.main import main
    from plugrt.plugins import init_libnvinfer_plugins
    from plugrt.testing import CheckUsageError

    init_libnvinfer_plugins(None, "")
    creator = trt.get_plugin_registry().get_creator("BatchedNMS_TRT", "1", "")
    shapes = [((1, 9, 1, 4), (2, 9, 1, 4), (4, 9, 1, 4)), ((1, 9, 4), (2, 9, 4), (4, 9, 4))]
    with pytest.raises(CheckUsageError, match=r"given fields do not create the plugin: .*'shareLocation'.* is missing"):
        check_plugin(creator, {}, shapes)
    assert main(["check", "builtin", "--plugin", "BatchedNMS_TRT", "--shapes", "boxes:1x9x1x4",
                 "--shapes", "scores:1x9x4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'shareLocation'" in err[0] and err[0].startswith("plugrt check: error: ")
