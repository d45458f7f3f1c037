"""In-process A/B timing shared by the ab_*.py scripts: variants run alternately, medians compared.

The machine is shared, so two variants timed one after the other see different neighbours;
alternating them run by run, then comparing medians, lets both see the same noise.
"""

from __future__ import annotations

import time

import numpy as np


def ab(label: str, variants: dict, runs: int, width: int = 60):
    """Median ms of each of two variants' fn(), alternating after one warm-up call each; prints
    the label, both medians and the ratio first / second, and returns the two medians."""
    times = {name: [] for name in variants}
    for fn in variants.values():
        fn()
    for _ in range(runs):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    a, b = (float(np.median(t)) * 1e3 for t in times.values())
    print(f"{label:<{width}}{a:>10.4f}{b:>10.4f}{a / b:>8.2f}x", flush=True)
    return a, b
