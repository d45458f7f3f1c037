"""A dependency-free SVG picture of a dataflow graph, nodes coloured by target.

Layered layout: each node sits on the row of its longest path from an input; within a row
nodes are ordered by the mean column of their producers (one barycentre sweep), which keeps
ResNet-style graphs (a main chain plus short skips) readable at a few hundred nodes.

Each node is a box with a label and an optional second line (``detail``, e.g. a short layer
name) and a tooltip; edges between different groups (tensors crossing a subgraph boundary)
are drawn thicker and red. Every node is ``<g class="node" data-group="...">`` so tools can
find them. The output depends only on the arguments (no timestamps, no ids from memory).
Every string is escaped for XML, its control characters shown as ``\\x1b``-style escapes
(``ir/text.py``: XML 1.0 cannot hold them), so any layer name gives a well-formed file.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ...ir.text import printable, xml_text

#: Distinct fills for TIDL subgraphs (cycled); the host is grey.
SUBGRAPH_COLOURS = ("#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
                    "#e15759", "#86bcb6", "#8cd17d", "#f1ce63", "#a0cbe8", "#ffbe7d", "#d4a6c8", "#d7b5a6")
HOST_COLOUR = "#bab0ac"
IO_COLOUR = "#ffffff"
BOUNDARY_EDGE = "#d62728"

BOX_W, BOX_H, BOX_H2, GAP_X, GAP_Y, MARGIN = 170, 24, 34, 30, 20, 20
#: Characters that fit in a box at the 11px font.
LABEL_CHARS = 27


@dataclass
class SvgNode:
    key: int
    label: str
    group: str          # "tidl_0", ..., "host", or "io"
    tooltip: str = ""
    detail: str = ""    # a second, smaller line (e.g. the short layer name)


def group_colour(group: str, order: Sequence[str]) -> str:
    if group == "host":
        return HOST_COLOUR
    if group == "io":
        return IO_COLOUR
    return SUBGRAPH_COLOURS[order.index(group) % len(SUBGRAPH_COLOURS)] if group in order else HOST_COLOUR


def _fit(text: str, limit: int = LABEL_CHARS) -> str:
    """Shortens from the left (the end of a name says the most: ``…layer1.0/conv1``)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _subgraph_order(group: str):
    head, _, tail = group.rpartition("_")
    return (0, head, int(tail), "") if tail.isdigit() else (1, group, 0, group)


def _layout(nodes: Sequence[SvgNode], preds: Dict[int, List[int]]) -> Tuple[Dict[int, int], Dict[int, int], int]:
    row: Dict[int, int] = {}
    for n in nodes:
        row[n.key] = 1 + max((row[p] for p in preds[n.key]), default=-1)
    rows: Dict[int, List[int]] = {}
    for n in nodes:
        rows.setdefault(row[n.key], []).append(n.key)
    col: Dict[int, int] = {}
    for r in sorted(rows):
        keys = rows[r]
        keys.sort(key=lambda k: (sum(col[p] for p in preds[k]) / len(preds[k])) if preds[k] else 0.0)
        used = set()
        for k in keys:
            want = round(sum(col[p] for p in preds[k]) / len(preds[k])) if preds[k] else 0
            c = max(0, int(want))
            while c in used:
                c += 1
            used.add(c)
            col[k] = c
    return row, col, len(rows)


def _edge_path(src, dst, rows_apart: int, box_h: int, index: int) -> str:
    """An edge between adjacent rows is a curve through the gap between them; a longer one
    (a skip connection) runs down the gap to the right of its source's column, so it never
    crosses a box."""
    (x1, y1), (x2, y2) = src, dst
    if rows_apart <= 1:
        return (f'M{x1 + BOX_W // 2},{y1 + box_h} C{x1 + BOX_W // 2},{y1 + box_h + GAP_Y} '
                f'{x2 + BOX_W // 2},{y2 - GAP_Y} {x2 + BOX_W // 2},{y2}')
    lane = x1 + BOX_W + GAP_X // 2 + (index % 3 - 1) * 4
    top, bottom = y1 + box_h + GAP_Y // 2, y2 - GAP_Y // 2
    return (f'M{x1 + BOX_W - 16},{y1 + box_h} L{lane},{top} L{lane},{bottom} L{x2 + BOX_W - 16},{y2}')


def render_svg(nodes: Sequence[SvgNode], edges: Sequence[Tuple[int, int]], title: str = "",
               legend: Optional[Mapping[str, str]] = None, subtitle: str = "") -> str:
    """``nodes`` in topological order; ``edges`` as (producer key, consumer key).

    ``legend`` maps a group to its legend text (default "TIDL subgraph <group>" / "host")."""
    preds: Dict[int, List[int]] = {n.key: [] for n in nodes}
    for a, b in edges:
        if a in preds and b in preds:
            preds[b].append(a)
    row, col, n_rows = _layout(nodes, preds)
    group_of = {n.key: n.group for n in nodes}
    box_h = BOX_H2 if any(n.detail for n in nodes) else BOX_H
    n_cols = int(max(col.values(), default=0)) + 1
    groups = sorted({n.group for n in nodes if n.group not in ("host", "io")}, key=_subgraph_order)
    shown = groups + (["host"] if any(n.group == "host" for n in nodes) or not groups else [])
    legend = dict(legend or {})
    width = max(2 * MARGIN + n_cols * (BOX_W + GAP_X), 640)
    sub_lines = textwrap.wrap(subtitle, width=max(40, int((width - 2 * MARGIN) / 6.2))) if subtitle else []
    header = 30 + 15 * len(sub_lines)
    legend_h = 22 * len(shown) + 12
    height = 2 * MARGIN + header + legend_h + n_rows * (box_h + GAP_Y)

    def xy(k):
        return MARGIN + col[k] * (BOX_W + GAP_X), MARGIN + header + legend_h + row[k] * (box_h + GAP_Y)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{MARGIN}" y="{MARGIN + 12}" font-size="15" font-weight="bold">{xml_text(title)}</text>']
    for i, line in enumerate(sub_lines):
        out.append(f'<text x="{MARGIN}" y="{MARGIN + 30 + 15 * i}" font-size="11">{xml_text(line)}</text>')
    ly = MARGIN + header
    for i, g in enumerate(shown):
        text = legend.get(g) or ("host (Arm / C7x via TVM)" if g == "host" else "TIDL subgraph " + g)
        out.append(f'<g class="legend" data-group="{xml_text(g)}"><rect x="{MARGIN}" y="{ly + 22 * i}" width="16" '
                   f'height="16" fill="{group_colour(g, groups)}" stroke="#333"/><text x="{MARGIN + 24}" '
                   f'y="{ly + 22 * i + 12}">{xml_text(text)}</text></g>')
    inner, crossing = [], []
    for a, b in edges:
        if a in col and b in col:
            d = _edge_path(xy(a), xy(b), row[b] - row[a], box_h, len(inner) + len(crossing))
            cross = group_of[a] != group_of[b] and "io" not in (group_of[a], group_of[b])
            (crossing if cross else inner).append(f'<path d="{d}"/>')
    out.append('<g class="edges" stroke="#555" stroke-width="1" fill="none">')
    out.extend(inner)
    out.append('</g>')
    out.append(f'<g class="boundary-edges" stroke="{BOUNDARY_EDGE}" stroke-width="2.5" fill="none">')
    out.extend(crossing)
    out.append('</g>')
    for n in nodes:
        x, y = xy(n.key)
        fill = group_colour(n.group, groups)
        text_fill = "#000" if n.group in ("host", "io") else "#fff"
        lines = [f'<text x="{x + BOX_W // 2}" y="{y + 16}" text-anchor="middle" fill="{text_fill}">'
                 f'{xml_text(_fit(printable(n.label)))}</text>']
        if n.detail:
            lines.append(f'<text x="{x + BOX_W // 2}" y="{y + 29}" text-anchor="middle" fill="{text_fill}" '
                         f'font-size="9">{xml_text(_fit(printable(n.detail), LABEL_CHARS + 5))}</text>')
        tip = xml_text(n.tooltip or n.label, keep="\n")  # a tooltip's lines stay lines
        out.append(f'<g class="node" data-group="{xml_text(n.group)}"><title>{tip}</title>'
                   f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{box_h}" rx="4" fill="{fill}" stroke="#333"/>'
                   + "".join(lines) + '</g>')
    out.append('</svg>')
    return "\n".join(out) + "\n"
