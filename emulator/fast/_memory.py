"""Keeps freed memory in the process heap so that large temporary arrays reuse warm pages.

glibc hands every block of 128 KiB or more back to the operating system when it is freed,
so each activation the interpreter allocates is fresh memory that page-faults on first touch.
In virtual machines a fault costs microseconds: a 3 MB activation then takes ~5 ms to
allocate, more than the convolution that fills it. Raising glibc's mmap and trim thresholds
(what ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` do) makes freed blocks reusable, at
the price of the process keeping its peak heap. A run whose config says ``keep_memory=False``
(``TIDLX_EMULATOR_KEEP_MEMORY=0``) leaves malloc alone (a setting made by an earlier run stays);
other C libraries are left alone anyway.
"""

from __future__ import annotations

import ctypes
import platform

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024   # glibc's maximum for this setting on 64-bit
_TRIM_THRESHOLD = 1 << 30

_done = False


def keep_freed_memory(enabled: bool = True) -> bool:
    """Applies the malloc settings once per process (when ``enabled``); returns whether they are in effect."""
    global _done
    if _done or not enabled:
        return _done == "on"
    _done = "off"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1 and \
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1
    except (OSError, AttributeError):
        return False
    _done = "on" if ok else "off"
    return ok
