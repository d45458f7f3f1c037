"""The block ranges every parallel driver cuts its work into (a module of its own, so that the
kernel modules can share it without importing one another)."""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def block_range(count, blocks, i):
    """[start, stop) of block ``i`` of ``blocks`` near-equal blocks of ``range(count)``."""
    step = (count + blocks - 1) // blocks
    start = min(count, i * step)
    return start, min(count, start + step)
