"""Derived forms of constant weight arrays (Winograd-transformed, packed in panels), cached per array.

A model's weights are read-only Constant arrays that live as long as the model: their derived forms
are computed on the first run and kept, keyed by the array's identity and the form's variant, for as
long as the array lives (a weak reference drops the entry with it). Writable arrays (a weight computed
in the run) are derived anew each time.
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable

import numpy as np

_lock = threading.Lock()
_cache: dict = {}


def derived(w: np.ndarray, variant, make: Callable[[], np.ndarray]) -> np.ndarray:
    """``make()``, cached for the life of ``w`` under ``variant`` when ``w`` is read-only."""
    if w.flags.writeable:
        return make()
    key = id(w)
    with _lock:
        entry = _cache.get(key)
    hit = entry[1].get(variant) if entry is not None and entry[0]() is w else None
    if hit is not None:
        return hit
    value = make()
    with _lock:
        entry = _cache.get(key)
        if entry is None or entry[0]() is not w:
            try:
                ref = weakref.ref(w, lambda _r, k=key: _cache.pop(k, None))
            except TypeError:
                return value
            entry = (ref, {})
            _cache[key] = entry
        entry[1][variant] = value
    return value
