"""Matrix products callable from numba code: OpenBLAS's cblas_sgemm/cblas_dgemm, the copy numpy uses.

numba code cannot call numpy's matmul without the GIL, so the emulator's parallel kernels
(_parallel.py) reach the BLAS routines directly: the address of numpy's bundled OpenBLAS
(scipy-openblas64, 64-bit integers) is bound to a symbol name that the compiled code links
against by name, which keeps numba's on-disk cache valid across processes. Each call runs on
the calling thread (OpenBLAS's own threads are set to 1 during emulator runs), so a numba
``prange`` over blocks runs the blocks' products in parallel without Python in between.

``AVAILABLE`` is False when numpy is linked to another BLAS; callers then use numpy.
Operands are 2-D, rows with unit stride (C order or row slices of it).

``KERNELS`` names the kernel set OpenBLAS chose when it loaded ("SkylakeX" for AVX-512, "Haswell"
for AVX2, ...; "" when unknown): products are ~1.7x faster on AVX-512 kernels, and the variable
``OPENBLAS_CORETYPE`` overrides OpenBLAS's choice, so the benchmarks print it.
"""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

_SYMBOLS = {"tidlx_cblas_sgemm64": "scipy_cblas_sgemm64_", "tidlx_cblas_dgemm64": "scipy_cblas_dgemm64_",
            "tidlx_cblas_sgemv64": "scipy_cblas_sgemv64_", "tidlx_cblas_dgemv64": "scipy_cblas_dgemv64_"}


def _bind_symbols() -> bool:
    """Binds our symbol names to numpy's OpenBLAS routines; False when they are not there."""
    folder = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(folder, "libscipy_openblas64_*.so*"))):
        try:
            lib = ctypes.CDLL(path)
            addresses = {ours: ctypes.cast(getattr(lib, theirs), ctypes.c_void_p).value
                         for ours, theirs in _SYMBOLS.items()}
        except (OSError, AttributeError):
            continue
        import llvmlite.binding as llvm

        for ours, address in addresses.items():
            llvm.add_symbol(ours, address)
        global KERNELS
        KERNELS = _kernel_set(lib)
        return True
    return False


def _kernel_set(lib) -> str:
    """OpenBLAS's name for the kernels it runs, "" when the library does not say."""
    corename = getattr(lib, "scipy_openblas_get_corename64_", None) or getattr(lib, "gotoblas_corename", None)
    if corename is None:
        return ""
    corename.restype = ctypes.c_char_p
    corename.argtypes = []
    return (corename() or b"").decode(errors="replace").strip()


KERNELS = ""
AVAILABLE = _bind_symbols()

from numba import njit, prange, types  # noqa: E402  (after the symbols exist for cached code)

# cblas_?gemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) with 64-bit
# integers and 32-bit enums
_ROW_MAJOR, _NO_TRANS = 101, 111
_sgemm = types.ExternalFunction("tidlx_cblas_sgemm64", types.void(
    types.int32, types.int32, types.int32, types.int64, types.int64, types.int64, types.float32, types.voidptr,
    types.int64, types.voidptr, types.int64, types.float32, types.voidptr, types.int64))
_dgemm = types.ExternalFunction("tidlx_cblas_dgemm64", types.void(
    types.int32, types.int32, types.int32, types.int64, types.int64, types.int64, types.float64, types.voidptr,
    types.int64, types.voidptr, types.int64, types.float64, types.voidptr, types.int64))

# cblas_?gemv(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy)
_sgemv = types.ExternalFunction("tidlx_cblas_sgemv64", types.void(
    types.int32, types.int32, types.int64, types.int64, types.float32, types.voidptr, types.int64, types.voidptr,
    types.int64, types.float32, types.voidptr, types.int64))
_dgemv = types.ExternalFunction("tidlx_cblas_dgemv64", types.void(
    types.int32, types.int32, types.int64, types.int64, types.float64, types.voidptr, types.int64, types.voidptr,
    types.int64, types.float64, types.voidptr, types.int64))


def usable(*arrays: np.ndarray) -> bool:
    """Whether the numba products take these operands: float32 or float64 (all alike), 2-D or
    stacks of 2-D, unit stride along rows and non-negative strides."""
    if not AVAILABLE:
        return False
    dtype = arrays[0].dtype
    if dtype not in (np.float32, np.float64):
        return False
    for a in arrays:
        if a.dtype != dtype or a.strides[-1] != a.itemsize or min(a.strides) < 0 or a.size == 0:
            return False
        if a.ndim == 2 and a.strides[0] % a.itemsize:
            return False
    return True


@njit(cache=True, nogil=True)
def gemm_into(a, b, c):
    """c = a @ b on the calling thread (see the module doc for the operands)."""
    m, k = a.shape
    n = b.shape[1]
    size = a.itemsize
    if size == 4:  # float32 (usable() admits only float32 and float64)
        _sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, np.float32(1.0), a.ctypes, a.strides[0] // size,
               b.ctypes, b.strides[0] // size, np.float32(0.0), c.ctypes, c.strides[0] // size)
    else:
        _dgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes, a.strides[0] // size,
               b.ctypes, b.strides[0] // size, 0.0, c.ctypes, c.strides[0] // size)


@njit(cache=True, nogil=True)
def _block_step(a, b, blocks, by_rows, align):
    """(rows or columns per block, the total): blocks fixed by the shape, each a multiple of align."""
    total = a.shape[0] if by_rows else b.shape[1]
    step = (total + blocks - 1) // blocks
    return (step + align - 1) // align * align, total


@njit(cache=True, nogil=True)
def _gemm_block(a, b, c, i, step, total, by_rows):
    start = i * step
    stop = min(total, start + step)
    if start < stop:
        if by_rows:
            gemm_into(a[start:stop], b, c[start:stop])
        else:
            gemm_into(a, b[:, start:stop], c[:, start:stop])


@njit(cache=True, nogil=True, parallel=True)
def gemm_blocks(a, b, c, blocks, by_rows, align):
    """c = a @ b in ``blocks`` blocks of rows (``by_rows``) or columns, each a multiple of ``align``
    (SIMD-friendly edges), one numba thread each."""
    step, total = _block_step(a, b, blocks, by_rows, align)
    for i in prange(blocks):
        _gemm_block(a, b, c, i, step, total, by_rows)


@njit(cache=True, nogil=True)
def gemm_blocks_serial(a, b, c, blocks, by_rows, align):
    """gemm_blocks' blocks, one after another on the calling thread (the same bits: a run's
    results must not depend on its thread count)."""
    step, total = _block_step(a, b, blocks, by_rows, align)
    for i in range(blocks):
        _gemm_block(a, b, c, i, step, total, by_rows)


@njit(cache=True, nogil=True, parallel=True)
def gemm_stack(a, b, c):
    """c[p] = a[p] @ b[p] for every p of 3-D stacks, the products spread over the numba threads."""
    for p in prange(a.shape[0]):
        gemm_into(a[p], b[p], c[p])


@njit(cache=True, nogil=True)
def _gemv_rows(a, x, y, start, stop):
    """y[start:stop] = a[start:stop] @ x on the calling thread (a row-major, x and y contiguous)."""
    if start >= stop:
        return
    k = a.shape[1]
    size = a.itemsize
    rows = a[start:stop]
    out = y[start:stop]
    if size == 4:
        _sgemv(_ROW_MAJOR, _NO_TRANS, stop - start, k, np.float32(1.0), rows.ctypes, a.strides[0] // size, x.ctypes, 1,
               np.float32(0.0), out.ctypes, 1)
    else:
        _dgemv(_ROW_MAJOR, _NO_TRANS, stop - start, k, 1.0, rows.ctypes, a.strides[0] // size, x.ctypes, 1, 0.0,
               out.ctypes, 1)


@njit(cache=True, nogil=True, parallel=True)
def gemv_blocks(a, x, y, blocks, align):
    """y = a @ x in ``blocks`` blocks of rows, each a multiple of ``align``, one numba thread each: a
    matrix-vector product (a dense layer of one sample) streams its weights from memory, and two
    cores stream them ~1.5x faster than one."""
    step, total = _block_step(a, a, blocks, True, align)
    for i in prange(blocks):
        _gemv_rows(a, x, y, i * step, min(total, (i + 1) * step))


@njit(cache=True, nogil=True)
def gemv_blocks_serial(a, x, y, blocks, align):
    """gemv_blocks' blocks in turn on the calling thread (the same bits)."""
    step, total = _block_step(a, a, blocks, True, align)
    for i in range(blocks):
        _gemv_rows(a, x, y, i * step, min(total, (i + 1) * step))
