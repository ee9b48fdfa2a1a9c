"""A plan laid out as a picture: nodes in layers, edges as paths (the console's graph).

A simple layered layout, computed here so the browser needs no layout library: each
node's layer is its longest path from the entry nodes over forward edges (a bounded
loop edge, ``max N``, goes back and is not followed), nodes in a layer keep plan order,
and each edge is a cubic curve from the bottom of its source to the top of its
destination (a loop edge bends out to the right). Pure: the same plan, the same picture.
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.workflow.definition import Workflow

NODE_W = 160
NODE_H = 44
GAP_X = 40
GAP_Y = 56
MARGIN = 20


@dataclass(frozen=True)
class Placed:
    """A node's box: its top-left corner and size, its layer and its place in the layer."""

    id: str
    kind: str
    x: int
    y: int
    w: int
    h: int
    layer: int


@dataclass(frozen=True)
class Path:
    """An edge drawn: its index in the plan, ends, SVG path data and label."""

    index: int
    src: str
    dst: str
    d: str
    label: str
    loop: bool


@dataclass(frozen=True)
class Layout:
    nodes: tuple[Placed, ...]
    edges: tuple[Path, ...]
    width: int
    height: int


def layers(wf: Workflow) -> dict[str, int]:
    """Each node's layer: the longest forward path to it from a node no forward edge enters."""
    ids = [node.id for node in wf.nodes]
    forward = [(e.src, e.dst) for e in wf.edges if e.max_cycles is None and e.src != e.dst]
    layer = dict.fromkeys(ids, 0)
    for _ in range(len(ids)):  # longest path by relaxation; a cycle cannot push past len(ids)
        moved = False
        for src, dst in forward:
            if src in layer and dst in layer and layer[dst] < layer[src] + 1 <= len(ids):
                layer[dst] = layer[src] + 1
                moved = True
        if not moved:
            break
    return layer


def lay_out(wf: Workflow) -> Layout:
    """The picture of ``wf`` (see the module docstring)."""
    layer = layers(wf)
    rows: dict[int, list[str]] = {}
    for node in wf.nodes:
        rows.setdefault(layer[node.id], []).append(node.id)
    widest = max((len(r) for r in rows.values()), default=1)
    width = MARGIN * 2 + widest * NODE_W + (widest - 1) * GAP_X + GAP_X  # room for loops
    kinds = {node.id: node.kind for node in wf.nodes}
    placed: dict[str, Placed] = {}
    for depth in sorted(rows):
        row = rows[depth]
        span = len(row) * NODE_W + (len(row) - 1) * GAP_X
        left = (width - GAP_X - span) // 2
        for i, node_id in enumerate(row):
            x = left + i * (NODE_W + GAP_X)
            y = MARGIN + depth * (NODE_H + GAP_Y)
            placed[node_id] = Placed(node_id, kinds[node_id], x, y, NODE_W, NODE_H, depth)
    height = MARGIN * 2 + (max(rows, default=0) + 1) * (NODE_H + GAP_Y) - GAP_Y
    paths = []
    for index, edge in enumerate(wf.edges):
        a, b = placed[edge.src], placed[edge.dst]
        parts = [edge.when] if edge.when is not None else []
        if edge.max_cycles is not None:
            parts.append(f"max {edge.max_cycles}")
        loop = edge.max_cycles is not None or b.layer <= a.layer
        paths.append(Path(index, edge.src, edge.dst, _curve(a, b, loop), " · ".join(parts), loop))
    return Layout(tuple(placed[n.id] for n in wf.nodes), tuple(paths), width, height)


def _curve(a: Placed, b: Placed, loop: bool) -> str:
    if loop:  # out of the source's right side, round, into the destination's right side
        x1, y1 = a.x + a.w, a.y + a.h // 2
        x2, y2 = b.x + b.w, b.y + b.h // 2
        bend = max(x1, x2) + GAP_X - 8
        return f"M{x1},{y1} C{bend},{y1} {bend},{y2} {x2},{y2}"
    x1, y1 = a.x + a.w // 2, a.y + a.h
    x2, y2 = b.x + b.w // 2, b.y
    mid = (y1 + y2) // 2
    return f"M{x1},{y1} C{x1},{mid} {x2},{mid} {x2},{y2}"
