"""The emulator's runtime helpers: the block thread pool, split matrix products, the malloc
setting, and the numba cache location."""

import os

import numpy as np
import pytest

from tidlx.emulator import _memory
from tidlx.emulator.kernels import _parallel


def test_for_blocks_covers_every_index_once():
    seen = np.zeros(1000, np.int64)

    def mark(start, stop):
        seen[start:stop] += 1

    _parallel.for_blocks(1000, mark)
    assert (seen == 1).all()
    _parallel.for_blocks(3, mark, min_block=10)  # too small to split: one call
    assert (seen[:3] == 2).all() and (seen[3:] == 1).all()


def test_for_blocks_raises_errors_of_any_block():
    def fail(start, stop):
        if start > 0:
            raise ValueError("block failed")

    with pytest.raises(ValueError, match="block failed"):
        _parallel.for_blocks(100, fail)


@pytest.mark.parametrize("m,k,n", [(64, 150, 1000), (700, 300, 20), (33, 1000, 77)])
def test_products_split_over_the_pool_equal_one_product(monkeypatch, m, k, n):
    monkeypatch.setenv("TIDLX_EMULATOR_BLAS", "pool")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    _parallel._setup()
    threads = _parallel._state["threads"]
    before = threads[1]() if threads else None
    with _parallel.run_context():
        assert _parallel.splitting_products() == (threads is not None)
        got = _parallel.matmul(a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)
    assert not _parallel.splitting_products()
    if threads:
        assert threads[1]() == before  # OpenBLAS's thread count is restored


def test_openblas_threads_can_be_kept(monkeypatch):
    monkeypatch.setenv("TIDLX_EMULATOR_BLAS", "openblas")
    with _parallel.run_context():
        assert not _parallel.splitting_products()


def test_keep_freed_memory_is_idempotent(monkeypatch):
    first = _memory.keep_freed_memory()
    assert _memory.keep_freed_memory() == first


def test_numba_cache_files_are_written_next_to_the_kernels_or_in_a_user_dir():
    from tidlx.emulator.kernels import _jit

    x = np.arange(10, dtype=np.float64)
    _jit.erf_f64(x)
    cache = _jit.erf_f64._cache
    assert cache._cache_path and os.access(cache._cache_path, os.W_OK)
    assert any(name.startswith("_jit.erf_f64") for name in os.listdir(cache._cache_path))


def test_for_blocks_from_two_caller_threads_covers_both():
    import threading

    seen = np.zeros((2, 5000), np.int64)

    def caller(row):
        for _ in range(20):
            _parallel.for_blocks(5000, lambda s, e: seen[row, s:e].__iadd__(1))

    threads = [threading.Thread(target=caller, args=(row,)) for row in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (seen == 20).all()
