"""Optional CPU kernels from PyTorch (oneDNN convolutions, ATen's vectorised loops), one tactic per layer.

The NumPy kernels are the engine's default and need nothing else. Where PyTorch is
installed (``pip install "plugrt[torch]"``) an operator that has a PyTorch kernel offers
it as tactic :data:`TORCH_TACTIC` besides its NumPy kernel (tactic 0); the builder times
both at the opt shapes of the first profile and records the faster in the plan, as it
does with plugin tactics (``builder/tactics.py``); ``plugrt inspect`` shows it. At run the
kernel reads and writes the engine's NumPy buffers in place: its tensors are
``torch.from_numpy`` views made once per shape change, and results go into the output
views (``out=`` or ``copy_``), so nothing is copied in or out.

This module is the only one that imports torch, lazily (never at ``import plugrt``).
``PLUGRT_TORCH=0`` (also ``off``, ``false``, ``no``) turns the tactic off: builds time only
NumPy and engines run their torch layers with NumPy; ``PLUGRT_TORCH=always`` makes every
layer whose PyTorch kernel applies take it without timing (to test or compare the kernels). A plan whose layers chose torch,
loaded where torch is absent or turned off, runs those layers with NumPy (the result
is the same within the tolerance the tests state); the engine logs a warning once.

Threads: every torch kernel runs on :func:`~plugrt.ops.blas_threads.threads_for` threads,
the engine's count (the BLAS's) when its work is large and a core is free, else one, as
the NumPy products do: a second thread that spins for work on a core another process
holds slows the whole run down. The setting is torch's process-wide one
(``torch.set_num_threads``).
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.errors import PlanFormatError
from ..core.types import DataType
from ..nodes.base import Binding
from .base import Operator
from .blas_threads import threads_for

__all__ = [
    "ENV_SWITCH",
    "NUMPY_TACTIC",
    "TORCH_TACTIC",
    "Kernel",
    "TorchOperator",
    "available",
    "check_tactics",
    "enabled",
    "forced",
    "tactic_name",
    "torch_module",
    "use_threads",
    "view",
]

#: the tactic of an operator's own (NumPy) kernel
NUMPY_TACTIC = 0
#: the tactic of its PyTorch kernel
TORCH_TACTIC = 1
#: the environment variable that turns the PyTorch tactic off ("0", "off", "false", "no")
ENV_SWITCH = "PLUGRT_TORCH"
_OFF = ("0", "off", "false", "no")
_ALWAYS = "always"
_NAMES = {NUMPY_TACTIC: "numpy", TORCH_TACTIC: "torch"}

#: a prepared torch kernel: runs the layer once on the tensors it was made for
Kernel = Callable[[], None]

_STATE: dict[str, Any] = {"module": None, "tried": False, "threads": 0}


def enabled() -> bool:
    """False when ``PLUGRT_TORCH`` turns the PyTorch tactic off (read at every call)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in _OFF


def forced() -> bool:
    """True when ``PLUGRT_TORCH=always``: the PyTorch kernel wherever it applies, untimed."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() == _ALWAYS


def torch_module() -> Any:
    """The torch module, imported on first use; None when it is not installed or fails to import."""
    if not _STATE["tried"]:
        _STATE["tried"] = True
        try:
            _STATE["module"] = importlib.import_module("torch")
        except Exception:
            _STATE["module"] = None
    return _STATE["module"]


def available() -> bool:
    """True when the PyTorch tactic can run: torch imports and ``PLUGRT_TORCH`` does not turn it off."""
    return enabled() and torch_module() is not None


def tactic_name(tactic: int) -> str:
    """The name of an operator tactic ('numpy', 'torch'), or 'tactic N' for another value."""
    return _NAMES.get(tactic, f"tactic {tactic}")


def use_threads(flops: float) -> None:
    """Set torch's thread count for a kernel of ``flops`` operations (see the module's note on threads)."""
    count = threads_for(flops)
    if count != _STATE["threads"]:
        torch_module().set_num_threads(count)
        _STATE["threads"] = count


def view(array: np.ndarray) -> Any:
    """A torch tensor over ``array``'s memory (no copy); read-only arrays (plan weights) are viewed too:
    the kernels never write to their inputs."""
    torch = torch_module()
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
    :data:`TORCH_TACTIC`, the array module is NumPy and torch is available; otherwise, or
    when the kernel declines these arrays, the NumPy kernel runs.
    """

    def __init__(self, params: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None) -> None:
        super().__init__(params, weights)
        self._torch_call: Kernel | None = None

    def tactics(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> list[int]:
        """NumPy, and PyTorch where it is available and :meth:`torch_supports` these inputs (PyTorch alone
        with ``PLUGRT_TORCH=always``)."""
        if self.xp is np and available() and self.torch_supports(types, shapes, constant):
            return [TORCH_TACTIC] if forced() else [NUMPY_TACTIC, TORCH_TACTIC]
        return [NUMPY_TACTIC]

    def torch_supports(
        self, types: Sequence[DataType], shapes: Sequence[tuple[int, ...]], constant: Sequence[bool]
    ) -> bool:
        """Whether the PyTorch kernel computes this layer for inputs of these types and (opt) shapes, with
        ``constant[i]`` telling whether input ``i`` is an engine constant (default: FLOAT inputs only)."""
        return all(t == DataType.FLOAT for t in types)

    def torch_kernel(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> Kernel | None:
        """The PyTorch kernel over these arrays, or None where it does not apply to them."""
        raise NotImplementedError(f"operator {type(self).__name__} does not implement torch_kernel")

    def bind(self, inputs: Sequence[Binding], outputs: Sequence[Binding], workspace: int) -> None:
        """The PyTorch kernel for these arrays under tactic :data:`TORCH_TACTIC`, else the NumPy kernel's binding."""
        self._torch_call = None
        if self.tactic == TORCH_TACTIC and self.xp is np and available():
            arrays = [b.array for b in inputs], [b.array for b in outputs]
            if all(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in (*arrays[0], *arrays[1])):
                self._torch_call = self.torch_kernel(*arrays)
        super().bind(inputs, outputs, workspace)

    def launch(self, stream: int) -> None:
        """The bound PyTorch kernel, or the NumPy kernel."""
        if self._torch_call is not None:
            self._torch_call()
        else:
            super().launch(stream)

    def prepared_launch(self, stream: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The bound PyTorch kernel itself, or the NumPy kernel and its arrays."""
        if self._torch_call is not None:
            return self._torch_call, ()
        return super().prepared_launch(stream)


def check_tactics(layers: Sequence[Any], logger: Any, host: bool) -> None:
    """Check the operator tactics of plan ``layers`` at load: a tactic the layer's operator does not have raises
    :class:`PlanFormatError`; layers that chose the PyTorch tactic but will run with NumPy (torch absent or
    turned off, or an engine that is not on the host: ``host`` False) get one warning."""
    from ..core.logger import Severity
    from .base import registered_operators

    kinds = registered_operators()
    chosen = []
    for layer in layers:
        if layer.is_plugin or not layer.tactic:
            continue
        cls = kinds.get(layer.kind)
        if layer.tactic != TORCH_TACTIC or cls is None or not issubclass(cls, TorchOperator):
            offered = (
                f"{NUMPY_TACTIC} (numpy) and {TORCH_TACTIC} (torch)"
                if cls and issubclass(cls, TorchOperator)
                else f"{NUMPY_TACTIC} only"
            )
            raise PlanFormatError(
                f"plan layer {layer.name!r} ({layer.kind}) has tactic {layer.tactic}; its operator has tactics {offered}"
            )
        chosen.append(layer.name)
    if not chosen or (host and available()):
        return
    why = (
        "the engine does not run on the CPU"
        if not host
        else f"{ENV_SWITCH} turns it off"
        if not enabled()
        else "torch is not installed (pip install 'plugrt[torch]')"
    )
    logger.emit(
        Severity.WARNING,
        f"{len(chosen)} layer(s) chose the torch tactic at build ({', '.join(chosen[:3])}"
        f"{', ...' if len(chosen) > 3 else ''}) but {why}: they run with NumPy",
    )
