"""Plane means with numpy's summation order (the fast ``nn.global_avg_pool2d``), vectorized over
4 planes at a time.

numpy's ``x.mean(axis=(2, 3), dtype=x.dtype)`` on a C-contiguous (N, C, H, W) float array sums each
plane as one row of ``n = H * W`` values by pairwise summation (numpy's ``pairwise_sum`` in its
loops): ``n < 8``: one value after another from 0.0; ``8 <= n <= 128`` (a *leaf*): eight partial
sums ``r[j]`` start at ``a[j]``, take ``a[i + j]`` for ``i = 8, 16, ..`` below ``n - n % 8``, then
``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`` and the rest one by one; ``n > 128``: the
sum of the first ``n // 2 - (n // 2) % 8`` values plus the sum of the others, each pairwise again.
The reduction adds that to +0.0 (a plane of -0.0 gives +0.0), and the mean divides it by the
count, an intp, so in float64, rounded to the dtype (for float32 the same as a float32 division
while ``n <= 2**24``; above, float32(n) would round). numpy's C loop keeps the eight partial sums in
one vector and runs on one thread (~25 GB/s on large planes), and a call costs ~4-15 us beside.

Here the leaves are an LLVM IR kernel (compiled by llvmlite for the host CPU, bound to a symbol
numba code calls by name, as _microkernel.py does), ``plane_sums4(src, stride, n, dst)``:
``dst[k]`` = the leaf sum of the ``n <= 128`` values at ``src + k * stride`` (elements) for k < 4,
each plane's eight partial sums one ``<8 x float>`` (or ``<8 x double>``) vector: the four planes'
chains are independent, so one plane's add latency hides behind the others' (one chain, as
numpy's, waits on each add; here 50-55 GB/s on one thread for (1, 144, 56, 56)). ``plane_sums1`` does one plane, the same operations. The split tree of a
row length is the same for every plane, so it is built once per length (``split_program``: the
leaves and additions in post-order) and run by ``plane_means`` for 4 planes at a time with an
explicit stack (a recursive numba function with ``cache=True`` crashed in a parallel region once
reloaded from numba's cache). Plain IEEE adds (no fast-math, no FMA), so the bits are numpy's and
do not depend on the vector width, the blocks or the thread count.

One exception: which NaN an addition of two NaNs returns depends on the compiled loop's operand
order, so ``plane_means`` flags a NaN mean and the caller takes numpy's own mean of the planes
whose mean is NaN (fast/op_pool.py).

``AVAILABLE`` is False when llvmlite cannot compile for this CPU; the caller then uses numpy.
"""

from __future__ import annotations

import functools

import numpy as np

from ._llvm import compile_and_bind

#: leaves hold at most this many values (numpy's PW_BLOCKSIZE)
LEAF = 128
#: planes summed together by plane_sums4
GROUP = 4
_TYPES = {"f32": ("float", 4), "f64": ("double", 8)}


def _symbol(planes: int, tag: str) -> str:
    return f"tidlx_plane_sums{planes}_{tag}"


def _plane_sums_ir(planes: int, tag: str) -> str:
    """``dst[k]`` = numpy's leaf sum of the ``n`` values at ``src + k * stride`` for k < planes."""
    t, size = _TYPES[tag]
    v = f"<8 x {t}>"
    ks = range(planes)
    lines = [
        f"define void @{_symbol(planes, tag)}(i64 %src_addr, i64 %stride, i64 %n, i64 %dst_addr) {{",
        "entry:",
        "  %src = inttoptr i64 %src_addr to ptr",
        "  %dst = inttoptr i64 %dst_addr to ptr",
    ]
    for k in ks:
        lines += [f"  %off{k} = mul i64 %stride, {k}",
                  f"  %p{k} = getelementptr {t}, ptr %src, i64 %off{k}"]
    lines += [
        "  %short = icmp slt i64 %n, 8",
        "  %some = icmp sgt i64 %n, 0",
        "  br i1 %short, label %short_check, label %vector",
        # n < 8: one by one from 0.0
        "short_check:",
        "  br i1 %some, label %short_loop, label %short_done",
        "short_loop:",
        "  %si = phi i64 [0, %short_check], [%si_next, %short_loop]",
    ]
    lines += [f"  %ss{k} = phi {t} [0.0, %short_check], [%ss_next{k}, %short_loop]" for k in ks]
    for k in ks:
        lines += [f"  %sp{k} = getelementptr {t}, ptr %p{k}, i64 %si",
                  f"  %sx{k} = load {t}, ptr %sp{k}, align {size}",
                  f"  %ss_next{k} = fadd {t} %ss{k}, %sx{k}"]
    lines += [
        "  %si_next = add i64 %si, 1",
        "  %s_more = icmp slt i64 %si_next, %n",
        "  br i1 %s_more, label %short_loop, label %short_done",
        "short_done:",
    ]
    lines += [f"  %sr{k} = phi {t} [0.0, %short_check], [%ss_next{k}, %short_loop]" for k in ks]
    for k in ks:
        lines += [f"  %sd{k} = getelementptr {t}, ptr %dst, i64 {k}",
                  f"  store {t} %sr{k}, ptr %sd{k}, align {size}"]
    lines += [
        "  ret void",
        # 8 <= n: eight partial sums in one vector per plane
        "vector:",
        "  %rest = and i64 %n, 7",
        "  %end = sub i64 %n, %rest",
    ]
    lines += [f"  %v{k} = load {v}, ptr %p{k}, align {size}" for k in ks]
    lines += [
        "  %any_v = icmp sgt i64 %end, 8",
        "  br i1 %any_v, label %vloop, label %vdone",
        "vloop:",
        "  %i = phi i64 [8, %vector], [%i_next, %vloop]",
    ]
    lines += [f"  %acc{k} = phi {v} [%v{k}, %vector], [%acc_next{k}, %vloop]" for k in ks]
    for k in ks:
        lines += [f"  %xp{k} = getelementptr {t}, ptr %p{k}, i64 %i",
                  f"  %x{k} = load {v}, ptr %xp{k}, align {size}",
                  f"  %acc_next{k} = fadd {v} %acc{k}, %x{k}"]
    lines += [
        "  %i_next = add i64 %i, 8",
        "  %v_more = icmp slt i64 %i_next, %end",
        "  br i1 %v_more, label %vloop, label %vdone",
        "vdone:",
    ]
    lines += [f"  %r{k} = phi {v} [%v{k}, %vector], [%acc_next{k}, %vloop]" for k in ks]
    for k in ks:
        lines += [f"  %e{k}_{j} = extractelement {v} %r{k}, i32 {j}" for j in range(8)]
        lines += [f"  %a{k}_01 = fadd {t} %e{k}_0, %e{k}_1", f"  %a{k}_23 = fadd {t} %e{k}_2, %e{k}_3",
                  f"  %a{k}_45 = fadd {t} %e{k}_4, %e{k}_5", f"  %a{k}_67 = fadd {t} %e{k}_6, %e{k}_7",
                  f"  %a{k}_03 = fadd {t} %a{k}_01, %a{k}_23", f"  %a{k}_47 = fadd {t} %a{k}_45, %a{k}_67",
                  f"  %res{k} = fadd {t} %a{k}_03, %a{k}_47"]
    lines += [
        "  %any_rest = icmp sgt i64 %rest, 0",
        "  br i1 %any_rest, label %tail, label %tail_done",
        # the rest one by one
        "tail:",
        "  %ti = phi i64 [%end, %vdone], [%ti_next, %tail]",
    ]
    lines += [f"  %ts{k} = phi {t} [%res{k}, %vdone], [%ts_next{k}, %tail]" for k in ks]
    for k in ks:
        lines += [f"  %tp{k} = getelementptr {t}, ptr %p{k}, i64 %ti",
                  f"  %tx{k} = load {t}, ptr %tp{k}, align {size}",
                  f"  %ts_next{k} = fadd {t} %ts{k}, %tx{k}"]
    lines += [
        "  %ti_next = add i64 %ti, 1",
        "  %t_more = icmp slt i64 %ti_next, %n",
        "  br i1 %t_more, label %tail, label %tail_done",
        "tail_done:",
    ]
    lines += [f"  %out{k} = phi {t} [%res{k}, %vdone], [%ts_next{k}, %tail]" for k in ks]
    for k in ks:
        lines += [f"  %od{k} = getelementptr {t}, ptr %dst, i64 {k}",
                  f"  store {t} %out{k}, ptr %od{k}, align {size}"]
    lines += ["  ret void", "}"]
    return "\n".join(lines)


_KERNELS = [(planes, tag) for planes in (GROUP, 1) for tag in _TYPES]
#: False when llvmlite cannot compile the leaf kernels for this CPU (the pool then uses numpy's mean)
AVAILABLE = compile_and_bind("\n".join(_plane_sums_ir(planes, tag) for planes, tag in _KERNELS),
                             [_symbol(planes, tag) for planes, tag in _KERNELS])

from numba import njit, prange, types  # noqa: E402  (after the symbols exist for cached code)

from ._blocks import block_range  # noqa: E402

_i64 = types.int64
_signature = types.void(_i64, _i64, _i64, _i64)
plane_sums4_f32 = types.ExternalFunction(_symbol(GROUP, "f32"), _signature)
plane_sums1_f32 = types.ExternalFunction(_symbol(1, "f32"), _signature)
plane_sums4_f64 = types.ExternalFunction(_symbol(GROUP, "f64"), _signature)
plane_sums1_f64 = types.ExternalFunction(_symbol(1, "f64"), _signature)


def _split(offset: int, n: int, ops: list) -> None:
    if n <= LEAF:
        ops.append((offset, n))
        return
    half = n // 2
    half -= half % 8
    _split(offset, half, ops)
    _split(offset + half, n - half, ops)
    ops.append((0, 0))


@functools.lru_cache(maxsize=256)
def split_program(n: int):
    """numpy's pairwise split of a row of ``n >= 1`` values: (program, depth). The program lists the
    steps in post-order, an (ops, 2) int64 array: ``(offset, length)`` pushes a leaf's sum onto a
    stack, ``(0, 0)`` replaces the top two sums by ``below + top`` (left + right, as numpy adds
    them); ``depth`` is the most sums on the stack at once."""
    ops: list = []
    _split(0, n, ops)
    program = np.array(ops, np.int64)
    program.setflags(write=False)
    depth = most = 0
    for _, length in ops:
        depth += 1 if length else -1
        most = max(most, depth)
    return program, most


@njit(cache=True, nogil=True, error_model="numpy")
def plane_means(x, program, depth, out, nan_flag, start, stop):
    """out[p] = numpy's mean of plane p of flat x (``out.size`` planes of equal length; ``program``,
    ``depth``: their split_program) for p in [start, stop); sets nan_flag[0] to 1 when one of them
    is NaN (blocks on other threads may set it too: they all write 1)."""
    n = x.size // out.size
    size = x.itemsize
    wide = size == 8
    stack = np.empty((depth, GROUP), x.dtype)
    base, top = x.ctypes.data, stack.ctypes.data
    zero = x.dtype.type(0.0)
    count = np.float64(n)  # numpy divides by an intp count: in float64, then rounds to the dtype
    p = start
    while p < stop:
        planes = GROUP if stop - p >= GROUP else 1
        src = base + p * n * size
        sp = 0
        for op in range(program.shape[0]):
            length = program[op, 1]
            if length > 0:
                dst = top + sp * GROUP * size
                leaf = src + program[op, 0] * size
                if wide:
                    if planes == GROUP:
                        plane_sums4_f64(leaf, n, length, dst)
                    else:
                        plane_sums1_f64(leaf, n, length, dst)
                elif planes == GROUP:
                    plane_sums4_f32(leaf, n, length, dst)
                else:
                    plane_sums1_f32(leaf, n, length, dst)
                sp += 1
            else:
                for k in range(planes):
                    stack[sp - 2, k] = stack[sp - 2, k] + stack[sp - 1, k]
                sp -= 1
        for k in range(planes):
            mean = x.dtype.type(np.float64(zero + stack[0, k]) / count)
            out[p + k] = mean
            if mean != mean:
                nan_flag[0] = 1
        p += planes


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def plane_means_blocks(x, program, depth, out, nan_flag, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            plane_means(x, program, depth, out, nan_flag, start, stop)
