"""What a template plugin's ``enqueue`` needs besides the user's function.

- :class:`RunTensors`: the :class:`~plugrt.plugin.Tensor` objects the ``impl`` function
  gets, made again only when descriptors, addresses, stream or device change;
- :func:`copy_aliased_inputs`: an aliased output the engine gave its own buffer gets
  the input's values, so the impl's in-place work lands in the output;
- :func:`time_aot_kernel`: one build-time timing run of an AOT kernel.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from ..backends.registry import active_backend, gpu_backend
from ..backends.views import as_array
from ..core.errors import PluginError
from ..interfaces.descriptors import PluginTensorDesc
from ._aot import AOTKernel
from ._tensor import Tensor

__all__ = ["RunTensors", "copy_aliased_inputs", "time_aot_kernel"]


class RunTensors:
    """The impl's input and output tensors for one set of descriptors and addresses."""

    def __init__(self) -> None:
        self._cached: tuple[tuple[Any, ...], list[Tensor], tuple[Tensor, ...]] | None = None

    def clear(self) -> None:
        """Forget the tensors (shapes changed)."""
        self._cached = None

    def get(
        self,
        descs: tuple[Sequence[PluginTensorDesc], Sequence[PluginTensorDesc]],
        addresses: tuple[Sequence[int], Sequence[int]],
        stream: int,
        device: str,
        aliases: Sequence[int],
        data_dependent: Sequence[tuple[int, int]],
    ) -> tuple[list[Tensor], tuple[Tensor, ...]]:
        """Tensors over ``addresses`` described by ``descs`` (inputs, outputs); ``aliases`` gives the input
        each output shares its buffer with (-1: none), ``data_dependent`` the (output, axis) sizes known
        only after the run."""
        (input_desc, output_desc), (inputs, outputs) = descs, addresses
        # The executor passes the same descriptors until shapes change; the cache holds them, so
        # comparing them by identity is safe (and cheap on every run).
        cached = self._cached
        if cached is not None:
            (c_in, c_out, c_inputs, c_outputs, c_stream, c_device), ins, outs = cached
            if (
                c_stream == stream
                and c_device == device
                and c_inputs == inputs
                and c_outputs == outputs
                and len(c_in) == len(input_desc)
                and len(c_out) == len(output_desc)
                and all(map(operator.is_, c_in, input_desc))
                and all(map(operator.is_, c_out, output_desc))
            ):
                return ins, outs
        key = (list(input_desc), list(output_desc), list(inputs), list(outputs), stream, device)
        written = {i for i in aliases if i >= 0}
        ins = [
            Tensor._make(desc, p, stream, device, i not in written)
            for i, (desc, p) in enumerate(zip(input_desc, inputs))
        ]
        dependent: dict[int, list[int]] = {}
        for out, axis in data_dependent:
            dependent.setdefault(out, []).append(axis)
        made = [
            Tensor._make(desc, p, stream, device, False, dependent.get(i, ()))
            for i, (desc, p) in enumerate(zip(output_desc, outputs))
        ]
        for out, inp in enumerate(aliases):
            if inp >= 0:
                object.__setattr__(made[out], "_aliased_to", ins[inp])
                object.__setattr__(ins[inp], "_aliased_to", made[out])
        self._cached = (key, ins, tuple(made))
        return ins, self._cached[2]


def copy_aliased_inputs(
    aliases: Sequence[int],
    input_desc: Sequence[PluginTensorDesc],
    inputs: Sequence[int],
    outputs: Sequence[int],
    stream: int,
) -> list[int]:
    """Input addresses as the impl sees them: an aliased output given its own buffer (the engine
    did not honour the aliasing, or a build timing run) gets the input's values, and the impl's
    in-place work happens there."""
    pointers = list(inputs)
    for out, inp in enumerate(aliases):
        if inp >= 0 and outputs[out] != inputs[inp]:
            source, target = as_array(inputs[inp], input_desc[inp]), as_array(outputs[out], input_desc[inp])
            with active_backend().stream_scope(stream):
                target[...] = source
            pointers[inp] = outputs[out]
    return pointers


def time_aot_kernel(
    kernel_of: Callable[[], AOTKernel],
    plugin_id: str,
    descs: tuple[Sequence[PluginTensorDesc], Sequence[PluginTensorDesc]],
    addresses: tuple[Sequence[int], Sequence[int]],
    stream: int,
) -> None:
    """One timing run of an AOT kernel at build: on the given buffers and stream in a GPU build
    (``Builder(device="cuda")``); in a CPU build the host buffers are copied to the GPU, where
    CuPy sees one. ``kernel_of`` gives the kernel (compiling it on first use), once the GPU is found."""
    (input_desc, output_desc), (inputs, outputs) = descs, addresses
    if active_backend().gpu:
        kernel = kernel_of()
        kernel.launch_on(kernel.resolve([list(d.dims) for d in input_desc], plugin_id), inputs, outputs, stream)
        return
    try:
        gpu = gpu_backend()
    except Exception as exc:
        raise PluginError(
            f"QDP plugin {plugin_id!r}: its AOT kernels can be timed only on a GPU ({exc}); on this machine "
            "give its AutoTuneCombinations no custom tactics (aot_impl is then called with tactic 0)"
        ) from None
    kernel = kernel_of()
    on_device_in = [gpu.xp.asarray(as_array(p, d)) for p, d in zip(inputs, input_desc)]
    on_device_out = [gpu.xp.asarray(as_array(p, d)) for p, d in zip(outputs, output_desc)]
    resolved = kernel.resolve([list(d.dims) for d in input_desc], f"QDP plugin {plugin_id!r}")
    kernel.launch_on(resolved, [gpu.address_of(a) for a in on_device_in], [gpu.address_of(a) for a in on_device_out], 0)
    gpu.synchronize(0)
