"""The HTML summary of a sweep (``out/summary.html``): per model, the Pareto front of % MACs on TIDL
(higher is better), boundary bytes (lower) and SQNR (higher, when ``compare`` was measured), as a
chart drawn like ``tidlx report``'s (matplotlib, inline SVG) and a table of the option sets on it.

A cell is on the front when no other cell of the same model is at least as good in every measure
and better in one; cells with the same measures are one point, listed together.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

#: (column, +1 when higher is better / -1 when lower is better, label)
OBJECTIVES = (("tidl_macs_percent", 1, "% MACs on TIDL"), ("boundary_bytes", -1, "boundary bytes"),
              ("sqnr_db_min", 1, "SQNR (dB, worst output)"))

FRONT_COLOUR = "#d95f02"
OTHER_COLOUR = "#bbbbbb"


def objectives(columns: Sequence[str]) -> List[Tuple[str, int, str]]:
    """The objectives a table measured."""
    return [o for o in OBJECTIVES if o[0] in columns]


def _score(value, sign: int) -> float:
    """A measure as a number where higher is better (nan: the worst)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return -math.inf
    return sign * float(value)


def pareto_front(rows: Sequence[Dict[str, Any]], objs: Sequence[Tuple[str, int, str]]) -> List[List[int]]:
    """The indices of ``rows`` on the Pareto front, grouped by equal measures (groups in row order):
    a row is on it when no other row is at least as good in every objective and better in one."""
    points: Dict[Tuple[float, ...], List[int]] = {}
    for k, row in enumerate(rows):
        points.setdefault(tuple(_score(row.get(c), s) for c, s, _ in objs), []).append(k)
    keys = list(points)
    front = []
    for p in keys:
        dominated = any(all(a >= b for a, b in zip(q, p)) and q != p for q in keys)
        if not dominated:
            front.append(points[p])
    return sorted(front)


def _kb(value: float) -> float:
    return value / 1024.0


def front_chart(rows: Sequence[Dict[str, Any]], front: Sequence[Sequence[int]], objs, prefix: str) -> str:
    """% MACs on TIDL against boundary KiB; the front's points large, labelled with their option sets,
    coloured by SQNR when it was measured (the others grey)."""
    from ..backends.tidl.report_charts import _draw

    on_front = {k for group in front for k in group}
    names = [c for c, _, _ in objs]
    with_sqnr = "sqnr_db_min" in names

    def build(fig):
        ax = fig.subplots()
        others = [r for k, r in enumerate(rows) if k not in on_front]
        if others:
            a = ax.scatter([_kb(r["boundary_bytes"]) for r in others], [r["tidl_macs_percent"] for r in others],
                           s=14, color=OTHER_COLOUR, label="other option sets", zorder=2)
            a.set_gid("sweep-other")
        xs = [_kb(rows[g[0]]["boundary_bytes"]) for g in front]
        ys = [rows[g[0]]["tidl_macs_percent"] for g in front]
        if with_sqnr:
            sq = [rows[g[0]]["sqnr_db_min"] for g in front]
            finite = [v for v in sq if v is not None and math.isfinite(v)]
            colours = [min(finite) if v is None or not math.isfinite(v) else v for v in sq] if finite else None
            b = ax.scatter(xs, ys, s=60, c=colours if colours else FRONT_COLOUR, cmap="viridis",
                           edgecolors="black", linewidths=0.8, label="Pareto front", zorder=3)
            if colours:
                fig.colorbar(b, ax=ax, label="SQNR (dB, worst output)")
        else:
            b = ax.scatter(xs, ys, s=60, color=FRONT_COLOUR, edgecolors="black", linewidths=0.8,
                           label="Pareto front", zorder=3)
        b.set_gid("sweep-front")
        for x, y, group in zip(xs, ys, front):
            ax.annotate(",".join(f"#{rows[k]['option_set']}" for k in group[:4]) + ("..." if len(group) > 4 else ""),
                        (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
        ax.set_xlabel("boundary bytes (KiB), lower is better")
        ax.set_ylabel("% MACs on TIDL, higher is better")
        ax.grid(color="#e5e5e5", lw=0.6)
        ax.legend(loc="lower right")

    return _draw(build, 7.5, 4.2, prefix)


def _value(value) -> str:
    from ..backends.tidl.html_report import _e

    if value is None:
        return "-"
    if isinstance(value, float):
        return _e(f"{value:.4g}")
    return _e(value)


def render_summary(title: str, columns: Sequence[str], rows: Sequence[Dict[str, Any]],
                   option_names: Sequence[str]) -> str:
    """The page: per model the front's chart (when the partition was measured) and its table, then
    the failed cells."""
    from ..backends.tidl.html_report import _STYLE, _e, _table

    objs = objectives(columns)
    models: Dict[str, List[Dict[str, Any]]] = {}
    for row in rows:
        models.setdefault(row["model"], []).append(row)
    failed = [r for r in rows if r.get("error")]
    body = [f"<header><h1>{_e(title)}</h1><p>{len(rows)} cells, {len(models)} model(s), {len(failed)} failed; "
            f"the Pareto front of {', '.join(label for _, _, label in objs) or 'nothing measured'}</p></header>",
            "<main>"]
    measure_cols = [c for c, _, _ in objs]
    for m, (model, model_rows) in enumerate(models.items()):
        ok = [r for r in model_rows if not r.get("error")]
        body.append(f'<section id="model-{m}"><h2>{_e(model)}</h2>')
        if not ok:
            body.append('<p class="note">every cell of this model failed (below)</p></section>')
            continue
        front = pareto_front(ok, objs)
        body.append(f'<p class="note">{len(ok)} cells measured, {sum(len(g) for g in front)} on the front '
                    f'({len(front)} distinct point(s))</p>')
        if "tidl_macs_percent" in measure_cols and "boundary_bytes" in measure_cols:
            body.append(f'<figure class="chart">{front_chart(ok, front, objs, f"front{m}")}</figure>')
        headers = [("option set", "num")] + [(c, "") for c in option_names] + [(label, "num") for _, _, label in objs]
        table_rows = []
        for group in front:
            for k in group:
                r = ok[k]
                table_rows.append([_value(r["option_set"])] + [_value(r.get(c)) for c in option_names]
                                  + [_value(r.get(c)) for c in measure_cols])
        body.append(_table(headers, table_rows, cls="front") + "</section>")
    if failed:
        body.append('<section id="failed"><h2>failed cells</h2>')
        body.append(_table([("model", ""), ("option set", "num"), ("error", "")],
                           [[_e(r["model"]), _value(r["option_set"]), _e(r["error"])] for r in failed]))
        body.append("</section>")
    body.append("</main>")
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      f"<title>{_e(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>", *body,
                      "</body>", "</html>"]) + "\n"
