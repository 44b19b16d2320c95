"""The layout of a workflow's DAG for the inline SVG of the workflow page.

Owns :func:`layout`: left to right, each node's column is its depth (the longest path
from a root), nodes of a column are ordered top to bottom by the mean position of their
parents (one sweep), and every node and edge gets coordinates. The template draws them
in an SVG whose viewBox fits the page's width (``static/dag.js`` pans and zooms it);
pure, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence

NODE_W = 168
NODE_H = 46
GAP_X = 64
"""Between two columns (depths): room for the edges' arrows."""
GAP_Y = 16
"""Between two nodes of a column."""
MARGIN = 16
MAX_DRAWN = 400
"""Above this many nodes the page shows the table only (an SVG that size is unreadable)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PlacedNode:
    id: str
    state: str
    task_id: str
    x: int
    y: int
    layer: int


@dataclasses.dataclass(frozen=True, slots=True)
class PlacedEdge:
    parent: str
    child: str
    x1: int
    y1: int
    x2: int
    y2: int


@dataclasses.dataclass(frozen=True, slots=True)
class Layout:
    nodes: list[PlacedNode]
    edges: list[PlacedEdge]
    width: int
    height: int
    node_w: int = NODE_W
    node_h: int = NODE_H


def depths(node_ids: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """The longest-path depth of every node (roots are 0), by Kahn's order."""
    children: dict[str, list[str]] = defaultdict(list)
    indegree = dict.fromkeys(node_ids, 0)
    for parent, child in edges:
        if parent in indegree and child in indegree:
            children[parent].append(child)
            indegree[child] += 1
    depth = dict.fromkeys(node_ids, 0)
    queue = deque(n for n in node_ids if indegree[n] == 0)
    while queue:
        n = queue.popleft()
        for c in children[n]:
            depth[c] = max(depth[c], depth[n] + 1)
            indegree[c] -= 1
            if indegree[c] == 0:
                queue.append(c)
    return depth


def layout(nodes: Sequence[tuple[str, str, str]], edges: Sequence[tuple[str, str]]) -> Layout:
    """Coordinates for ``nodes`` (id, state, task id) and ``edges`` (parent, child)."""
    ids = [n[0] for n in nodes]
    depth = depths(ids, edges)
    parents: dict[str, list[str]] = defaultdict(list)
    for parent, child in edges:
        parents[child].append(parent)
    layers: dict[int, list[str]] = defaultdict(list)
    for node_id in ids:
        layers[depth[node_id]].append(node_id)
    position: dict[str, float] = {}
    for level in sorted(layers):
        members = layers[level]

        def key(n: str) -> tuple[float, str]:
            ps = [position[p] for p in parents[n] if p in position]
            return (sum(ps) / len(ps) if ps else 0.0, n)

        if level > 0:
            members.sort(key=key)
        for i, n in enumerate(members):
            position[n] = float(i)
    tallest = max((len(m) for m in layers.values()), default=0)
    width = MARGIN * 2 + len(layers) * NODE_W + max(0, len(layers) - 1) * GAP_X
    height = MARGIN * 2 + tallest * NODE_H + max(0, tallest - 1) * GAP_Y
    placed: dict[str, PlacedNode] = {}
    for level, members in layers.items():
        column_h = len(members) * NODE_H + max(0, len(members) - 1) * GAP_Y
        top = (height - column_h) // 2
        for i, n in enumerate(members):
            placed[n] = PlacedNode(
                id=n,
                state="",
                task_id="",
                x=MARGIN + level * (NODE_W + GAP_X),
                y=top + i * (NODE_H + GAP_Y),
                layer=level,
            )
    out_nodes = [
        dataclasses.replace(placed[node_id], state=state, task_id=task_id)
        for node_id, state, task_id in nodes
    ]
    out_edges = [
        PlacedEdge(
            parent=p,
            child=c,
            x1=placed[p].x + NODE_W,
            y1=placed[p].y + NODE_H // 2,
            x2=placed[c].x,
            y2=placed[c].y + NODE_H // 2,
        )
        for p, c in edges
        if p in placed and c in placed
    ]
    return Layout(nodes=out_nodes, edges=out_edges, width=width, height=height)
