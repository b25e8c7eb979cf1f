"""A convolution in parts on a busy machine (``ops/onednn_conv_parts.py``, the launcher's ``split``) and the helper
thread kept off the caller's core there (``ops/host_threads.py``).

Oracles: the float64 reference and buffer helpers of ``test_onednn_conv.py``; the layer's whole primitive run on
the same buffers (the parts must give its bits); the band geometry checked against the output-size formula.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from test_onednn_conv import _assert_close, _empty, _logical, _operator, _out_shape, _random, _reference, _stored

from onednn_support import ONEDNN_TESTS, BusyMachine
from plugrt.core.types import TensorFormat
from plugrt.ops import blas_threads, host_threads, onednn_buffers, onednn_conv, onednn_conv_parts, onednn_parts
from plugrt.ops.onednn_conv_parts import Band, bands
from plugrt.ops.onednn_parts import MAX_PARTS, PART_FLOPS

HWC, LINEAR = TensorFormat.HWC, TensorFormat.LINEAR


# --- the bands ------------------------------------------------------------------------------------------------------


def _covered(parts: list[Band]) -> list[tuple[int, int]]:
    """Every (image, output row) the parts write, in order."""
    return [(part.image + k, row) for part in parts for k in range(part.images) for row in range(part.row0, part.row1)]


@pytest.mark.parametrize(
    ("in_rows", "stride", "reach", "pads"),
    [
        (56, 1, 3, (1, 1)),
        (11, 2, 5, (2, 2)),
        (12, 1, 5, (2, 2)),
        (10, 2, 3, (0, 0)),
        (9, 1, 3, (0, 1)),
        (7, 3, 1, (0, 0)),
    ],
    ids=["3x3", "5x5_stride2", "dilated", "unread_last_row", "asymmetric", "1x1_stride3"],
)
def test_one_image_in_bands_of_rows_covers_each_output_row_once(in_rows, stride, reach, pads) -> None:
    """One image: bands of rows, each reading exactly the input rows its windows cover, padding only at the edges,
    every output row written once."""
    out_rows = (in_rows + sum(pads) - reach) // stride + 1
    parts = bands(1, in_rows, out_rows, stride, reach, pads, 100 * PART_FLOPS)
    assert len(parts) == min(MAX_PARTS, out_rows)
    assert _covered(parts) == [(0, r) for r in range(out_rows)]
    for part in parts:
        assert part.images == 1
        # oneDNN's size formula over the band gives the band's rows
        assert (part.last - part.first + part.top + part.bottom - reach) // stride + 1 == part.row1 - part.row0
        assert 0 <= part.first < part.last <= in_rows
        assert part.top == max(0, pads[0] - part.row0 * stride)
        assert part.top <= pads[0] and part.bottom <= pads[1]
    assert parts[0].top == pads[0]


def test_as_many_images_as_parts_go_in_runs_of_whole_images() -> None:
    """Batch 20 and eight parts: runs of whole images (the layer's own padding, every input row), none empty."""
    parts = bands(20, 10, 5, 2, 3, (0, 0), 100 * PART_FLOPS)
    assert len(parts) == MAX_PARTS
    assert [(p.image, p.images) for p in parts] == [(0, 2), (2, 3), (5, 2), (7, 3), (10, 2), (12, 3), (15, 2), (17, 3)]
    assert all((p.row0, p.row1, p.first, p.last, p.top, p.bottom) == (0, 5, 0, 10, 0, 0) for p in parts)
    assert _covered(parts) == [(i, r) for i in range(20) for r in range(5)]


def test_fewer_images_than_parts_split_each_image_alike() -> None:
    """Three images, eight parts' work: two bands per image (never more than MAX_PARTS)."""
    parts = bands(3, 16, 16, 1, 3, (1, 1), 8 * PART_FLOPS)
    assert [(p.image, p.row0, p.row1) for p in parts] == [
        (0, 0, 8),
        (0, 8, 16),
        (1, 0, 8),
        (1, 8, 16),
        (2, 0, 8),
        (2, 8, 16),
    ]


@pytest.mark.parametrize(
    ("images", "out_rows", "work"),
    [(1, 56, 1.9 * PART_FLOPS), (1, 1, 100 * PART_FLOPS), (4, 8, 1.0 * PART_FLOPS)],
    ids=["little_work", "one_row", "four_images_little_work"],
)
def test_no_parts_where_the_work_or_the_rows_make_fewer_than_two(images, out_rows, work) -> None:
    assert bands(images, out_rows, out_rows, 1, 1, (0, 0), work) == []


def test_the_part_count_follows_the_work() -> None:
    assert len(bands(1, 64, 64, 1, 3, (1, 1), 3.5 * PART_FLOPS)) == 3
    assert len(bands(1, 64, 64, 1, 3, (1, 1), 1000 * PART_FLOPS)) == MAX_PARTS


def test_no_parts_where_a_band_would_lie_in_the_padding_only() -> None:
    """A window taller than the input with wide padding: a band reading no input row makes no parts at all."""
    assert bands(1, 2, 8, 1, 1, (3, 3), 100 * PART_FLOPS) == []


# --- a layer in parts -----------------------------------------------------------------------------------------------


def _with_onednn(test):  # type: ignore[no-untyped-def]
    """The marks of the oneDNN tests (skipped without the library, run with it on) on one test."""
    for mark in ONEDNN_TESTS:
        test = mark(test)
    return test


def _machine(monkeypatch: pytest.MonkeyPatch) -> BusyMachine:
    """A busy machine, parts of 1e4 operations (``onednn_support.BusyMachine``)."""
    return BusyMachine(monkeypatch, busy=True)


#: name -> (x shape NCHW, maps, kernel, group, conv params, activation, residual format or None, (in, out) formats)
CASES = {
    "3x3_relu_one_image": ((1, 16, 20, 18), 24, (3, 3), 1, {"pads": [1, 1, 1, 1]}, "RELU", None, (HWC, HWC)),
    "5x5_stride2_no_padding_below": (
        (1, 8, 21, 16),
        16,
        (5, 5),
        1,
        {"pads": [2, 1, 0, 2], "strides": [2, 2]},
        "",
        None,
        (HWC, HWC),
    ),
    "dilated": ((1, 8, 17, 15), 8, (3, 3), 1, {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, "CLIP", None, (HWC, HWC)),
    "depthwise_linear_out": (
        (2, 16, 14, 13),
        16,
        (3, 3),
        16,
        {"pads": [1, 1, 1, 1]},
        "HARD_SWISH",
        None,
        (HWC, LINEAR),
    ),
    "residual_hwc_three_images": ((3, 8, 12, 12), 8, (3, 3), 1, {"pads": [1, 1, 1, 1]}, "RELU", HWC, (HWC, HWC)),
    "residual_linear_staged": ((1, 8, 16, 10), 8, (3, 3), 1, {"pads": [1, 1, 1, 1]}, "RELU", LINEAR, (LINEAR, LINEAR)),
    "stride2_unread_last_row_images": ((10, 4, 10, 9), 8, (3, 3), 1, {"strides": [2, 2]}, "", None, (HWC, HWC)),
    "one_pixel_wide_maps": ((2, 8, 40, 1), 16, (5, 1), 1, {}, "RELU", None, (HWC, HWC)),
    "one_pixel_wide_one_image_strided": (
        (1, 8, 41, 1),
        16,
        (5, 1),
        1,
        {"pads": [2, 0, 1, 0], "strides": [2, 1]},
        "",
        HWC,
        (HWC, HWC),
    ),
    "one_row_maps_dilated": (
        (1, 8, 1, 37),
        8,
        (1, 3),
        1,
        {"pads": [0, 2, 0, 2], "dilations": [1, 2]},
        "",
        None,
        (LINEAR, LINEAR),
    ),
}


def _run_case(name: str, machine: BusyMachine) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The layer's result on a quiet machine (the whole primitive), on a busy one (the parts), and the reference."""
    shape, maps, kernel, group, conv_params, activation, residual_fmt, (fin, fout) = CASES[name]
    op = _operator(shape[1], maps, kernel, group, seed=len(name), activation=activation,
                   residual=residual_fmt is not None, **conv_params)  # fmt: skip
    if activation == "CLIP":
        op = _operator(shape[1], maps, kernel, group, seed=3, activation=activation, activation_alpha=0.0,
                       activation_beta=6.0, **conv_params)  # fmt: skip
    out_shape = _out_shape(op, shape)
    x = _random(shape, 1)
    residual = None if residual_fmt is None else _random(out_shape, 2)
    formats = [fin, *([] if residual_fmt is None else [residual_fmt]), fout]
    x_buffer = _stored(x, fin)
    residual_buffer = None if residual is None else _stored(residual, formats[1])
    out = _empty(out_shape, fout)
    run = onednn_conv.convolution_onednn(op, x_buffer, out, residual_buffer, formats)
    assert run is not None
    machine.busy = False
    run()
    whole = _logical(out, fout).copy()
    assert machine.pulled == []
    machine.busy = True
    out.fill(np.nan)
    run()
    return whole, _logical(out, fout).copy(), _reference(op, x, residual)


@_with_onednn
@pytest.mark.parametrize("name", list(CASES))
def test_parts_give_the_whole_primitives_bits(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a busy machine the layer runs in parts (pulled by two threads): the whole primitive's bits, the float64
    reference's values, over one image's bands of rows, runs of images, strides, dilations, padding on some edges
    only, depthwise groups, residuals (HWC and staged LINEAR), staged LINEAR inputs and outputs, one-pixel-wide
    maps (as one row: bands of columns), one-row maps."""
    machine = _machine(monkeypatch)
    whole, parts, want = _run_case(name, machine)
    assert machine.pulled and machine.pulled[0] >= 2
    np.testing.assert_array_equal(parts, whole)
    _assert_close(parts, want)


@_with_onednn
def test_parts_are_made_once_and_follow_new_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts are made at the first busy run and reused; new values in the buffers give new results; a quiet
    run between takes the whole primitive again."""
    machine = _machine(monkeypatch)
    made: list[object] = []
    real = onednn_conv_parts.part_primitives
    monkeypatch.setattr(onednn_conv, "part_primitives", lambda *a: made.append(1) or real(*a))
    op = _operator(8, 8, (3, 3), pads=[1, 1, 1, 1], activation="RELU", residual=True)
    shape = (1, 8, 16, 12)
    x_buffer, residual_buffer = _stored(_random(shape, 3), HWC), _stored(_random(shape, 4), HWC)
    out = _empty(shape, HWC)
    run = onednn_conv.convolution_onednn(op, x_buffer, out, residual_buffer, [HWC, HWC, HWC])
    assert run is not None
    for seed, busy in ((5, True), (7, False), (9, True)):
        machine.busy = busy
        x, residual = _random(shape, seed), _random(shape, seed + 1)
        np.copyto(x_buffer, _stored(x, HWC))
        np.copyto(residual_buffer, _stored(residual, HWC))
        out.fill(np.nan)
        run()
        _assert_close(_logical(out, HWC), _reference(op, x, residual))
    assert len(made) == 1
    assert len(machine.pulled) == 2


@_with_onednn
def test_parts_read_a_tensor_taken_from_the_input_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a PyTorch kernel left the input in its hand-over slot, the parts read that tensor, not the buffer."""
    torch = pytest.importorskip("torch")
    from plugrt.ops.hand_over import hand_over

    machine = _machine(monkeypatch)
    op = _operator(8, 16, (3, 3), pads=[1, 1, 1, 1], activation="RELU")
    x = _random((1, 8, 14, 9), 5)
    x_buffer, out = np.zeros((1, 14, 9, 8), np.float32), _empty((1, 16, 14, 9), HWC)
    run = onednn_conv.convolution_onednn(op, x_buffer, out, None, [HWC, HWC])
    assert run is not None
    slot = hand_over(x_buffer)
    try:
        slot.tensor = torch.from_numpy(x.copy()).contiguous(memory_format=torch.channels_last)
        run()
    finally:
        slot.tensor = None
    assert machine.pulled
    _assert_close(_logical(out, HWC), _reference(op, x))


def _run_twice_and_check(seed: int) -> None:
    """A 3x3 layer of 16 maps over 20 x 20 pixels bound, run twice, its result checked."""
    op = _operator(16, 16, (3, 3), pads=[1, 1, 1, 1])
    x = _random((1, 16, 20, 20), seed)
    out = _empty((1, 16, 20, 20), HWC)
    run = onednn_conv.convolution_onednn(op, _stored(x, HWC), out, None, [HWC, HWC])
    assert run is not None
    run()
    run()
    _assert_close(_logical(out, HWC), _reference(op, x))


@_with_onednn
def test_an_engine_of_one_thread_makes_no_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine allowed one thread has one primitive a layer and never splits it, busy or not."""
    machine = _machine(monkeypatch)
    monkeypatch.setattr(onednn_buffers, "engine_threads", lambda: 1)
    _run_twice_and_check(seed=6)
    assert machine.pulled == []


@_with_onednn
def test_a_layer_without_parts_runs_whole_on_a_busy_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Too little work for two parts: the one-thread primitive runs, and the split is not tried again."""
    machine = _machine(monkeypatch)
    monkeypatch.setattr(onednn_parts, "PART_FLOPS", 1e12)
    tried: list[int] = []
    real = onednn_conv.bands
    monkeypatch.setattr(onednn_conv, "bands", lambda *a: tried.append(1) or real(*a))
    _run_twice_and_check(seed=8)
    assert machine.pulled == [] and tried == [1]


# --- the helper's core ----------------------------------------------------------------------------------------------

_AFFINITY = hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2


@pytest.mark.skipif(not _AFFINITY, reason="needs two cores and sched_setaffinity")
@pytest.mark.parametrize("busy", [True, False])
def test_the_helper_keeps_off_the_callers_core_on_a_busy_machine(busy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Busy: the helper takes its items on cores other than the one the caller was on; quiet: on every core the
    process may use."""
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: busy)
    monkeypatch.setattr(host_threads, "engine_threads", lambda: 2)
    allowed = frozenset(os.sched_getaffinity(0))
    seen: list[frozenset[int]] = []
    caller = threading.get_ident()
    started = threading.Event()
    cores: list[int | None] = []

    def item(index: int) -> None:
        if threading.get_ident() != caller:
            seen.append(frozenset(os.sched_getaffinity(0)))
            started.set()
        else:
            started.wait(0.5)  # leave the helper an item

    for _ in range(3):
        cores.append(host_threads._caller_core())
        host_threads.pulled_by_two(4, item)
    assert seen, "the helper took no item"
    if busy:
        assert all(core is not None for core in cores)
        assert all(affinity and affinity < allowed for affinity in seen)
    else:
        assert cores == [None, None, None]
        assert all(affinity == allowed for affinity in seen)


@pytest.mark.skipif(not _AFFINITY, reason="needs two cores and sched_setaffinity")
def test_the_helper_gets_every_core_back_when_the_machine_is_quiet_again(monkeypatch: pytest.MonkeyPatch) -> None:
    state = {"busy": True}
    monkeypatch.setattr(blas_threads, "_machine_busy", lambda: state["busy"])
    monkeypatch.setattr(host_threads, "engine_threads", lambda: 2)
    allowed = frozenset(os.sched_getaffinity(0))
    seen: list[frozenset[int]] = []
    caller = threading.get_ident()
    helped = threading.Event()

    def item(index: int) -> None:
        if threading.get_ident() != caller:
            seen.append(frozenset(os.sched_getaffinity(0)))
            helped.set()
        else:
            helped.wait(1.0)  # leave the helper an item

    for busy in (True, False):
        state["busy"] = busy
        helped.clear()
        host_threads.pulled_by_two(4, item)
    assert seen and seen[0] < allowed and seen[-1] == allowed
