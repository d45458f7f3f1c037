"""The charts of the HTML report (``html_report.py``), drawn with matplotlib as inline SVG.

    svg = sqnr_chart(rows, prefix="c1")         # SQNR per TIDL layer at 8 and 16 bit, saturation below
    svg = layer_values_chart(sample, "c2")      # one layer: float vs fixed histograms, and a scatter
    svg = fusion_chart(fusions, "c3")           # each fusion: SQNR vs float, fused and unfused

Each function returns one ``<svg>`` element as text, ready to be placed in an HTML page: no XML
declaration, no DOCTYPE, no metadata, every ``id`` (and every reference to it) prefixed with
``prefix`` so that several charts share one page without a clash. Text stays text (SVG
``<text>``, font DejaVu Sans, else the browser's sans-serif; matplotlib lays it out with the
DejaVu Sans it ships), so a chart needs no font file and its words can be searched. The output depends only on the arguments: ``svg.hashsalt`` is fixed and the date left out,
so the same figures give the same bytes. matplotlib is imported when a chart is drawn (it is not
needed by the rest of tidlx); pyplot is not used.

Artists the report's tests look for carry a ``gid`` (an ``id`` in the SVG, after the prefix):
``sqnr-8bit``, ``sqnr-16bit``, ``saturation-8bit``, ``saturation-16bit``, ``histogram-float``,
``histogram-fixed``, ``scatter``, ``fusion-fused``, ``fusion-unfused``.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

#: Colours of the two bit widths (none of them a colour of the partition graph, svg.py).
BITS_COLOURS = {8: "#d95f02", 16: "#1f77b4"}
FUSED_COLOUR = "#c51b7d"
UNFUSED_COLOUR = "#4d9221"
FLOAT_COLOUR = "#555555"
RANGE_COLOUR = "#9467bd"
FIXED_COLOUR = "#d95f02"
#: Alternate background of the subgraphs in the per-layer chart.
SUBGRAPH_SHADE = "#f0f0f0"
#: Points drawn in a scatter plot at most (evenly spaced over the tensor, plus the largest errors).
SCATTER_POINTS = 800
SCATTER_WORST = 80
HISTOGRAM_BINS = 60
#: Layer names are written under the per-layer chart up to this many layers (else every k-th).
NAMED_LAYERS = 120

_RC = {
    "svg.hashsalt": "tidlx-report",
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 8,
    "path.simplify": False,
}
_METADATA = {"Format": None, "Type": None, "Creator": None, "Date": None}


@dataclass(frozen=True)
class LayerPoint:
    """One TIDL layer of the per-layer chart, in model order: SQNR and saturation per bit width
    (None: not compared at that width; SQNR may be inf, exact, or nan, no finite values)."""

    subgraph: str
    label: str
    sqnr_db: Dict[int, Optional[float]]
    saturated_pct: Dict[int, Optional[float]]


@dataclass(frozen=True)
class LayerSample:
    """One layer's output at one bit width on one frame: the float value, the fixed-point value as the
    real number it stands for (q / tensorScale), and the range the integer type holds at that scale."""

    subgraph: str
    layer: str
    type: str
    bits: int
    sqnr_db: float
    saturated_pct: Optional[float]
    float_values: np.ndarray
    fixed_values: np.ndarray
    range_lo: Optional[float]
    range_hi: Optional[float]


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=72, layout="constrained")


def _svg_text(fig, prefix: str) -> str:
    """The figure as one ``<svg>`` element with ids prefixed (see the module docstring)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", metadata=_METADATA)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    ids = set(re.findall(r'\bid="([^"]+)"', text))
    if ids:
        pattern = re.compile(r'(\bid="|xlink:href="#|href="#|url\(#)(' + "|".join(
            re.escape(i) for i in sorted(ids, key=len, reverse=True)) + r')(?=[")])')
        text = pattern.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)
    return text.strip() + "\n"


def _draw(build, width: float, height: float, prefix: str) -> str:
    import matplotlib

    with matplotlib.rc_context(_RC):
        fig = _figure(width, height)
        build(fig)
        return _svg_text(fig, prefix)


def _bars(ax, positions, heights, width: float, colour: str, horizontal: bool = False, label: Optional[str] = None):
    """Bars as one artist (a PolyCollection), so that one ``gid`` names them all."""
    from matplotlib.collections import PolyCollection

    verts = []
    for p, h in zip(positions, heights):
        lo, hi = p - width / 2, p + width / 2
        verts.append([(0, lo), (h, lo), (h, hi), (0, hi)] if horizontal else [(lo, 0), (lo, h), (hi, h), (hi, 0)])
    bars = PolyCollection(verts, facecolors=colour, edgecolors="none", label=label)
    ax.add_collection(bars)
    ax.autoscale_view()
    return bars


def _finite(values: Sequence[Optional[float]]) -> List[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def sqnr_chart(points: Sequence[LayerPoint], bits: Sequence[int] = (8, 16), prefix: str = "sqnr") -> str:
    """SQNR per TIDL layer (model order) at each bit width, one line each, with a marker at the top
    for a layer without error; below, the share of integer values saturated per layer."""
    n = len(points)
    width = max(9.0, min(0.14 * n + 2.5, 48.0))

    def build(fig):
        top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1.4))
        xs = np.arange(n)
        finite = _finite([p.sqnr_db.get(b) for p in points for b in bits])
        ymax = (max(finite) if finite else 10.0) + 6.0
        ymin = min(0.0, min(finite) - 3.0) if finite else 0.0
        # subgraphs as bands
        start = 0
        band = 0
        for i in range(1, n + 1):
            if i == n or points[i].subgraph != points[start].subgraph:
                for ax in (top, bottom):
                    if band % 2 == 0:
                        ax.axvspan(start - 0.5, i - 0.5, color=SUBGRAPH_SHADE, zorder=0, lw=0)
                top.text((start + i - 1) / 2, ymax - 1.0, points[start].subgraph, ha="center", va="top",
                         fontsize=8, color="#333333")
                start = i
                band += 1
        width_bar = 0.8 / max(1, len(bits))
        for k, b in enumerate(bits):
            colour = BITS_COLOURS.get(b, "#2ca02c")
            ys = np.array([p.sqnr_db.get(b) if p.sqnr_db.get(b) is not None else np.nan for p in points], float)
            exact = np.isposinf(ys)
            shown = np.where(np.isfinite(ys), ys, np.nan)
            line, = top.plot(xs, shown, marker="o", markersize=3, lw=1.2, color=colour, label=f"{b} bit")
            line.set_gid(f"sqnr-{b}bit")
            if exact.any():
                marks = top.plot(xs[exact], np.full(int(exact.sum()), ymax - 2.5), linestyle="none", marker="^",
                                 markersize=5, color=colour, label=f"{b} bit: exact (no error)")
                marks[0].set_gid(f"sqnr-{b}bit-exact")
            sat = np.array([p.saturated_pct.get(b) if p.saturated_pct.get(b) is not None else 0.0 for p in points],
                           float)
            bars = _bars(bottom, xs + (k - (len(bits) - 1) / 2) * width_bar, sat, width_bar, colour)
            bars.set_gid(f"saturation-{b}bit")
        top.set_ylim(ymin, ymax)
        top.set_ylabel("SQNR vs float (dB)")
        top.set_title("SQNR per TIDL layer, model order (error accumulated through the layers before)", loc="left")
        top.grid(axis="y", color="#dddddd", lw=0.6)
        top.legend(loc="lower left", ncols=4, frameon=True)
        bottom.set_ylabel("saturated (%)")
        bottom.grid(axis="y", color="#dddddd", lw=0.6)
        sat_max = max([p.saturated_pct.get(b) or 0.0 for p in points for b in bits] + [0.0])
        bottom.set_ylim(0, max(1.0, sat_max * 1.15))
        step = 1 if n <= NAMED_LAYERS else int(math.ceil(n / NAMED_LAYERS))
        ticks = list(range(0, n, step))
        bottom.set_xticks(ticks, [points[i].label for i in ticks], rotation=90)
        bottom.set_xlim(-0.6, n - 0.4)
        bottom.set_xlabel("TIDL layer")

    labels = max((len(p.label) for p in points), default=10)
    return _draw(build, width, 5.2 + 0.075 * min(labels, 40), prefix)


def _scatter_indices(ref: np.ndarray, val: np.ndarray) -> np.ndarray:
    n = ref.size
    if n <= SCATTER_POINTS:
        return np.arange(n)
    even = np.linspace(0, n - 1, SCATTER_POINTS).astype(np.int64)
    worst = np.argsort(-np.abs(ref - val), kind="stable")[:SCATTER_WORST]
    return np.unique(np.concatenate([even, worst]))


def layer_values_chart(sample: LayerSample, prefix: str) -> str:
    """Left: histograms of the layer's float and fixed-point values (same bins); right: fixed point
    against float per element (a sample of them), the diagonal and the range the integer type holds."""
    ref = np.asarray(sample.float_values, np.float64).reshape(-1)
    val = np.asarray(sample.fixed_values, np.float64).reshape(-1)
    keep = np.isfinite(ref) & np.isfinite(val)
    ref, val = ref[keep], val[keep]
    fixed_colour = BITS_COLOURS.get(sample.bits, FIXED_COLOUR)

    def build(fig):
        hist, scat = fig.subplots(1, 2, width_ratios=(1.35, 1))
        if ref.size:
            lo = float(min(ref.min(), val.min()))
            hi = float(max(ref.max(), val.max()))
            if hi <= lo:
                hi = lo + 1.0
            pad = 0.04 * (hi - lo)
            view = (lo - pad, hi + pad)
            edges = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
            _, _, f_patches = hist.hist(ref, bins=edges, histtype="stepfilled", color=FLOAT_COLOUR, alpha=0.35,
                                        label="float")
            f_patches[0].set_gid("histogram-float")
            _, _, q_patches = hist.hist(val, bins=edges, histtype="step", color=fixed_colour, lw=1.3,
                                        label=f"{sample.bits}-bit fixed point")
            q_patches[0].set_gid("histogram-fixed")
            hist.set_yscale("log")
            idx = _scatter_indices(ref, val)
            dots = scat.scatter(ref[idx], val[idx], s=4, color=fixed_colour, alpha=0.5, linewidths=0)
            dots.set_gid("scatter")
            scat.plot(view, view, color=FLOAT_COLOUR, lw=0.8, label="fixed = float")
            # the range the integers hold, where it falls inside the values' span (else it is far away)
            inside = [b for b in (sample.range_lo, sample.range_hi)
                      if b is not None and math.isfinite(b) and view[0] <= b <= view[1]]
            for bound in inside:
                scat.axhline(bound, color=RANGE_COLOUR, lw=0.9, ls="--")
                hist.axvline(bound, color=RANGE_COLOUR, lw=0.9, ls="--")
            if inside:
                scat.plot([], [], color=RANGE_COLOUR, lw=0.9, ls="--", label="limit of the integers")
            for ax in (hist, scat):
                ax.set_xlim(*view)
            scat.set_ylim(*view)
            scat.set_title(f"fixed vs float ({len(idx):,} of {ref.size:,} values)", loc="left")
        hist.set_title("values: float and fixed point (dequantized)", loc="left")
        hist.set_xlabel("value")
        hist.set_ylabel("count (log)")
        hist.legend(loc="upper right")
        scat.set_xlabel("float")
        scat.set_ylabel("fixed point")
        scat.legend(loc="upper left")
        for ax in (hist, scat):
            ax.grid(color="#eeeeee", lw=0.6)

    return _draw(build, 10.5, 3.3, prefix)


def fusion_chart(rows: Sequence[Tuple[str, float, float]], prefix: str = "fusion") -> str:
    """One row per compared fusion (label, SQNR of the fused layer vs float, of the unfused sequence
    vs float): a dot for each, joined by a line; an exact value (no error) is drawn at the right edge."""
    from matplotlib.collections import LineCollection

    n = len(rows)

    def build(fig):
        ax = fig.subplots()
        ys = np.arange(n, dtype=float)
        fused = np.array([r[1] for r in rows], float)
        unfused = np.array([r[2] for r in rows], float)
        finite = _finite(list(fused) + list(unfused))
        lo = min(finite) - 2.0 if finite else 0.0
        hi = max(finite) + 2.0 if finite else 10.0
        fused = np.where(np.isposinf(fused), hi, np.where(np.isneginf(fused), lo, fused))
        unfused = np.where(np.isposinf(unfused), hi, np.where(np.isneginf(unfused), lo, unfused))
        segments = [[(a, y), (b, y)] for a, b, y in zip(fused, unfused, ys) if np.isfinite(a) and np.isfinite(b)]
        ax.add_collection(LineCollection(segments, colors="#999999", linewidths=1.0))
        a, = ax.plot(fused, ys, linestyle="none", marker="o", markersize=5, color=FUSED_COLOUR,
                     label="fused (as TIDL runs it)")
        a.set_gid("fusion-fused")
        b, = ax.plot(unfused, ys, linestyle="none", marker="s", markersize=4, color=UNFUSED_COLOUR,
                     label="unfused (the fusion switched off)")
        b.set_gid("fusion-unfused")
        ax.set_yticks(ys, [r[0] for r in rows])
        ax.set_ylim(n - 0.4, -0.6)
        ax.set_xlim(lo - 1.0, hi + 1.0)
        ax.set_xlabel("SQNR vs float (dB), higher is better")
        ax.set_title("each fusion: fused vs unfused, against float", loc="left")
        ax.grid(color="#e5e5e5", lw=0.6)
        ax.legend(loc="lower right" if n > 3 else "best")

    labels = max((len(r[0]) for r in rows), default=10)
    return _draw(build, 7.5 + 0.055 * min(labels, 80), 1.3 + 0.24 * n, prefix)


__all__ = ["sqnr_chart", "layer_values_chart", "fusion_chart", "LayerPoint", "LayerSample"]
