"""TF32 in the GPU's FLOAT products and convolutions, as ``BuilderFlag.TF32`` allows it.

TensorRT may run FLOAT matrix products and convolutions with TF32 tensor cores (the inputs rounded to 10 mantissa
bits, the sums kept in FP32) unless ``BuilderFlag.TF32`` is cleared; a new ``IBuilderConfig`` has the flag set.
plugrt records the flag in the plan (``EnginePlan.tf32``) and, on the GPU, sets PyTorch's two switches (cuBLAS's
and cuDNN's: its kernels are the products' and convolutions' tactics there) to it for every run of the engine and
for the build's tactic timing, then gives the caller's settings back. A captured CUDA graph keeps the kernels
chosen while it was captured. CuPy's own products read ``CUPY_TF32`` once, at its import, and are not switched:
the flag allows TF32, it does not require it. On the CPU there is no TF32; the flag changes nothing.

PyTorch has two spellings of the switches and refuses to mix them: the legacy ``allow_tf32`` attributes, and
``fp32_precision`` (``"tf32"`` or ``"ieee"``). :class:`TF32Scope` uses the legacy ones unless the caller has used
the new ones (then reading a legacy one raises), and restores exactly what it found.
"""

from __future__ import annotations

import contextlib
import types
from typing import Any

__all__ = ["TF32Scope", "tf32_scope"]


class _Switch:
    """One of PyTorch's TF32 switches: ``holder.allow_tf32`` (legacy) or ``precision_holder.fp32_precision``."""

    __slots__ = ("holder", "precision_holder")

    def __init__(self, holder: Any, precision_holder: Any) -> None:
        self.holder = holder
        self.precision_holder = precision_holder

    def get(self) -> tuple[bool, Any]:
        """(legacy, value): the switch's current setting in the spelling the caller uses."""
        try:
            return True, bool(self.holder.allow_tf32)
        except RuntimeError:  # the caller set fp32_precision: PyTorch refuses the legacy read
            return False, self.precision_holder.fp32_precision

    def set(self, legacy: bool, allowed: bool) -> None:
        if legacy:
            self.holder.allow_tf32 = allowed
        else:
            self.precision_holder.fp32_precision = "tf32" if allowed else "ieee"

    def restore(self, legacy: bool, value: Any) -> None:
        if legacy:
            self.holder.allow_tf32 = value
        else:
            self.precision_holder.fp32_precision = value


class TF32Scope:
    """Inside the block PyTorch's cuBLAS and cuDNN kernels may use TF32 exactly when ``allowed``."""

    __slots__ = ("allowed", "saved", "switches")

    def __init__(self, torch: Any, allowed: bool) -> None:
        self.allowed = bool(allowed)
        self.switches = _switches(torch)
        self.saved: list[tuple[_Switch, bool, Any]] = []

    def __enter__(self) -> None:
        saved = []
        for switch in self.switches:
            legacy, value = switch.get()
            if value == (self.allowed if legacy else ("tf32" if self.allowed else "ieee")):
                continue  # already so: nothing to set or restore (an eager run's host time)
            saved.append((switch, legacy, value))
            switch.set(legacy, self.allowed)
        self.saved = saved

    def __exit__(self, *exc: object) -> None:
        for switch, legacy, value in reversed(self.saved):
            switch.restore(legacy, value)
        self.saved = []


_SWITCHES: dict[str, tuple[_Switch, ...]] = {}


def _switches(torch: Any) -> tuple[_Switch, ...]:
    """PyTorch's two TF32 switches (cuBLAS's and cuDNN's), made once for the torch module (every time for
    anything else passed as ``torch``)."""
    module = isinstance(torch, types.ModuleType)
    found = _SWITCHES.get(torch.__name__) if module else None
    if found is None:
        backends = torch.backends
        found = (
            _Switch(backends.cuda.matmul, backends.cuda.matmul),
            _Switch(backends.cudnn, getattr(backends.cudnn, "conv", backends.cudnn)),
        )
        if module:
            _SWITCHES[torch.__name__] = found
    return found


def tf32_scope(torch: Any | None, allowed: bool) -> contextlib.AbstractContextManager[None]:
    """:class:`TF32Scope` over ``torch`` (PyTorch with CUDA), or a block that changes nothing without it."""
    return contextlib.nullcontext() if torch is None else TF32Scope(torch, allowed)
