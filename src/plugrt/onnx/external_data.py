"""External weights: read only from the model's own folder, and only when there is one.

An ONNX tensor may keep its bytes in another file (``data_location=EXTERNAL``,
``location="weights.bin"``). The rules:

- A model parsed from a file (``parse_from_file``, ``parse(data, path=file)``,
  ``plugrt.compile("model.onnx")``) reads external data from the file's folder.
- A model given as bytes or a ``ModelProto`` has no folder: its external data is
  refused unless the caller names a base directory (``parse(data, path=folder)``
  or ``plugrt.compile(data, external_data_dir=folder)``). It is never read from
  the working directory.
- A location must be a relative path that stays inside that folder: absolute
  paths, ``..`` and symbolic links leading out of it are refused.

Initializers of plain numeric types are read from the file straight into arrays
(:func:`load_external_data` returns them by name) and their tensors in the model
stay without data, so the weights are in memory once rather than in the model and
again in the arrays made from it; other external tensors are read into the model.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
from onnx import AttributeProto, GraphProto, TensorProto

from .graph import GraphError

__all__ = ["external_tensors", "load_external_data", "resolve_location"]


def _graph_tensors(graph: GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == AttributeProto.TENSOR:
                yield attribute.t
            elif attribute.type == AttributeProto.TENSORS:
                yield from attribute.tensors
            elif attribute.type == AttributeProto.SPARSE_TENSOR:
                yield attribute.sparse_tensor.values
                yield attribute.sparse_tensor.indices
            elif attribute.type == AttributeProto.GRAPH:
                yield from _graph_tensors(attribute.g)
            elif attribute.type == AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    yield from _graph_tensors(sub)


def external_tensors(model: Any) -> list[TensorProto]:
    """Every tensor of ``model`` (initializers, node attributes, subgraphs, functions) whose data is external."""
    tensors = list(_graph_tensors(model.graph))
    for function in model.functions:
        for node in function.node:
            for attribute in node.attribute:
                if attribute.type == AttributeProto.TENSOR:
                    tensors.append(attribute.t)
    return [t for t in tensors if t.data_location == TensorProto.EXTERNAL]


def resolve_location(tensor: TensorProto, base_dir: str) -> tuple[str, int, int]:
    """(file path, offset, length or -1) of ``tensor``'s external data, checked to stay inside ``base_dir``."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    if not location:
        raise GraphError(f"tensor {tensor.name!r} has external data but no location")
    if os.path.isabs(location) or location.startswith(("/", "\\")):
        raise GraphError(f"tensor {tensor.name!r}: external data location {location!r} is absolute; it must be "
                         "relative to the model's folder")
    if ".." in location.replace("\\", "/").split("/"):
        raise GraphError(f"tensor {tensor.name!r}: external data location {location!r} leaves the model's folder")
    root = os.path.realpath(base_dir)
    target = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, target]) != root:
        raise GraphError(f"tensor {tensor.name!r}: external data location {location!r} leads out of the model's "
                         f"folder {base_dir!r} (through a symbolic link)")
    try:
        offset = int(info.get("offset", "0"))
        length = int(info.get("length", "-1"))
    except ValueError:
        raise GraphError(f"tensor {tensor.name!r}: external data offset/length are not integers: {info}") from None
    if offset < 0:
        raise GraphError(f"tensor {tensor.name!r}: external data offset {offset} is negative")
    return target, offset, length


#: ONNX element types whose external bytes are the array's (little-endian), read into arrays directly
_DIRECT_TYPES: dict[int, str] = {
    TensorProto.FLOAT: "<f4",
    TensorProto.DOUBLE: "<f8",
    TensorProto.FLOAT16: "<f2",
    TensorProto.INT8: "i1",
    TensorProto.UINT8: "u1",
    TensorProto.INT16: "<i2",
    TensorProto.UINT16: "<u2",
    TensorProto.INT32: "<i4",
    TensorProto.UINT32: "<u4",
    TensorProto.INT64: "<i8",
    TensorProto.UINT64: "<u8",
}


def _direct_size(tensor: TensorProto, length: int) -> tuple[np.dtype, int] | None:
    """(dtype, element count) when ``tensor``'s external bytes are read straight into an array, else None
    (other types, or a length that disagrees with its dims: read into the model, whose checks say why)."""
    if int(tensor.data_type) not in _DIRECT_TYPES:
        return None
    dtype = np.dtype(_DIRECT_TYPES[int(tensor.data_type)])
    count = int(np.prod(tensor.dims, dtype=np.int64))
    return (dtype, count) if length in (-1, count * dtype.itemsize) else None


def _read_array(tensor: TensorProto, path: str, offset: int, dtype: np.dtype, count: int) -> np.ndarray:
    try:
        array = np.fromfile(path, dtype=dtype, count=count, offset=offset)
    except (OSError, ValueError) as exc:
        raise GraphError(f"tensor {tensor.name!r}: cannot read external data from {path!r}: {exc}") from None
    if array.size != count:
        raise GraphError(f"tensor {tensor.name!r}: external file {path!r} holds {array.size * dtype.itemsize} bytes "
                         f"at offset {offset}, the model says {count * dtype.itemsize}")
    return array.astype(dtype.newbyteorder("="), copy=False).reshape(tuple(tensor.dims))


def load_external_data(model: Any, base_dir: str | None, source: str) -> dict[str, np.ndarray]:
    """Read every external tensor of ``model`` from ``base_dir``: the top-level initializers of plain numeric
    types into arrays, returned by name (their tensors keep no data), the others into the model in place.

    ``base_dir`` None (a model given as bytes, no folder named) refuses external
    data; ``source`` says where the model came from, for messages.
    """
    tensors = external_tensors(model)
    if not tensors:
        return {}
    if base_dir is None:
        names = ", ".join(repr(t.name) for t in tensors[:3]) + (" ..." if len(tensors) > 3 else "")
        raise GraphError(
            f"tensor(s) {names} keep their data in external files, but the model was given as {source} with no folder "
            "to read them from; pass the model's path (parse_from_file, parse(data, path=...)) or name a base "
            "directory (parse(data, path=folder), plugrt.compile(..., external_data_dir=folder))"
        )
    initializers = list(model.graph.initializer)
    uses = Counter(t.name for t in initializers)
    arrays: dict[str, np.ndarray] = {}
    in_place: list[TensorProto] = []
    for tensor in initializers:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        path, offset, length = resolve_location(tensor, base_dir)
        size = _direct_size(tensor, length) if uses[tensor.name] == 1 else None
        if size is not None:
            arrays[tensor.name] = _read_array(tensor, path, offset, *size)
        else:
            in_place.append(tensor)
    in_place += tensors[len(arrays) + len(in_place) :]  # external_tensors lists the initializers first
    for tensor in in_place:
        path, offset, length = resolve_location(tensor, base_dir)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read() if length < 0 else f.read(length)
        except OSError as exc:
            raise GraphError(f"tensor {tensor.name!r}: cannot read external data from {path!r}: {exc}") from None
        if length >= 0 and len(data) != length:
            raise GraphError(f"tensor {tensor.name!r}: external file {path!r} holds {len(data)} bytes at offset "
                             f"{offset}, the model says {length}")
        tensor.raw_data = data
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]
    return arrays
