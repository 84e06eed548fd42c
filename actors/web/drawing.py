"""Geometry of the console's two pictures, as data for the SVG templates (pure).

A DAG run is drawn left to right by stage (a task's stage is one more than its
latest dependency's, so a column's tasks can run in parallel), each task a box
in its state's colour, each ``after`` edge a curve from the dependency's right
edge to the task's left edge. A schedule's runs are two bar charts, oldest on
the left: firing lateness and duration, each scaled to its own maximum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actors.views.dag_view import DOT_COLOURS, DagView

NODE_W = 180
NODE_H = 56
COLUMN_GAP = 70
ROW_GAP = 24
MARGIN = 16


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    state: str
    detail: str
    job: str
    x: int
    y: int
    fill: str


@dataclass(frozen=True, slots=True)
class Edge:
    path: str  # an SVG path ("M x y C ...")


@dataclass(frozen=True, slots=True)
class Graph:
    width: int
    height: int
    nodes: list[Node]
    edges: list[Edge]
    node_w: int = NODE_W
    node_h: int = NODE_H


def dag_graph(view: DagView) -> Graph:
    columns: dict[int, list[str]] = {}
    for task in view.tasks:
        columns.setdefault(task.stage, []).append(task.name)
    where: dict[str, tuple[int, int]] = {}
    for stage, names in columns.items():
        x = MARGIN + (stage - 1) * (NODE_W + COLUMN_GAP)
        for row, name in enumerate(names):
            where[name] = (x, MARGIN + row * (NODE_H + ROW_GAP))
    nodes = [
        Node(
            name=t.name,
            state=t.state,
            detail=t.detail,
            job=t.job,
            x=where[t.name][0],
            y=where[t.name][1],
            fill=DOT_COLOURS.get(t.state, "#ffffff"),
        )
        for t in view.tasks
    ]
    edges: list[Edge] = []
    for task in view.tasks:
        tx, ty = where[task.name]
        for dep in task.after:
            dx, dy = where[dep]
            x1, y1 = dx + NODE_W, dy + NODE_H // 2
            x2, y2 = tx, ty + NODE_H // 2
            bend = (x2 - x1) // 2
            edges.append(Edge(f"M {x1} {y1} C {x1 + bend} {y1}, {x2 - bend} {y2}, {x2} {y2}"))
    stages = max(columns, default=1)
    rows = max((len(names) for names in columns.values()), default=1)
    return Graph(
        width=2 * MARGIN + stages * NODE_W + (stages - 1) * COLUMN_GAP,
        height=2 * MARGIN + rows * NODE_H + (rows - 1) * ROW_GAP,
        nodes=nodes,
        edges=edges,
    )


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    width: int
    height: int
    bars: list[Bar]
    max_label: str


def bar_chart(
    title: str,
    values_ms: Sequence[int | None],
    labels: Sequence[str],
    *,
    width: int = 560,
    height: int = 90,
) -> Chart:
    """Bars of ``values_ms`` (None: no bar) scaled to the largest, with a label each."""
    known = [v for v in values_ms if v is not None]
    top = max(max(known, default=0), 1)
    slot = width / max(len(values_ms), 1)
    bars: list[Bar] = []
    for i, (value, label) in enumerate(zip(values_ms, labels, strict=True)):
        if value is None:
            continue
        h = max(1.0, (max(value, 0) / top) * (height - 4))
        bars.append(
            Bar(
                x=round(i * slot + slot * 0.15, 1),
                y=round(height - h, 1),
                width=round(slot * 0.7, 1),
                height=round(h, 1),
                label=f"{label}: {value} ms",
            )
        )
    return Chart(title=title, width=width, height=height, bars=bars, max_label=f"{top} ms")
