"""A float32 register-blocked product kernel for the small products inside Winograd tile blocks.

The blocked Winograd convolutions (_winograd.py) multiply, per tile position, ROWS output channels
at a time by 16 tiles at a time: products of (O x C) by (C x 16) where C is 16..512. OpenBLAS
packs both operands and sets up its blocking on every call, which costs more than such a
product itself; this kernel reads the weights prepacked once per model and the 16 tile columns
in place. It is written in LLVM IR (``llvm.fma`` on vectors of LANES floats: 16 where the CPU has
AVX-512, with panels of ROWS = 8 output channels; else 8, with panels of 6) and compiled by
llvmlite for the host CPU on first import; its address is bound to a symbol name that numba code
calls by name, as _blas.py does for OpenBLAS, so numba's on-disk cache stays valid. The numba
callers read the panel height from the packed weights' last axis, so no compiled code holds ROWS.
On a 2-vCPU AMD EPYC Zen 5 VM the 16-float kernel took whole models to 0.78x (ResNet-18), 0.78-0.85x
(BEVDet image stage, ResNet-50) of their time with the 8-float one (benchmarks/ab_emulator_checkouts.py).

``panel_product(a, b, ldb, c, ldc, k)`` (all int64; a, b, c are addresses):
``c[i, j] = sum over q in 0..k-1 of a[q, i] * b[q, j]`` for i < ROWS, j < 16, where ``a`` is a
(k, ROWS) row-major panel, ``b`` rows are ``ldb`` floats apart, ``c`` rows ``ldc`` floats apart.
Each sum starts at 0 and adds the terms in order of q with one rounding per term (fused
multiply-add), so the result does not depend on the CPU's vector width, the panel height, the
thread count or the blocking. Without hardware FMA, LLVM calls the C library's fmaf: the same
bits, slower. ``panel_product_add`` (same arguments) computes the same sum and adds it to ``c``:
callers sum long products in chunks of channels (two-level summation, see
_jit.winograd_block_products).

``panel_taps(a, b, offsets, c, ldc, k)`` (same arguments as panel_product, but ``offsets`` is the
address of k int64 offsets in floats): ``c[i, j] = sum over q of a[q, i] * b[offsets[q] + j]``, summed
as panel_product does. The direct convolution of few input channels (_jit.conv_few_channels) sums
each output's taps (channel, kernel row, kernel column) this way, with ``b`` one output row's
input and offsets[q] the tap's position, so no im2col matrix is built.

``direct_taps{v}`` and ``direct_taps_add{v}`` (v = 1, 2, 3; panel_taps' arguments) are panel_taps
over ROWS x v vectors of LANES columns (up to 24 accumulators of 16 floats on AVX-512), storing or
adding the sums: the dense convolutions' direct route (_jit.conv_direct), where ``b`` is the input's
phase planes at the first output position and offsets[q] is tap q's place in them. v is used up to
DIRECT_VECTORS (3 on AVX-512, 2 on AVX2's 16 registers). In isolation on the Zen 5 VM, one thread:
~105-110 GMAC/s over the computed positions (onnxruntime's own convolutions 108-118 GMAC/s there).

``depthwise_parts(src, row_step, offsets, weights, taps, dst, dst_step, rows, width)`` (all int64; src,
offsets, weights, dst are addresses) is the depthwise convolution's inner kernel (_jit.py's
depthwise_conv_planes): for r < rows and column c < 8 * width,
``dst[r * dst_step + c] = sum over t < taps of src[r * row_step + offsets[t] + c] * weights[t]``,
summed from 0 in order of t, a product and an addition per term (no FMA: the same bits as the numba
loop it replaces, _jit.depthwise_conv_nchw). Every column stride reads consecutive floats: the
driver's padded plane holds each row's column phases one after the other. ``width`` is 1..8
vectors of 8 columns, each width its own code: steps of ceil(8 / width) rows keep all their
rows x width vectors in registers over all taps (8..14 independent add chains: an add waits ~3
cycles for the previous one of its chain), so each output is written once, not once per tap.
With LANES = 16 each pair of 8-column vectors is one vector of 16 (an odd last one stays 8): the
same columns and sums, ~10-15% less time per depthwise layer on the Zen 5 VM (MobileNetV2/EfficientNet
shapes, one thread), lost in the noise of whole models.
``depthwise_pad(src, src_step, dst, dst_step, rows, count, span)`` copies ``count`` floats of each of
``rows`` rows; ``depthwise_pad_s2`` copies 2 * ``count``, the even ones to dst, the odd ones to
dst + span (the padded plane's column phases of stride 2). Both move vectors of 8 floats (numba's
row slice copies cost ~20 ns each, more than the kernel on small rows).

``store_rows(src, src_step, dst, dst_step, rows, count, scale, shift, other, other_step, mode, lo, hi,
act)`` copies ``rows`` rows of ``count`` floats applying a conv tail on the way (``mode``: _jit.store_mode
of the tail's flags and activation; _jit.tail_row's operations in its order, so its bits, hard-swish and
swish included): the direct route's rows leaving its scratch, the stems' rows, depthwise planes and
1x1 product blocks in place. A numba call of tail_row and two array slices per row cost more than the
row's tail: a 64-channel 56x56 3x3 convolution with batch norm and relu took 1.78 ms at one thread
with them, 1.12 ms this way.

``pointwise_tile(x, ldx, w, s, lds, k, shape, y, ldy, live)`` (all int64; x, w, s, y are addresses;
shape = final * 128 + add * 64 + vectors * 8 + rows, vectors 1..POINTWISE_VECTORS, rows 8, 4, 2 or 1)
is the 1x1 convolutions' tile with output channels as the lanes (_jit.pointwise_lanes): for i < rows,
j < vectors * LANES, ``t[i, j] = sum over q < k of x[q * ldx + i] * w[q * vectors * LANES + j]``, one
FMA chain from 0 in order of q, plus s[i * lds + j] when ``add``; stored to s, or, ``final``,
transposed in registers (a butterfly of shuffles, _transpose_plan) and stored as y[j * ldy + i] for
the channels j < live. The input is read in place, row q of a tile being ``rows`` floats of input
channel q; the weights are packed once (op_conv.PointwiseConv). It is compiled at its first use
(``pointwise_available``), on AVX-512 hosts only.

``AVAILABLE`` is False when llvmlite cannot compile for this CPU; callers then use OpenBLAS
(Winograd) or the numba loop (depthwise).
"""

from __future__ import annotations

import os
import threading

import numpy as np

from ._llvm import compile_and_bind, host_has_avx512



def _product_lanes() -> int:
    """Floats per vector of the product kernels: 16 where the CPU has AVX-512, else 8;
    ``TIDLX_EMULATOR_LANES=8`` keeps 8 (for A/B measurements; the same bits either way)."""
    if os.environ.get("TIDLX_EMULATOR_LANES", "").strip() == "8":
        return 8
    return 16 if host_has_avx512() else 8


LANES = _product_lanes()
#: Output channels per panel (broadcast operands): 8 rows of one 16-float vector, or 6 rows of two
#: 8-float vectors; either way 8..12 independent FMA chains, as many as the FMA units keep busy.
ROWS = 8 if LANES == 16 else 6
COLUMNS = 16  # tiles (or output columns) per product: one vector of 16 floats or two of 8
_SYMBOL = "tidlx_panel_product"
_SYMBOL_ADD = "tidlx_panel_product_add"
_SYMBOL_DEPTHWISE = "tidlx_depthwise_parts"
_SYMBOL_PAD = "tidlx_depthwise_pad"
_SYMBOL_PAD_S2 = "tidlx_depthwise_pad_s2"
_SYMBOL_TAPS = "tidlx_panel_taps"
#: Vectors of LANES output positions per call of the direct convolution's kernels (direct_taps):
#: 1..DIRECT_VECTORS, each width its own code. ROWS x 3 = 24 accumulators of 16 floats leave room in
#: AVX-512's 32 registers for the 3 input vectors and a weight; AVX2's 16 registers take ROWS x 2 = 12.
DIRECT_VECTORS = 3 if LANES == 16 else 2
#: The direct kernels prefetch the weights of the tap this many taps ahead (2 KB): a layer's packed
#: weights stream from memory (ResNet-18's 512-channel 3x3 layers: 9.4 MB each). Two threads, weights
#: out of cache, medians of alternating processes: 512ch 7x7 1.21 -> 0.90 ms, 256ch 14x14 0.85 -> 0.78,
#: 128 -> 256ch stride 2 0.51 -> 0.45; 128-tap distance about the same, 56x56 layers within the noise.
DIRECT_PREFETCH_TAPS = 64
_DIRECT_WIDTHS = (1, 2, 3)
_SYMBOLS_DIRECT = tuple(f"tidlx_direct_taps{v}" for v in _DIRECT_WIDTHS)
_SYMBOLS_DIRECT_ADD = tuple(f"tidlx_direct_taps_add{v}" for v in _DIRECT_WIDTHS)
_SYMBOL_STORE = "tidlx_store_rows"
_SYMBOL_DEPTHWISE_FLAT = "tidlx_depthwise_flat"
_SYMBOL_MASKED_COPIES = "tidlx_masked_copies"
_SYMBOL_POINTWISE = "tidlx_pointwise_tile"
#: The pointwise tile kernel's shapes (AVX-512 only): up to POINTWISE_VECTORS vectors of output channels
#: by up to 8 positions (3 x 8 = 24 accumulators), and the narrower tiles the ends of a block of
#: channels or a row of positions take (positions 8, 4, 2, 1: _jit.pointwise_lanes picks them)
POINTWISE_VECTORS = 3
_POINTWISE_ROWS = (8, 4, 2, 1)
#: The pointwise tile prefetches each input row this many floats ahead (8 tiles): a 1x1 layer's input,
#: just written by the layer before, partly by the other core, arrives cold, and a tile reads 64 rows
#: at once, more streams than the hardware prefetchers follow. MobileNetV2's 1x1 layers of 7x7 and
#: 14x14 maps, in a run: 1.97 -> 1.70 ms (0: 1.97, 32: 1.84, 128: 1.86), noisy.
POINTWISE_PREFETCH = 64
_SYMBOLS = (_SYMBOL, _SYMBOL_ADD, _SYMBOL_DEPTHWISE, _SYMBOL_PAD, _SYMBOL_PAD_S2, _SYMBOL_TAPS) + _SYMBOLS_DIRECT \
    + _SYMBOLS_DIRECT_ADD + (_SYMBOL_STORE, _SYMBOL_DEPTHWISE_FLAT, _SYMBOL_MASKED_COPIES)


def _kernel_ir() -> str:
    """All kernels in LLVM IR."""
    return "\n".join(["declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)",
                      "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
                      "declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)",
                      "declare <8 x float> @llvm.masked.load.v8f32.p0(ptr, i32, <8 x i1>, <8 x float>)",
                      "declare <16 x float> @llvm.masked.load.v16f32.p0(ptr, i32, <16 x i1>, <16 x float>)",
                      "declare void @llvm.masked.store.v8f32.p0(<8 x float>, ptr, i32, <8 x i1>)",
                      "declare void @llvm.masked.store.v16f32.p0(<16 x float>, ptr, i32, <16 x i1>)",
                      _function_ir(_SYMBOL, add=False), _function_ir(_SYMBOL_ADD, add=True),
                      _function_ir(_SYMBOL_TAPS, add=False, taps=True),
                      *(_function_ir(symbol, add=False, taps=True, vectors=v)
                        for symbol, v in zip(_SYMBOLS_DIRECT, _DIRECT_WIDTHS)),
                      *(_function_ir(symbol, add=True, taps=True, vectors=v)
                        for symbol, v in zip(_SYMBOLS_DIRECT_ADD, _DIRECT_WIDTHS)),
                      _depthwise_ir(_SYMBOL_DEPTHWISE), _depthwise_pad_ir(_SYMBOL_PAD, 1),
                      _depthwise_pad_ir(_SYMBOL_PAD_S2, 2), _store_rows_ir(_SYMBOL_STORE),
                      _depthwise_flat_ir(_SYMBOL_DEPTHWISE_FLAT), _masked_copies_ir(_SYMBOL_MASKED_COPIES)])


#: Accumulator vectors (of 8 floats) a step keeps over all taps: a row part of W vectors goes
#: ceil(DEPTHWISE_CHAINS / W) rows at a time, so each step has ~8..14 independent add chains.
DEPTHWISE_CHAINS = 8
#: Widest row part (vectors of 8 outputs) one step covers; wider rows are split into near-equal parts.
DEPTHWISE_WIDTH = 8


def depthwise_rows_per_step(width: int) -> int:
    """Output rows a step of ``width`` vectors covers (the driver pads rows to a multiple of it)."""
    return -(-DEPTHWISE_CHAINS // width)


def _depthwise_vectors(width: int) -> list:
    """(first column, lanes) of the vectors covering ``width`` * 8 columns: vectors of 8 floats, or
    with LANES = 16 pairs of them as one vector of 16 (and an odd last one of 8). Each column is
    summed on its own either way (the same bits)."""
    if LANES == 16:
        return [(16 * k, 16) for k in range(width // 2)] + ([(16 * (width // 2), 8)] if width % 2 else [])
    return [(8 * k, 8) for k in range(width)]


def _depthwise_step_ir(tag: str, rows: int, width: int, first: str, stop: str, next_label: str) -> list:
    """Rows [first, stop) in steps of ``rows``: each step sums all taps into rows x (the vectors of
    ``width`` * 8 columns) accumulators (independent chains), then stores them; then ``next_label``."""
    vectors = _depthwise_vectors(width)
    acc = [(r, k) for r in range(rows) for k in range(len(vectors))]
    lines = [
        f"{tag}_check:",
        f"  %{tag}_any = icmp slt i64 {first}, {stop}",
        f"  br i1 %{tag}_any, label %{tag}_row, label %{next_label}",
        f"{tag}_row:",
        f"  %{tag}_r = phi i64 [{first}, %{tag}_check], [%{tag}_r_next, %{tag}_store]",
        f"  %{tag}_src_off = mul i64 %{tag}_r, %row_step",
        f"  %{tag}_src = getelementptr float, ptr %src, i64 %{tag}_src_off",
        f"  br label %{tag}_tap",
        f"{tag}_tap:",
        f"  %{tag}_t = phi i64 [0, %{tag}_row], [%{tag}_t_next, %{tag}_tap]",
    ]
    lines += [f"  %{tag}_acc{r}_{k} = phi <{vectors[k][1]} x float> [zeroinitializer, %{tag}_row], "
              f"[%{tag}_sum{r}_{k}, %{tag}_tap]" for r, k in acc]
    lines += [
        f"  %{tag}_off_ptr = getelementptr i64, ptr %offs, i64 %{tag}_t",
        f"  %{tag}_off = load i64, ptr %{tag}_off_ptr, align 8",
        f"  %{tag}_x_ptr = getelementptr float, ptr %{tag}_src, i64 %{tag}_off",
        f"  %{tag}_w_ptr = getelementptr float, ptr %wts, i64 %{tag}_t",
        f"  %{tag}_w = load float, ptr %{tag}_w_ptr, align 4",
    ]
    for lanes in sorted({lanes for _, lanes in vectors}):
        lines += [f"  %{tag}_w_ins{lanes} = insertelement <{lanes} x float> poison, float %{tag}_w, i32 0",
                  f"  %{tag}_ws{lanes} = shufflevector <{lanes} x float> %{tag}_w_ins{lanes}, <{lanes} x float> "
                  f"poison, <{lanes} x i32> zeroinitializer"]
    for r in range(rows):
        lines += [f"  %{tag}_xr{r} = getelementptr float, ptr %{tag}_x_ptr, i64 %row_step{r}"]
        for k, (col, lanes) in enumerate(vectors):
            vec = f"<{lanes} x float>"
            lines += [
                f"  %{tag}_xp{r}_{k} = getelementptr float, ptr %{tag}_xr{r}, i64 {col}",
                f"  %{tag}_x{r}_{k} = load {vec}, ptr %{tag}_xp{r}_{k}, align 4",
                f"  %{tag}_p{r}_{k} = fmul {vec} %{tag}_x{r}_{k}, %{tag}_ws{lanes}",
                f"  %{tag}_sum{r}_{k} = fadd {vec} %{tag}_acc{r}_{k}, %{tag}_p{r}_{k}",
            ]
    lines += [
        f"  %{tag}_t_next = add i64 %{tag}_t, 1",
        f"  %{tag}_more_t = icmp slt i64 %{tag}_t_next, %taps",
        f"  br i1 %{tag}_more_t, label %{tag}_tap, label %{tag}_store",
        f"{tag}_store:",
        f"  %{tag}_dst_off = mul i64 %{tag}_r, %dst_step",
        f"  %{tag}_dst = getelementptr float, ptr %dst, i64 %{tag}_dst_off",
    ]
    for r in range(rows):
        lines += [f"  %{tag}_or{r} = getelementptr float, ptr %{tag}_dst, i64 %dst_step{r}"]
        for k, (col, lanes) in enumerate(vectors):
            lines += [f"  %{tag}_op{r}_{k} = getelementptr float, ptr %{tag}_or{r}, i64 {col}",
                      f"  store <{lanes} x float> %{tag}_sum{r}_{k}, ptr %{tag}_op{r}_{k}, align 4"]
    lines += [
        f"  %{tag}_r_next = add i64 %{tag}_r, {rows}",
        f"  %{tag}_more_r = icmp slt i64 %{tag}_r_next, {stop}",
        f"  br i1 %{tag}_more_r, label %{tag}_row, label %{next_label}",
    ]
    return lines


def _depthwise_ir(symbol: str) -> str:
    """One row part of ``width`` vectors (1..DEPTHWISE_WIDTH, a switch to that width's code): rows in
    steps of depthwise_rows_per_step(width) up to the last multiple of it, then one at a time."""
    most_rows = depthwise_rows_per_step(1)
    lines = [
        f"define void @{symbol}(i64 %src_addr, i64 %row_step, i64 %offs_addr, i64 %wts_addr, "
        "i64 %taps, i64 %dst_addr, i64 %dst_step, i64 %rows, i64 %width) {",
        "entry:",
        "  %src = inttoptr i64 %src_addr to ptr",
        "  %offs = inttoptr i64 %offs_addr to ptr",
        "  %wts = inttoptr i64 %wts_addr to ptr",
        "  %dst = inttoptr i64 %dst_addr to ptr",
    ]
    for r in range(most_rows):
        lines += [f"  %row_step{r} = mul i64 %row_step, {r}", f"  %dst_step{r} = mul i64 %dst_step, {r}"]
    cases = " ".join(f"i64 {w}, label %w{w}" for w in range(1, DEPTHWISE_WIDTH + 1))
    lines += [
        "  %some_taps = icmp sgt i64 %taps, 0",
        "  br i1 %some_taps, label %dispatch, label %done",
        "dispatch:",
        f"  switch i64 %width, label %done [{cases}]",
    ]
    for w in range(1, DEPTHWISE_WIDTH + 1):
        step = depthwise_rows_per_step(w)
        lines += [f"w{w}:",
                  f"  %w{w}_left = urem i64 %rows, {step}",
                  f"  %w{w}_stepped = sub i64 %rows, %w{w}_left",
                  f"  br label %w{w}m_check"]
        lines += _depthwise_step_ir(f"w{w}m", step, w, "0", f"%w{w}_stepped", f"w{w}s_check")
        lines += _depthwise_step_ir(f"w{w}s", 1, w, f"%w{w}_stepped", "%rows", "done")
    lines += ["done:", "  ret void", "}"]
    return "\n".join(lines)


#: Vectors of LANES outputs the flat depthwise kernel keeps over all taps (8 independent add chains;
#: AVX2's 16 registers take 4).
DEPTHWISE_FLAT_GROUP = 8 if LANES == 16 else 4


def _depthwise_flat_group_ir(tag: str, group: int, first: str, next_label: str, loop: bool) -> list:
    """``group`` vectors from vector ``first``: all taps summed into ``group`` accumulators, then stored;
    ``loop``: again ``group`` further while whole groups remain, then ``next_label``."""
    vec = f"<{LANES} x float>"
    lines = [f"{tag}_start:", f"  br label %{tag}_check" if loop else f"  br label %{tag}_tap"]
    if loop:
        lines += [f"{tag}_check:",
                  f"  %{tag}_v = phi i64 [{first}, %{tag}_start], [%{tag}_v_next, %{tag}_store]",
                  f"  %{tag}_end = add i64 %{tag}_v, {group}",
                  f"  %{tag}_fits = icmp sle i64 %{tag}_end, %vectors",
                  f"  br i1 %{tag}_fits, label %{tag}_tap, label %{next_label}"]
        v, pred = f"%{tag}_v", f"%{tag}_check"
    else:
        v, pred = first, f"%{tag}_start"
    lines += [f"{tag}_tap:", f"  %{tag}_t = phi i64 [0, {pred}], [%{tag}_t_next, %{tag}_tap]"]
    lines += [f"  %{tag}_acc{k} = phi {vec} [zeroinitializer, {pred}], [%{tag}_sum{k}, %{tag}_tap]"
              for k in range(group)]
    lines += [
        f"  %{tag}_first = mul i64 {v}, {LANES}",
        f"  %{tag}_off_ptr = getelementptr i64, ptr %offs, i64 %{tag}_t",
        f"  %{tag}_off = load i64, ptr %{tag}_off_ptr, align 8",
        f"  %{tag}_at = add i64 %{tag}_first, %{tag}_off",
        f"  %{tag}_x_ptr = getelementptr float, ptr %src, i64 %{tag}_at",
        f"  %{tag}_w_ptr = getelementptr float, ptr %wts, i64 %{tag}_t",
        f"  %{tag}_w = load float, ptr %{tag}_w_ptr, align 4",
        f"  %{tag}_w_ins = insertelement {vec} poison, float %{tag}_w, i32 0",
        f"  %{tag}_ws = shufflevector {vec} %{tag}_w_ins, {vec} poison, <{LANES} x i32> zeroinitializer",
    ]
    for k in range(group):
        lines += [
            f"  %{tag}_xp{k} = getelementptr float, ptr %{tag}_x_ptr, i64 {LANES * k}",
            f"  %{tag}_x{k} = load {vec}, ptr %{tag}_xp{k}, align 4",
            f"  %{tag}_p{k} = fmul {vec} %{tag}_x{k}, %{tag}_ws",
            f"  %{tag}_sum{k} = fadd {vec} %{tag}_acc{k}, %{tag}_p{k}",
        ]
    lines += [
        f"  %{tag}_t_next = add i64 %{tag}_t, 1",
        f"  %{tag}_more_t = icmp slt i64 %{tag}_t_next, %taps",
        f"  br i1 %{tag}_more_t, label %{tag}_tap, label %{tag}_store",
        f"{tag}_store:",
        f"  %{tag}_dst_first = mul i64 {v}, {LANES}",
        f"  %{tag}_dst = getelementptr float, ptr %dst, i64 %{tag}_dst_first",
    ]
    for k in range(group):
        lines += [f"  %{tag}_op{k} = getelementptr float, ptr %{tag}_dst, i64 {LANES * k}",
                  f"  store {vec} %{tag}_sum{k}, ptr %{tag}_op{k}, align 4"]
    if loop:
        lines += [f"  %{tag}_v_next = add i64 %{tag}_v, {group}", f"  br label %{tag}_check"]
    else:
        lines += [f"  br label %{next_label}"]
    return lines


def _depthwise_flat_ir(symbol: str) -> str:
    """``depthwise_flat(src, offsets, weights, taps, dst, vectors)``: for v < vectors, dst's vector v =
    sum over t < taps of src[LANES * v + offsets[t]:][:LANES] * weights[t], summed from 0 in order of t
    (a product and an addition per term, as depthwise_parts). Whole groups of DEPTHWISE_FLAT_GROUP
    vectors, then one group of the vectors left (a switch to that size's code)."""
    group = DEPTHWISE_FLAT_GROUP
    lines = [
        f"define void @{symbol}(i64 %src_addr, i64 %offs_addr, i64 %wts_addr, i64 %taps, i64 %dst_addr, "
        "i64 %vectors) {",
        "entry:",
        "  %src = inttoptr i64 %src_addr to ptr",
        "  %offs = inttoptr i64 %offs_addr to ptr",
        "  %wts = inttoptr i64 %wts_addr to ptr",
        "  %dst = inttoptr i64 %dst_addr to ptr",
        "  %some_taps = icmp sgt i64 %taps, 0",
        "  br i1 %some_taps, label %whole_start, label %done",
    ]
    lines += _depthwise_flat_group_ir("whole", group, "0", "rest", loop=True)
    cases = " ".join(f"i64 {g}, label %g{g}_start" for g in range(1, group))
    lines += ["rest:",
              "  %rest_first = phi i64 [%whole_v, %whole_check]",
              "  %left = sub i64 %vectors, %rest_first",
              f"  switch i64 %left, label %done [{cases}]"]
    for g in range(1, group):
        lines += _depthwise_flat_group_ir(f"g{g}", g, "%rest_first", "done", loop=False)
    lines += ["done:", "  ret void", "}"]
    return "\n".join(lines)


def _masked_copies_ir(symbol: str) -> str:
    """``masked_copies(src, count, masks, copies, dst, dst_step)``: for k < copies and i < count,
    dst[k * dst_step + i] = the bits of src[i] and those of masks[k * count + i] (int32 all ones or
    0: the float or +0). Vectors of LANES floats, then one masked vector."""
    vec, ivec = f"<{LANES} x float>", f"<{LANES} x i32>"
    lanes = ", ".join(f"i32 {lane}" for lane in range(LANES))
    lines = [
        f"define void @{symbol}(i64 %src_addr, i64 %count, i64 %masks_addr, i64 %copies, i64 %dst_addr, "
        "i64 %dst_step) {",
        "entry:",
        "  %src = inttoptr i64 %src_addr to ptr",
        "  %masks = inttoptr i64 %masks_addr to ptr",
        "  %dst = inttoptr i64 %dst_addr to ptr",
        f"  %vec_end = and i64 %count, -{LANES}",
        "  %left = sub i64 %count, %vec_end",
        "  %any_vec = icmp sgt i64 %vec_end, 0",
        "  %any_tail = icmp sgt i64 %left, 0",
        "  %left32 = trunc i64 %left to i32",
        f"  %left_ins = insertelement {ivec} poison, i32 %left32, i32 0",
        f"  %left_all = shufflevector {ivec} %left_ins, {ivec} poison, <{LANES} x i32> zeroinitializer",
        f"  %mask = icmp slt {ivec} <{lanes}>, %left_all",
        "  %go = icmp sgt i64 %copies, 0",
        "  br i1 %go, label %copy, label %done",
        "copy:",
        "  %k = phi i64 [0, %entry], [%k_next, %copy_end]",
        "  %m_off = mul i64 %k, %count",
        "  %m_row = getelementptr i32, ptr %masks, i64 %m_off",
        "  %d_off = mul i64 %k, %dst_step",
        "  %d_row = getelementptr float, ptr %dst, i64 %d_off",
        "  br i1 %any_vec, label %vec, label %tail_check",
        "vec:",
        "  %i = phi i64 [0, %copy], [%i_next, %vec]",
        "  %s_ptr = getelementptr float, ptr %src, i64 %i",
        "  %m_ptr = getelementptr i32, ptr %m_row, i64 %i",
        "  %d_ptr = getelementptr float, ptr %d_row, i64 %i",
        f"  %x = load {ivec}, ptr %s_ptr, align 4",
        f"  %m = load {ivec}, ptr %m_ptr, align 4",
        f"  %y = and {ivec} %x, %m",
        f"  store {ivec} %y, ptr %d_ptr, align 4",
        f"  %i_next = add i64 %i, {LANES}",
        "  %more = icmp slt i64 %i_next, %vec_end",
        "  br i1 %more, label %vec, label %tail_check",
        "tail_check:",
        "  br i1 %any_tail, label %tail, label %copy_end",
        "tail:",
        "  %s_tail = getelementptr float, ptr %src, i64 %vec_end",
        "  %m_tail = getelementptr i32, ptr %m_row, i64 %vec_end",
        "  %d_tail = getelementptr float, ptr %d_row, i64 %vec_end",
        f"  %xt = call {vec} @llvm.masked.load.v{LANES}f32.p0(ptr %s_tail, i32 4, <{LANES} x i1> %mask, {vec} zeroinitializer)",
        f"  %mt = call {vec} @llvm.masked.load.v{LANES}f32.p0(ptr %m_tail, i32 4, <{LANES} x i1> %mask, {vec} zeroinitializer)",
        f"  %xti = bitcast {vec} %xt to {ivec}",
        f"  %mti = bitcast {vec} %mt to {ivec}",
        f"  %yti = and {ivec} %xti, %mti",
        f"  %yt = bitcast {ivec} %yti to {vec}",
        f"  call void @llvm.masked.store.v{LANES}f32.p0({vec} %yt, ptr %d_tail, i32 4, <{LANES} x i1> %mask)",
        "  br label %copy_end",
        "copy_end:",
        "  %k_next = add i64 %k, 1",
        "  %more_k = icmp slt i64 %k_next, %copies",
        "  br i1 %more_k, label %copy, label %done",
        "done:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines)


def _depthwise_pad_ir(symbol: str, stride: int) -> str:
    """``rows`` rows of ``count`` (stride 1) or 2 * ``count`` (stride 2) floats from ``src`` (rows
    ``src_step`` apart) to ``dst`` (rows ``dst_step`` apart); stride 2 puts the even floats at
    ``dst`` and the odd ones at ``dst + span``, count of each. Vectors of 8 outputs, then one masked vector."""
    evens = ", ".join(f"i32 {2 * lane}" for lane in range(8))
    odds = ", ".join(f"i32 {2 * lane + 1}" for lane in range(8))
    lanes8 = ", ".join(f"i32 {lane}" for lane in range(8))
    lanes16 = ", ".join(f"i32 {lane}" for lane in range(16))
    lines = [
        f"define void @{symbol}(i64 %src_addr, i64 %src_step, i64 %dst_addr, i64 %dst_step, i64 %rows, "
        "i64 %count, i64 %span) {",
        "entry:",
        "  %src = inttoptr i64 %src_addr to ptr",
        "  %dst = inttoptr i64 %dst_addr to ptr",
        "  %vec_end = and i64 %count, -8",
        # the last count % 8 outputs of each row: one masked vector (lanes past the row are not touched)
        "  %left = sub i64 %count, %vec_end",
        "  %any_tail = icmp sgt i64 %left, 0",
        "  %left32 = trunc i64 %left to i32",
        "  %left_ins = insertelement <8 x i32> poison, i32 %left32, i32 0",
        "  %left_all = shufflevector <8 x i32> %left_ins, <8 x i32> poison, <8 x i32> zeroinitializer",
        f"  %mask = icmp slt <8 x i32> <{lanes8}>, %left_all",
        "  %left2 = shl i32 %left32, 1",
        "  %left2_ins = insertelement <16 x i32> poison, i32 %left2, i32 0",
        "  %left2_all = shufflevector <16 x i32> %left2_ins, <16 x i32> poison, <16 x i32> zeroinitializer",
        f"  %mask2 = icmp slt <16 x i32> <{lanes16}>, %left2_all",
        "  %any_rows = icmp sgt i64 %rows, 0",
        "  %any_count = icmp sgt i64 %count, 0",
        "  %go = and i1 %any_rows, %any_count",
        "  br i1 %go, label %row, label %done",
        "row:",
        "  %r = phi i64 [0, %entry], [%r_next, %row_end]",
        "  %src_off = mul i64 %r, %src_step",
        "  %src_row = getelementptr float, ptr %src, i64 %src_off",
        "  %dst_off = mul i64 %r, %dst_step",
        "  %dst_row = getelementptr float, ptr %dst, i64 %dst_off",
        "  %dst_odd = getelementptr float, ptr %dst_row, i64 %span",
        "  %any_vec = icmp sgt i64 %vec_end, 0",
        "  br i1 %any_vec, label %vec, label %tail_check",
        "vec:",
        "  %i = phi i64 [0, %row], [%i_next, %vec]",
        f"  %in_i = mul i64 %i, {stride}",
        "  %s_ptr = getelementptr float, ptr %src_row, i64 %in_i",
        "  %d_ptr = getelementptr float, ptr %dst_row, i64 %i",
    ]
    if stride == 1:
        lines += ["  %v = load <8 x float>, ptr %s_ptr, align 4",
                  "  store <8 x float> %v, ptr %d_ptr, align 4"]
    else:
        lines += ["  %wide = load <16 x float>, ptr %s_ptr, align 4",
                  f"  %ev = shufflevector <16 x float> %wide, <16 x float> poison, <8 x i32> <{evens}>",
                  f"  %od = shufflevector <16 x float> %wide, <16 x float> poison, <8 x i32> <{odds}>",
                  "  %o_ptr = getelementptr float, ptr %dst_odd, i64 %i",
                  "  store <8 x float> %ev, ptr %d_ptr, align 4",
                  "  store <8 x float> %od, ptr %o_ptr, align 4"]
    lines += [
        "  %i_next = add i64 %i, 8",
        "  %more_vec = icmp slt i64 %i_next, %vec_end",
        "  br i1 %more_vec, label %vec, label %tail_check",
        "tail_check:",
        "  br i1 %any_tail, label %tail, label %row_end",
        "tail:",
        f"  %in_end = mul i64 %vec_end, {stride}",
        "  %s_tail = getelementptr float, ptr %src_row, i64 %in_end",
        "  %d_tail = getelementptr float, ptr %dst_row, i64 %vec_end",
    ]
    if stride == 1:
        lines += ["  %v_tail = call <8 x float> @llvm.masked.load.v8f32.p0(ptr %s_tail, i32 4, <8 x i1> %mask, "
                  "<8 x float> poison)",
                  "  call void @llvm.masked.store.v8f32.p0(<8 x float> %v_tail, ptr %d_tail, i32 4, <8 x i1> %mask)"]
    else:
        lines += ["  %wide_tail = call <16 x float> @llvm.masked.load.v16f32.p0(ptr %s_tail, i32 4, "
                  "<16 x i1> %mask2, <16 x float> poison)",
                  f"  %ev_tail = shufflevector <16 x float> %wide_tail, <16 x float> poison, <8 x i32> <{evens}>",
                  f"  %od_tail = shufflevector <16 x float> %wide_tail, <16 x float> poison, <8 x i32> <{odds}>",
                  "  %o_tail = getelementptr float, ptr %dst_odd, i64 %vec_end",
                  "  call void @llvm.masked.store.v8f32.p0(<8 x float> %ev_tail, ptr %d_tail, i32 4, <8 x i1> %mask)",
                  "  call void @llvm.masked.store.v8f32.p0(<8 x float> %od_tail, ptr %o_tail, i32 4, <8 x i1> %mask)"]
    lines += [
        "  br label %row_end",
        "row_end:",
        "  %r_next = add i64 %r, 1",
        "  %more_r = icmp slt i64 %r_next, %rows",
        "  br i1 %more_r, label %row, label %done",
        "done:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines)

#: store_rows' modes: 12 * (1: hard-swish, 2: swish) + 6 * affine + 3 * residual add + (0: nothing more,
#: 1: relu, 2: clip); _jit.store_mode
STORE_HARD_SWISH, STORE_SWISH, STORE_AFFINE, STORE_ADD, STORE_RELU, STORE_CLIP = 12, 24, 6, 3, 1, 2


def _float_constant(value) -> str:
    """An LLVM float constant holding the float32 ``value`` exactly (the hex of its double)."""
    import struct

    return f"0x{struct.unpack('<Q', struct.pack('<d', float(np.float32(value))))[0]:016X}"


def _splat(vec: str, value) -> str:
    return f"<{', '.join([f'float {_float_constant(value)}'] * LANES)}>"


def _swish_ops(tag: str, vec: str, v: str) -> tuple:
    """IR lines of _exp.swish_f32 on the vector ``v`` (the same float32 operations in the same order:
    the clamp, exp_neg_f32's steps, the divide, the NaN select, the product), and the result's name."""
    from . import _exp as e

    ivec = f"<{LANES} x i32>"
    k = {name: _splat(vec, getattr(e, name)) for name in ("_V_LOW", "_V_HIGH", "_NEG_LOG2E", "_ROUNDER", "_LN2_HI",
                                                            "_LN2_LO", "_NEG_Q4", "_Q3", "_Q2", "_Q1", "_Q0", "_ONE")}
    bits = f"<{', '.join([f'i32 {int(e._ROUNDER_BITS) - 126}'] * LANES)}>"
    shift = f"<{', '.join(['i32 23'] * LANES)}>"
    lines = [f"  %{tag}_above = fcmp ogt {vec} {v}, {k['_V_LOW']}",
             f"  %{tag}_w0 = select <{LANES} x i1> %{tag}_above, {vec} {v}, {vec} {k['_V_LOW']}",
             f"  %{tag}_below = fcmp olt {vec} %{tag}_w0, {k['_V_HIGH']}",
             f"  %{tag}_w = select <{LANES} x i1> %{tag}_below, {vec} %{tag}_w0, {vec} {k['_V_HIGH']}",
             f"  %{tag}_t0 = fmul {vec} %{tag}_w, {k['_NEG_LOG2E']}",
             f"  %{tag}_t = fadd {vec} %{tag}_t0, {k['_ROUNDER']}",
             f"  %{tag}_n = fsub {vec} %{tag}_t, {k['_ROUNDER']}",
             f"  %{tag}_u0 = fmul {vec} %{tag}_n, {k['_LN2_HI']}",
             f"  %{tag}_u1 = fadd {vec} %{tag}_w, %{tag}_u0",
             f"  %{tag}_u2 = fmul {vec} %{tag}_n, {k['_LN2_LO']}",
             f"  %{tag}_u = fadd {vec} %{tag}_u1, %{tag}_u2",
             f"  %{tag}_q0 = fmul {vec} {k['_NEG_Q4']}, %{tag}_u",
             f"  %{tag}_q1 = fadd {vec} %{tag}_q0, {k['_Q3']}"]
    q = f"%{tag}_q1"
    for step, name in enumerate(("_Q2", "_Q1", "_Q0")):
        lines += [f"  %{tag}_qu{step} = fmul {vec} {q}, %{tag}_u",
                  f"  %{tag}_qs{step} = fsub {vec} {k[name]}, %{tag}_qu{step}"]
        q = f"%{tag}_qs{step}"
    lines += [f"  %{tag}_uu = fmul {vec} %{tag}_u, %{tag}_u",
              f"  %{tag}_p0 = fmul {vec} {q}, %{tag}_uu",
              f"  %{tag}_p1 = fsub {vec} %{tag}_p0, %{tag}_u",
              f"  %{tag}_p = fadd {vec} %{tag}_p1, {k['_ONE']}",
              f"  %{tag}_tb = bitcast {vec} %{tag}_t to {ivec}",
              f"  %{tag}_eb = sub {ivec} %{tag}_tb, {bits}",
              f"  %{tag}_sb = shl {ivec} %{tag}_eb, {shift}",
              f"  %{tag}_half = bitcast {ivec} %{tag}_sb to {vec}",
              f"  %{tag}_pp = fadd {vec} %{tag}_p, %{tag}_p",
              f"  %{tag}_ex = fmul {vec} %{tag}_pp, %{tag}_half",
              f"  %{tag}_den = fadd {vec} {k['_ONE']}, %{tag}_ex",
              f"  %{tag}_sig = fdiv {vec} {k['_ONE']}, %{tag}_den",
              f"  %{tag}_nan = fcmp une {vec} {v}, {v}",
              f"  %{tag}_sel = select <{LANES} x i1> %{tag}_nan, {vec} {v}, {vec} %{tag}_sig",
              f"  %{tag}_sw = fmul {vec} {v}, %{tag}_sel"]
    return lines, f"%{tag}_sw"


def _store_row_ops(tag: str, mode: int, vec: str, src: str, other: str, load: str) -> tuple:
    """IR lines computing one vector of store_rows' mode ``mode`` from ``src`` (and ``other``), and
    the name of the result; ``load`` formats a load of the vector at a pointer."""
    act, rest = divmod(mode, STORE_HARD_SWISH)
    affine, rest = divmod(rest, STORE_AFFINE)
    add, op = divmod(rest, STORE_ADD)
    lines = [f"  %{tag}_v0 = {load.format(src)}"]
    v = f"%{tag}_v0"
    if affine:  # v * s + t: two roundings, as the unfused tail (no fused multiply-add)
        lines += [f"  %{tag}_v1 = fmul {vec} {v}, %s_all", f"  %{tag}_v2 = fadd {vec} %{tag}_v1, %t_all"]
        v = f"%{tag}_v2"
    if add:
        lines += [f"  %{tag}_o = {load.format(other)}", f"  %{tag}_v3 = fadd {vec} {v}, %{tag}_o"]
        v = f"%{tag}_v3"
    if op == STORE_RELU:  # zero where v <= 0 (NaN kept, -0 -> +0)
        lines += [f"  %{tag}_le = fcmp ole {vec} {v}, zeroinitializer",
                  f"  %{tag}_v4 = select <{LANES} x i1> %{tag}_le, {vec} zeroinitializer, {vec} {v}"]
        v = f"%{tag}_v4"
    elif op == STORE_CLIP:  # lo where v < lo, then hi where v > hi (NaN kept)
        lines += [f"  %{tag}_below = fcmp olt {vec} {v}, %lo_all",
                  f"  %{tag}_v5 = select <{LANES} x i1> %{tag}_below, {vec} %lo_all, {vec} {v}",
                  f"  %{tag}_above = fcmp ogt {vec} %{tag}_v5, %hi_all",
                  f"  %{tag}_v6 = select <{LANES} x i1> %{tag}_above, {vec} %hi_all, {vec} %{tag}_v5"]
        v = f"%{tag}_v6"
    if act == STORE_SWISH // STORE_HARD_SWISH:
        more, v = _swish_ops(f"{tag}_sw", vec, v)
        lines += more
    elif act:  # v * clip(v * a + b, act_lo, act_hi): _jit.hard_sigmoid_value's steps, then the product
        lines += [f"  %{tag}_h1 = fmul {vec} {v}, %act_a",
                  f"  %{tag}_h2 = fadd {vec} %{tag}_h1, %act_b",
                  f"  %{tag}_hb = fcmp olt {vec} %{tag}_h2, %act_lo",
                  f"  %{tag}_h3 = select <{LANES} x i1> %{tag}_hb, {vec} %act_lo, {vec} %{tag}_h2",
                  f"  %{tag}_ha = fcmp ogt {vec} %{tag}_h3, %act_hi",
                  f"  %{tag}_h4 = select <{LANES} x i1> %{tag}_ha, {vec} %act_hi, {vec} %{tag}_h3",
                  f"  %{tag}_h5 = fmul {vec} {v}, %{tag}_h4"]
        v = f"%{tag}_h5"
    return lines, v


def _store_vector_ir(t: str, part: str, mode: int, vec: str, at: str, load: str, store: str) -> list:
    """store_rows' loop ``t`` (one mode): the vector of the row at float ``at``, computed and stored
    (``load`` and ``store`` format a plain or a masked access)."""
    p = f"{t}_{part}"
    lines = [f"  %{p}_sp = getelementptr float, ptr %{t}_src, i64 {at}",
             f"  %{p}_op = getelementptr float, ptr %{t}_oth, i64 {at}",
             f"  %{p}_dp = getelementptr float, ptr %{t}_dst, i64 {at}"]
    ops, value = _store_row_ops(p, mode, vec, f"%{p}_sp", f"%{p}_op", load)
    lines += [line.replace("%s_all", f"%{t}_s_all").replace("%t_all", f"%{t}_t_all") for line in ops]
    return lines + ["  " + store.format(value, f"%{p}_dp")]


def _store_rows_ir(symbol: str) -> str:
    """``store_rows(src, src_step, dst, dst_step, rows, count, scale, shift, other, other_step, mode, lo,
    hi, act)``: for r < rows, i < count, dst[r * dst_step + i] = tail(src[r * src_step + i]) where tail
    is mode's steps in _jit.tail_row's order and roundings: v * scale[r] + shift[r], + other[r *
    other_step + i], then relu or clip to [lo, hi], then hard-swish with the 4 floats at ``act`` (a, b,
    lo, hi) or the swish (_exp.swish_f32's operations) (_jit.store_mode; mode 0 copies). Vectors of LANES floats, then one masked vector; each
    mode its own loop."""
    vec = f"<{LANES} x float>"
    lanes = ", ".join(f"i32 {lane}" for lane in range(LANES))
    lines = [
        f"define void @{symbol}(i64 %src_addr, i64 %src_step, i64 %dst_addr, i64 %dst_step, i64 %rows, i64 %count, "
        "i64 %scale_addr, i64 %shift_addr, i64 %other_addr, i64 %other_step, i64 %mode, float %lo, float %hi, "
        "i64 %act_addr) {",
        "entry:",
        "  %src = inttoptr i64 %src_addr to ptr",
        "  %dst = inttoptr i64 %dst_addr to ptr",
        "  %scale = inttoptr i64 %scale_addr to ptr",
        "  %shift = inttoptr i64 %shift_addr to ptr",
        "  %other = inttoptr i64 %other_addr to ptr",
        f"  %vec_end = and i64 %count, -{LANES}",
        "  %left = sub i64 %count, %vec_end",
        "  %any_vec = icmp sgt i64 %vec_end, 0",
        "  %any_tail = icmp sgt i64 %left, 0",
        "  %left32 = trunc i64 %left to i32",
        f"  %left_ins = insertelement <{LANES} x i32> poison, i32 %left32, i32 0",
        f"  %left_all = shufflevector <{LANES} x i32> %left_ins, <{LANES} x i32> poison, <{LANES} x i32> zeroinitializer",
        f"  %mask = icmp slt <{LANES} x i32> <{lanes}>, %left_all",
        f"  %lo_ins = insertelement {vec} poison, float %lo, i32 0",
        f"  %lo_all = shufflevector {vec} %lo_ins, {vec} poison, <{LANES} x i32> zeroinitializer",
        f"  %hi_ins = insertelement {vec} poison, float %hi, i32 0",
        f"  %hi_all = shufflevector {vec} %hi_ins, {vec} poison, <{LANES} x i32> zeroinitializer",
        "  %any_rows = icmp sgt i64 %rows, 0",
        "  %any_count = icmp sgt i64 %count, 0",
        "  %go = and i1 %any_rows, %any_count",
        "  br i1 %go, label %dispatch, label %done",
        "dispatch:",
        "  %act = inttoptr i64 %act_addr to ptr",
        f"  %hard_swish_low = icmp sge i64 %mode, {STORE_HARD_SWISH}",
        f"  %hard_swish_high = icmp slt i64 %mode, {STORE_SWISH}",
        "  %hard_swish = and i1 %hard_swish_low, %hard_swish_high",
        "  br i1 %hard_swish, label %act_consts, label %dispatch_mode",
        "act_consts:",  # read only in the hard-swish modes (the other callers pass no constants)
    ]
    for k, name in enumerate(("a", "b", "lo", "hi")):
        lines += [f"  %act_{name}_ptr = getelementptr float, ptr %act, i64 {k}",
                  f"  %act_{name}_s = load float, ptr %act_{name}_ptr, align 4",
                  f"  %act_{name}_ins = insertelement {vec} poison, float %act_{name}_s, i32 0",
                  f"  %act_{name}_v = shufflevector {vec} %act_{name}_ins, {vec} poison, <{LANES} x i32> zeroinitializer"]
    lines += ["  br label %dispatch_mode", "dispatch_mode:"]
    for name in ("a", "b", "lo", "hi"):
        lines += [f"  %act_{name} = phi {vec} [zeroinitializer, %dispatch], [%act_{name}_v, %act_consts]"]
    modes = [m for m in range(STORE_SWISH + STORE_HARD_SWISH)]
    lines += [f"  switch i64 %mode, label %done [{' '.join(f'i64 {m}, label %m{m}_row' for m in modes)}]"]
    plain = f"load {vec}, ptr {{}}, align 4"
    masked = f"call {vec} @llvm.masked.load.v{LANES}f32.p0(ptr {{}}, i32 4, <{LANES} x i1> %mask, {vec} zeroinitializer)"
    for m in modes:
        t = f"m{m}"
        lines += [
            f"{t}_row:",
            f"  %{t}_r = phi i64 [0, %dispatch_mode], [%{t}_r_next, %{t}_row_end]",
            f"  %{t}_so = mul i64 %{t}_r, %src_step",
            f"  %{t}_src = getelementptr float, ptr %src, i64 %{t}_so",
            f"  %{t}_do = mul i64 %{t}_r, %dst_step",
            f"  %{t}_dst = getelementptr float, ptr %dst, i64 %{t}_do",
            f"  %{t}_oo = mul i64 %{t}_r, %other_step",
            f"  %{t}_oth = getelementptr float, ptr %other, i64 %{t}_oo",
        ]
        if m % STORE_HARD_SWISH >= STORE_AFFINE:
            lines += [
                f"  %{t}_s_ptr = getelementptr float, ptr %scale, i64 %{t}_r",
                f"  %{t}_s = load float, ptr %{t}_s_ptr, align 4",
                f"  %{t}_t_ptr = getelementptr float, ptr %shift, i64 %{t}_r",
                f"  %{t}_t = load float, ptr %{t}_t_ptr, align 4",
                f"  %{t}_s_ins = insertelement {vec} poison, float %{t}_s, i32 0",
                f"  %{t}_s_all = shufflevector {vec} %{t}_s_ins, {vec} poison, <{LANES} x i32> zeroinitializer",
                f"  %{t}_t_ins = insertelement {vec} poison, float %{t}_t, i32 0",
                f"  %{t}_t_all = shufflevector {vec} %{t}_t_ins, {vec} poison, <{LANES} x i32> zeroinitializer",
            ]
        stored = f"store {vec} {{}}, ptr {{}}, align 4"
        masked_store = f"call void @llvm.masked.store.v{LANES}f32.p0({vec} {{}}, ptr {{}}, i32 4, <{LANES} x i1> %mask)"
        lines += [f"  br i1 %any_vec, label %{t}_vec, label %{t}_tail_check", f"{t}_vec:",
                  f"  %{t}_i = phi i64 [0, %{t}_row], [%{t}_i_next, %{t}_vec]"]
        lines += _store_vector_ir(t, "a", m, vec, f"%{t}_i", plain, stored)
        lines += [f"  %{t}_i_next = add i64 %{t}_i, {LANES}",
                  f"  %{t}_more_i = icmp slt i64 %{t}_i_next, %vec_end",
                  f"  br i1 %{t}_more_i, label %{t}_vec, label %{t}_tail_check",
                  f"{t}_tail_check:",
                  f"  br i1 %any_tail, label %{t}_tail, label %{t}_row_end",
                  f"{t}_tail:"]
        lines += _store_vector_ir(t, "b", m, vec, "%vec_end", masked, masked_store)
        lines += [f"  br label %{t}_row_end",
                  f"{t}_row_end:",
                  f"  %{t}_r_next = add i64 %{t}_r, 1",
                  f"  %{t}_more_r = icmp slt i64 %{t}_r_next, %rows",
                  f"  br i1 %{t}_more_r, label %{t}_row, label %done"]
    lines += ["done:", "  ret void", "}"]
    return "\n".join(lines)


def _function_ir(symbol: str, add: bool, taps: bool = False, vectors: int | None = None) -> str:
    """ROWS x (COLUMNS / LANES) vector accumulators (or ROWS x ``vectors``) over a loop on k; stored
    to c, or added to it. ``taps``: b's row q starts at the offset offsets[q] (the third argument's
    table), not q * ldb."""
    third = "%offs_addr" if taps else "%ldb"
    vec, per_row = f"<{LANES} x float>", vectors or COLUMNS // LANES
    fma = f"@llvm.fma.v{LANES}f32"
    lines = [
        f"define void @{symbol}(i64 %a_addr, i64 %b_addr, i64 {third}, i64 %c_addr, i64 %ldc, i64 %k) {{",
        "entry:",
        "  %a = inttoptr i64 %a_addr to ptr",
        "  %b = inttoptr i64 %b_addr to ptr",
        "  %c = inttoptr i64 %c_addr to ptr",
    ]
    if taps:
        lines += ["  %offs = inttoptr i64 %offs_addr to ptr"]
    lines += [
        "  %any = icmp sgt i64 %k, 0",
        "  br i1 %any, label %loop, label %done",
        "loop:",
        "  %q = phi i64 [0, %entry], [%q_next, %loop]",
    ]
    acc = [(i, j) for i in range(ROWS) for j in range(per_row)]
    lines += [f"  %s{i}_{j} = phi {vec} [zeroinitializer, %entry], [%r{i}_{j}, %loop]" for i, j in acc]
    if taps:
        lines += ["  %off_ptr = getelementptr i64, ptr %offs, i64 %q",
                  "  %b_off = load i64, ptr %off_ptr, align 8"]
    else:
        lines += ["  %b_off = mul i64 %q, %ldb"]
    lines += ["  %b_row = getelementptr float, ptr %b, i64 %b_off"]
    for j in range(per_row):
        lines += [f"  %b_ptr{j} = getelementptr float, ptr %b_row, i64 {LANES * j}",
                  f"  %b{j} = load {vec}, ptr %b_ptr{j}, align 4"]
    lines += [
        f"  %a_off = mul i64 %q, {ROWS}",
        "  %a_row = getelementptr float, ptr %a, i64 %a_off",
    ]
    if vectors and DIRECT_PREFETCH_TAPS:  # the direct route's weights stream from memory: fetch ahead
        lines += [f"  %a_ahead = getelementptr float, ptr %a_row, i64 {DIRECT_PREFETCH_TAPS * ROWS}",
                  "  call void @llvm.prefetch.p0(ptr %a_ahead, i32 0, i32 3, i32 1)"]
    for i in range(ROWS):
        lines += [
            f"  %a_ptr{i} = getelementptr float, ptr %a_row, i64 {i}",
            f"  %a_val{i} = load float, ptr %a_ptr{i}, align 4",
            f"  %a_ins{i} = insertelement {vec} poison, float %a_val{i}, i32 0",
            f"  %a{i} = shufflevector {vec} %a_ins{i}, {vec} poison, <{LANES} x i32> zeroinitializer",
        ]
        lines += [f"  %r{i}_{j} = call {vec} {fma}({vec} %a{i}, {vec} %b{j}, {vec} %s{i}_{j})"
                  for j in range(per_row)]
    lines += [
        "  %q_next = add i64 %q, 1",
        "  %more = icmp slt i64 %q_next, %k",
        "  br i1 %more, label %loop, label %done",
        "done:",
    ]
    lines += [f"  %t{i}_{j} = phi {vec} [zeroinitializer, %entry], [%r{i}_{j}, %loop]" for i, j in acc]
    for i in range(ROWS):
        lines += [f"  %c_off{i} = mul i64 %ldc, {i}",
                  f"  %c_row{i} = getelementptr float, ptr %c, i64 %c_off{i}"]
        for j in range(per_row):
            ptr = f"%c_ptr{i}_{j}"
            lines += [f"  {ptr} = getelementptr float, ptr %c_row{i}, i64 {LANES * j}"]
            value = f"%t{i}_{j}"
            if add:
                lines += [f"  %old{i}_{j} = load {vec}, ptr {ptr}, align 4",
                          f"  %new{i}_{j} = fadd {vec} %old{i}_{j}, %t{i}_{j}"]
                value = f"%new{i}_{j}"
            lines += [f"  store {vec} {value}, ptr {ptr}, align 4"]
    lines += ["  ret void", "}"]
    return "\n".join(lines)


def _transpose_plan(rows: int) -> tuple:
    """The shuffles taking ``rows`` vectors (vector i: row i's LANES floats) to vectors whose chunks
    of ``rows`` floats each hold one lane's rows in order: a butterfly of log2(rows) stages, each
    interleaving groups of 1, 2, 4 floats of two vectors that hold the same lanes. Returns (steps,
    lanes_of): steps = [(name, first, second, mask)] for shufflevector, lanes_of = {vector name:
    the lane of each of its chunks}."""
    vectors = {f"%t{i}": [(i, lane) for lane in range(LANES)] for i in range(rows)}
    steps, group = [], 1
    while group < rows:
        classes: dict = {}
        for name, held in vectors.items():
            classes.setdefault(frozenset(lane for _, lane in held), []).append(name)
        made = {}
        for members in classes.values():
            members.sort(key=lambda name: min(i for i, _ in vectors[name]))
            for k in range(0, len(members), 2):
                first, second = vectors[members[k]], vectors[members[k + 1]]
                groups = LANES // group
                halves = ([], []), ([], [])
                for g in range(groups):
                    half = halves[g >= groups // 2]
                    for held, base in ((first, 0), (second, LANES)):
                        half[0].extend(held[g * group:(g + 1) * group])
                        half[1].extend(range(base + g * group, base + (g + 1) * group))
                for held, mask in halves:
                    name = f"%u{group}_{len(steps)}"
                    steps.append((name, members[k], members[k + 1], mask))
                    made[name] = held
        vectors, group = made, group * 2
    lanes_of = {name: [held[c][1] for c in range(0, LANES, rows)] for name, held in vectors.items()}
    return steps, lanes_of


def _pointwise_tile_ir(symbol: str, rows: int, vectors: int, add: bool, final: bool) -> str:
    """One shape of the pointwise tile: ``rows`` positions x ``vectors`` vectors of output channels, the
    input's floats broadcast, the weights' rows loaded as vectors; the sums (plus s's, ``add``) stored
    to s, or (``final``) transposed in registers and stored as the output channels' rows."""
    vec, fma = f"<{LANES} x float>", f"@llvm.fma.v{LANES}f32"
    width = vectors * LANES
    lines = [f"define internal void @{symbol}(ptr %x, i64 %ldx, ptr %w, ptr %s, i64 %lds, i64 %k, ptr %y, i64 %ldy, "
             "i64 %live) {", "entry:", "  %any = icmp sgt i64 %k, 0", "  br i1 %any, label %loop, label %sums", "loop:",
             "  %q = phi i64 [0, %entry], [%q_next, %loop]"]
    acc = [(i, v) for i in range(rows) for v in range(vectors)]
    lines += [f"  %a{i}_{v} = phi {vec} [zeroinitializer, %entry], [%r{i}_{v}, %loop]" for i, v in acc]
    lines += ["  %x_off = mul i64 %q, %ldx", "  %x_row = getelementptr float, ptr %x, i64 %x_off",
              f"  %w_off = mul i64 %q, {width}", "  %w_row = getelementptr float, ptr %w, i64 %w_off"]
    if POINTWISE_PREFETCH:
        lines += [f"  %x_ahead = getelementptr float, ptr %x_row, i64 {POINTWISE_PREFETCH}",
                  "  call void @llvm.prefetch.p0(ptr %x_ahead, i32 0, i32 3, i32 1)"]
    for v in range(vectors):
        lines += [f"  %w_ptr{v} = getelementptr float, ptr %w_row, i64 {v * LANES}",
                  f"  %w{v} = load {vec}, ptr %w_ptr{v}, align 4"]
    for i in range(rows):
        lines += [f"  %x_ptr{i} = getelementptr float, ptr %x_row, i64 {i}",
                  f"  %x_val{i} = load float, ptr %x_ptr{i}, align 4",
                  f"  %x_ins{i} = insertelement {vec} poison, float %x_val{i}, i32 0",
                  f"  %b{i} = shufflevector {vec} %x_ins{i}, {vec} poison, <{LANES} x i32> zeroinitializer"]
        lines += [f"  %r{i}_{v} = call {vec} {fma}({vec} %b{i}, {vec} %w{v}, {vec} %a{i}_{v})" for v in range(vectors)]
    lines += ["  %q_next = add i64 %q, 1", "  %more = icmp slt i64 %q_next, %k",
              "  br i1 %more, label %loop, label %sums", "sums:"]
    lines += [f"  %c{i}_{v} = phi {vec} [zeroinitializer, %entry], [%r{i}_{v}, %loop]" for i, v in acc]
    totals = {}  # (i, v) -> the value holding the sum so far
    for i in range(rows):
        lines += [f"  %s_off{i} = mul i64 %lds, {i}", f"  %s_row{i} = getelementptr float, ptr %s, i64 %s_off{i}"]
        for v in range(vectors):
            ptr = f"%s_ptr{i}_{v}"
            lines += [f"  {ptr} = getelementptr float, ptr %s_row{i}, i64 {v * LANES}"]
            totals[i, v] = f"%c{i}_{v}"
            if add:
                lines += [f"  %old{i}_{v} = load {vec}, ptr {ptr}, align 4",
                          f"  %t{i}_{v} = fadd {vec} %old{i}_{v}, %c{i}_{v}"]
                totals[i, v] = f"%t{i}_{v}"
            if not final:
                lines += [f"  store {vec} {totals[i, v]}, ptr {ptr}, align 4"]
    if not final:
        return "\n".join(lines + ["  ret void", "}"])
    steps, lanes_of = _transpose_plan(rows)
    chunk = f"<{rows} x float>"
    for v in range(vectors):
        rows_of_v = {f"%t{i}": totals[i, v] for i in range(rows)}

        def value(name):  # a plan name's value for vector v: a row's total, or a shuffle made for v
            return rows_of_v.get(name, f"{name}_{v}")
        for name, first, second, mask in steps:
            lines += [f"  {name}_{v} = shufflevector {vec} {value(first)}, {vec} {value(second)}, "
                      f"<{LANES} x i32> <{', '.join(f'i32 {m}' for m in mask)}>"]
        for name, lanes in lanes_of.items():
            for c, lane in enumerate(lanes):
                channel, tag = v * LANES + lane, f"{v}_{lane}"
                lines += [f"  %live{tag} = icmp slt i64 {channel}, %live", f"  br i1 %live{tag}, label %st{tag}, label %nx{tag}",
                          f"st{tag}:", f"  %y_off{tag} = mul i64 %ldy, {channel}",
                          f"  %y_ptr{tag} = getelementptr float, ptr %y, i64 %y_off{tag}"]
                if rows == 1:
                    lines += [f"  %row{tag} = extractelement {vec} {value(name)}, i32 {c}",
                              f"  store float %row{tag}, ptr %y_ptr{tag}, align 4"]
                else:
                    picks = ", ".join(f"i32 {c * rows + r}" for r in range(rows))
                    lines += [f"  %row{tag} = shufflevector {vec} {value(name)}, {vec} poison, <{rows} x i32> <{picks}>",
                              f"  store {chunk} %row{tag}, ptr %y_ptr{tag}, align 4"]
                lines += [f"  br label %nx{tag}", f"nx{tag}:"]
    return "\n".join(lines + ["  ret void", "}"])


def _pointwise_ir(symbol: str) -> str:
    """``pointwise_tile``: each tile shape its own internal function, the entry switching on the shape
    final * 128 + add * 64 + vectors * 8 + rows (an unknown shape does nothing)."""
    shapes = [(final, add, v, r) for final in (0, 1) for add in (0, 1) for v in range(1, POINTWISE_VECTORS + 1)
              for r in _POINTWISE_ROWS]
    parts = [_pointwise_tile_ir(f"{symbol}_{f}_{a}_{v}_{r}", r, v, bool(a), bool(f)) for f, a, v, r in shapes]
    cases = " ".join(f"i64 {f * 128 + a * 64 + v * 8 + r}, label %t{f}_{a}_{v}_{r}" for f, a, v, r in shapes)
    lines = [f"define void @{symbol}(i64 %x_addr, i64 %ldx, i64 %w_addr, i64 %s_addr, i64 %lds, i64 %k, i64 %shape, "
             "i64 %y_addr, i64 %ldy, i64 %live) {",
             "entry:", "  %x = inttoptr i64 %x_addr to ptr", "  %w = inttoptr i64 %w_addr to ptr",
             "  %s = inttoptr i64 %s_addr to ptr", "  %y = inttoptr i64 %y_addr to ptr",
             f"  switch i64 %shape, label %done [ {cases} ]"]
    for f, a, v, r in shapes:
        lines += [f"t{f}_{a}_{v}_{r}:",
                  f"  call void @{symbol}_{f}_{a}_{v}_{r}(ptr %x, i64 %ldx, ptr %w, ptr %s, i64 %lds, i64 %k, ptr %y, "
                  "i64 %ldy, i64 %live)", "  br label %done"]
    lines += ["done:", "  ret void", "}"]
    return "\n".join(parts + ["\n".join(lines)])


#: False when llvmlite cannot compile the kernels for this CPU (the callers then use OpenBLAS or numba loops)
AVAILABLE = compile_and_bind(_kernel_ir(), _SYMBOLS)

_pointwise_state = {"ready": None}
_pointwise_lock = threading.Lock()


def pointwise_available() -> bool:
    """Whether pointwise_tile can run: compiled and bound at the first call, on AVX-512 hosts only
    (its 48 tile shapes take ~0.2 s of LLVM, two thirds of all the kernels' compile: not a cost for
    every process that imports the emulator, only for one that plans such a convolution)."""
    with _pointwise_lock:
        if _pointwise_state["ready"] is None:
            ir = "\n".join(["declare void @llvm.prefetch.p0(ptr, i32, i32, i32)",
                            f"declare <{LANES} x float> @llvm.fma.v{LANES}f32(<{LANES} x float>, <{LANES} x float>, "
                            f"<{LANES} x float>)", _pointwise_ir(_SYMBOL_POINTWISE)])
            _pointwise_state["ready"] = AVAILABLE and LANES == 16 and compile_and_bind(ir, (_SYMBOL_POINTWISE,))
        return _pointwise_state["ready"]

from numba import types  # noqa: E402  (after the symbol exists for cached code)

_i64 = types.int64
panel_product = types.ExternalFunction(_SYMBOL, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
panel_product_add = types.ExternalFunction(_SYMBOL_ADD, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
panel_taps = types.ExternalFunction(_SYMBOL_TAPS, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
depthwise_parts = types.ExternalFunction(_SYMBOL_DEPTHWISE, types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64,
                                                                       _i64, _i64))
_product_type = types.void(_i64, _i64, _i64, _i64, _i64, _i64)
direct_taps1, direct_taps2, direct_taps3 = (types.ExternalFunction(symbol, _product_type) for symbol in _SYMBOLS_DIRECT)
direct_taps_add1, direct_taps_add2, direct_taps_add3 = (types.ExternalFunction(symbol, _product_type)
                                                        for symbol in _SYMBOLS_DIRECT_ADD)
store_rows = types.ExternalFunction(_SYMBOL_STORE, types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64,
                                                            _i64, _i64, types.float32, types.float32, _i64))
depthwise_flat = types.ExternalFunction(_SYMBOL_DEPTHWISE_FLAT, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
masked_copies = types.ExternalFunction(_SYMBOL_MASKED_COPIES, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
pointwise_tile = types.ExternalFunction(_SYMBOL_POINTWISE, types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64,
                                                                     _i64, _i64))
depthwise_pad = types.ExternalFunction(_SYMBOL_PAD, types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64))
depthwise_pad_s2 = types.ExternalFunction(_SYMBOL_PAD_S2, types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64))


def pack_panels(u: np.ndarray) -> np.ndarray:
    """(P, O, C) float32 -> (P, ceil(O/ROWS), C, ROWS): each product's rows in panels of ROWS output channels,
    channels along the second-last axis (the kernel's ``a`` operands); missing rows are zero."""
    positions, outs, channels = u.shape
    panels = -(-outs // ROWS)
    padded = np.zeros((positions, panels * ROWS, channels), np.float32)
    padded[:, :outs] = u
    return np.ascontiguousarray(padded.reshape(positions, panels, ROWS, channels).transpose(0, 1, 3, 2))
