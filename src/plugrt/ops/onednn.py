"""oneDNN's primitives called directly through its C API (the optional extra ``plugrt[onednn]``).

PyTorch reaches oneDNN's convolutions too, but through a call that redoes its setup every time: ~20-27 us above
the kernel whatever its size, more than the whole kernel of most of a small CNN's layers (docs/benchmarks.md).
Here a primitive is created once, when a layer is bound, with the buffers' addresses in its arguments; a run is one
``dnnl_primitive_execute`` (1-2 us above the kernel). The kernels are oneDNN's own (the same JIT-generated code
PyTorch's build runs), so results match PyTorch's path bit for bit where both choose the same implementation.

The library is oneDNN 3.x built with GNU OpenMP (``libdnnl.so.3``, the ``onednn-cpu-gomp`` wheel puts it in
``<prefix>/lib``); ``PLUGRT_ONEDNN_LIBRARY`` names another file. It is loaded at the first layer that could use
it, never at ``import plugrt``; where it is absent, fails to load, is not a 3.x build on OpenMP or a sequential
runtime, or ``PLUGRT_ONEDNN`` turns it off (``0``, ``off``, ``false``, ``no``), :func:`library` is None and the
layers run their other kernels.

Threads: oneDNN's OpenMP (the system's ``libgomp``, not PyTorch's copy) is told the thread count before a
primitive is created (its work is split then) and before each run (``_Library.use_threads``). It is loaded with the
spin count PyTorch's OpenMP gets (``torch_cpu.openmp_spin``), so neither runtime's workers hold a core for
milliseconds after their region. Runs on the CPU are synchronous (no wait on the stream).
"""

from __future__ import annotations

import ctypes
import os
import site
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..backends.cpu import zeroed_pages

__all__ = [
    "ACTIVATIONS",
    "ARG_BIAS",
    "ARG_DST",
    "ARG_DST_ITER",
    "ARG_DST_ITER_C",
    "ARG_MULTIPLE_SRC",
    "ARG_SCRATCHPAD",
    "ARG_SRC",
    "ARG_SRC_ITER",
    "ARG_SRC_ITER_C",
    "ARG_WEIGHTS",
    "ARG_WEIGHTS_ITER",
    "CONVOLUTION_DIRECT",
    "DECONVOLUTION_DIRECT",
    "ENV_SWITCH",
    "FORWARD_INFERENCE",
    "LIBRARY_VARIABLE",
    "SCRATCH_ALIGN",
    "SCRATCH_SLOT",
    "SOFTMAX_ACCURATE",
    "STANDALONE_ACTIVATIONS",
    "UNARY",
    "Desc",
    "Memory",
    "OneDnnError",
    "PostOps",
    "Primitive",
    "activation_steps",
    "available",
    "convolution_maker",
    "fast_primitives",
    "library",
    "pointer",
    "thread_buffer",
]

#: the environment variable that turns the direct oneDNN kernels off ("0", "off", "false", "no")
ENV_SWITCH = "PLUGRT_ONEDNN"
#: the environment variable naming the library file to load instead of the wheel's
LIBRARY_VARIABLE = "PLUGRT_ONEDNN_LIBRARY"
_OFF = ("0", "off", "false", "no")

# The C API's constants (oneDNN 3.x, dnnl_types.h and dnnl_config.h)
_F32 = 3
#: ``dnnl_forward_inference`` and ``dnnl_convolution_direct``
FORWARD_INFERENCE = 96
CONVOLUTION_DIRECT = 1
#: ``dnnl_deconvolution_direct``
DECONVOLUTION_DIRECT = 10
_FORMAT_ANY = 1
_CPU_ENGINE = 1
_IN_ORDER = 1
_SCRATCHPAD_USER = 1
_QUERY_IMPL_INFO = 8
_QUERY_EXEC_ARG_MD = 255
_QUERY_SCRATCHPAD_MD = 136
_RUNTIME_SEQ = 1
_RUNTIME_OMP = 2
_BINARY_ADD = 0x1FFF0
#: eltwise algorithms by name (``dnnl_eltwise_*``)
ELTWISE = {
    "relu": 0x20,
    "tanh": 0x21,
    "sqrt": 0x25,
    "linear": 0x26,
    "hardsigmoid": 0x28,
    "logistic": 0x29,
    "gelu_tanh": 0x2B,
    "clip": 0x2E,
    "gelu_erf": 0x31,
    "hardswish": 0x34,
}
#: the engine's activation types oneDNN computes: type -> (alpha, beta) -> (eltwise algorithm, its alpha, its beta)
ACTIVATIONS: dict[str, Callable[[float, float], tuple[str, float, float]]] = {
    "RELU": lambda a, b: ("relu", 0.0, 0.0),
    "LEAKY_RELU": lambda a, b: ("relu", a, 0.0),
    "CLIP": lambda a, b: ("clip", a, b),
    "HARD_SWISH": lambda a, b: ("hardswish", 1.0 / 6.0, 0.5),
    "HARD_SIGMOID": lambda a, b: ("hardsigmoid", a, b),
    "SIGMOID": lambda a, b: ("logistic", 0.0, 0.0),
    "TANH": lambda a, b: ("tanh", 0.0, 0.0),
    "GELU_ERF": lambda a, b: ("gelu_erf", 0.0, 0.0),
    "GELU_TANH": lambda a, b: ("gelu_tanh", 0.0, 0.0),
}


def activation_steps(name: str, alpha: float = 0.0, beta: float = 0.0) -> list[tuple[str, float, float]] | None:
    """An activation of the engine's (its type, "" for none, and its alpha and beta) as eltwise post-ops: none, or
    one; None where oneDNN has no algorithm for it (:data:`ACTIVATIONS`)."""
    if not name:
        return []
    make = ACTIVATIONS.get(name)
    return None if make is None else [make(alpha, beta)]


#: the activation types a layer of its own runs as oneDNN's eltwise primitive: those whose special values are
#: PyTorch's (oneDNN's relu, clip and hardsigmoid give a NaN a number; GELU of -inf, and of +inf in its erf form, is
#: NaN as in PyTorch and onnxruntime)
STANDALONE_ACTIVATIONS = frozenset({"LEAKY_RELU", "SIGMOID", "TANH", "HARD_SWISH", "GELU_ERF", "GELU_TANH"})
#: the unary functions oneDNN computes as NumPy does: the engine's op -> eltwise algorithm (oneDNN 3.2's exp gives a
#: NaN +inf, its log is off for subnormal inputs)
UNARY = {"SQRT": "sqrt"}
#: ``dnnl_softmax_accurate``
SOFTMAX_ACCURATE = 0x30000
ARG_SRC = 1
ARG_SRC_1 = 2
#: a recurrent primitive's initial hidden and cell states, final ones, and recurrent weights
ARG_SRC_ITER, ARG_SRC_ITER_C, ARG_DST_ITER, ARG_DST_ITER_C, ARG_WEIGHTS_ITER = 2, 3, 18, 19, 34
ARG_DST = 17
ARG_WEIGHTS = 33
ARG_BIAS = 41
ARG_SCRATCHPAD = 80
#: the first of a concat's sources (``DNNL_ARG_MULTIPLE_SRC``; the k-th is this plus k)
ARG_MULTIPLE_SRC = 1024
_POST_OP_BASE = 32768
_MAX_DIMS = 12

_Dims = ctypes.c_int64 * _MAX_DIMS
_P = ctypes.c_void_p


class OneDnnError(RuntimeError):
    """A call into oneDNN failed (the layer then runs another kernel)."""


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _P)]


class _Version(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_int),
        ("minor", ctypes.c_int),
        ("patch", ctypes.c_int),
        ("hash", ctypes.c_char_p),
        ("cpu_runtime", ctypes.c_uint),
        ("gpu_runtime", ctypes.c_uint),
    ]


_STATE: dict[str, Any] = {"library": None, "tried": False}
_LOCAL = threading.local()


class _Library:
    """The loaded library, its CPU engine and its OpenMP's thread control."""

    def __init__(self, dll: ctypes.CDLL, openmp: Any, version: str) -> None:
        self.dll = dll
        self.openmp = openmp
        #: the library's version, ``major.minor.patch``
        self.version = version
        dll.dnnl_primitive_desc_query_md.restype = _P
        dll.dnnl_primitive_desc_query_md.argtypes = [_P, ctypes.c_int, ctypes.c_int]
        dll.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        dll.dnnl_memory_desc_get_size.argtypes = [_P]
        dll.dnnl_memory_desc_equal.restype = ctypes.c_int
        dll.dnnl_memory_desc_equal.argtypes = [_P, _P]
        dll.dnnl_post_ops_append_binary.argtypes = [_P, ctypes.c_int, _P]
        dll.dnnl_primitive_execute.restype = ctypes.c_int
        dll.dnnl_primitive_execute.argtypes = [_P, _P, ctypes.c_int, _P]
        dll.dnnl_memory_set_data_handle.restype = ctypes.c_int
        dll.dnnl_memory_set_data_handle.argtypes = [_P, _P]
        for name in ("dnnl_memory_desc_destroy", "dnnl_memory_destroy", "dnnl_primitive_destroy"):
            getattr(dll, name).argtypes = [_P]
        dll.dnnl_primitive_desc_destroy.argtypes = [_P]
        dll.dnnl_primitive_attr_destroy.argtypes = [_P]
        dll.dnnl_post_ops_destroy.argtypes = [_P]
        self.engine = _P()
        check(dll.dnnl_engine_create(ctypes.byref(self.engine), _CPU_ENGINE, ctypes.c_size_t(0)), "engine_create")
        self.execute = dll.dnnl_primitive_execute
        self.set_handle = dll.dnnl_memory_set_data_handle

    def use_threads(self, count: int) -> None:
        """Make the next primitive creation or run on this thread use ``count`` threads (OpenMP's count is the
        calling thread's; a sequential build has one)."""
        if self.openmp is not None and getattr(_LOCAL, "threads", 0) != count:
            self.openmp.omp_set_num_threads(count)
            _LOCAL.threads = count

    def stream(self) -> _P:
        """This thread's stream (oneDNN's streams are not shared between threads)."""
        stream = getattr(_LOCAL, "stream", None)
        if stream is None:
            stream = _P()
            check(self.dll.dnnl_stream_create(ctypes.byref(stream), self.engine, ctypes.c_uint(_IN_ORDER)), "stream")
            _LOCAL.stream = stream
        return stream


def check(status: int, what: str) -> None:
    """Raise :class:`OneDnnError` naming the call ``what`` for a status other than success."""
    if status != 0:
        names = {1: "out of memory", 2: "invalid arguments", 3: "unimplemented", 5: "runtime error"}
        raise OneDnnError(f"oneDNN {what} failed: {names.get(status, f'status {status}')}")


def available() -> bool:
    """True when the direct oneDNN kernels can run: the library loads and ``PLUGRT_ONEDNN`` does not turn it off."""
    return library() is not None


def library() -> _Library | None:
    """The loaded library (see the module's note), loaded on first use; None where it cannot run here."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in _OFF:
        return None
    if not _STATE["tried"]:
        _STATE["tried"] = True
        _STATE["library"] = _load()
    result: _Library | None = _STATE["library"]
    return result


def _candidates() -> list[str]:
    """Where the library may be: ``PLUGRT_ONEDNN_LIBRARY``, else the wheel's place in this environment (``sys.prefix``;
    a virtual environment's own, not its base interpreter's) or in the user's site (``pip install --user``)."""
    named = os.environ.get(LIBRARY_VARIABLE, "").strip()
    if named:
        return [named]
    places = [sys.prefix, site.getuserbase()]
    return [os.path.join(place, "lib", "libdnnl.so.3") for place in places]


def _load() -> _Library | None:
    from .torch_cpu import openmp_spin

    for path in _candidates():
        if not os.path.exists(path):
            continue
        try:
            with openmp_spin(False):  # the spin count PyTorch's OpenMP gets, for the libgomp loaded with it
                dll = ctypes.CDLL(path)
            dll.dnnl_version.restype = ctypes.POINTER(_Version)
            version = dll.dnnl_version().contents
            if version.major != 3 or version.cpu_runtime not in (_RUNTIME_SEQ, _RUNTIME_OMP):
                continue
            openmp = ctypes.CDLL("libgomp.so.1") if version.cpu_runtime == _RUNTIME_OMP else None
            return _Library(dll, openmp, f"{version.major}.{version.minor}.{version.patch}")
        except (OSError, AttributeError, OneDnnError):
            continue
    return None


class _Owned:
    """A handle oneDNN made, destroyed with this object."""

    __slots__ = ("destroy", "handle")

    def __init__(self, destroy: Callable[[Any], Any]) -> None:
        self.handle = _P()
        self.destroy = destroy

    def __del__(self) -> None:
        if self.handle:
            self.destroy(self.handle)
            self.handle = _P()


def pointer(value: Any) -> _P:
    """A pointer argument: an owned handle's, a pointer's, or an address (None: null); never a bare int, which
    ctypes would pass as a 32-bit C int."""
    if isinstance(value, _Owned):
        return value.handle
    return value if isinstance(value, _P) else _P(value)


def dims(values: Sequence[int]) -> Any:
    """A ``dnnl_dims_t`` of ``values``."""
    result = _Dims()
    for i, v in enumerate(values):
        result[i] = int(v)
    return result


class Desc(_Owned):
    """A FLOAT memory descriptor: ``shape`` with element ``strides``, or any layout oneDNN picks (``strides`` None)."""

    __slots__ = ("shape",)

    def __init__(self, lib: _Library, shape: Sequence[int], strides: Sequence[int] | None) -> None:
        super().__init__(lib.dll.dnnl_memory_desc_destroy)
        self.shape = tuple(int(d) for d in shape)
        if strides is None:
            status = lib.dll.dnnl_memory_desc_create_with_tag(
                ctypes.byref(self.handle), len(shape), dims(shape), _F32, _FORMAT_ANY
            )
        else:
            status = lib.dll.dnnl_memory_desc_create_with_strides(
                ctypes.byref(self.handle), len(shape), dims(shape), _F32, dims(strides)
            )
        check(status, f"memory descriptor {list(shape)}")


class Memory(_Owned):
    """A memory object over ``address`` described by ``desc`` (a :class:`Desc`, or a descriptor a primitive owns);
    ``hold``: the array at that address, kept alive with it."""

    __slots__ = ("address", "desc", "hold", "nbytes", "owner", "slot")

    def __init__(self, lib: _Library, desc: Any, address: int, hold: Any = None) -> None:
        super().__init__(lib.dll.dnnl_memory_destroy)
        self.desc = pointer(desc)
        self.owner = desc  # the descriptor lives as long as the memory
        self.hold = hold
        check(
            lib.dll.dnnl_memory_create(ctypes.byref(self.handle), self.desc, lib.engine, _P(address)), "memory_create"
        )
        self.address = address
        #: for a :meth:`transient` memory, its slot among the running thread's buffers (else None) and its size
        self.slot: int | None = None
        self.nbytes = 0

    @classmethod
    def transient(cls, lib: _Library, desc: Any, slot: int) -> Memory:
        """A memory whose contents live only during one layer's run (a staging copy, a scratchpad): in buffer
        ``slot`` of the running thread's (:func:`thread_buffer`), where each :meth:`Primitive.run` that reads or
        writes it points it first. The layers of an engine then share those bytes instead of each holding its
        own: PP-OCR det's channels-last copies of its LINEAR tensors were 30 MB, one per layer. A layer gives
        each of its transient memories a slot of its own (:data:`SCRATCH_SLOT` is the scratchpad's)."""
        nbytes = int(lib.dll.dnnl_memory_desc_get_size(pointer(desc)))
        memory = cls(lib, desc, thread_buffer(slot, nbytes))
        memory.slot, memory.nbytes = slot, nbytes
        return memory

    @property
    def desc_shape(self) -> list[int]:
        """The logical shape of a :class:`Desc` it was made with (empty for a primitive's descriptor)."""
        return list(self.owner.shape) if isinstance(self.owner, Desc) else []

    def point(self, lib: _Library, address: int) -> None:
        """Make the memory read or write at ``address`` (set only when it moved)."""
        if address != self.address:
            check(lib.set_handle(self.handle, _P(address)), "memory_set_data_handle")
            self.address = address

    def settle(self, lib: _Library) -> None:
        """Point a :meth:`transient` memory at this thread's buffer of its slot (others stay where they are)."""
        if self.slot is not None:
            self.point(lib, thread_buffer(self.slot, self.nbytes))


class PostOps(_Owned):
    """A primitive's post-ops, appended in order: eltwise algorithms and binary adds of another tensor."""

    __slots__ = ("count", "lib")

    def __init__(self, lib: _Library) -> None:
        super().__init__(lib.dll.dnnl_post_ops_destroy)
        check(lib.dll.dnnl_post_ops_create(ctypes.byref(self.handle)), "post_ops_create")
        self.lib = lib
        self.count = 0

    def eltwise(self, name: str, alpha: float = 0.0, beta: float = 0.0) -> None:
        """Append eltwise algorithm ``name`` (a key of :data:`ELTWISE`) with its two scalars."""
        status = self.lib.dll.dnnl_post_ops_append_eltwise(
            self.handle, ELTWISE[name], ctypes.c_float(alpha), ctypes.c_float(beta)
        )
        check(status, f"post-op {name}")
        self.count += 1

    def add(self, desc: Desc) -> int:
        """Append the addition of a tensor described by ``desc``; returns its argument index
        (``DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1``)."""
        check(self.lib.dll.dnnl_post_ops_append_binary(self.handle, _BINARY_ADD, desc.handle), "post-op add")
        self.count += 1
        return _post_op_input(self.count - 1)


def _post_op_input(index: int) -> int:
    """The execution argument of the tensor read by post-op ``index`` (``DNNL_ARG_ATTR_MULTIPLE_POST_OP | SRC_1``)."""
    return _POST_OP_BASE * (index + 1) | ARG_SRC_1


class Primitive:
    """A primitive created from the descriptor ``make(pd_pointer, attr)`` returns the status of, on ``threads``
    threads, with its scratchpad in the running thread's buffer (:func:`thread_buffer`); its arguments are set
    once (:meth:`bind`) and each :meth:`run` is one execution."""

    def __init__(self, lib: _Library, make: Callable[[Any, Any], int], post_ops: PostOps | None, threads: int) -> None:
        self.lib = lib
        self.threads = threads
        attr = _Owned(lib.dll.dnnl_primitive_attr_destroy)
        check(lib.dll.dnnl_primitive_attr_create(ctypes.byref(attr.handle)), "primitive_attr_create")
        check(lib.dll.dnnl_primitive_attr_set_scratchpad_mode(attr.handle, _SCRATCHPAD_USER), "scratchpad mode")
        if post_ops is not None and post_ops.count:
            check(lib.dll.dnnl_primitive_attr_set_post_ops(attr.handle, post_ops.handle), "set_post_ops")
        self._pd = _Owned(lib.dll.dnnl_primitive_desc_destroy)
        lib.use_threads(threads)  # oneDNN splits the work for the threads it has when the primitive is made
        check(make(ctypes.byref(self._pd.handle), attr.handle), "primitive descriptor")
        info = ctypes.c_char_p()
        check(lib.dll.dnnl_primitive_desc_query(self._pd.handle, _QUERY_IMPL_INFO, 0, ctypes.byref(info)), "query")
        #: the implementation oneDNN chose (e.g. ``brgconv:avx512_core``; ``ref`` ones are its slow references)
        self.implementation = (info.value or b"").decode()
        self._primitive = _Owned(lib.dll.dnnl_primitive_destroy)
        check(lib.dll.dnnl_primitive_create(ctypes.byref(self._primitive.handle), self._pd.handle), "primitive_create")
        scratch_md = lib.dll.dnnl_primitive_desc_query_md(self._pd.handle, _QUERY_SCRATCHPAD_MD, 0)
        size = int(lib.dll.dnnl_memory_desc_get_size(scratch_md)) if scratch_md else 0
        self._scratch_memory = Memory.transient(lib, scratch_md, SCRATCH_SLOT) if size else None
        self._args: Any = None
        self._nargs = 0
        self._keep: list[Any] = []
        self._bound: dict[int, Memory] = {}
        self._transient: list[Memory] = []

    def arg_desc(self, arg: int) -> Any:
        """The descriptor of execution argument ``arg`` (e.g. :data:`ARG_WEIGHTS`) in the layout the primitive chose
        (owned by the primitive)."""
        return self.lib.dll.dnnl_primitive_desc_query_md(self._pd.handle, _QUERY_EXEC_ARG_MD, arg)

    def bind(self, args: Sequence[tuple[int, Memory]]) -> None:
        """The execution arguments (argument index, memory), the scratchpad's added."""
        pairs = list(args)
        if self._scratch_memory is not None:
            pairs.append((ARG_SCRATCHPAD, self._scratch_memory))
        self._keep = [m for _, m in pairs]
        self._bound = dict(pairs)
        self._transient = [m for m in self._keep if m.slot is not None]
        self._args = (_Arg * len(pairs))(*(_Arg(index, memory.handle) for index, memory in pairs))
        self._nargs = len(pairs)

    def bound(self, arg: int) -> Memory | None:
        """The memory bound to execution argument ``arg`` (:meth:`bind`), or None."""
        return self._bound.get(arg)

    def table_row(self) -> tuple[int, int, int, int, int] | None:
        """The primitive as a row of a compiled loop's table (``parts_numba_loops``): its handle, the address of its
        argument array, their count, its scratchpad's memory (0: none) and the scratchpad's size in bytes; None
        where it is not bound, or has transient memories other than the scratchpad (the loop points only that one
        at the running thread's buffer). From then on the loop points the scratchpad's memory, so its
        :meth:`Memory.point` here always sets it. The argument array's address holds until the next :meth:`bind`."""
        scratch = self._scratch_memory
        if self._args is None or any(m is not scratch for m in self._transient):
            return None
        row = (int(self._primitive.handle.value or 0), ctypes.addressof(self._args), self._nargs)
        if scratch is None:
            return (*row, 0, 0)
        scratch.address = -1  # (where the loop last pointed it is not known here)
        return (*row, int(scratch.handle.value or 0), scratch.nbytes)

    def run(self, pointed: Sequence[Memory] = ()) -> None:
        """Execute once on this thread's stream, on the threads it was made for, its transient memories in this
        thread's buffers (except those of ``pointed``, which a caller pointed elsewhere for this run)."""
        self.lib.use_threads(self.threads)
        for memory in self._transient:
            if memory not in pointed:
                memory.settle(self.lib)
        check(self.lib.execute(self._primitive.handle, self.lib.stream(), self._nargs, self._args), "execute")


#: transient buffers start on this many bytes (a cache line, a vector register of AVX-512)
SCRATCH_ALIGN = 64
#: the slot of a primitive's scratchpad among the thread's buffers (:meth:`Memory.transient`)
SCRATCH_SLOT = 0


def thread_buffer(slot: int, size: int) -> int:
    """The address of this thread's buffer ``slot``, at least ``size`` bytes, grown (a new buffer) when too small.

    What a :meth:`Memory.transient` memory holds is read only during one layer's run, and a thread runs one
    layer at a time, so the layers share one buffer per slot and thread, as large as the largest need, rather
    than each holding its own (a BiLSTM's two LSTM primitives asked for 11 MB of scratchpad each). Each run
    points its memories here first, so a buffer left behind by growth is never read. Its pages are taken only
    where written (no huge pages)."""
    try:
        held = _LOCAL.buffers[slot]  # (size, aligned address, the buffer): a run's call costs a lookup
        if held[0] >= size:
            return held[1]  # type: ignore[no-any-return]
    except (AttributeError, IndexError):
        pass
    buffers: list[tuple[int, int, np.ndarray | None]] = getattr(_LOCAL, "buffers", [])
    _LOCAL.buffers = buffers
    buffers.extend([(-1, 0, None)] * (slot + 1 - len(buffers)))
    pages = zeroed_pages(size + SCRATCH_ALIGN, huge_pages_up_to=0)  # (a scratchpad is written in part)
    address = -(-int(pages.ctypes.data) // SCRATCH_ALIGN) * SCRATCH_ALIGN
    buffers[slot] = (size, address, pages)
    return address


def fast_primitives(
    lib: _Library, make: Callable[[Any, Any], int], post_ops: PostOps | None, counts: Sequence[int]
) -> list[Primitive] | None:
    """A :class:`Primitive` made by ``make`` for each thread count of ``counts``, or None where oneDNN chose one of its
    reference implementations (``ref:...``, far slower than the layer's other kernels)."""
    primitives = [Primitive(lib, make, post_ops, count) for count in counts]
    return None if any(p.implementation.startswith("ref") for p in primitives) else primitives


def convolution_maker(
    lib: _Library,
    source: Any,
    weights: Any,
    bias: Any,
    target: Any,
    window: tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int]],
) -> Callable[[Any, Any], int]:
    """The ``make`` of a :class:`Primitive` for oneDNN's direct forward-inference convolution of these descriptors
    (``bias`` None for none; descriptors or pointers to them); ``window``: its strides, its dilations (oneDNN's: less
    one) and its padding before and after, each along both axes."""
    strides, dilations, left, right = (dims(values) for values in window)

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_convolution_forward_primitive_desc_create(
            pd, lib.engine, FORWARD_INFERENCE, CONVOLUTION_DIRECT, pointer(source), pointer(weights), pointer(bias),
            pointer(target), strides, dilations, left, right, attr,
        )  # fmt: skip
        return status

    return make


def reordering(lib: _Library, source: Any, target: Any) -> Primitive:
    """A reorder primitive from the layout described by ``source`` into ``target``'s (descriptors), one thread."""

    def make(pd: Any, attr: Any) -> int:
        status: int = lib.dll.dnnl_reorder_primitive_desc_create(
            pd, pointer(source), lib.engine, pointer(target), lib.engine, attr
        )
        return status

    return Primitive(lib, make, None, 1)


def reorder(lib: _Library, source: np.ndarray, source_desc: Desc, target_desc: Any) -> np.ndarray:
    """``source`` (described by ``source_desc``) reordered into a new buffer laid out as ``target_desc``."""
    target = np.zeros(max(int(lib.dll.dnnl_memory_desc_get_size(pointer(target_desc))), 4) // 4, np.float32)
    source = np.ascontiguousarray(source, np.float32)
    primitive = reordering(lib, source_desc, target_desc)
    src = Memory(lib, source_desc, source.ctypes.data, hold=source)
    dst = Memory(lib, target_desc, target.ctypes.data, hold=target)
    primitive.bind([(ARG_SRC, src), (ARG_DST, dst)])
    primitive.run()
    return target


def same_desc(lib: _Library, a: Any, b: Any) -> bool:
    """Whether two descriptors describe the same layout."""
    return bool(lib.dll.dnnl_memory_desc_equal(pointer(a), pointer(b)))
