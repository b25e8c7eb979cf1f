"""Defining decorator-API plugins: the schema from type hints, and every misuse with its message."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest

import plugrt as trt
import plugrt.plugin as trtp
from plugrt.plugin import _lib

E = trt.PluginDefinitionError


@pytest.fixture
def ids() -> Iterator[list[str]]:
    """Plugin ids a test defines; forgotten afterwards."""
    made: list[str] = []
    yield made
    for plugin_id in made:
        _lib.forget(plugin_id)


def _register(ids: list[str], plugin_id: str, lazy: bool = False):  # type: ignore[no-untyped-def]
    ids.append(plugin_id)
    return trtp.register(plugin_id, lazy_register=lazy)


def _network() -> tuple[trt.INetworkDefinition, trt.ITensor]:
    network = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_network(0)
    return network, network.add_input("x", trt.float32, (2, 3))


def test_register_reads_the_schema_and_registers_a_creator(ids: list[str]) -> None:
    @_register(ids, "t::schema")
    def desc(
        x: trtp.TensorDesc,
        y: trtp.TensorDesc,
        count: int,
        alpha: float,
        name: str,
        flag: bool,
        blob: bytes,
        pads: npt.NDArray[np.int32],
        mask: npt.NDArray[np.bool_],
    ) -> tuple[trtp.TensorDesc, trtp.TensorDesc]:
        return x.like(), y.like()

    definition = trtp.op.t.schema
    assert isinstance(definition, trtp.PluginDef) and definition.plugin_id == "t::schema"
    assert definition.schema.tensor_names == ["x", "y"] and definition.schema.num_outputs == 2
    creator = trt.get_plugin_registry().get_creator("schema", "1", "t")
    assert isinstance(creator, _lib.QuickPluginCreator) and creator.plugin_namespace == "t"
    types = {f.name: f.type for f in creator.field_names}
    assert types == {
        "count": trt.PluginFieldType.INT64,
        "alpha": trt.PluginFieldType.FLOAT64,
        "name": trt.PluginFieldType.CHAR,
        "flag": trt.PluginFieldType.INT8,
        "blob": trt.PluginFieldType.UNKNOWN,
        "pads": trt.PluginFieldType.INT32,
        "mask": trt.PluginFieldType.INT8,
    }


def test_lazy_register_waits_for_the_first_call(ids: list[str]) -> None:
    @_register(ids, "t::lazy", lazy=True)
    def desc(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x.like()

    registry = trt.get_plugin_registry()
    assert registry.get_creator("lazy", "1", "t") is None
    _, x = _network()
    trtp.op.t.lazy(x)
    assert isinstance(registry.get_creator("lazy", "1", "t"), _lib.QuickPluginCreator)


def _bad_register(ids: list[str], plugin_id: str, func: object, message: str) -> None:
    ids.append(plugin_id)
    with pytest.raises(E, match=message):
        trtp.register(plugin_id)(func)  # type: ignore[arg-type]


def test_register_misuse(ids: list[str]) -> None:
    def no_hint(x, n: int) -> trtp.TensorDesc:  # type: ignore[no-untyped-def]
        return x

    _bad_register(ids, "t::a", no_hint, "'t::a': parameter 'x' has no type hint; mark it trtp.TensorDesc")

    def default(x: trtp.TensorDesc, n: int = 2) -> trtp.TensorDesc:
        return x

    _bad_register(ids, "t::b", default, "'n' has a default value")

    def interspersed(x: trtp.TensorDesc, n: int, y: trtp.TensorDesc) -> trtp.TensorDesc:
        return x

    _bad_register(ids, "t::c", interspersed, "tensor 'y' comes after attributes")

    def listed(x: trtp.TensorDesc, sizes: list) -> trtp.TensorDesc:  # type: ignore[type-arg]
        return x

    _bad_register(ids, "t::d", listed, "attribute 'sizes' has type <class 'list'>, which cannot be serialized")

    def complex_array(x: trtp.TensorDesc, v: npt.NDArray[np.complex64]) -> trtp.TensorDesc:
        return x

    _bad_register(ids, "t::e", complex_array, "attribute 'v' has type")

    def reserved(x: trtp.TensorDesc, stream: int) -> trtp.TensorDesc:
        return x

    _bad_register(ids, "t::f", reserved, "'stream' cannot be an attribute name")

    def no_return(x: trtp.TensorDesc):  # type: ignore[no-untyped-def]
        return x

    _bad_register(ids, "t::g", no_return, "no return type hint")

    def wrong_return(x: trtp.TensorDesc) -> int:
        return 0

    _bad_register(ids, "t::h", wrong_return, "returns <class 'int'>; declare -> trtp.TensorDesc")

    def attr_first(n: int, x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x

    _bad_register(ids, "t::i", attr_first, "the first parameter 'n' must be a trtp.TensorDesc")

    def star(*xs: trtp.TensorDesc) -> trtp.TensorDesc:
        return xs[0]

    _bad_register(ids, "t::j", star, "parameter 'xs' must be a plain or keyword-only parameter")


@pytest.mark.parametrize(
    ("plugin_id", "message"),
    [
        ("no_namespace", "has the form 'namespace::name'"),
        ("trt::x", "namespace 'trt' is reserved"),
        ("::x", "namespace '' is reserved"),
        ("my.ns::x", "cannot contain '.'"),
        ("ns::a-b", "must be a Python identifier"),
        (3, "has the form 'namespace::name'"),
    ],
)
def test_register_rejects_bad_ids(plugin_id: object, message: str) -> None:
    with pytest.raises(E, match=message):
        trtp.register(plugin_id)  # type: ignore[arg-type]


def test_two_registrations_of_one_id(ids: list[str]) -> None:
    @_register(ids, "t::twice")
    def first(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x.like()

    def second(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x.like()

    with pytest.raises(E, match=r"'t::twice'\) for .*second: the plugin is already registered \(by .*first\)"):
        trtp.register("t::twice")(second)


def test_impl_autotune_and_aot_impl_are_checked_against_register(ids: list[str]) -> None:
    @_register(ids, "t::hooks")
    def desc(x: trtp.TensorDesc, n: int, alpha: float) -> trtp.TensorDesc:
        return x.like()

    with pytest.raises(
        E, match=r"impl function .*wrong_order.*'t::hooks': parameters \(x, alpha, n, outputs, stream\)"
    ):

        @trtp.impl("t::hooks")
        def wrong_order(x, alpha, n, outputs, stream):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(E, match=r"differ from register's; expected the tensors \(x\)"):

        @trtp.impl("t::hooks")
        def no_stream(x, n, outputs):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(E, match=r"parameter 'n' is hinted <class 'float'>; expected int \(as in register\)"):

        @trtp.impl("t::hooks")
        def wrong_hint(x, n: float, outputs, stream):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(E, match=r"parameter 'x' is hinted .*TensorDesc.*; expected trtp.Tensor"):

        @trtp.impl("t::hooks")
        def desc_for_tensor(x: trtp.TensorDesc, outputs, stream):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(E, match=r"parameter 'outputs' is hinted .*; expected Tuple\[trtp.Tensor\]"):

        @trtp.impl("t::hooks")
        def outputs_list(x, outputs: list[trtp.Tensor], stream):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(E, match="returns <class 'int'>; expected None"):

        @trtp.impl("t::hooks")
        def returns(x, outputs, stream) -> int:  # type: ignore[no-untyped-def]
            return 0

    @trtp.impl("t::hooks")
    def good(x: trtp.Tensor, alpha: float, outputs: tuple[trtp.Tensor], stream: int, tactic: int) -> None:
        pass

    definition = trtp.op.t.hooks
    assert definition.impl_attrs == ["alpha"] and definition.impl_takes_tactic

    with pytest.raises(E, match=r"autotune function .*'t::hooks': parameters \(x, outputs, stream\)"):

        @trtp.autotune("t::hooks")
        def tune_stream(x, outputs, stream):  # type: ignore[no-untyped-def]
            return []

    with pytest.raises(E, match=r"returns <class 'str'>; expected List\[trtp.AutoTuneCombination\]"):

        @trtp.autotune("t::hooks")
        def tune_returns(x, outputs) -> str:  # type: ignore[no-untyped-def]
            return ""

    with pytest.raises(E, match=r"aot_impl function .*'t::hooks': parameters \(x, n, outputs\)"):

        @trtp.aot_impl("t::hooks")
        def aot_no_tactic(x, n, outputs):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(E, match=r"expected Tuple\[str | bytes, str | bytes, trtp.KernelLaunchParams, trtp.SymExprs\]"):

        @trtp.aot_impl("t::hooks")
        def aot_returns(x, outputs, tactic) -> tuple[str, str]:  # type: ignore[no-untyped-def]
            return "", ""


def test_hooks_for_an_unregistered_plugin() -> None:
    for decorator in (trtp.impl, trtp.autotune, trtp.aot_impl):
        with pytest.raises(
            E, match=r"\('t::missing'\): no such QDP plugin is registered; define it with @trtp.register"
        ):
            decorator("t::missing")(lambda: None)


def test_string_annotations_are_resolved(ids: list[str]) -> None:
    exec(
        "from __future__ import annotations\n"
        "import plugrt.plugin as trtp\n"
        "@trtp.register('t::future')\n"
        "def desc(x: trtp.TensorDesc, n: int) -> trtp.TensorDesc:\n"
        "    return x.like()\n",
        {},
    )
    ids.append("t::future")
    assert trtp.op.t.future.schema.attrs["n"].builtin is int
    with pytest.raises(E, match="cannot be resolved"):
        exec(
            "from __future__ import annotations\n"
            "import plugrt.plugin as trtp\n"
            "@trtp.register('t::unresolved')\n"
            "def desc(x: trtp.TensorDesc, n: Missing) -> trtp.TensorDesc:\n"
            "    return x.like()\n",
            {},
        )


def test_op_calls_are_checked_against_the_schema(ids: list[str]) -> None:
    @_register(ids, "t::call")
    def desc(x: trtp.TensorDesc, n: int, alpha: float, pads: npt.NDArray[np.int32]) -> trtp.TensorDesc:
        return x.like()

    _, x = _network()
    op = trtp.op.t.call
    pads = np.array([1, 2], np.int32)
    with pytest.raises(E, match=r"trtp.op.t.call takes 1 input tensors \(x\), got 2"):
        op(x, x, n=1, alpha=1.0, pads=pads)
    with pytest.raises(E, match="input 0 must be an ITensor, got ndarray"):
        op(np.zeros(3), n=1, alpha=1.0, pads=pads)
    with pytest.raises(E, match=r"unexpected: \['beta'\]; missing: \['alpha'\]"):
        op(x, n=1, beta=1.0, pads=pads)
    with pytest.raises(E, match=r"attribute 'alpha' is declared float .* got int 1"):
        op(x, n=1, alpha=1, pads=pads)
    with pytest.raises(E, match=r"attribute 'n' is declared int .* got bool True"):
        op(x, n=True, alpha=1.0, pads=pads)
    with pytest.raises(E, match=r"attribute 'pads' is declared NDArray\[int32\] .* got an array of int64"):
        op(x, n=1, alpha=1.0, pads=np.array([1, 2]))
    with pytest.raises(E, match="pass a 1-D numpy array, got list"):
        op(x, n=1, alpha=1.0, pads=[1, 2])
    with pytest.raises(E, match="got ndarray of 2 dimensions"):
        op(x, n=1, alpha=1.0, pads=np.zeros((2, 2), np.int32))


def test_op_namespace_lookups_say_what_exists(ids: list[str]) -> None:
    @_register(ids, "t::lookup")
    def desc(x: trtp.TensorDesc) -> trtp.TensorDesc:
        return x.like()

    with pytest.raises(AttributeError, match=r"no QDP plugin 'nope' in namespace 't'; defined: .*lookup"):
        _ = trtp.op.t.nope
    with pytest.raises(AttributeError, match=r"no QDP plugin namespace 'nowhere'; namespaces: .*t"):
        _ = trtp.op.nowhere
