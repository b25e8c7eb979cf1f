"""Optional kernels from PyTorch (oneDNN and ATen on the CPU, cuDNN and ATen's CUDA kernels on a GPU), one tactic per layer.

The NumPy/CuPy kernels are the engine's default and need nothing else. Where PyTorch is
installed (``pip install "plugrt[torch]"``) an operator that has a PyTorch kernel offers
it as tactic :data:`TORCH_TACTIC` besides its own kernel (tactic 0); the builder times
both at the opt shapes of the first profile on the build device and records the faster in
the plan, as it does with plugin tactics (``builder/tactics.py``); ``plugrt inspect`` shows
it. At run the kernel reads and writes the engine's buffers in place: its tensors are
views made once per shape change (``torch.from_numpy`` on the CPU; on a GPU
``torch.as_tensor`` over the CuPy arrays, ``__cuda_array_interface__``), and results go
into the output views (``out=`` or ``copy_``), so nothing is copied in or out. On a GPU the
kernels run on the engine's stream: the CUDA backend makes it PyTorch's current stream for
the run (``backends/cuda.py`` ``stream_scope``), and they are captured into the engine's
CUDA graph like its own kernels. A PyTorch kernel takes FLOAT tensors on the CPU, FLOAT or
HALF on a GPU (HALF where the builder's precision pass chose it under ``BuilderFlag.FP16``).

Kernels that call oneDNN directly: on the CPU, where oneDNN's library is installed (:mod:`.onednn`), an operator's
:meth:`TorchOperator.direct_kernel` (convolution, pooling, LSTM, products, attention, normalizations, activations,
softmax, SE blocks, channel concatenations) is tried before its PyTorch kernel under the same tactics, and the tactic is offered where :meth:`TorchOperator.direct_supports`
a layer, with or without torch, without importing it: torch is imported only for a layer that needs one of its
kernels, so an engine oneDNN runs whole never imports it (~190 MB of memory).

This module is the only one that imports torch, lazily (never at ``import plugrt``).
``PLUGRT_TORCH=0`` (also ``off``, ``false``, ``no``) turns the tactic off: builds time only
NumPy and engines run their torch layers with NumPy; ``PLUGRT_TORCH=always`` makes every
layer whose PyTorch kernel applies take it without timing (to test or compare the kernels),
``PLUGRT_TORCH=nhwc`` the same with the channels-last kernel where a layer has one. A plan whose layers chose torch,
loaded where torch is absent or turned off, runs those layers with NumPy (the result
is the same within the tolerance the tests state); the engine logs a warning once. A plan
built on one device that is loaded for another (the tactic is timed on the build device) keeps
the torch tactic where PyTorch can run it there, else the layer's own kernel runs.

Channels-last runs: an operator may offer a third tactic, :data:`CHANNELS_LAST_TACTIC`, a PyTorch kernel that
reads and writes channels-last (``TensorFormat.HWC``) tensors, timed on such tensors
(:meth:`TorchOperator.tactic_formats`). The convolution does (oneDNN's convolution with its kernel
reordered once at bind, the activation inside it): consecutive layers that chose it hand over
their activations in that layout, with no reorder in or out of each (``builder/layouts.py`` gives
those tensors the format, and takes the tactic back from a layer left with none).

Hand-over: a channels-last kernel whose output is stored HWC leaves its result as torch made it
in a :class:`HandOver` slot of that buffer (:func:`hand_over`, one slot per address) instead of
copying it in (0.1-0.2 ms for each of MobileNetV2's 112 x 112 layers), and a channels-last kernel
reading an HWC tensor takes the slot's tensor when there is one. Only layers of tactic
:data:`CHANNELS_LAST_TACTIC` write or read HWC tensors (``builder/layouts.py``), and each one that
writes it either fills the slot or empties it (the NumPy kernel through linear copies, and a
convolution whose output is cropped, write the buffer), so a reader never takes a stale tensor:
within a run the writer of a tensor always runs before its readers, also where the memory plan
gives one address to tensors of disjoint lifetimes.

Memory: the first channels-last CPU kernel bound makes the C heap keep freed blocks (:mod:`.heap`): the tensors a
run hands over are allocated again at every run, and glibc otherwise maps large ones as fresh pages each time
(other engines keep glibc's thresholds: kept, BERT-base's peak rose 760 -> 791 MB).

Threads: every torch kernel runs on :func:`~plugrt.ops.blas_threads.threads_for` threads,
the engine's count (the BLAS's) when its work is large and a core is free, else one, as
the NumPy products do: a second thread that spins for work on a core another process
holds slows the whole run down. The setting is torch's process-wide one
(``torch.set_num_threads``). Torch's OpenMP workers spin briefly (:data:`OPENMP_SPIN_COUNT`) where plugrt
imports torch: where the caller imported torch first, or set ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``, that
choice stands.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..core.errors import PlanFormatError
from ..core.types import DataType, TensorFormat
from ..nodes.base import Binding
from . import onednn
from .base import Operator
from .blas_threads import quiet_blas_workers, threads_for
from .hand_over import HandOver, hand_over
from .heap import keep_freed_memory

__all__ = [
    "CHANNELS_LAST_TACTIC",
    "ENV_SWITCH",
    "MIN_OPENMP_FLOPS",
    "NUMPY_TACTIC",
    "OPENMP_SPIN_COUNT",
    "TORCH_TACTIC",
    "Kernel",
    "TorchOperator",
    "available",
    "check_tactics",
    "cuda_available",
    "direct_runs",
    "enabled",
    "forced",
    "forced_channels_last",
    "one_thread_here",
    "openmp_spin",
    "runs_on",
    "tactic_name",
    "torch_module",
    "use_threads",
    "view",
]

#: the tactic of an operator's own (NumPy) kernel
NUMPY_TACTIC = 0
#: the tactic of its PyTorch kernel
TORCH_TACTIC = 1
#: the tactic of its PyTorch kernel over channels-last tensors (see the module's note on channels-last runs)
CHANNELS_LAST_TACTIC = 2
#: the environment variable that turns the PyTorch tactic off ("0", "off", "false", "no")
ENV_SWITCH = "PLUGRT_TORCH"
_OFF = ("0", "off", "false", "no")
_ALWAYS = "always"
_NHWC = "nhwc"
_NAMES = {NUMPY_TACTIC: "numpy", TORCH_TACTIC: "torch", CHANNELS_LAST_TACTIC: "torch-nhwc"}
_CPU_TYPES = frozenset({DataType.FLOAT})
_GPU_TYPES = frozenset({DataType.FLOAT, DataType.HALF})

#: a prepared torch kernel: runs the layer once on the tensors it was made for
Kernel = Callable[[], None]

#: how long torch's OpenMP workers spin for the next parallel region before they sleep (GNU OpenMP's
#: ``GOMP_SPINCOUNT``; its default, 300000, keeps a worker on its core for milliseconds after each torch kernel).
#: The engine's own second thread (``ops/host_threads.py``: product blocks, attention rows) needs that core
#: then: BERT-base at batch 4 on two threads ran its GELUs 4.5x slower than on one (36 against 8 ms), its
#: products 1.3x faster instead of ~1.8x, 333 ms a run; with 10000, 236 ms (onnxruntime 227), MobileNetV2,
#: magika and the T5 encoder a little faster too (docs/benchmarks.md)
OPENMP_SPIN_COUNT = 10000

#: torch's kernels of this many floating-point operations or more run on the engine's thread count (its OpenMP
#: workers, spinning briefly, start a region in a few us; the engine's helper thread costs ~70 us to wake here, so
#: the BLAS's products split only from ``MIN_THREADED_FLOPS``): MobileNetV2 at batch 1 on two threads, most of its
#: layers 5-20 MFLOP, 4.14 -> 3.70 ms against 2e7; ResNet-18 9.14 -> 8.81 ms (docs/benchmarks.md)
MIN_OPENMP_FLOPS = 5e6

_STATE: dict[str, Any] = {"module": None, "tried": False, "threads": 0}
_LOCAL = threading.local()


def enabled() -> bool:
    """False when ``PLUGRT_TORCH`` turns the PyTorch tactic off (read at every call)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in _OFF


def forced() -> bool:
    """True when ``PLUGRT_TORCH=always`` or ``nhwc``: the PyTorch kernel wherever it applies, untimed."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() in (_ALWAYS, _NHWC)


def forced_channels_last() -> bool:
    """True when ``PLUGRT_TORCH=nhwc``: the channels-last PyTorch kernel wherever a layer has one, untimed."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() == _NHWC


def torch_module() -> Any:
    """The torch module, imported on first use (its OpenMP workers' spin set first, :func:`openmp_spin`); None
    when it is not installed or fails to import."""
    if not _STATE["tried"]:
        _STATE["tried"] = True
        try:
            with openmp_spin("torch" in sys.modules):
                _STATE["module"] = importlib.import_module("torch")
        except Exception:
            _STATE["module"] = None
    return _STATE["module"]


@contextlib.contextmanager
def openmp_spin(loaded: bool) -> Iterator[None]:
    """Inside the block (torch's import) ``GOMP_SPINCOUNT`` is :data:`OPENMP_SPIN_COUNT`, unless torch is
    ``loaded`` already or the environment sets ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` (the caller's choice
    stands); afterwards the environment is as it was. GNU OpenMP (torch's on Linux) reads it once, as torch
    loads it; see :data:`OPENMP_SPIN_COUNT`."""
    if loaded or any(name in os.environ for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")):
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = str(OPENMP_SPIN_COUNT)
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


def available() -> bool:
    """True when the PyTorch tactic can run: torch imports and ``PLUGRT_TORCH`` does not turn it off."""
    return enabled() and torch_module() is not None


def cuda_available() -> bool:
    """True when the PyTorch tactic can run on a GPU: :func:`available` and torch sees a CUDA device."""
    if not available():
        return False
    if "cuda" not in _STATE:
        try:
            _STATE["cuda"] = bool(torch_module().cuda.is_available())
        except Exception:
            _STATE["cuda"] = False
    return bool(_STATE["cuda"])


def runs_on(xp: Any) -> bool:
    """Whether the PyTorch tactic can run on the arrays of module ``xp`` (NumPy, or CuPy with torch's CUDA)."""
    return available() if xp is np else cuda_available()


def direct_runs(xp: Any) -> bool:
    """Whether the tactic's kernels that call oneDNN directly (:mod:`.onednn`, no torch) can run on the arrays of
    module ``xp``: NumPy's, the library loaded, neither ``PLUGRT_TORCH`` nor ``PLUGRT_ONEDNN`` turning it off."""
    return xp is np and enabled() and onednn.available()


def tactic_name(tactic: int) -> str:
    """The name of an operator tactic ('numpy', 'torch'), or 'tactic N' for another value."""
    return _NAMES.get(tactic, f"tactic {tactic}")


def use_threads(flops: float) -> None:
    """Set torch's thread count for a kernel of ``flops`` operations (see the module's note on threads): from
    :data:`MIN_OPENMP_FLOPS` on, the engine's count."""
    count = threads_for(flops, MIN_OPENMP_FLOPS)
    if count != _STATE["threads"]:
        torch_module().set_num_threads(count)
        _STATE["threads"] = count


def one_thread_here() -> None:
    """Make torch's kernels called from this thread (the engine's helper thread) run on it alone: its OpenMP
    thread count is its own, set once; torch's process-wide count is set again by the next :func:`use_threads`."""
    if not getattr(_LOCAL, "single", False):
        torch_module().set_num_threads(1)
        _LOCAL.single = True
        _STATE["threads"] = 0


def view(array: Any) -> Any:
    """A torch tensor over ``array``'s memory (no copy): a NumPy array's on the CPU, a CuPy array's on its
    GPU; read-only arrays (plan weights) are viewed too: the kernels never write to their inputs."""
    torch = torch_module()
    if not isinstance(array, np.ndarray):
        return torch.as_tensor(array, device="cuda")
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "the given NumPy array is not writable"
        return torch.from_numpy(array)


class TorchOperator(Operator):
    """An operator with a PyTorch kernel besides its NumPy one, chosen by ``tactic``.

    Subclasses implement :meth:`torch_supports` (whether the PyTorch kernel computes this
    layer: types, shapes, which inputs are engine constants) and :meth:`torch_kernel` (the
    kernel over one binding's arrays). ``bind`` makes the kernel when the tactic is
    :data:`TORCH_TACTIC` and torch runs on the engine's array module (:func:`runs_on`);
    otherwise, or when the kernel declines these arrays, the operator's own kernel runs.
    """

    #: True for an operator with a :data:`CHANNELS_LAST_TACTIC` kernel
    channels_last: bool = False
    #: True where the own kernel on a GPU calls the same vendor kernel through PyTorch (the products: cuBLAS),
    #: only with more work per run: there the PyTorch kernel is taken untimed (timing one kernel against itself
    #: decides nothing)
    same_kernel_on_gpu: bool = False

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._torch_call: Kernel | None = None
        self._torch_weights: dict[tuple[str, Any], Any] = {}
        #: the formats of the bound inputs then outputs (LINEAR unless the builder chose channels-last ones)
        self.formats: list[TensorFormat] = []
        #: the own kernel over channels-last tensors: (copies in, linear inputs, results, output views)
        self._relaid: tuple[Any, ...] | None = None

    def tactics(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> list[int]:
        """The own kernel, and PyTorch's where it runs on this device and :meth:`torch_supports` these inputs or,
        on the CPU where oneDNN's library is there, where :meth:`direct_supports` them (asked first, without
        importing torch; PyTorch alone with ``PLUGRT_TORCH=always``, or on a GPU for :attr:`same_kernel_on_gpu`
        operators), and the channels-last one where :meth:`channels_last_supports` them. On a GPU the channels-last kernel is offered
        for HALF inputs only (or with ``PLUGRT_TORCH=nhwc``), and then alone: cuDNN's HALF convolutions run NHWC
        kernels (given NCHW tensors it reorders them in and out around each one: 53% of ResNet-50's fp16 kernel
        time at batch 32), and timing every layer of a run in both layouts there cost minutes of build time
        (ResNet-50: 5 s -> 120 s)."""
        direct = (  # (asked without importing torch)
            direct_runs(self.xp) and set(types) <= _CPU_TYPES and self.direct_supports(types, shapes, constant)
        )
        if direct or (self.torch_supports(types, shapes, constant) and runs_on(self.xp)):
            nhwc = self.channels_last and self.channels_last_supports(types, shapes, constant)
            if nhwc and self.xp is not np:
                if forced_channels_last() or DataType.HALF in types:
                    return [CHANNELS_LAST_TACTIC]
                nhwc = False
            if forced() or (self.same_kernel_on_gpu and self.xp is not np and not nhwc):
                return [CHANNELS_LAST_TACTIC if nhwc and forced_channels_last() else TORCH_TACTIC]
            return [NUMPY_TACTIC, TORCH_TACTIC, *([CHANNELS_LAST_TACTIC] if nhwc else [])]
        return [NUMPY_TACTIC]

    def channels_last_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Whether the :data:`CHANNELS_LAST_TACTIC` kernel computes this layer (default: no)."""
        return False

    def direct_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Whether :meth:`direct_kernel` may compute this layer of FLOAT inputs on the CPU (what it declines at bind
        runs PyTorch's kernel, else the own one); asked without importing torch (default: no)."""
        return False

    def direct_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """The tactic's kernel that calls oneDNN's library directly over these NumPy arrays (no torch), tried before
        :meth:`torch_kernel`; None where it does not apply (default: none)."""
        return None

    def tactic_formats(self, tactic: int, inputs: int, outputs: int) -> list[TensorFormat]:
        """The formats of the inputs then outputs ``tactic`` is timed on: channels-last where the
        :data:`CHANNELS_LAST_TACTIC` kernel reads or writes it (:meth:`channels_last_positions`), else LINEAR."""
        formats = [TensorFormat.LINEAR] * (inputs + outputs)
        if tactic == CHANNELS_LAST_TACTIC:
            for position in self.channels_last_positions(inputs, outputs):
                formats[position] = TensorFormat.HWC
        return formats

    def channels_last_positions(self, inputs: int, outputs: int) -> list[int]:
        """The inputs then outputs (positions in one list) the channels-last kernel may get as HWC tensors."""
        return []

    def torch_types(self) -> frozenset[DataType]:
        """The input types PyTorch's kernels take on this operator's device: FLOAT, and HALF on a GPU."""
        return _CPU_TYPES if self.xp is np else _GPU_TYPES

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Whether the PyTorch kernel computes this layer for inputs of these types and (opt) shapes, with
        ``constant[i]`` telling whether input ``i`` is an engine constant (default: every input of one type
        of :meth:`torch_types`)."""
        return len(set(types)) <= 1 and all(t in self.torch_types() for t in types)

    def torch_kernel(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> Kernel | None:
        """The PyTorch kernel over these arrays, or None where it does not apply to them."""
        raise NotImplementedError(f"operator {type(self).__name__} does not implement torch_kernel")

    def torch_weight(self, name: str, like: Any, shape: Sequence[int] | None = None) -> Any:
        """Weight ``name`` as a torch tensor on ``like``'s device in ``like``'s type (reshaped to ``shape``):
        a view of the plan's array on the CPU when the types agree, else a copy made once."""
        key = (name, like.dtype)
        tensor = self._torch_weights.get(key)
        if tensor is None:
            tensor = view(self.weight(name, self.xp)).to(like.dtype)
            self._torch_weights[key] = tensor
        return tensor if shape is None else tensor.reshape(*shape)

    def derived_weight(self, name: str, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """``make()``'s tensor computed from the weights (a kernel reordered for oneDNN), kept across binds while
        ``key`` (shapes, strides: what else it depends on) stays; one per ``name``, the last key's. A context
        whose outputs move binds their writers again at each call (ResNet-18: a 9 MiB kernel reordered, ~6 ms)."""
        slot = ("derived", name)
        kept = self._torch_weights.get(slot)
        if kept is not None and kept[0] == key:
            return kept[1]
        tensor = make()
        self._torch_weights[slot] = (key, tensor)
        return tensor

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """The tactic's kernel for these arrays under tactic :data:`TORCH_TACTIC` or :data:`CHANNELS_LAST_TACTIC`
        (:meth:`direct_kernel` first, then PyTorch's), else the own kernel's binding; bound to channels-last (HWC)
        tensors, the own kernel reads copies of them in the linear layout and its results are copied back (a plan
        that chose the channels-last kernel, run where neither applies)."""
        self._torch_call = None
        self._relaid = None
        self.formats = [b.format for b in (*inputs, *outputs)]
        self.bind_arrays(inputs, outputs)  # prepared for these shapes before a kernel is made
        direct = direct_runs(self.xp)
        if self.tactic in (TORCH_TACTIC, CHANNELS_LAST_TACTIC) and (direct or runs_on(self.xp)):
            arrays = [b.array for b in inputs], [b.array for b in outputs]
            kinds = {np.dtype(np.float32)} if self.xp is np else {np.dtype(np.float32), np.dtype(np.float16)}
            module = np.ndarray if self.xp is np else self.xp.ndarray
            if all(isinstance(a, module) and a.dtype in kinds for a in (*arrays[0], *arrays[1])):
                self._torch_call = self.direct_kernel(*arrays) if direct else None
                if self._torch_call is None and runs_on(self.xp):  # (torch imported only here)
                    self._torch_call = self.torch_kernel(*arrays)
                    if self._torch_call is not None and self.tactic == CHANNELS_LAST_TACTIC and self.xp is np:
                        # PyTorch's tensors handed over at every run: from a heap that keeps them (oneDNN's direct
                        # kernels write the engine's buffers: a heap that kept every freed block held PP-OCR det's
                        # build buffers, 61 MB)
                        keep_freed_memory()
            if self._torch_call is not None and self.xp is np:
                quiet_blas_workers()  # no OpenBLAS worker spinning on the cores torch's OpenMP needs
        if self._torch_call is None:  # the own kernel's
            self._direct = self.direct_launch(*self._bound_args)
            if any(f != TensorFormat.LINEAR for f in self.formats):
                self._relaid = self._linear_copies(inputs, outputs)

    def _linear_copies(self, inputs: Sequence[Binding], outputs: Sequence[Binding]) -> tuple[Any, ...]:
        xp = self.xp
        linear_in, copies = [], []
        for k, b in enumerate(inputs):
            if b.format == TensorFormat.HWC:
                scratch = self.scratch(("relaid", k), tuple(b.shape), b.array.dtype, xp)
                copies.append((scratch, b.array.transpose(0, 3, 1, 2), hand_over(b.array)))
                linear_in.append(scratch)
            else:
                linear_in.append(b.array)
        results: list[Any] = []
        targets: list[tuple[Any, HandOver] | None] = []
        for k, b in enumerate(outputs):
            if b.format == TensorFormat.HWC:
                results.append(self.scratch(("relaid_out", k), tuple(b.shape), b.array.dtype, xp))
                targets.append((b.array.transpose(0, 3, 1, 2), hand_over(b.array)))
            else:
                results.append(b.array)
                targets.append(None)
        return copies, linear_in, results, targets

    def _run_relaid(self) -> None:
        assert self._relaid is not None
        copies, linear_in, results, targets = self._relaid
        xp = self.xp
        for scratch, source, slot in copies:
            given = slot.tensor
            xp.copyto(scratch, source if given is None else (given.numpy() if xp is np else xp.asarray(given)))
        self.run(linear_in, results, xp)
        for result, target in zip(results, targets):
            if target is not None:
                xp.copyto(target[0], result)
                target[1].tensor = None  # the buffer holds it now

    def launch(self, stream: int) -> None:
        """The bound PyTorch kernel, or the NumPy kernel."""
        if self._torch_call is not None:
            self._torch_call()
        elif self._relaid is not None:
            self._run_relaid()
        else:
            super().launch(stream)

    def prepared_launch(self, stream: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The bound PyTorch kernel itself, or the NumPy kernel and its arrays."""
        if self._torch_call is not None:
            return self._torch_call, ()
        if self._relaid is not None:
            return self._run_relaid, ()
        return super().prepared_launch(stream)


def check_tactics(layers: Sequence[Any], logger: Any, xp: Any) -> None:
    """Check the operator tactics of plan ``layers`` at load for an engine on array module ``xp``: a tactic the
    layer's operator does not have raises :class:`PlanFormatError`; layers that chose the PyTorch tactic but
    will run with their own kernel (torch absent or turned off, or without CUDA for a GPU engine) get one
    warning; on the CPU with oneDNN's library, layers whose operator has a :meth:`~TorchOperator.direct_kernel` are
    not counted (torch is not imported for them)."""
    from ..core.logger import Severity
    from .base import registered_operators

    kinds = registered_operators()
    chosen = []
    for layer in layers:
        if layer.is_plugin or not layer.tactic:
            continue
        cls = kinds.get(layer.kind)
        torch_cls = cls if cls is not None and issubclass(cls, TorchOperator) else None
        nhwc = torch_cls is not None and torch_cls.channels_last
        if torch_cls is None or not (layer.tactic == TORCH_TACTIC or (layer.tactic == CHANNELS_LAST_TACTIC and nhwc)):
            offered = (
                f"{NUMPY_TACTIC} only"
                if torch_cls is None
                else f"{NUMPY_TACTIC} (numpy), {TORCH_TACTIC} (torch) and {CHANNELS_LAST_TACTIC} (torch-nhwc)"
                if nhwc
                else f"{NUMPY_TACTIC} (numpy) and {TORCH_TACTIC} (torch)"
            )
            raise PlanFormatError(
                f"plan layer {layer.name!r} ({layer.kind}) has tactic {layer.tactic}; its operator has tactics {offered}"
            )
        if not (direct_runs(xp) and torch_cls.direct_kernel is not TorchOperator.direct_kernel):
            chosen.append(layer.name)  # (an operator with a direct kernel runs it here, torch or not)
    if not chosen or runs_on(xp):
        return
    why = (
        f"{ENV_SWITCH} turns it off"
        if not enabled()
        else "torch is not installed (pip install 'plugrt[torch]')"
        if torch_module() is None
        else "torch has no CUDA device for this GPU engine"
    )
    logger.emit(
        Severity.WARNING,
        f"{len(chosen)} layer(s) chose the torch tactic at build ({', '.join(chosen[:3])}"
        f"{', ...' if len(chosen) > 3 else ''}) but {why}: they run with {'NumPy' if xp is np else 'CuPy'}",
    )
