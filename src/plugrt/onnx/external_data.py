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
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

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


def load_external_data(model: Any, base_dir: str | None, source: str) -> None:
    """Read every external tensor of ``model`` from ``base_dir`` into the model (in place).

    ``base_dir`` None (a model given as bytes, no folder named) refuses external
    data; ``source`` says where the model came from, for messages.
    """
    tensors = external_tensors(model)
    if not tensors:
        return
    if base_dir is None:
        names = ", ".join(repr(t.name) for t in tensors[:3]) + (" ..." if len(tensors) > 3 else "")
        raise GraphError(
            f"tensor(s) {names} keep their data in external files, but the model was given as {source} with no folder "
            "to read them from; pass the model's path (parse_from_file, parse(data, path=...)) or name a base "
            "directory (parse(data, path=folder), plugrt.compile(..., external_data_dir=folder))"
        )
    for tensor in tensors:
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
