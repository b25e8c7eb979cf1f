"""Run tools that ``import tensorrt`` against plugrt (opt-in; never on by default).

Polygraphy, NVIDIA's samples and many deployment scripts import ``tensorrt`` themselves.
:func:`install` puts a ``tensorrt`` module into ``sys.modules`` that *is* plugrt's API (every
attribute is plugrt's object) and reports TensorRT's version number, so those tools run
unchanged on plugrt. ``tensorrt.plugin`` resolves to :mod:`plugrt.plugin`.

    import plugrt.compat
    plugrt.compat.install()
    import tensorrt as trt              # plugrt, under TensorRT's name
    from polygraphy.backend.trt import EngineFromNetwork, NetworkFromOnnxPath

or, without touching the tool's code::

    python -m plugrt.compat my_script.py --its-args
    python -m plugrt.compat --device cuda -m polygraphy run model.onnx --trt

``tensorrt.__version__`` is :data:`TENSORRT_API_VERSION`, the TensorRT Python API level plugrt
implements (tools compare it with their minimum, e.g. Polygraphy's 8.5);
``tensorrt.__plugrt_version__`` is plugrt's own version. A real TensorRT already imported in
the process is never replaced: :func:`install` raises instead.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import runpy
import sys
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .backends.registry import DEFAULT_DEVICE, check_device
from .core.errors import PlugrtError

__all__ = ["TENSORRT_API_VERSION", "install", "installed", "is_installed", "main", "uninstall"]

#: The TensorRT Python API level plugrt implements, reported as ``tensorrt.__version__``.
TENSORRT_API_VERSION = "10.13.0"

#: TensorRT's submodules and the plugrt modules that stand in for them.
_SUBMODULES = {"tensorrt.plugin": "plugrt.plugin"}


class _TensorRTModule(types.ModuleType):
    """``tensorrt`` as plugrt: attribute reads go to the plugrt package."""

    __plugrt_alias__ = True

    def __getattr__(self, name: str) -> Any:
        import plugrt

        try:
            return getattr(plugrt, name)
        except AttributeError:
            raise AttributeError(
                f"module 'tensorrt' (plugrt {plugrt.__version__}, TensorRT API {TENSORRT_API_VERSION}) has no "
                f"attribute {name!r}; plugrt does not provide it"
            ) from None

    def __dir__(self) -> list[str]:
        import plugrt

        return sorted(set(super().__dir__()) | set(dir(plugrt)))


class _SubmoduleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``tensorrt.<sub>`` as the plugrt module standing in for it."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in _SUBMODULES:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(_SUBMODULES[spec.name])
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


_FINDER = _SubmoduleFinder()


def is_installed() -> bool:
    """Whether ``import tensorrt`` gives plugrt in this process."""
    return getattr(sys.modules.get("tensorrt"), "__plugrt_alias__", False) is True


def _on_device(base: type, device: str) -> type:
    """``base`` (plugrt's ``Runtime`` or ``Builder``) with ``device`` as its default device (a subclass)."""

    class OnDevice(base):  # type: ignore[valid-type,misc]
        __doc__ = base.__doc__

        def __init__(self, logger: Any = None, device: str = device) -> None:
            super().__init__(logger, device)

    OnDevice.__name__ = base.__name__
    OnDevice.__module__ = base.__module__
    OnDevice.__qualname__ = base.__qualname__
    return OnDevice


def _set_device(module: types.ModuleType, device: str) -> None:
    """Make ``module.Runtime`` deserialize for, and ``module.Builder`` time tactics on, ``device``."""
    import plugrt

    default = device == DEFAULT_DEVICE
    module.Runtime = plugrt.Runtime if default else _on_device(plugrt.Runtime, device)  # type: ignore[attr-defined]
    module.Builder = plugrt.Builder if default else _on_device(plugrt.Builder, device)  # type: ignore[attr-defined]
    module.__plugrt_device__ = device  # type: ignore[attr-defined]


def install(device: str = DEFAULT_DEVICE) -> types.ModuleType:
    """Make ``import tensorrt`` (and ``import tensorrt.plugin``) give plugrt; returns the module.

    ``device`` is where engines that tools deserialize through ``tensorrt.Runtime`` run, and
    where ``tensorrt.Builder`` times plugin tactics: 'cpu' (the default) or 'cuda' (needed for
    tools that hand the engine device pointers, such as Polygraphy's ``TrtRunner``, and for
    plugins whose ``enqueue`` launches device work). Idempotent (a second call may change the device).
    Raises :class:`PlugrtError` when a real ``tensorrt`` is already imported.
    """
    check_device(device, "plugrt.compat.install")
    existing = sys.modules.get("tensorrt")
    if existing is not None:
        if is_installed():
            if existing.__dict__.get("__plugrt_device__") != device:
                _set_device(existing, device)
            return existing
        raise PlugrtError(
            f"a real 'tensorrt' module is already imported ({getattr(existing, '__file__', existing)!r}); "
            "plugrt.compat.install() must run before anything imports tensorrt, in a process meant for plugrt"
        )
    import plugrt

    module = _TensorRTModule("tensorrt", "TensorRT's Python API, provided by plugrt (see plugrt.compat).")
    module.__version__ = TENSORRT_API_VERSION  # type: ignore[attr-defined]
    module.__plugrt_version__ = plugrt.__version__  # type: ignore[attr-defined]
    _set_device(module, device)
    module.__file__ = plugrt.__file__
    module.__path__ = []  # a package, so that tensorrt.plugin can be imported
    module.__spec__ = importlib.machinery.ModuleSpec("tensorrt", None, is_package=True)
    sys.modules["tensorrt"] = module
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return module


def uninstall() -> None:
    """Undo :func:`install` (modules that already hold ``tensorrt`` keep their reference)."""
    if is_installed():
        del sys.modules["tensorrt"]
    for name in _SUBMODULES:
        sys.modules.pop(name, None)
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


@contextmanager
def installed(device: str = DEFAULT_DEVICE) -> Iterator[types.ModuleType]:
    """``import tensorrt`` gives plugrt inside the block (and not after, unless it was before)."""
    was = is_installed()
    module = install(device)
    try:
        yield module
    finally:
        if not was:
            uninstall()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m plugrt.compat [--device cpu|cuda] (-m module | script.py) args…``."""
    args = list(sys.argv[1:] if argv is None else argv)
    device = DEFAULT_DEVICE
    if args[:1] == ["--device"] and len(args) >= 2:
        device, args = args[1], args[2:]
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m plugrt.compat [--device cpu|cuda] (-m MODULE | SCRIPT) [ARGS...]\n"
              "Runs MODULE or SCRIPT with `import tensorrt` giving plugrt "
              f"(TensorRT API {TENSORRT_API_VERSION}).")
        return 0 if args else 2
    install(device)
    if args[0] == "-m":
        if len(args) < 2:
            print("python -m plugrt.compat: -m needs a module name", file=sys.stderr)
            return 2
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
