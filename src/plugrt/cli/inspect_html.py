"""A self-contained HTML page drawing an engine's graph (SVG, no scripts, no downloads)."""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["render_html"]

_BOX_W, _BOX_H, _GAP_X, _GAP_Y = 220, 54, 60, 28
_COLORS = {"plugin": "#f6c26b", "reformat": "#c9c9c9", "input": "#9fd3a8", "output": "#9fc3e6"}


def _columns(summary: dict[str, Any]) -> tuple[dict[str, int], dict[str, str]]:
    """Longest-path depth of every node; nodes are layers plus IO tensors."""
    depth: dict[str, int] = {}
    producer: dict[str, str] = {}
    for io in summary["io"]:
        if io["role"] == "input":
            depth[f"in:{io['name']}"] = 0
            producer[io["name"]] = f"in:{io['name']}"
    for layer in summary["layers"]:
        node = f"layer:{layer['index']}"
        depth[node] = 1 + max((depth.get(producer.get(t["name"], ""), 0) for t in layer["inputs"]), default=0)
        for t in layer["outputs"]:
            producer[t["name"]] = node
    for io in summary["io"]:
        if io["role"] == "output":
            depth[f"out:{io['name']}"] = depth.get(producer.get(io["name"], ""), 0) + 1
    return depth, producer


def render_html(summary: dict[str, Any]) -> str:
    """The page: graph on top (hover a box or edge for details), then the summary as JSON."""
    depth, producer = _columns(summary)
    rows: dict[int, int] = {}
    position: dict[str, tuple[int, int]] = {}
    for node, column in sorted(depth.items(), key=lambda kv: (kv[1], kv[0])):
        row = rows.get(column, 0)
        rows[column] = row + 1
        position[node] = (20 + column * (_BOX_W + _GAP_X), 20 + row * (_BOX_H + _GAP_Y))
    width = max((x for x, _ in position.values()), default=0) + _BOX_W + 40
    height = max((y for _, y in position.values()), default=0) + _BOX_H + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="engine graph">'
    ]
    edges: list[tuple[str, str, str]] = []
    for layer in summary["layers"]:
        for t in layer["inputs"]:
            edges.append((producer.get(t["name"], ""), f"layer:{layer['index']}", t["name"]))
    for io in summary["io"]:
        if io["role"] == "output":
            edges.append((producer.get(io["name"], ""), f"out:{io['name']}", io["name"]))
    for source, target, tensor in edges:
        if source not in position or target not in position:
            continue
        (x1, y1), (x2, y2) = position[source], position[target]
        parts.append(
            f'<line class="edge" x1="{x1 + _BOX_W}" y1="{y1 + _BOX_H // 2}" x2="{x2}" y2="{y2 + _BOX_H // 2}" '
            f'stroke="#555" stroke-width="1.5"><title>{html.escape(tensor)}</title></line>'
        )
    labels = {
        f"in:{io['name']}": (io["name"], "input", f"{io['dtype']} {io['declared_shape']}") for io in summary["io"]
    }
    labels.update(
        {f"out:{io['name']}": (io["name"], "output", f"{io['dtype']} {io['declared_shape']}") for io in summary["io"]}
    )
    for layer in summary["layers"]:
        kind = layer["kind"]
        detail = f"{layer['plugin']['name']} v{layer['plugin']['version']}" if kind == "plugin" else kind
        labels[f"layer:{layer['index']}"] = (layer["name"], kind, detail)
    for node, (x, y) in position.items():
        name, kind, detail = labels[node]
        color = _COLORS.get(kind, "#e8e8f4")
        parts.append(
            f'<g class="node" data-kind="{html.escape(kind)}"><rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" '
            f'rx="6" fill="{color}" stroke="#333"/><title>{html.escape(name)}: {html.escape(detail)}</title>'
            f'<text x="{x + 8}" y="{y + 22}" font-family="sans-serif" font-size="12">{html.escape(name[:32])}</text>'
            f'<text x="{x + 8}" y="{y + 40}" font-family="sans-serif" font-size="11" fill="#333">'
            f"{html.escape(detail[:34])}</text></g>"
        )
    parts.append("</svg>")
    body = json.dumps(summary, indent=2, default=str)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>plugrt engine {html.escape(str(summary['name']))}</title></head><body>"
        f"<h1>Engine {html.escape(str(summary['name']))}</h1>"
        f"<p>{len(summary['layers'])} layers, {summary['bytes']} bytes, "
        f"{len(summary['profiles'])} optimization profile(s)</p>"
        + "".join(parts)
        + f'<h2>Details</h2><pre id="summary">{html.escape(body)}</pre></body></html>\n'
    )
