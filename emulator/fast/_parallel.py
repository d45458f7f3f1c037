"""Parallel execution of the heavy kernels: numba parallel regions, with a Python thread pool as fallback.

The hot kernels (matrix products, Winograd transforms, im2col, conv tails, batch norm, relu,
pooling) are numba loops over a block range ``[start, stop)``. In a run each executes as one numba
parallel region (``run_blocks`` with the loop's ``*_blocks`` driver; products call OpenBLAS from
inside the region, see _blas.py). numba's OpenMP workers keep spinning for a moment after a
region, so the next kernel starts in ~5 us, where waking a sleeping Python pool thread costs
~100 us in a VM; a ResNet-18 run makes ~80 such hand-offs (its median went from ~50 to ~39 ms on
2 cores, interleaved A/B in one process).

The fallback is the Python pool (``for_blocks``): work is cut in blocks that the calling thread and
``cpus - 1`` pool threads take from a shared counter until none is left, so a thread that the OS
deschedules delays only its current block, and idle pool threads sleep. It runs the loops given
as Python callables (numba loops release the GIL, numpy's products too), and everything when
numba has no thread-safe threading layer (OpenMP or TBB) or numpy's BLAS is not its bundled
OpenBLAS. ``TIDLX_EMULATOR_PARALLEL=pool`` forces it, and a process forked after a run uses it
(GNU OpenMP is not fork-safe).

OpenBLAS's own threads are not used during a run (its thread count is set to 1 and restored
after): its workers busy-wait after each product and split work statically. On an idle 2-core
machine that made whole-model runs slower and erratic (45-65 ms for a ResNet-18, ~45 involuntary
context switches per run, against a steady ~45 ms with the pool), and when another process holds
a core each product waits for a descheduled worker (4-7x slower runs).

The settings come from the run's ``EmulatorConfig`` (``run_context(config)``): ``threads=1`` runs
everything on the calling thread (``N`` caps the threads at N), ``blas="openblas"`` leaves products
to OpenBLAS's threads (and the rest to the pool), ``parallel="pool"`` forces the pool.
The numba threading layer is chosen as numba's "threadsafe" one unless ``NUMBA_THREADING_LAYER``
says otherwise (the emulator may run from several threads at once).

Beside other CPU-bound processes a parallel region waits for a descheduled worker. So by default
(``EmulatorConfig.adapt``, ``TIDLX_EMULATOR_ADAPT=0`` turns it off; config ``threads=0`` only) a run
counts at its start the runnable threads of other processes (/proc/loadavg's running count less
this process's running threads, ~23 us) and uses only the CPUs left (at least 1; on 2 cores beside
one busy process: the calling thread alone). A count stands for ADAPT_RECOUNT_SECONDS, the least of
it and the count before it (a process busy for a moment is no competitor; _others_running_recently):
the runs of a small model (MobileNetV3-small: ~1.5 ms) would otherwise spend 3-5% of their time counting (69 us a
count through Python's file objects, 23 us through os.read). benchmarks/ab_parallel.py, fresh processes
alternating, 3 rounds x 7 runs, medians, 2-core VM at load 1.4-1.6, ms idle / beside one Python
busy loop (measured with older depthwise and activation kernels than today's):

    ============================  ============  ============  ============  ============  ===========
    model                         regions       pool          threads=1     adapt         onnxruntime
    ============================  ============  ============  ============  ============  ===========
    ResNet-18                     22.9 / 47.0   29.6 / 36.5   35.4 / 36.6   22.1 / 34.7   17.7 / 37.9
    MobileNetV3-small             9.9 / 16.9    11.9 / 13.0   11.6 / 14.5   10.6 / 12.9   1.8 / 2.5
    EfficientNet-B0               43.7 / 121.1  51.3 / 59.4   53.7 / 65.6   46.7 / 63.0   8.1 / 15.0
    ============================  ============  ============  ============  ============  ===========

It became the default when a shared machine (other engineers' compiles, load average ~2.2-2.5 on
2 cores) made the regions 17x slower than one thread: in one process, configs alternating, 7
runs, medians, ms: MobileNetV3-small regions 107.5 / pool 6.9 / threads=1 6.3, EfficientNet-B0
148.1 / 37.6 / 31.0, ResNet-18 224.7 / 48.2 / 42.6; with the rule on, MobileNetV3-small 6.8 and
ResNet-18 43.6 (threads=1: 6.7, 43.3). Results are the same bits for any thread count, so the rule
changes only speed. Its limits: /proc/loadavg counts the whole kernel's runnable threads (in a
container on a larger host, other tenants too: then a run uses one thread), and the count is one
instant's (a burst elsewhere decides a run).
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Optional

import numpy as np

#: products smaller than this many multiply-adds run as one call, larger ones in blocks: in a
#: numba region (~5 us to start) two blocks of a 0.4-2M product (MobileNetV3-small's 1x1
#: convolutions at 28x28 and 14x14) ran 1.1-1.8x faster than one call on 2 cores, 0.2-0.3M ones
#: no faster; MobileNetV3-small's runs went 3.6% faster than with 2M (in-process A/B, twice)
_MIN_PARALLEL_MACS = 400_000
#: ... and the Python pool (a ~100 us hand-off) takes blocks of products from this size; smaller
#: ones compute their blocks in turn on the calling thread (the same blocks: the same bits)
_MIN_POOL_MACS = 2_000_000
#: element-wise passes over fewer elements than this per thread run in the calling thread: a pool
#: dispatch costs ~0.1 ms of thread wake-ups in a VM, as long as one thread takes for ~1M floats
#: (a batch norm over 64x112x112 took 0.3 ms on the pool, 0.1 ms in one thread)
MIN_ELEMENTWISE_BLOCK = 1 << 20
_BLOCK_ALIGN = 16

_lock = threading.Lock()
_local = threading.local()
_state = {"ready": False, "threads": None, "pool": None, "workers": 0, "saved": None, "split_products": False,
          "numba_threads": 1}
_active_runs = [0]

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
            "openblas_set_num_threads")


def _find_openblas():
    """(set_num_threads, get_num_threads) of the OpenBLAS numpy is linked to, or None (Linux only)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            setter = getattr(lib, name, None)
            getter = getattr(lib, name.replace("set_num", "get_num"), None)
            if setter is not None and getter is not None:
                setter.argtypes = [ctypes.c_int]
                setter.restype = None
                getter.argtypes = []
                getter.restype = ctypes.c_int
                return setter, getter
    return None


def _thread_count() -> int:
    """The most threads a run may use: one per CPU, at most 8 (a run's config may ask for fewer)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def _read_proc(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _others_running() -> int:
    """Runnable threads of other processes now (/proc/loadavg's running count less this process's)."""
    try:
        running = int(_read_proc("/proc/loadavg").split()[3].split(b"/")[0])
        own = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                if _read_proc(f"/proc/self/task/{tid}/stat").rsplit(b")", 1)[1].split(None, 1)[0] == b"R":
                    own += 1
            except (OSError, IndexError):
                pass
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, running - own)


#: Seconds a count of other processes' runnable threads stands for the runs that start after it.
ADAPT_RECOUNT_SECONDS = 0.01
#: Counts a process's first positive count is checked by (the least stands): a CPU-bound process is
#: runnable at each, a kernel worker waking for microseconds rarely at two in a row.
ADAPT_CONFIRMING_COUNTS = 2
_others_count = [float("-inf"), 0, None]  # [time.monotonic() of the last count, what stands, the count seen]


def _others_running_recently() -> int:
    """_others_running, counted again once the last count is ADAPT_RECOUNT_SECONDS old. What stands is
    the least of the count and the one before it (the first count of a process: of it and
    ADAPT_CONFIRMING_COUNTS counts right after it): a CPU-bound process is seen at successive counts,
    a daemon busy for a moment at one. On an idle 2-vCPU Intel Xeon VM (AVX-512), one count in ~14
    saw such a passer-by (at three counts ~25 us apart too), and its run took one thread: 44-49 ms for
    a ResNet-18 of 13-15 (a process's first one-thread run also loads the serial kernels)."""
    now = time.monotonic()
    if now - _others_count[0] >= ADAPT_RECOUNT_SECONDS:
        seen = _others_running()
        previous = _others_count[2]
        if previous is None:
            standing = seen
            for _ in range(ADAPT_CONFIRMING_COUNTS):
                if standing == 0:
                    break
                standing = min(standing, _others_running())
        else:
            standing = min(seen, previous)
        _others_count[:] = [now, standing, seen]
    return _others_count[1]


def _run_threads(config) -> int:
    """The threads a run with ``config`` uses: its cap, or all (with ``config.adapt``, the default,
    and no cap: the CPUs other processes leave, see the module doc)."""
    most = _thread_count()
    if config.threads == 0 and config.adapt:
        return max(1, most - _others_running_recently())
    return min(most, config.threads) if config.threads > 0 else most


def _setup() -> None:
    if _state["ready"]:
        return
    with _lock:
        if _state["ready"]:
            return
        np.ones((2, 2), np.float32) @ np.ones((2, 2), np.float32)  # make sure BLAS is loaded
        workers = _thread_count() - 1
        if workers > 0:
            _state["pool"] = ThreadPoolExecutor(workers, thread_name_prefix="tidlx-emulator")
            _state["workers"] = workers
            _state["threads"] = _find_openblas()
            if _state["threads"] is not None:
                _state["numba_threads"] = _numba_parallel_threads(workers + 1)
        _state["ready"] = True


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: it makes a new pool on its next run, and
    never enters numba's OpenMP layer, which is not fork-safe (numba aborts the child)."""
    global _lock
    _lock = threading.Lock()
    forked_layer = _state["numba_threads"] > 1
    _state.update(ready=False, pool=None, workers=0, split_products=False, numba_threads=1)
    _state["forked_from_numba"] = _state.get("forked_from_numba", False) or forked_layer
    _active_runs[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _numba_parallel_threads(wanted: int) -> int:
    """How many numba threads parallel regions may use (1: they cannot be used): needs OpenBLAS
    reachable from numba and a thread-safe numba threading layer."""
    import numba

    from . import _blas

    if not _blas.AVAILABLE or _state.get("forked_from_numba"):
        return 1
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region has run in this process yet: we may choose the layer
        if "NUMBA_THREADING_LAYER" not in os.environ and numba.config.THREADING_LAYER == "default":
            numba.config.THREADING_LAYER = "threadsafe"
        try:
            _blas.gemm_stack(np.zeros((2, 1, 1)), np.zeros((2, 1, 1)), np.zeros((2, 1, 1)))
            layer = numba.threading_layer()
        except Exception:  # noqa: BLE001  (any failure: the pool does the work)
            return 1
    if layer not in ("omp", "tbb"):
        return 1  # numba's workqueue layer must not be entered from two threads at once
    return max(1, min(wanted, numba.config.NUMBA_NUM_THREADS))


@contextmanager
def run_context(config):
    """Wraps a run with ``config`` (an EmulatorConfig): OpenBLAS computes in the calling threads,
    kernels use at most the config's threads (see the module doc)."""
    _setup()
    threads = _state["threads"]
    run_threads = _run_threads(config)
    with _lock:
        if _active_runs[0] == 0:
            _state["split_products"] = threads is not None and config.blas != "openblas"
            if _state["split_products"]:
                _state["saved"] = threads[1]()
                threads[0](1)
        _active_runs[0] += 1
    use_numba = _state["numba_threads"] > 1 and _state["split_products"] and config.parallel != "pool"
    numba_threads = min(_state["numba_threads"], run_threads) if use_numba else 1
    saved_numba = None
    if numba_threads > 1:
        import numba

        saved_numba = numba.get_num_threads()  # a per-thread setting in numba
        numba.set_num_threads(numba_threads)
    saved_threads = getattr(_local, "threads", None)
    saved_local_numba = getattr(_local, "numba_threads", 1)
    _local.numba_threads = numba_threads
    _local.threads = run_threads
    try:
        yield
    finally:
        _local.numba_threads = saved_local_numba
        _local.threads = saved_threads
        if saved_numba is not None:
            numba.set_num_threads(saved_numba)
        with _lock:
            _active_runs[0] -= 1
            if _active_runs[0] == 0 and _state["split_products"]:
                threads[0](_state["saved"])
                _state["split_products"] = False


def numba_threads() -> int:
    """The numba threads kernels may use on this thread now: > 1 only inside a run that uses numba
    parallel regions (see the module doc)."""
    return getattr(_local, "numba_threads", 1)


def run_blocks(count: int, serial: Callable, parallel: Callable, *args, min_block: int = 1) -> None:
    """``serial(*args, start, stop)`` over ``range(count)``: as ``parallel(*args, count, blocks)`` (a
    numba driver running the blocks in one parallel region) when this run uses numba threads, else
    on the Python pool, or in one call when ``count`` is below two ``min_block``s (sized for the
    pool's ~100 us hand-off)."""
    threads = numba_threads()
    if threads > 1:
        # a parallel region starts in microseconds: blocks may be 16x smaller than on the pool
        min_block = max(1, min_block // 16)
    if count < 2 * min_block:
        serial(*args, 0, count)
    elif threads > 1:
        parallel(*args, count, min(threads, count // min_block))
    else:
        for_blocks(count, lambda start, stop: serial(*args, start, stop), min_block=min_block)


def splitting_products() -> bool:
    """Whether this run computes products in blocks on the pool (BLAS being single-threaded)."""
    return bool(_state["split_products"])


def for_blocks(count: int, fn: Callable[[int, int], None], min_block: int = 1) -> None:
    """Calls ``fn(start, stop)`` over ``range(count)`` cut in blocks, on the pool when it helps.

    ``fn`` must release the GIL for the pool to pay (numpy calls and ``nogil`` numba loops do).
    """
    _setup()
    workers = _state["workers"]
    cap = getattr(_local, "threads", None)  # a run's thread cap (outside runs: the whole pool)
    if cap is not None:
        workers = min(workers, cap - 1)
    if workers <= 0 or count < 2 * min_block:
        fn(0, count)
        return
    blocks = min(2 * (workers + 1), count // min_block)
    step = -(-count // blocks)
    bounds = [(s, min(s + step, count)) for s in range(0, count, step)]
    counter = itertools.count()

    def work():
        while True:
            i = next(counter)  # atomic under the GIL
            if i >= len(bounds):
                return
            fn(*bounds[i])

    futures = [_state["pool"].submit(work) for _ in range(min(workers, len(bounds) - 1))]
    try:
        work()
    finally:
        for f in futures:
            f.result()


#: float32 products with a short inner side (k <= 192) are cut in blocks of at most ~1M multiply-adds
#: when they are small (up to 6.5M) or have long rows (3136 columns or more, up to 32M): OpenBLAS
#: (0.3.31, SkylakeX kernels) computes such a block with its small-matrix kernel, without packing
#: the operands, and packing dominates a product whose k is short. benchmarks/ab_product_blocks.py
#: (2-core AMD EPYC VM, the benchmark set's 1x1 convolutions, old and new blocks alternating, 16
#: runs, medians, us at 1 / 2 threads): ShuffleNetV2's 116x116 @ 116x196 61.5 -> 51.6 / 45.9 ->
#: 37.1, MobileNetV2's 192x32 @ 32x784 116 -> 94 / 86 -> 56 and 96x16 @ 16x12544 579 -> 436 /
#: 335 -> 231. Elsewhere small blocks were no faster or slower: k >= 384 (96x576 @ 576x196 +-1%),
#: mid-size products with short rows (960x160 @ 160x49 182 -> 192 / 95 -> 108; 116x116 @ 116x784
#: 230 -> 244 / 136 -> 158), and products above 32M (256x64 @ 64x3136).
_SMALL_BLOCKS_MAX_K = 192
_SMALL_BLOCK_MACS = 1_000_000
_SMALL_BLOCKS_ANY_ROWS_MACS = 6_500_000
_SMALL_BLOCKS_LONG_ROWS = 3136
_SMALL_BLOCKS_MAX_MACS = 32_000_000


def _small_kernel_blocks(m: int, k: int, n: int, dtype) -> bool:
    """Whether a product is cut for OpenBLAS's small-matrix kernel (see above)."""
    macs = m * k * n
    return 0 < k <= _SMALL_BLOCKS_MAX_K and np.dtype(dtype) == np.float32 and (
        macs <= _SMALL_BLOCKS_ANY_ROWS_MACS or (n >= _SMALL_BLOCKS_LONG_ROWS and macs <= _SMALL_BLOCKS_MAX_MACS))


def product_blocks(m: int, n: int, k: int = 0, dtype=np.float32) -> tuple:
    """(by_rows, blocks, step) of a split ``m x k @ k x n`` product: its longer side cut in one block
    per CPU of the machine (not per thread of the run), or, for some float32 products with a short k
    (``_small_kernel_blocks``), in blocks of at most ~1M multiply-adds (a multiple of the CPU
    count); each a multiple of the SIMD-friendly align.

    OpenBLAS picks its kernels by a product's size, so a block may round differently from the whole
    product: on this AVX-512 VM 48x224 @ 224x196 gave other bits in two column blocks (112 + 84)
    than in one call, and a run's results changed with its thread count (so with the load, through
    the adapt rule). Blocks fixed by the shape keep them the same bits for any threads or engine;
    one thread computes the blocks in turn (MobileNetV2 at threads=1: 2-4% slower than one call)."""
    by_rows = n < m
    total = m if by_rows else n
    cpus = _thread_count()
    wanted = cpus
    if _small_kernel_blocks(m, k, n, dtype):
        small_blocks = -(-(m * k * n) // _SMALL_BLOCK_MACS)
        wanted = max(cpus, -(-small_blocks // cpus) * cpus)  # a multiple of the CPUs: even shares
    blocks = max(1, min(wanted, -(-total // _BLOCK_ALIGN)))
    step = -(-(-(-total // blocks)) // _BLOCK_ALIGN) * _BLOCK_ALIGN  # as _blas.gemm_blocks cuts them
    return by_rows, blocks, step


#: matrix-vector products from this many multiply-adds run in blocks of rows (a dense layer of one
#: sample: MobileNetV3-small's 576x1024 and 1024x1000 weights come from memory, 184 -> 127 us for the
#: second in two blocks on 2 cores, a cold cache each time)
_MIN_MATVEC_MACS = 200_000


def matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``a @ x`` for a row-major float matrix and a contiguous vector of its dtype: when the run splits
    products, in blocks of rows fixed by the shape (``product_blocks``) over the run's numba threads
    (one thread: in turn, the same bits), else one BLAS call."""
    m, k = a.shape
    from . import _blas

    if not _state["split_products"] or m * k < _MIN_MATVEC_MACS or not _blas.usable(a, x) \
            or not a.flags.c_contiguous or not x.flags.c_contiguous:
        return np.matmul(a, x)
    _, blocks, _ = product_blocks(m, 1)
    y = np.empty(m, a.dtype)
    (_blas.gemv_blocks if numba_threads() > 1 else _blas.gemv_blocks_serial)(a, x, y, blocks, _BLOCK_ALIGN)
    return y


def product_plan(m: int, k: int, n: int, dtype) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``matmul``'s decisions for one product shape and dtype, made once: ``fn(a, b)`` computes
    ``a @ b`` as ``matmul(a, b)`` does (the same blocks, so the same bits), for call sites whose
    shapes never change (prepared steps, _prepared.py; ~3 us a call less)."""
    dtype = np.dtype(dtype)
    if m * k * n < _MIN_PARALLEL_MACS or dtype.kind != "f":
        return np.matmul
    by_rows, blocks, _ = product_blocks(m, n, k, dtype)
    from . import _blas

    def product(a, b):
        if not _state["split_products"]:
            return np.matmul(a, b)
        out = np.empty((m, n), dtype)
        if not _blas.usable(a, b, out):
            return matmul(a, b, out)
        if numba_threads() > 1:
            _blas.gemm_blocks(a, b, out, blocks, by_rows, _BLOCK_ALIGN)
        elif getattr(_local, "threads", None) == 1:
            _blas.gemm_blocks_serial(a, b, out, blocks, by_rows, _BLOCK_ALIGN)
        else:
            return matmul(a, b, out)
        return out
    return product


def product_tail_plan(m: int, k: int, n: int, dtype) -> Optional[Callable]:
    """``product_plan``'s blocks for one shape in a numba parallel region, each block followed by its
    part of a convolution's tail (affine, residual add, relu or clip, activation: by _microkernel.store_rows
    for float32, else _jit.tail_row; the same bits) while the block
    is in its core's cache, instead of a second region over the whole result: two cores streaming
    a 1x1 convolution's output from L3 got ~1.3x one core's speed, the blocks ~1.8x.
    ``fn(a, b, tail)`` returns the finished (m, n) array, or None when this run has no numba
    threads to split over (the caller then runs the product and the tail's pass: the same bits, as
    the blocks' products and the element operations are the same; at one thread the per-block form
    measured 1.05-1.15x slower). ``tail`` is (scale, shift, other, has_affine, has_add, relu, clamp,
    lo, hi, act, act_consts: _prepared._tail_operands' flags); ``other`` a C-contiguous (m, n) residual
    or None. None (no plan) when product_plan does
    not cut this shape."""
    dtype = np.dtype(dtype)
    if m * k * n < _MIN_PARALLEL_MACS or dtype.kind != "f":
        return None
    by_rows, blocks, _ = product_blocks(m, n, k, dtype)
    from . import _blas, _jit, _microkernel

    stored = dtype == np.float32 and _microkernel.AVAILABLE  # the tail by the store kernel (float32 only)

    def product(a, b, tail):
        if not _state["split_products"] or numba_threads() < 2:
            return None
        out = np.empty((m, n), dtype)
        if not _blas.usable(a, b, out):
            return None
        scale, shift, other = tail[:3]
        blocks_of = _jit.gemm_stored_tail_blocks if stored else _jit.gemm_tail_blocks
        blocks_of(a, b, out, blocks, by_rows, _BLOCK_ALIGN, scale, shift, out if other is None else other, *tail[3:])
        return out
    return product


def matmul(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``a @ b`` for 2-D operands; large float products, when the run splits products (BLAS being
    single-threaded), in the blocks of ``product_blocks`` spread over the run's threads (numba
    threads, else the pool; one thread computes them in turn), else one BLAS call."""
    m, k = a.shape
    n = b.shape[1]
    if out is None:
        out = np.empty((m, n), np.result_type(a, b))
    if not _state["split_products"] or m * k * n < _MIN_PARALLEL_MACS or a.dtype.kind != "f":
        return np.matmul(a, b, out=out)
    by_rows, blocks, step = product_blocks(m, n, k, a.dtype)
    from . import _blas

    blas = _blas.usable(a, b, out)
    cap = getattr(_local, "threads", None)
    if blas and (numba_threads() > 1 or cap == 1):
        (_blas.gemm_blocks if numba_threads() > 1 else _blas.gemm_blocks_serial)(a, b, out, blocks, by_rows,
                                                                                 _BLOCK_ALIGN)
        return out
    total = m if by_rows else n
    product = _blas.gemm_into if blas else lambda x, y, z: np.matmul(x, y, out=z)

    def run(first, last):
        for i in range(first, last):
            s, e = i * step, min(total, (i + 1) * step)
            if s >= e:  # the last blocks may be empty, as in gemm_blocks
                continue
            if by_rows:
                product(a[s:e], b, out[s:e])
            else:
                product(a, b[:, s:e], out[:, s:e])

    if m * k * n < _MIN_POOL_MACS:
        run(0, blocks)
    else:
        for_blocks(blocks, run)
    return out
