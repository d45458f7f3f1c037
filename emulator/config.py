"""The emulator's settings as one explicit object, ``EmulatorConfig``, instead of module globals.

``run(..., config=EmulatorConfig(threads=1, fuse=False))`` passes settings to one run; without a
config a run reads the environment when it starts (``EmulatorConfig.from_env()``), so the
``TIDLX_EMULATOR_*`` variables keep working and may change between runs. During a run the config
is the *active* one of the calling thread (``active_config()``), which is how the fast kernels
read it; outside a run ``active_config()`` reads the environment, and ``using_config`` makes a
config active for direct kernel calls (tests).

Only the fast kernel set reads these settings; the reference set has none.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping, Optional

_OFF = ("0", "no", "false", "off")
WINOGRAD_MODES = ("auto", "off", "2", "4")


@dataclass(frozen=True)
class EmulatorConfig:
    """Settings of the fast kernel set (environment variable in brackets).

    * ``threads``: at most this many threads per run, 0 = one per CPU up to 8 (``TIDLX_EMULATOR_THREADS``);
      1 runs everything on the calling thread.
    * ``adapt``: with ``threads=0``, a run uses only the CPUs other processes leave it when it starts
      (fast/_parallel.py; ``TIDLX_EMULATOR_ADAPT=0`` turns it off: one thread per CPU regardless).
    * ``fuse``: fuse element-wise chains into their producer (``TIDLX_EMULATOR_FUSE=0`` turns it off).
    * ``winograd``: ``"auto"`` (F(2x2, 3x3) in float32, by shape in float64), ``"off"``, ``"2"`` (only
      F(2x2, 3x3)) or ``"4"`` (F(4x4, 3x3) wherever Winograd is used: faster, ~15x the rounding error)
      (``TIDLX_EMULATOR_WINOGRAD`` = 1/0/2/4).
    * ``parallel``: ``"numba"`` parallel regions or the Python thread ``"pool"`` (``TIDLX_EMULATOR_PARALLEL``).
    * ``blas``: ``"pool"`` (products split over tidlx's threads, OpenBLAS single-threaded during a run)
      or ``"openblas"`` (OpenBLAS's own threads) (``TIDLX_EMULATOR_BLAS``).
    * ``keep_memory``: keep freed heap pages for reuse, once per process (``TIDLX_EMULATOR_KEEP_MEMORY``).
    * ``prepare``: specialize each step to its call site when its plan is compiled (fast/_prepared.py;
      the same bits; ``TIDLX_EMULATOR_PREPARE=0`` turns it off).
    * ``tile_blocks``: float32 Winograd by blocks of 16 tiles on the microkernel (False: whole
      transformed arrays and BLAS products; no environment variable, for tests and measurements).
    """

    threads: int = 0
    adapt: bool = True
    fuse: bool = True
    winograd: str = "auto"
    parallel: str = "numba"
    blas: str = "pool"
    keep_memory: bool = True
    tile_blocks: bool = True
    prepare: bool = True

    def __post_init__(self):
        if not isinstance(self.threads, int) or self.threads < 0:
            raise ValueError(f"EmulatorConfig.threads must be an int >= 0, got {self.threads!r}")
        if self.winograd not in WINOGRAD_MODES:
            raise ValueError(f"EmulatorConfig.winograd must be one of {WINOGRAD_MODES}, got {self.winograd!r}")
        if self.parallel not in ("numba", "pool"):
            raise ValueError(f"EmulatorConfig.parallel must be 'numba' or 'pool', got {self.parallel!r}")
        if self.blas not in ("pool", "openblas"):
            raise ValueError(f"EmulatorConfig.blas must be 'pool' or 'openblas', got {self.blas!r}")

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "EmulatorConfig":
        """The settings the ``TIDLX_EMULATOR_*`` variables ask for (defaults where unset or unreadable)."""
        env = os.environ if environ is None else environ

        def get(name: str, default: str) -> str:
            return env.get("TIDLX_EMULATOR_" + name, default).strip().lower()

        try:
            threads = max(0, int(get("THREADS", "0")))
        except ValueError:
            threads = 0
        winograd = get("WINOGRAD", "1")
        return cls(
            threads=threads,
            adapt=get("ADAPT", "1") not in _OFF,
            fuse=get("FUSE", "1") not in _OFF,
            winograd="off" if winograd in _OFF else winograd if winograd in ("2", "4") else "auto",
            parallel="pool" if get("PARALLEL", "numba") == "pool" else "numba",
            blas="openblas" if get("BLAS", "pool") == "openblas" else "pool",
            keep_memory=get("KEEP_MEMORY", "1") not in _OFF,
            prepare=get("PREPARE", "1") not in _OFF,
        )

    def replace(self, **changes) -> "EmulatorConfig":
        return dataclasses.replace(self, **changes)


_local = threading.local()


def active_config() -> EmulatorConfig:
    """The config of the run on this thread, else the one the environment asks for."""
    config = getattr(_local, "config", None)
    return config if config is not None else EmulatorConfig.from_env()


@contextmanager
def using_config(config: EmulatorConfig) -> Iterator[EmulatorConfig]:
    """Makes ``config`` the active one on this thread (runs do this for their own config)."""
    saved = getattr(_local, "config", None)
    _local.config = config
    try:
        yield config
    finally:
        _local.config = saved
