"""How many rounds the tactic timing runs (``builder/tactics.py``): small layers go on past 7 rounds, up to 50
or 10 ms, so that the fastest run of a 10-60 us kernel is taken over more samples; slow layers stop at 7, and a
kernel twice as fast as the others ends the timing at 3."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from plugrt.backends.registry import get_backend
from plugrt.builder import tactics
from plugrt.core.types import DataType
from plugrt.engine.plan import LayerPlan


class _Dim:
    def __init__(self, value: int) -> None:
        self.value = value

    def evaluate(self, env: dict[str, int]) -> int:
        return self.value


class _Op:
    """An operator whose kernels sleep ``seconds[tactic]`` a call and count their calls."""

    def __init__(self, seconds: dict[int, float]) -> None:
        self.seconds, self.calls, self.tactic = seconds, {t: 0 for t in seconds}, 0

    def bind(self, inputs: Any, outputs: Any, workspace: int) -> None:
        self.bound = self.tactic

    def prepared_launch(self, stream: int) -> tuple[Any, tuple[Any, ...]]:
        tactic = self.bound

        def call() -> None:
            self.calls[tactic] += 1
            if self.seconds[tactic]:
                time.sleep(self.seconds[tactic])

        return call, ()

    def release(self) -> None:
        pass


def _rounds(monkeypatch: pytest.MonkeyPatch, seconds: dict[int, float]) -> dict[int, int]:
    monkeypatch.setattr(tactics, "machine_busy", lambda: False)
    tensor = SimpleNamespace(shape=[_Dim(2), _Dim(3)], dtype=DataType.FLOAT)
    state = SimpleNamespace(tensors={0: tensor, 1: tensor}, config=SimpleNamespace(get_flag=lambda flag: False))
    op = _Op(seconds)
    layer = LayerPlan("l", "fake", [0], [1])
    variants: list[tuple[int, Any]] = [(t, None) for t in seconds]
    best = tactics._time_variants(op, layer, state, {}, variants, get_backend("cpu"))  # type: ignore[arg-type]
    assert len(best) == len(seconds) and all(b >= 0 for b in best)
    return {t: n - 1 for t, n in op.calls.items()}  # less the warm-up call


def test_small_layers_are_timed_over_more_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _rounds(monkeypatch, {0: 0.0, 1: 0.0}) == {0: tactics._SMALL_ROUNDS, 1: tactics._SMALL_ROUNDS}


def test_slow_layers_stop_after_the_usual_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tactics, "_BUDGET_S", 60.0)  # a loaded machine's long sleeps end no timing early
    assert _rounds(monkeypatch, {0: 0.002, 1: 0.002}) == {0: tactics._ROUNDS, 1: tactics._ROUNDS}


def test_a_decisive_kernel_ends_the_timing_early(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _rounds(monkeypatch, {0: 0.004, 1: 0.0})
    assert counts == {0: tactics._DECISIVE_ROUNDS, 1: tactics._DECISIVE_ROUNDS}
