"""The emulator's runtime helpers: the block thread pool, split matrix products, the malloc
setting, and the numba cache location."""

import os

import numpy as np
import pytest

from tidlx.emulator import EmulatorConfig
from tidlx.emulator.fast import _memory
from tidlx.emulator.fast import _parallel


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
def test_products_split_over_the_pool_equal_one_product(m, k, n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    _parallel._setup()
    threads = _parallel._state["threads"]
    before = threads[1]() if threads else None
    with _parallel.run_context(EmulatorConfig(blas="pool")):
        assert _parallel.splitting_products() == (threads is not None)
        got = _parallel.matmul(a, b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)
    assert not _parallel.splitting_products()
    if threads:
        assert threads[1]() == before  # OpenBLAS's thread count is restored


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(48, 224, 196), (40, 256, 196), (96, 448, 49), (700, 300, 20), (33, 1000, 77),
                                   (48, 120, 196), (96, 288, 49), (116, 116, 196), (192, 32, 784)])
def test_split_products_are_the_same_bits_for_any_thread_count_and_engine(dtype, m, k, n):
    """On AVX-512 cores OpenBLAS computes a 48x224 @ 224x196 product in one call and its two
    column blocks with different kernels: blocks cut by the run's thread count gave other bits at
    threads=1 than at 2. Blocks fixed by the shape do not."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    results = {}
    for name, config in {"one thread": EmulatorConfig(threads=1),
                         "numba": EmulatorConfig(threads=2, adapt=False),
                         "pool": EmulatorConfig(threads=2, adapt=False, parallel="pool"),
                         "all CPUs": EmulatorConfig(adapt=False)}.items():
        with _parallel.run_context(config):
            results[name] = _parallel.matmul(a, b)
    np.testing.assert_allclose(results["one thread"], a @ b, rtol=1e-5, atol=1e-3)
    differ = [name for name, r in results.items() if r.tobytes() != results["one thread"].tobytes()]
    assert differ == [], f"other bits than one thread's: {differ}"


def test_product_blocks_cover_the_longer_side():
    for m, k, n in [(48, 224, 196), (1280, 320, 49), (16, 16, 16), (33, 300, 77), (700, 500, 20), (5, 1, 1),
                    (116, 116, 196), (96, 16, 12544), (192, 32, 784)]:
        for dtype in (np.float32, np.float64):
            by_rows, blocks, step = _parallel.product_blocks(m, n, k, dtype)
            total = m if by_rows else n
            assert by_rows == (n < m) and step % 16 == 0 and blocks >= 1
            # every row or column, in no more than one block's spill
            assert total <= blocks * step and step < total + 16


def test_short_products_are_cut_for_the_small_matrix_kernel():
    """float32 products with k <= 192, small or with long rows: blocks of ~1M multiply-adds, as many
    for every CPU (OpenBLAS's small-matrix kernel); others, and float64: one block per CPU."""
    cpus = _parallel._thread_count()
    for m, k, n in [(116, 116, 196), (96, 16, 12544), (192, 32, 784), (58, 58, 784)]:
        by_rows, blocks, step = _parallel.product_blocks(m, n, k, np.float32)
        other = n if by_rows else m
        assert blocks % cpus == 0 and blocks >= -(-m * k * n // 1_000_000)
        assert step * k * other <= 1_000_000 + 16 * k * other  # ~1M each, give or take an align
        assert _parallel.product_blocks(m, n, k, np.float64)[1] == min(cpus, -(-(m if by_rows else n) // 16))
    for m, k, n in [(96, 576, 196), (512, 128, 784), (1024, 256, 196), (960, 160, 49), (116, 116, 784)]:
        # k too long, too big, or mid-size with short rows
        assert _parallel.product_blocks(m, n, k, np.float32)[1] == cpus


def test_openblas_threads_can_be_kept():
    with _parallel.run_context(EmulatorConfig(blas="openblas")):
        assert not _parallel.splitting_products()


def test_keep_freed_memory_is_idempotent(monkeypatch):
    first = _memory.keep_freed_memory()
    assert _memory.keep_freed_memory() == first


def test_numba_cache_files_are_written_next_to_the_kernels_or_in_a_user_dir():
    from tidlx.emulator.fast import _jit

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


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@pytest.mark.skipif(_cpus() < 2, reason="one CPU: runs are serial by design")
def test_runs_use_numba_parallel_regions_on_several_cpus():
    """The fast path (numba's OpenMP layer and OpenBLAS reachable from numba) is what the install
    provides; a missing libgomp would silently fall back to the slower Python pool."""
    from tidlx.emulator.fast import _blas

    assert _blas.AVAILABLE
    assert _parallel.numba_threads() == 1  # outside runs
    with _parallel.run_context(EmulatorConfig(adapt=False)):  # the default adapts to the machine's load
        assert _parallel.numba_threads() == min(_cpus(), 8)
    with _parallel.run_context(EmulatorConfig(parallel="pool")):
        assert _parallel.numba_threads() == 1
    with _parallel.run_context(EmulatorConfig(threads=1)):
        assert _parallel.numba_threads() == 1


@pytest.mark.skipif(_cpus() < 2, reason="one CPU: runs are serial by design")
@pytest.mark.parametrize("others,expected", [(0, None), (1, -1), (99, 1)])
def test_default_runs_use_the_cpus_other_processes_leave(monkeypatch, others, expected):
    most = min(_cpus(), 8)
    monkeypatch.setattr(_parallel, "_others_running", lambda: others)
    monkeypatch.setattr(_parallel, "_others_count", [float("-inf"), 0, None])  # no count standing from earlier runs
    with _parallel.run_context(EmulatorConfig()):
        assert _parallel.numba_threads() == {None: most, -1: max(1, most - 1)}.get(expected, expected)
    with _parallel.run_context(EmulatorConfig(adapt=False)):
        assert _parallel.numba_threads() == most
    with _parallel.run_context(EmulatorConfig(threads=2)):  # a cap is taken as asked
        assert _parallel.numba_threads() == 2
    assert EmulatorConfig.from_env({"TIDLX_EMULATOR_ADAPT": "0"}).adapt is False
    assert EmulatorConfig.from_env({}).adapt is True


@pytest.mark.skipif(_cpus() < 2, reason="one CPU: runs are serial by design")
def test_a_count_of_other_processes_stands_for_a_short_while(monkeypatch):
    """Runs starting within ADAPT_RECOUNT_SECONDS of a count reuse it; a later run counts again."""
    counts = []

    def counting():
        counts.append(1)
        return 99 if len(counts) > 1 else 0

    monkeypatch.setattr(_parallel, "_others_running", counting)
    monkeypatch.setattr(_parallel, "_others_count", [float("-inf"), 0, None])
    monkeypatch.setattr(_parallel, "ADAPT_RECOUNT_SECONDS", 3600.0)
    monkeypatch.setattr(_parallel, "ADAPT_CONFIRMING_COUNTS", 0)  # one count a recount here
    for _ in range(3):
        with _parallel.run_context(EmulatorConfig()):
            assert _parallel.numba_threads() == min(_cpus(), 8)
    assert len(counts) == 1
    _parallel._others_count[0] -= 3600.0  # the count is now old: the next run counts again (99 others)
    with _parallel.run_context(EmulatorConfig()):  # ... which stands once the count before agrees
        assert _parallel.numba_threads() == min(_cpus(), 8)
    _parallel._others_count[0] -= 3600.0
    with _parallel.run_context(EmulatorConfig()):
        assert _parallel.numba_threads() == 1
    assert len(counts) == 3
    assert _parallel._others_running.__name__ == "counting"
    monkeypatch.undo()
    assert _parallel._others_running() >= 0  # the real count reads /proc (0 where it cannot)


@pytest.mark.skipif(_cpus() < 2, reason="one CPU: runs are serial by design")
@pytest.mark.parametrize("counts,threads", [((1, 0), "all"), ((1, 1, 0), "all"), ((1, 1, 1), "less one"),
                                            ((2, 1, 3), "less one"), ((0,), "all")])
def test_a_first_count_stands_when_the_counts_right_after_it_agree(monkeypatch, counts, threads):
    """A process's first positive count is checked by ADAPT_CONFIRMING_COUNTS more, the least standing:
    a thread runnable at one count only (a kernel worker passing by) leaves the run all of the CPUs."""
    seen = list(counts)
    monkeypatch.setattr(_parallel, "_others_running", lambda: seen.pop(0))
    monkeypatch.setattr(_parallel, "_others_count", [float("-inf"), 0, None])
    monkeypatch.setattr(_parallel, "ADAPT_CONFIRMING_COUNTS", 2)
    most = min(_cpus(), 8)
    with _parallel.run_context(EmulatorConfig()):
        assert _parallel.numba_threads() == (most if threads == "all" else max(1, most - 1))
    assert not seen  # no count more than needed


@pytest.mark.skipif(_cpus() < 2, reason="one CPU: runs are serial by design")
def test_later_counts_stand_when_the_count_before_agrees(monkeypatch):
    """After a process's first count, what stands is the least of a count and the one before it: a
    burst seen at one count leaves all CPUs, a process seen at two in a row takes one of them."""
    seen = [0, 1, 0, 1, 1, 1, 0]
    monkeypatch.setattr(_parallel, "_others_running", lambda: seen.pop(0))
    monkeypatch.setattr(_parallel, "_others_count", [float("-inf"), 0, None])
    most = min(_cpus(), 8)
    got = []
    for _ in range(7):
        _parallel._others_count[0] = float("-inf")  # each run counts anew
        with _parallel.run_context(EmulatorConfig()):
            got.append(_parallel.numba_threads())
    less = max(1, most - 1)
    assert got == [most, most, most, most, less, less, most]
    assert not seen

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(512, 300, 49), (64, 147, 1000), (33, 70, 77)])
def test_numba_products_equal_numpy(dtype, m, k, n):
    from tidlx.emulator.fast import _blas

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m + 3, k)).astype(dtype)[3:]  # starts inside its buffer
    b = rng.standard_normal((k, n + 5)).astype(dtype)[:, :n]  # rows longer than n (ldb > n)
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-10)
    for blocks, by_rows in ((1, True), (2, True), (3, False), (2, False)):
        c = np.full((m, n), np.nan, dtype)
        _blas.gemm_blocks(a, b, c, blocks, by_rows, 16)
        np.testing.assert_allclose(c, a @ b, **tol)
    stack_a = rng.standard_normal((5, m, k)).astype(dtype)
    stack_b = rng.standard_normal((5, k, n)).astype(dtype)
    c = np.empty((5, m, n), dtype)
    _blas.gemm_stack(stack_a, stack_b, c)
    np.testing.assert_allclose(c, stack_a @ stack_b, **tol)
    assert _blas.usable(a, b, c[0]) and not _blas.usable(a.astype(np.int32), b, c[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k", [(1000, 1024), (999, 333), (37, 9000)])
def test_matrix_vector_products_in_row_blocks_are_the_same_for_any_thread_count(dtype, m, k, monkeypatch):
    """A dense layer of one sample (_parallel.matvec): blocks of rows fixed by the shape, run over
    the numba threads or in turn on one; equal to numpy's product within the dense tolerance."""
    from tidlx.emulator.fast import _blas
    from tidlx.emulator.fast.op_nn import DENSE_TOLERANCE

    rng = np.random.default_rng(3)
    a, x = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal(k).astype(dtype)
    drivers = []
    for name in ("gemv_blocks", "gemv_blocks_serial"):
        original = getattr(_blas, name)
        monkeypatch.setattr(_blas, name, lambda *args, _f=original, _n=name: drivers.append(_n) or _f(*args))
    outs = []
    for threads in (1, 2):
        with _parallel.run_context(EmulatorConfig(threads=threads, adapt=False)):
            outs.append(_parallel.matvec(a, x))
    assert outs[0].tobytes() == outs[1].tobytes()
    want = a @ x
    assert np.abs(outs[0] - want).max() <= DENSE_TOLERANCE * np.abs(want).max()
    assert drivers == ["gemv_blocks_serial", "gemv_blocks" if _cpus() > 1 else "gemv_blocks_serial"]


def test_run_blocks_in_a_run_covers_every_index_once():
    from tidlx.emulator.fast._jit import relu_flat, relu_flat_blocks

    x = np.random.default_rng(1).standard_normal(3_000_001).astype(np.float32)
    out = np.full_like(x, np.nan)
    with _parallel.run_context(EmulatorConfig()):
        _parallel.run_blocks(x.size, relu_flat, relu_flat_blocks, x, out, np.float32(0), min_block=1 << 20)
    np.testing.assert_array_equal(out, np.maximum(x, 0))


@pytest.mark.parametrize("stride,dilation", [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2)])
def test_im2col_gather_equals_the_window_view(stride, dilation):
    from numpy.lib.stride_tricks import as_strided

    from tidlx.emulator.fast import op_conv

    xp = np.random.default_rng(2).standard_normal((1, 5, 23, 19)).astype(np.float32)
    k = 3
    oh = (23 - dilation * (k - 1) - 1) // stride + 1
    ow = (19 - dilation * (k - 1) - 1) // stride + 1
    s_n, s_c, s_h, s_w = xp.strides
    want = as_strided(xp, (1, 5, k, k, oh, ow), (s_n, s_c, s_h * dilation, s_w * dilation, s_h * stride, s_w * stride))
    for context in (lambda: _parallel.run_context(EmulatorConfig()), lambda: __import__("contextlib").nullcontext()):
        with context():
            got = op_conv._im2col(xp, k, k, (stride, stride), (dilation, dilation), (oh, ow))
        np.testing.assert_array_equal(got, want)


def test_numba_and_pool_engines_agree_on_a_conv_net():
    """Every parallel driver (im2col, products, Winograd transforms, tails, max pool) against the
    Python pool's runs of the same loops: only the products' blocking may differ."""
    from tidlx.emulator import run
    from tidlx.ir import Function, IRModule, TensorType, TupleGetItem, Var, call, const

    rng = np.random.default_rng(3)
    x = Var("x", TensorType((1, 3, 112, 112), "float32"))

    def conv(y, c_in, c_out, k, stride):
        w = rng.normal(0, (2 / (c_in * k * k)) ** 0.5, (c_out, c_in, k, k)).astype(np.float32)
        y = call("nn.conv2d", y, const(w), strides=(stride, stride), padding=(k // 2,) * 4, channels=c_out,
                 kernel_size=(k, k))
        g, b, m = (rng.uniform(-0.5, 0.5, c_out).astype(np.float32) for _ in range(3))
        v = rng.uniform(0.5, 2, c_out).astype(np.float32)
        return TupleGetItem(call("nn.batch_norm", y, const(g), const(b), const(m), const(v)), 0)

    y = call("nn.relu", conv(x, 3, 32, 7, 2))
    y = call("nn.max_pool2d", y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
    z = call("nn.relu", call("add", conv(call("nn.relu", conv(y, 32, 32, 3, 1)), 32, 32, 3, 1), y))
    z = call("nn.relu", conv(z, 32, 64, 3, 2))
    mod = IRModule({"main": Function([x], z)})
    image = rng.uniform(-1, 1, (1, 3, 112, 112)).astype(np.float32)
    outputs = []
    for engine in ("numba", "pool"):
        outputs.append(run(mod, {"x": image}, config=EmulatorConfig(parallel=engine))[0])
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=0, atol=1e-5 * np.abs(outputs[1]).max())


def _small_conv_model():
    from tidlx.ir import Function, IRModule, TensorType, Var, call, const

    rng = np.random.default_rng(5)
    w = rng.normal(0, 0.2, (32, 16, 3, 3)).astype(np.float32)
    x = Var("x", TensorType((1, 16, 64, 64), "float32"))
    body = call("nn.relu", call("nn.conv2d", x, const(w), padding=(1, 1, 1, 1), channels=32, kernel_size=(3, 3)))
    image = rng.uniform(-1, 1, (1, 16, 64, 64)).astype(np.float32)
    return IRModule({"main": Function([x], body)}), image


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_process_forked_after_a_run_can_run_the_emulator():
    """GNU OpenMP is not fork-safe and the pool's threads do not survive a fork: the child must
    still run (on a new pool) instead of aborting or hanging."""
    from tidlx.emulator import run

    mod, image = _small_conv_model()
    (want,) = run(mod, {"x": image})
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when its run is right (no pytest machinery here)
        code = 1
        try:
            (got,) = run(mod, {"x": image})
            code = 0 if np.allclose(got, want, rtol=1e-5, atol=1e-5) else 1
        finally:
            os._exit(code)
    import time

    deadline = time.monotonic() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_runs_from_several_threads_at_once_are_right():
    from concurrent.futures import ThreadPoolExecutor

    from tidlx.emulator import run

    mod, image = _small_conv_model()
    (want,) = run(mod, {"x": image})
    with ThreadPoolExecutor(3) as callers:
        results = list(callers.map(lambda _: run(mod, {"x": image})[0], range(12)))
    for got in results:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
