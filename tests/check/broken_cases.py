"""The broken plugins the tests walk: per case, the check that must fail and a phrase of its message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from broken_plugins import (
    AssumesFloat,
    CloneDropsBias,
    CountingShapes,
    DeclaresHalf,
    ForgetsBias,
    IgnoresField,
    KeepsChoice,
    ModifiesInput,
    NeverAccepts,
    NoHeader,
    Overrun,
    PeeksAhead,
    ScaleBiasCreator,
    SharedState,
    ShortWrite,
    WrongIdentity,
    WrongSize,
)
from broken_runtime_plugins import (
    CloneFreesShared,
    DefaultStreamOnly,
    DirtyWorkspace,
    Drifting,
    FixedShapeConfigure,
    LeakyInitialize,
    NonZeroOvercountCreator,
    SharedScratch,
    SmallWorkspace,
    StaleShape,
    UndeclaredWorkspace,
    V2ExtForgetsDimsCreator,
    V3AttachesItselfCreator,
    V3DropsFieldsCreator,
    WrongSign,
)

RANGE_3D = [((1, 3, 1), (2, 3, 4), (5, 3, 9))]
SCALE_BIAS = {"scale": 1.5, "bias": 0.25}


@dataclass
class Case:
    """One broken plugin: the check that must fail and a phrase its message must contain."""

    check: str
    creator: Any
    phrase: str
    fields: dict[str, Any] = field(default_factory=lambda: dict(SCALE_BIAS))
    shapes: list[Any] = field(default_factory=lambda: list(RANGE_3D))
    options: dict[str, Any] = field(default_factory=dict)
    #: Other checks the same mistake rightly fails too.
    also: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        name = getattr(self.creator, "name", type(self.creator).__name__)
        return f"{self.check}:{name}"


def _reference(x: np.ndarray) -> np.ndarray:
    return x * np.float32(SCALE_BIAS["scale"]) + np.float32(SCALE_BIAS["bias"])


CASES = [
    Case("identity", ScaleBiasCreator(WrongIdentity), "make plugin_type equal the creator's name"),
    Case("fields-roundtrip", ScaleBiasCreator(IgnoresField), "changing field(s) 'scale'"),
    Case("output-shapes", ScaleBiasCreator(ShortWrite), "unwritten"),
    Case("guard-bytes", ScaleBiasCreator(Overrun), "written after its end"),
    Case("inputs-unmodified", ScaleBiasCreator(ModifiesInput), "enqueue modified its inputs"),
    Case("shape-hooks-pure", ScaleBiasCreator(CountingShapes), "get_output_dimensions changed self.shape_calls"),
    Case(
        "serialization-size", ScaleBiasCreator(WrongSize), "serialization_size says 20 bytes but serialize() wrote 16"
    ),
    Case("serialization-roundtrip", ScaleBiasCreator(ForgetsBias), "the recreated plugin"),
    Case("serialization-rejects-damage", ScaleBiasCreator(NoHeader), "with 1 extra byte"),
    Case("clone-independence", ScaleBiasCreator(SharedState), "changed the original's self.state"),
    Case("clone-independence", ScaleBiasCreator(CloneDropsBias), "clone() does not copy all the state"),
    Case("format-accepts-something", ScaleBiasCreator(NeverAccepts), "rejected every candidate"),
    Case("format-consistency", ScaleBiasCreator(KeepsChoice), "changed self.last_type"),
    Case("format-consistency", ScaleBiasCreator(DeclaresHalf), "declares HALF but supports_format_combination rejects"),
    Case("format-no-lookahead", ScaleBiasCreator(PeeksAhead), "it read in_out[1].type (output 0)"),
    Case("format-accepted-runs", ScaleBiasCreator(AssumesFloat), "it accepts inputs [HALF/LINEAR]"),
    Case("reconfigure", ScaleBiasCreator(StaleShape), "state left from an earlier configuration"),
    Case("reconfigure", ScaleBiasCreator(FixedShapeConfigure), "must not assume fixed shapes"),
    Case("workspace", ScaleBiasCreator(SmallWorkspace), "wrote past the workspace"),
    Case("workspace", ScaleBiasCreator(DirtyWorkspace), "reads workspace bytes it did not write"),
    Case("workspace", ScaleBiasCreator(UndeclaredWorkspace), "get_workspace_size returned 0"),
    Case("initialize-terminate", ScaleBiasCreator(LeakyInitialize), "terminate() left 1 device_malloc buffer(s)"),
    Case("initialize-terminate", ScaleBiasCreator(CloneFreesShared), "destroying a clone released something"),
    Case("concurrency", ScaleBiasCreator(SharedScratch), "shares mutable state between clones"),
    Case("determinism", ScaleBiasCreator(Drifting), "identical inputs gave different outputs"),
    Case("stream", ScaleBiasCreator(DefaultStreamOnly), "with stream handle 0x7f3a1c00"),
    Case("reference", ScaleBiasCreator(WrongSign), "differs", options={"reference": _reference}),
    Case(
        "serialization-roundtrip",
        V2ExtForgetsDimsCreator(),
        "recreated plugin",
        fields={"scale": 2.0},
        shapes=[((1, 2, 3), (2, 2, 3), (6, 2, 3))],
    ),
    Case(
        "serialization-roundtrip",
        V3DropsFieldsCreator(),
        "recreated plugin",
        fields={"pads": [1, 2]},
        also=("fields-roundtrip",),  # a field that never reaches the serialized form is both
    ),
    Case("output-shapes", NonZeroOvercountCreator(), "outside 0..", fields={}, shapes=[((1, 1), (4, 4), (8, 8))]),
    Case(
        "clone-independence",
        V3AttachesItselfCreator(),
        "attach_to_context() returned the plugin itself",
        fields={"pads": [1, 2]},
    ),
]
