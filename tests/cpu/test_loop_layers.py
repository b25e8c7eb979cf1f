"""The network API's ILoop and IIfConditional: built, run and compared with NumPy; plans round-trip; misuse."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import plugrt as trt
from plugrt.core.errors import BuildError, NetworkError
from plugrt.engine.host_run import HostRun

SUM, PROD = trt.ElementWiseOperation.SUM, trt.ElementWiseOperation.PROD
LESS = trt.ElementWiseOperation.LESS


def network() -> trt.INetworkDefinition:
    return trt.Builder(trt.Logger()).create_network(0)


def const(net: trt.INetworkDefinition, value: object, dtype: type = np.float32) -> trt.ITensor:
    array = np.asarray(value, dtype=dtype)
    return net.add_constant(array.shape, array).get_output(0)


def plan_of(net: trt.INetworkDefinition) -> bytes:
    builder = trt.Builder(trt.Logger())
    return bytes(builder.build_serialized_network(net, builder.create_builder_config()))


def run_plan(plan: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    run = HostRun(trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan))
    run.set_shapes({name: value.shape for name, value in feeds.items()})
    run.allocate()
    run.upload(feeds)
    run.execute()
    return run.results()


def run_twice(net: trt.INetworkDefinition, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the built plan, then a copy revived from its bytes; both must agree."""
    plan = plan_of(net)
    first = run_plan(plan, feeds)
    again = run_plan(bytes(trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan).serialize()), feeds)
    for name, value in first.items():
        np.testing.assert_array_equal(value, again[name])
    return first


def sum_rows(net: trt.INetworkDefinition, x: trt.ITensor, count: int) -> tuple[trt.ILoop, trt.ITensor, dict]:
    """A COUNT loop over the rows of ``x``: a running sum, the doubled rows, and the sums in reverse."""
    loop = net.add_loop()
    n = const(net, count, np.int32)
    loop.add_trip_limit(n, trt.TripLimit.COUNT)
    total = loop.add_recurrence(const(net, np.zeros(x.shape[1])))
    row = loop.add_iterator(x).get_output(0)
    new_total = net.add_elementwise(total.get_output(0), row, SUM).get_output(0)
    total.set_input(1, new_total)
    doubled = net.add_elementwise(row, row, SUM).get_output(0)
    outputs = {"last": loop.add_loop_output(total.get_output(0), trt.LoopOutput.LAST_VALUE)}
    outputs["last_sum"] = loop.add_loop_output(new_total, trt.LoopOutput.LAST_VALUE)
    outputs["rows"] = loop.add_loop_output(doubled, trt.LoopOutput.CONCATENATE)
    outputs["reversed"] = loop.add_loop_output(new_total, trt.LoopOutput.REVERSE)
    for layer in (outputs["rows"], outputs["reversed"]):
        layer.set_input(1, n)
    return loop, n, outputs


def test_counted_loop_running_sum_concatenate_and_reverse() -> None:
    net = network()
    x = net.add_input("x", trt.float32, (3, 4))
    loop, _, outputs = sum_rows(net, x, 3)
    for layer in outputs.values():
        net.mark_output(layer.get_output(0))
    assert all(layer.loop is loop for layer in outputs.values())
    value = np.arange(12, dtype=np.float32).reshape(3, 4) - 4
    got = run_twice(net, {"x": value})
    names = {key: layer.get_output(0).name for key, layer in outputs.items()}
    np.testing.assert_allclose(got[names["last"]], value.sum(axis=0))
    np.testing.assert_allclose(got[names["last_sum"]], value.sum(axis=0))
    np.testing.assert_allclose(got[names["rows"]], 2 * value)
    np.testing.assert_allclose(got[names["reversed"]], np.cumsum(value, axis=0)[::-1])


def test_iterator_on_axis_1_reverse_and_concatenate_on_axis_1() -> None:
    net = network()
    x = net.add_input("x", trt.float32, (2, 5))
    loop = net.add_loop()
    n = const(net, 5, np.int32)
    loop.add_trip_limit(n, trt.TripLimit.COUNT)
    column = loop.add_iterator(x, axis=1, reverse=True).get_output(0)
    squared = net.add_elementwise(column, column, PROD).get_output(0)
    out = loop.add_loop_output(squared, trt.LoopOutput.CONCATENATE, axis=1)
    out.set_input(1, n)
    net.mark_output(out.get_output(0))
    value = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    got = run_twice(net, {"x": value})[out.get_output(0).name]
    np.testing.assert_allclose(got, (value**2)[:, ::-1], rtol=1e-6)


def test_while_loop_stops_when_its_condition_is_false() -> None:
    """Double v while v < 100: the condition is tested on each iteration's starting value."""
    net = network()
    start = net.add_input("start", trt.float32, ())
    loop = net.add_loop()
    v = loop.add_recurrence(start)
    keep_going = net.add_elementwise(v.get_output(0), const(net, 100.0), LESS).get_output(0)
    loop.add_trip_limit(keep_going, trt.TripLimit.WHILE)
    doubled = net.add_elementwise(v.get_output(0), const(net, 2.0), PROD).get_output(0)
    v.set_input(1, doubled)
    last = loop.add_loop_output(v.get_output(0), trt.LoopOutput.LAST_VALUE)
    steps = loop.add_loop_output(doubled, trt.LoopOutput.CONCATENATE)
    steps.set_input(1, const(net, 10, np.int32))
    net.mark_output(last.get_output(0))
    net.mark_output(steps.get_output(0))
    plan = plan_of(net)
    for first in (3.0, 150.0):
        got = run_plan(plan, {"start": np.float32(first).reshape(())})
        expected, seen = first, []
        while expected < 100:
            expected *= 2
            seen.append(expected)
        assert float(got[last.get_output(0).name]) == expected
        np.testing.assert_allclose(got[steps.get_output(0).name], np.array(seen, np.float32))


def conditional(net: trt.INetworkDefinition, flag: trt.ITensor, x: trt.ITensor) -> trt.IIfConditionalOutputLayer:
    cond = net.add_if_conditional()
    cond.set_condition(flag)
    inside = cond.add_input(x).get_output(0)
    doubled = net.add_elementwise(inside, inside, SUM).get_output(0)
    negated = net.add_unary(inside, trt.UnaryOperation.NEG).get_output(0)
    return cond.add_output(doubled, negated)


def test_if_conditional_chooses_its_branch_at_run_time() -> None:
    net = network()
    flag = net.add_input("flag", trt.bool, ())
    x = net.add_input("x", trt.float32, (2, 3))
    out = conditional(net, flag, x)
    assert out.conditional.condition is not None
    net.mark_output(out.get_output(0))
    plan = plan_of(net)
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    name = out.get_output(0).name
    np.testing.assert_allclose(run_plan(plan, {"flag": np.array(True), "x": value})[name], 2 * value)
    np.testing.assert_allclose(run_plan(plan, {"flag": np.array(False), "x": value})[name], -value)
    revived = bytes(trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan).serialize())
    np.testing.assert_allclose(run_plan(revived, {"flag": np.array(False), "x": value})[name], -value)


def test_enums_and_layer_types_are_exported() -> None:
    assert trt.TripLimit.COUNT != trt.TripLimit.WHILE
    assert {m.name for m in trt.LoopOutput} == {"LAST_VALUE", "CONCATENATE", "REVERSE"}
    net = network()
    loop = net.add_loop()
    layer = loop.add_recurrence(net.add_input("x", trt.float32, (2,)))
    assert layer.type == trt.LayerType.RECURRENCE and isinstance(layer, trt.IRecurrenceLayer)
    assert "[Recurrence]" in layer.name


# --- misuse -------------------------------------------------------------------------------------


def misuse(make: Callable[[trt.INetworkDefinition], None], error: type[Exception], *words: str) -> None:
    net = network()
    with pytest.raises(error) as raised:
        make(net)
        plan_of(net)
    for word in words:
        assert word in str(raised.value), str(raised.value)


def _loop_with(net: trt.INetworkDefinition, limit: bool = True, next_value: bool = True) -> trt.ILoop:
    x = net.add_input("x", trt.float32, (2,))
    loop = net.add_loop()
    loop.name = "acc"
    if limit:
        loop.add_trip_limit(const(net, 2, np.int32), trt.TripLimit.COUNT)
    r = loop.add_recurrence(x)
    r.name = "state"
    grown = net.add_elementwise(r.get_output(0), x, SUM).get_output(0)
    if next_value:
        r.set_input(1, grown)
    net.mark_output(loop.add_loop_output(grown, trt.LoopOutput.LAST_VALUE).get_output(0))
    return loop


def test_recurrence_without_next_value() -> None:
    misuse(lambda net: _loop_with(net, next_value=False), BuildError, "'acc'", "'state'", "set_input(1")


def test_loop_without_trip_limit() -> None:
    misuse(lambda net: _loop_with(net, limit=False), BuildError, "'acc'", "no trip limit")


def test_trip_limit_given_twice() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        loop = _loop_with(net)
        loop.add_trip_limit(const(net, 3, np.int32), trt.TripLimit.COUNT)

    misuse(make, NetworkError, "'acc'", "already has a TripLimit.COUNT trip limit")


def test_loop_output_of_a_tensor_outside_the_loop() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        loop = _loop_with(net)
        outside = net.add_identity(net.get_input(0)).get_output(0)
        net.mark_output(loop.add_loop_output(outside, trt.LoopOutput.LAST_VALUE).get_output(0))

    misuse(make, BuildError, "'acc'", "not computed in the loop")


def test_loop_tensor_read_outside_the_loop() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        loop = _loop_with(net)
        inner = loop.add_recurrence(net.get_input(0))
        inner.set_input(1, inner.get_output(0))
        net.mark_output(net.add_identity(inner.get_output(0)).get_output(0))

    misuse(make, BuildError, "loop 'acc'", "add_loop_output")


def test_concatenate_without_length() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        loop = _loop_with(net)
        r = loop._layers[1]
        net.mark_output(loop.add_loop_output(r.get_output(0), trt.LoopOutput.CONCATENATE).get_output(0))

    misuse(make, BuildError, "'acc'", "CONCATENATE", "input 1")


def test_non_bool_while_condition() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        x = net.add_input("x", trt.float32, ())
        loop = net.add_loop()
        r = loop.add_recurrence(x)
        r.set_input(1, r.get_output(0))
        loop.add_trip_limit(r.get_output(0), trt.TripLimit.WHILE)
        net.mark_output(loop.add_loop_output(r.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0))

    misuse(make, BuildError, "WHILE", "BOOL", "FLOAT")


def test_layers_of_one_loop_used_in_another() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        first = _loop_with(net)
        second = net.add_loop()
        second.name = "other"
        second.add_trip_limit(const(net, 2, np.int32), trt.TripLimit.COUNT)
        r = second.add_recurrence(net.get_input(0))
        mixed = net.add_elementwise(r.get_output(0), first._layers[1].get_output(0), SUM).get_output(0)
        r.set_input(1, mixed)
        net.mark_output(second.add_loop_output(mixed, trt.LoopOutput.LAST_VALUE).get_output(0))

    misuse(make, BuildError, "loop 'acc'", "loop 'other'")


@pytest.mark.parametrize(
    ("dtype", "shape", "words"), [(trt.float32, (), ("BOOL", "FLOAT")), (trt.bool, (2,), ("rank 1",))]
)
def test_condition_must_be_a_0d_bool(dtype: trt.DataType, shape: tuple[int, ...], words: tuple[str, ...]) -> None:
    def make(net: trt.INetworkDefinition) -> None:
        flag = net.add_input("flag", dtype, shape)
        out = conditional(net, flag, net.add_input("x", trt.float32, (2,)))
        out.conditional.name = "pick"
        net.mark_output(out.get_output(0))

    misuse(make, BuildError, "conditional 'pick'", *words)


def test_conditional_branches_must_agree() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        cond = net.add_if_conditional()
        cond.name = "pick"
        cond.set_condition(net.add_input("flag", trt.bool, ()))
        x = cond.add_input(net.add_input("x", trt.float32, (2, 3))).get_output(0)
        flat = net.add_shuffle(x)
        flat.reshape_dims = (6,)
        out = cond.add_output(x, flat.get_output(0))
        out.name = "result"
        net.mark_output(out.get_output(0))

    misuse(make, BuildError, "conditional 'pick'", "'result'", "rank")


def test_conditional_without_condition() -> None:
    def make(net: trt.INetworkDefinition) -> None:
        cond = net.add_if_conditional()
        x = cond.add_input(net.add_input("x", trt.float32, (2,))).get_output(0)
        net.mark_output(cond.add_output(x, x).get_output(0))

    misuse(make, BuildError, "no condition", "set_condition")


def test_trip_count_known_only_at_run_time_on_a_dynamic_input() -> None:
    """A count given as a network input: the concatenated output's length is a data-dependent size."""
    builder = trt.Builder(trt.Logger())
    net = builder.create_network(0)
    x = net.add_input("x", trt.float32, (-1, 4))
    n = net.add_input("n", trt.int32, ())
    loop = net.add_loop()
    loop.add_trip_limit(n, trt.TripLimit.COUNT)
    row = loop.add_iterator(x).get_output(0)
    out = loop.add_loop_output(net.add_elementwise(row, row, PROD).get_output(0), trt.LoopOutput.CONCATENATE)
    out.set_input(1, n)
    net.mark_output(out.get_output(0))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4), (3, 4), (8, 4))
    config.add_optimization_profile(profile)
    plan = bytes(builder.build_serialized_network(net, config))
    for rows in (2, 5):
        value = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        got = run_plan(plan, {"x": value, "n": np.array(rows, np.int32)})[out.get_output(0).name]
        np.testing.assert_allclose(got, value * value)


def test_conditional_branches_of_different_lengths() -> None:
    net = network()
    flag = net.add_input("flag", trt.bool, ())
    x = net.add_input("x", trt.float32, (3,))
    cond = net.add_if_conditional()
    cond.set_condition(flag)
    inside = cond.add_input(x).get_output(0)
    longer = net.add_concatenation([inside, inside]).get_output(0)
    out = cond.add_output(longer, inside)
    net.mark_output(out.get_output(0))
    plan = plan_of(net)
    value = np.array([1.0, 2.0, 3.0], np.float32)
    name = out.get_output(0).name
    np.testing.assert_allclose(run_plan(plan, {"flag": np.array(True), "x": value})[name], np.tile(value, 2))
    np.testing.assert_allclose(run_plan(plan, {"flag": np.array(False), "x": value})[name], value)
