"""Plan files: exact round trips, and damaged or hostile plans fail with PlanFormatError.

Every byte of a plan is covered by a CRC-32 (per section and over the whole body),
so any truncation, single-bit flip or burst of up to 32 bits is detected. Plans
rewritten through ``decode_plan``/``encode_plan`` have valid checksums; their
contents are then validated field by field, and anything wrong must surface as a
:class:`plugrt.PlugrtError` (normally :class:`plugrt.PlanFormatError`), never as
another exception type.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import plugrt as trt
from plugrt.engine.plan_format import PLAN_FORMAT_VERSION, PlanContents, decode_plan, encode_plan
from plugrt.examples import circ_pad_v2, circ_pad_v3, nonzero_v3
from plugrt.network.layer_enums import ActivationType, ElementWiseOperation

from testing_plugins import build, fields

SCALE = np.arange(6, dtype=np.float32).reshape(1, 6)


class Quiet(trt.ILogger):
    """Counts errors instead of printing thousands of them."""

    def __init__(self) -> None:
        super().__init__(trt.Logger.ERROR)
        self.count = 0

    def log(self, severity: trt.Severity, msg: str) -> None:
        self.count += 1


def reference(x: np.ndarray) -> dict[str, np.ndarray]:
    """The network below, in NumPy: pad (V2) -> * SCALE -> relu -> pad (V3) -> nonzero (V3, data-dependent)."""
    padded = np.maximum(np.pad(x, [(0, 0), (1, 1)], mode="wrap") * SCALE, 0)
    padded = np.pad(padded, [(0, 0), (0, 2)], mode="wrap")
    return {"padded": padded, "indices": np.argwhere(padded != 0).astype(np.int32)}


def make_plan() -> bytes:
    """x [-1, 4] -> CircPad V2 -> * constant -> relu -> CircPad V3 -> NonZero (V3, data-dependent)."""
    builder = trt.Builder(Quiet())
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (-1, 4))
    pad2 = network.add_plugin_v2([x], circ_pad_v2.register().create_plugin("pad2", fields(pads=[1, 1])))
    pad2.name = "pad_v2"
    scale = network.add_constant((1, 6), SCALE)
    scale.name = "scale_weights"
    product = network.add_elementwise(pad2.get_output(0), scale.get_output(0), ElementWiseOperation.PROD)
    product.name = "scale"
    relu = network.add_activation(product.get_output(0), ActivationType.RELU)
    relu.name = "relu"
    pad3 = network.add_plugin_v3([relu.get_output(0)], [],
                                 circ_pad_v3.register().create_plugin("pad3", fields(pads=[0, 2]), trt.TensorRTPhase.BUILD))
    pad3.name = "pad_v3"
    nonzero = network.add_plugin_v3([pad3.get_output(0)], [],
                                    nonzero_v3.register().create_plugin("nz", fields(), trt.TensorRTPhase.BUILD))
    nonzero.name = "nonzero"
    pad3.get_output(0).name = "padded"
    nonzero.get_output(0).name = "indices"
    network.mark_output(pad3.get_output(0))
    network.mark_output(nonzero.get_output(0))
    with pytest.MonkeyPatch.context() as patch:  # keep 'scale' and 'relu' apart: the edits name them
        patch.setenv("PLUGRT_DISABLE_PASSES", "elementwise_chain")
        return bytes(build(network, builder, [{"x": ((1, 4), (2, 4), (4, 4))}]))


@pytest.fixture(scope="module")
def plan() -> bytes:
    return make_plan()


class Allocator(trt.IOutputAllocator):
    """Keeps each output's buffer and final shape."""

    def __init__(self) -> None:
        super().__init__()
        self.buffers: dict[str, np.ndarray] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}

    def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
        self.buffers[tensor_name] = np.zeros(max(size, 1), np.uint8)
        return int(self.buffers[tensor_name].ctypes.data)

    def notify_shape(self, tensor_name: str, shape: trt.Dims) -> None:
        self.shapes[tensor_name] = tuple(shape)


class UnusableShape(AssertionError):
    """The engine reported an output shape no buffer can have."""


def infer(engine: trt.ICudaEngine, x: np.ndarray) -> dict[str, np.ndarray]:
    """Run once; the data-dependent output comes through an IOutputAllocator."""
    context = engine.create_execution_context()
    allocator = Allocator()
    assert context.set_output_allocator("indices", allocator)
    assert context.set_input_shape("x", x.shape)
    context.set_tensor_address("x", x.ctypes.data)
    shape = tuple(context.get_tensor_shape("padded"))
    if any(d < 0 for d in shape) or np.prod(shape, dtype=np.float64) > 1 << 24:
        raise UnusableShape(f"the engine reports output shape {shape} for 'padded'")
    padded = np.zeros(shape, np.float32)
    context.set_tensor_address("padded", padded.ctypes.data)
    context.execute_async_v3(0)
    shape = allocator.shapes["indices"]
    count = int(np.prod(shape))
    indices = allocator.buffers["indices"][: count * 4].view(np.int32).reshape(shape).copy()
    return {"padded": padded, "indices": indices}


def _load(data: bytes) -> trt.ICudaEngine:
    return trt.Runtime(Quiet()).deserialize_cuda_engine(data)


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-2, 3, size=(n, 4)).astype(np.float32) for n in (1, 2, 3, 4, 4)]
    inputs.append(np.zeros((2, 4), np.float32))
    return inputs


# --- round trip ----------------------------------------------------------------------------


def test_round_trip(plan: bytes) -> None:
    engine = _load(plan)
    serialized = engine.serialize()
    assert isinstance(serialized, trt.IHostMemory)
    assert serialized == plan and bytes(serialized) == plan and serialized.nbytes == len(plan)
    reloaded = _load(bytes(serialized))
    assert reloaded.serialize() == plan
    assert [reloaded.get_tensor_name(i) for i in range(reloaded.num_io_tensors)] == ["x", "padded", "indices"]
    assert tuple(reloaded.get_tensor_shape("indices")) == (-1, 2)
    for x in _inputs():
        first, second, expected = infer(engine, x), infer(reloaded, x), reference(x)
        for name in expected:
            np.testing.assert_array_equal(first[name], expected[name], err_msg=name)
            np.testing.assert_array_equal(second[name], first[name], err_msg=name)


def test_decode_encode_is_the_identity(plan: bytes) -> None:
    contents = decode_plan(plan)
    assert encode_plan(contents) == plan
    assert decode_plan(encode_plan(contents)) == contents
    assert {p.name for p in contents.plugins} == {"CircPadPlugin", "CircPadPluginV3", "NonZeroPlugin"}
    assert {p.interface for p in contents.plugins} == {"v2", "v3"}
    assert len(contents.weights) == 1


def test_building_twice_gives_identical_plans(plan: bytes) -> None:
    engine = _load(plan)
    again = _load(bytes(engine.serialize()))
    assert bytes(again.serialize()) == plan


# --- byte-level damage: always detected -----------------------------------------------------


def _failures(candidates: list[tuple[Any, bytes]]) -> list[str]:
    """Deserialize each candidate; list those that did not raise PlanFormatError."""
    logger = Quiet()
    runtime = trt.Runtime(logger)
    bad = []
    for label, data in candidates:
        try:
            runtime.deserialize_cuda_engine(data)
        except trt.PlanFormatError:
            continue
        except Exception as exc:
            bad.append(f"{label}: {type(exc).__name__}: {exc}")
        else:
            bad.append(f"{label}: loaded without error")
    assert logger.count == len(candidates)  # every failure is logged at ERROR too
    return bad


def test_every_truncation_is_a_plan_format_error(plan: bytes) -> None:
    lengths = sorted({*range(min(200, len(plan))), *range(200, len(plan), 7), *range(len(plan) - 20, len(plan))})
    assert len(lengths) > 400
    assert not _failures([(f"prefix of {n} bytes", plan[:n]) for n in lengths])


def test_truncation_messages_say_truncated(plan: bytes) -> None:
    for n in (0, 3, 8, 11, 15, 40, len(plan) // 2, len(plan) - 1):
        with pytest.raises(trt.PlanFormatError, match=r"truncated|declares|remain"):
            _load(plan[:n])


def _flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def test_single_bit_flips_are_plan_format_errors(plan: bytes) -> None:
    rng = np.random.default_rng(20240601)
    nbits = len(plan) * 8
    positions = set(rng.choice(nbits, size=min(3000, nbits), replace=False).tolist())
    positions |= set(range(64 * 8))  # magic, version, section count, the first section's header
    positions |= set(range(nbits - 16 * 8, nbits))  # the end marker
    assert len(positions) > 3000
    assert not _failures([(f"bit {bit}", _flip(plan, bit)) for bit in sorted(positions)])


def test_bursts_up_to_32_bits_are_plan_format_errors(plan: bytes) -> None:
    rng = random.Random(99)
    candidates = []
    for _ in range(600):
        width = rng.randint(1, 4)
        start = rng.randrange(len(plan) - width + 1)
        damaged = bytearray(plan)
        for i in range(width):
            damaged[start + i] ^= rng.randint(1, 255)
        candidates.append((f"{width} bytes at {start}", bytes(damaged)))
    assert not _failures(candidates)


def test_appended_and_inserted_bytes_are_plan_format_errors(plan: bytes) -> None:
    candidates = [("one byte appended", plan + b"\0"), ("a plan appended", plan + plan),
                  ("a byte inserted after the magic", plan[:8] + b"\0" + plan[8:]),
                  ("a byte removed in the middle", plan[: len(plan) // 2] + plan[len(plan) // 2 + 1 :])]
    assert not _failures(candidates)


@pytest.mark.parametrize("version", [0, PLAN_FORMAT_VERSION + 1, 255, 2**32 - 1])
def test_other_format_versions_are_rejected(plan: bytes, version: int) -> None:
    other = plan[:8] + version.to_bytes(4, "little") + plan[12:]
    with pytest.raises(trt.PlanFormatError, match=rf"plan format version {version} is not supported; this plugrt reads version {PLAN_FORMAT_VERSION}"):
        _load(other)


def test_not_a_plan(plan: bytes) -> None:
    for data in (b"\x7fELF" + bytes(60), b"{}", plan[::-1], bytes(len(plan))):
        with pytest.raises(trt.PlanFormatError, match="not a plugrt plan"):
            _load(data)


# --- contents with valid checksums ------------------------------------------------------------


def _layer(header: dict[str, Any], name: str) -> dict[str, Any]:
    return next(layer for layer in header["layers"] if layer["name"] == name)


def _tensor(header: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in header["tensors"] if t["name"] == name)


def _rewrite(plan: bytes, edit: Callable[[dict[str, Any]], Any] | None = None,
             plugins: Callable[[list[Any]], list[Any]] | None = None,
             weights: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None) -> bytes:
    contents = decode_plan(plan)
    header = copy.deepcopy(contents.header)
    if edit is not None:
        edit(header)
    records = plugins(list(contents.plugins)) if plugins else list(contents.plugins)
    arrays = weights(dict(contents.weights)) if weights else dict(contents.weights)
    return encode_plan(PlanContents(header, arrays, records))


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit setting header[path] where path is 'layers/relu/kind', 'tensors/x/shape/1', 'io/0' ..."""
    def edit(header: dict[str, Any]) -> None:
        keys = path.split("/")
        node: Any = header
        if keys[0] in ("layers", "tensors") and len(keys) > 2:
            node = (_layer if keys[0] == "layers" else _tensor)(header, keys[1])
            keys = keys[2:]
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return edit


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    def edit(header: dict[str, Any]) -> None:
        del header[key]
    return edit


def _offset_outside_arena(header: dict[str, Any]) -> None:
    profile = header["profiles"][0]
    profile["offsets"][0][1] = profile["arena_size"] + 4096


def _offset_overflowing_arena(header: dict[str, Any]) -> None:
    profile = header["profiles"][0]
    profile["offsets"][0][1] = profile["arena_size"] - 4  # inside, but the tensor does not fit


def _arena_too_small(header: dict[str, Any]) -> None:
    header["profiles"][0]["arena_size"] = 8
    header["profiles"][0]["offsets"] = [[k, 0] for k, _ in header["profiles"][0]["offsets"]]


def _negative_offset(header: dict[str, Any]) -> None:
    header["profiles"][0]["offsets"][0][1] = -64


def _workspace_for_unknown_layer(header: dict[str, Any]) -> None:
    header["profiles"][0]["workspace_offsets"] = [[99, 0]]


def _deep_expression(header: dict[str, Any]) -> None:
    expr: Any = 4
    for _ in range(200):
        expr = ["SUM", expr, 1]
    _tensor(header, "padded")["shape"][1] = expr


def _interface_swapped(records: list[Any]) -> list[Any]:
    return [dataclasses.replace(r, interface="v3" if r.interface == "v2" else "v2") for r in records]


def _records_reordered(records: list[Any]) -> list[Any]:
    return records[1:] + records[:1]


def _payload_garbage(records: list[Any]) -> list[Any]:
    return [dataclasses.replace(r, payload=b"\xff" * 7) for r in records]


def _payload_truncated(records: list[Any]) -> list[Any]:
    return [dataclasses.replace(r, payload=r.payload[: len(r.payload) // 2]) for r in records]


TAMPERS: dict[str, tuple[dict[str, Any], str]] = {
    "unknown operator kind": ({"edit": _set("layers/relu/kind", "conv_transpose_9d")},
                              r"operator kind 'conv_transpose_9d'.*known:"),
    "empty operator kind": ({"edit": _set("layers/relu/kind", "")}, r"operator kind ''"),
    "layer input index out of range": ({"edit": _set("layers/relu/inputs/0", 999)}, r"tensor index 999 is out of range"),
    "layer input index negative": ({"edit": _set("layers/relu/inputs/0", -1)}, r"tensor index -1 is out of range"),
    "layer output index is a string": ({"edit": _set("layers/pad_v2/outputs/0", "1")}, r"tensor index '1' is out of range"),
    "layer input index is a bool": ({"edit": _set("layers/pad_v3/inputs/0", True)}, r"tensor index True is out of range"),
    "io index out of range": ({"edit": _set("io/1", 4096)}, r"io tensor index 4096 is out of range"),
    "offset outside the arena": ({"edit": _offset_outside_arena}, r"outside (its|the) arena"),
    "tensor overflowing the arena": ({"edit": _offset_overflowing_arena}, r"outside the arena"),
    "arena too small": ({"edit": _arena_too_small}, r"outside the arena"),
    "negative offset": ({"edit": _negative_offset}, r"outside its arena"),
    "workspace of an unknown layer": ({"edit": _workspace_for_unknown_layer}, r"layer index 99 is out of range"),
    "dimension: unknown operation": ({"edit": _set("tensors/padded/shape/1", ["TIMES", 2, 4])}, r"malformed dimension expression"),
    "dimension: missing operand": ({"edit": _set("tensors/padded/shape/1", ["SUM", 2])}, r"malformed dimension expression"),
    "dimension: symbol without name": ({"edit": _set("tensors/padded/shape/0", ["sym"])}, r"malformed dimension expression"),
    "dimension: float": ({"edit": _set("tensors/padded/shape/1", 8.5)}, r"malformed dimension expression"),
    "dimension: bool": ({"edit": _set("tensors/padded/shape/1", True)}, r"malformed dimension expression"),
    "dimension: object": ({"edit": _set("tensors/padded/shape/1", {"SUM": [1, 2]})}, r"malformed dimension expression"),
    "dimension: nested too deeply": ({"edit": _deep_expression}, r"nested deeper than"),
    "dimension: unknown symbol": ({"edit": _set("tensors/padded/shape/0", ["sym", "ghost[0]"])}, r"ghost\[0\]"),
    "unknown plugin family": ({"edit": _set("layers/pad_v3/params/family", "v4_turbo")}, r"unknown plugin family 'v4_turbo'"),
    "family does not match record": ({"edit": _set("layers/pad_v2/params/family", "v3")}, r"does not match record interface"),
    "static family for a dynamic record": ({"edit": _set("layers/pad_v2/params/family", "v2_static")},
                                           r"layer 'pad_v2'.*(execute_async|v2_static|IPluginV2DynamicExt)"),
    "plugin record index out of range": ({"edit": _set("layers/nonzero/params/plugin", 17)}, r"plugin record index 17 is out of range"),
    "plugin record index is a string": ({"edit": _set("layers/nonzero/params/plugin", "0")},
                                        r"plugin layer 'nonzero' has no plugin record index in its params"),
    "plugin family is not a string": ({"edit": _set("layers/pad_v2/params/family", 2)},
                                      r"plugin layer 'pad_v2' has no plugin family in its params"),
    "operator layer turned plugin": ({"edit": _set("layers/relu/kind", "plugin")},
                                     r"plugin layer 'relu' has no plugin record index in its params"),
    "unknown dtype": ({"edit": _set("tensors/padded/dtype", "FLOAT128")}, r"dtype 'FLOAT128' is not a DataType"),
    "unknown format": ({"edit": _set("tensors/padded/format", "ZIGZAG")}, r"format 'ZIGZAG' is not a TensorFormat"),
    "negative workspace": ({"edit": _set("layers/pad_v2/workspace", -8)}, r"negative workspace"),
    "missing weights": ({"edit": _set("layers/scale_weights/weights/value", "nowhere")}, r"missing weights 'nowhere'"),
    "no profiles": ({"edit": _set("profiles", [])}, r"no optimization profile"),
    "symbol of a missing axis": ({"edit": _set("symbols/x[0]", ["x", 5])}, r"no shape for symbol|'x' axis 0 is x\[0\]"),
    "symbol of an unknown input": ({"edit": _set("symbols/x[0]", ["y", 0])}, r"no shape for symbol|'x' axis 0 is x\[0\]"),
    "symbol of a fixed axis": ({"edit": _set("symbols/x[0]", ["x", 1])}, r"'x' axis 0 is x\[0\]|not a dynamic input axis"),
    "activation alpha is a string": ({"edit": _set("layers/relu/params/alpha", "steep")},
                                     r"layer 'relu' \(activation\) has bad parameters: ValueError"),
    "activation alpha is a list": ({"edit": _set("layers/relu/params/alpha", [1])},
                                   r"layer 'relu' \(activation\) has bad parameters: TypeError"),
    "constant shape holds a string": ({"edit": _set("layers/scale_weights/params/shape/0", "one")},
                                      r"layer 'scale_weights' \(constant\) has bad parameters"),
    "constant shape is a bool": ({"edit": _set("layers/scale_weights/params/shape", True)},
                                 r"layer 'scale_weights' \(constant\) has bad parameters"),
    "profile max of lower rank": ({"edit": _set("profiles/0/shapes/x/2", [])}, r"profile 0 shapes of 'x' do not have the input's rank 2"),
    "io tensor renamed": ({"edit": _set("tensors/x/name", "renamed")}, r"io_shapes names .* differ from the IO tensors"),
    "io_shapes entry missing": ({"edit": lambda h: h["io_shapes"].pop("x")}, r"io_shapes names .* differ from the IO tensors"),
    "output tensor renamed": ({"edit": _set("tensors/padded/name", "other")}, r"io_shapes names .* differ from the IO tensors"),
    "size output index out of range": ({"edit": _set("layers/nonzero/size_outputs/0/0", 7)},
                                       r"layer 'nonzero' declares size tensor output 7, which is not a 0-d output"),
    "negative constant dimension": ({"edit": _set("tensors/x/shape/1", -4)}, r"tensor 'x' has a negative dimension -4"),
    "input dimension differs from io_shapes": ({"edit": _set("tensors/x/shape/1", 10**6)},
                                               r"input 'x' axis 1 is 1000000 but its declared size is 4"),
    "input dimension made dynamic": ({"edit": _set("tensors/x/shape/1", ["sym", "x[0]"])}, r"input 'x' axis 1"),
    "layer reads a tensor before it is written": ({"edit": _set("layers/pad_v2/inputs/0", 5)}, r"reads tensor 'padded' before any layer writes it"),
    "io tensor with an internal role": ({"edit": _set("tensors/padded/role", "internal")}, r"has role 'internal'"),
    "missing layers": ({"edit": _drop("layers")}, r"malformed: KeyError"),
    "missing tensors": ({"edit": _drop("tensors")}, r"malformed: KeyError"),
    "missing profiles": ({"edit": _drop("profiles")}, r"malformed: KeyError"),
    "tensors is an object": ({"edit": _set("tensors", {"x": 1})}, r"malformed"),
    "layers is a number": ({"edit": _set("layers", 3)}, r"malformed: TypeError"),
    "profile min/opt/max missing": ({"edit": _set("profiles/0/shapes/x", [[1, 4], [4, 4]])}, r"min, opt and max"),
    "record interfaces swapped": ({"plugins": _interface_swapped}, r"does not match record interface"),
    "records reordered": ({"plugins": _records_reordered}, r"does not match record interface|deserialize_plugin\(\)|create_plugin\(\)"),
    "plugin payloads garbage": ({"plugins": _payload_garbage}, r"layer 'pad_v2', plugin CircPadPlugin v1 creator, deserialize_plugin\(\): bad magic"),
    "plugin payloads truncated": ({"plugins": _payload_truncated}, r"layer 'pad_v2', plugin CircPadPlugin v1 creator, deserialize_plugin\(\).*truncated"),
    "record for an unknown plugin": ({"plugins": lambda rs: [dataclasses.replace(rs[0], name="NoSuchPlugin"), *rs[1:]]},
                                     r"no plugin creator for 'NoSuchPlugin' version '1' namespace ''"),
    "weights removed": ({"weights": lambda ws: {}}, r"missing weights"),
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_tampered_contents_raise_plugrt_errors(plan: bytes, case: str) -> None:
    changes, message = TAMPERS[case]
    data = _rewrite(plan, **changes)
    assert data != plan
    with pytest.raises(trt.PlugrtError, match=message):
        engine = _load(data)
        # some damage can only show when the engine runs: it must still be a PlugrtError
        infer(engine, np.ones((2, 4), np.float32))


@pytest.mark.parametrize("case", [c for c in sorted(TAMPERS) if not c.startswith(("records", "plugin payloads", "record for", "static family"))])
def test_tampered_header_is_a_plan_format_error_at_load(plan: bytes, case: str) -> None:
    """Header damage is found by deserialize_cuda_engine itself, as PlanFormatError (or the registry's error)."""
    changes, _ = TAMPERS[case]
    with pytest.raises((trt.PlanFormatError, trt.CreatorNotFoundError)):
        _load(_rewrite(plan, **changes))


def test_harmless_edits_still_load(plan: bytes) -> None:
    """The validation is not over-eager: renaming the network or a layer keeps a working engine."""
    def rename(header: dict[str, Any]) -> None:
        header["name"] = "renamed"
        _layer(header, "relu")["name"] = "relu_renamed"

    engine = _load(_rewrite(plan, rename))
    assert engine.name == "renamed"
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    np.testing.assert_array_equal(infer(engine, x)["padded"], reference(x)["padded"])


# --- contents that load although they are inconsistent (bugs) ----------------------------------


@pytest.mark.parametrize("value", [16, 3])
def test_output_dimension_differing_from_io_shapes_is_rejected(plan: bytes, value: int) -> None:
    data = _rewrite(plan, _set("tensors/padded/shape/1", value))
    with pytest.raises(trt.PlanFormatError, match=r"'padded'"):
        engine = _load(data)
        context = engine.create_execution_context()
        assert context.set_input_shape("x", (2, 4))
        # what the engine promises and what the context then reports must agree
        assert tuple(context.get_tensor_shape("padded"))[1] == engine.get_tensor_shape("padded")[1]


def test_family_not_fitting_the_revived_plugin_is_rejected_at_load(plan: bytes) -> None:
    data = _rewrite(plan, _set("layers/pad_v2/params/family", "v2_static"))
    with pytest.raises(trt.PlugrtError, match=r"pad_v2"):
        _load(data)


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [path] if path else []
    if isinstance(value, dict):
        for key, sub in value.items():
            paths += _leaf_paths(sub, (*path, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            paths += _leaf_paths(sub, (*path, i))
    return paths


JUNK: list[Any] = [-1, 0, 1, 3, 10**6, 2**62, "x", "", None, [], {}, 1.5, True, [1], ["sym", "x[0]"], ["SUM", 1],
                   "FLOAT", "input", "output", "internal", "v2", "v3", "v2_dynamic", {"a": 1}]


def test_random_header_edits_only_raise_plugrt_errors(plan: bytes) -> None:
    """1500 edits of one header value each (fixed seed): loading and running raise PlugrtError or work."""
    base = decode_plan(plan)
    paths = _leaf_paths(base.header)
    rng = random.Random(5)
    escaped: dict[str, str] = {}
    for _ in range(1500):
        header = copy.deepcopy(base.header)
        path = rng.choice(paths)
        node: Any = header
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = copy.deepcopy(rng.choice(JUNK))
        try:
            data = encode_plan(PlanContents(header, base.weights, base.plugins))
        except trt.SerializationError:
            continue
        try:
            infer(_load(data), np.ones((2, 4), np.float32))
        except (trt.PlugrtError, UnusableShape):  # UnusableShape: see test_output_dimension_differing_from_io_shapes
            pass
        except Exception as exc:
            escaped.setdefault(type(exc).__name__, f"{path}: {exc}")
    assert not escaped, escaped
