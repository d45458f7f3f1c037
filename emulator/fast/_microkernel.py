"""A float32 register-blocked product kernel for the small products inside Winograd tile blocks.

The blocked Winograd convolutions (_winograd.py) multiply, per tile position, 6 output channels
at a time by 16 tiles at a time: products of (O x C) by (C x 16) where C is 16..512. OpenBLAS
packs both operands and sets up its blocking on every call, which costs more than such a
product itself; this kernel reads the weights prepacked once per model and the 16 tile columns
in place. It is written in LLVM IR (vectors of 8 floats, ``llvm.fma``) and compiled by llvmlite
for the host CPU on first import; its address is bound to a symbol name that numba code calls
by name, as _blas.py does for OpenBLAS, so numba's on-disk cache stays valid.

``sgemm_6x16(a, b, ldb, c, ldc, k)`` (all int64; a, b, c are addresses):
``c[i, j] = sum over q in 0..k-1 of a[q, i] * b[q, j]`` for i < 6, j < 16, where ``a`` is a
(k, 6) row-major panel, ``b`` rows are ``ldb`` floats apart, ``c`` rows ``ldc`` floats apart.
Each sum starts at 0 and adds the terms in order of q with one rounding per term (fused
multiply-add), so the result does not depend on the CPU's vector width, the thread count or the
blocking. Without hardware FMA, LLVM calls the C library's fmaf: the same bits, slower.
``sgemm_6x16_add`` (same arguments) computes the same sum and adds it to ``c``: callers sum long
products in chunks of channels (two-level summation, see _jit.winograd_block_products).

``conv_taps_6x16(a, b, offsets, c, ldc, k)`` (same arguments as sgemm_6x16, but ``offsets`` is the
address of k int64 offsets in floats): ``c[i, j] = sum over q of a[q, i] * b[offsets[q] + j]``, summed
as sgemm_6x16 does. The direct convolution of few input channels (_jit.conv_few_channels) sums
each output's taps (channel, kernel row, kernel column) this way, with ``b`` one output row's
input and offsets[q] the tap's position, so no im2col matrix is built.

``depthwise_rows(src, row_step, offsets, weights, taps, dst, rows, vectors)`` and
``depthwise_rows_s2`` (same arguments; all int64, src, offsets, weights, dst are addresses) are the
depthwise convolution's inner kernels for column strides 1 and 2 (_jit.py's depthwise_conv_planes):
for r < rows and column c < 8 * vectors, with s the stride,
``dst[r * 8 * vectors + c] = sum over t < taps of src[r * row_step + offsets[t] + s * c] * weights[t]``,
summed from 0 in order of t, a product and an addition per term (no FMA: the same bits as the
numba loop they replace, _jit.depthwise_conv_nchw). They keep 4 vectors of 8 columns in registers
over all taps (then 1 at a time for the rest; rows narrower than 4 vectors go 4 rows at a time),
so each output is written once, not once per tap; stride 2 loads 16 consecutive floats and keeps
the even ones.

``AVAILABLE`` is False when llvmlite cannot compile for this CPU; callers then use OpenBLAS
(Winograd) or the numba loop (depthwise).
"""

from __future__ import annotations

import numpy as np

ROWS = 6  # output channels per panel (broadcast operands)
COLUMNS = 16  # tiles per block: two vectors of 8 floats
_SYMBOL = "tidlx_sgemm_6x16"
_SYMBOL_ADD = "tidlx_sgemm_6x16_add"
_SYMBOL_DEPTHWISE = "tidlx_depthwise_rows"
_SYMBOL_DEPTHWISE_S2 = "tidlx_depthwise_rows_s2"
_SYMBOL_TAPS = "tidlx_conv_taps_6x16"
_SYMBOLS = (_SYMBOL, _SYMBOL_ADD, _SYMBOL_DEPTHWISE, _SYMBOL_DEPTHWISE_S2, _SYMBOL_TAPS)


def _kernel_ir() -> str:
    """All kernels in LLVM IR."""
    return "\n".join(["declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)",
                      _function_ir(_SYMBOL, add=False), _function_ir(_SYMBOL_ADD, add=True),
                      _function_ir(_SYMBOL_TAPS, add=False, taps=True),
                      _depthwise_ir(_SYMBOL_DEPTHWISE, 1), _depthwise_ir(_SYMBOL_DEPTHWISE_S2, 2)])


def _depthwise_columns_ir(tag: str, unroll: int, rows: int, stride: int, first: str, stop: str,
                          next_label: str) -> list:
    """A loop over vector columns [first, stop) in steps of ``unroll`` vectors of ``rows`` output
    rows (from %row_ptr / %out_row), each step summing all taps into rows x unroll vector
    accumulators (independent chains, so that the FMA-free adds overlap); then ``next_label``."""
    acc = [(r, k) for r in range(rows) for k in range(unroll)]
    lines = [
        f"{tag}_check:",
        f"  %{tag}_any = icmp slt i64 {first}, {stop}",
        f"  br i1 %{tag}_any, label %{tag}_vec, label %{next_label}",
        f"{tag}_vec:",
        f"  %{tag}_v = phi i64 [{first}, %{tag}_check], [%{tag}_v_next, %{tag}_store]",
        f"  %{tag}_col = shl i64 %{tag}_v, 3",
        f"  %{tag}_in_col = mul i64 %{tag}_col, {stride}",
        f"  br label %{tag}_tap",
        f"{tag}_tap:",
        f"  %{tag}_t = phi i64 [0, %{tag}_vec], [%{tag}_t_next, %{tag}_tap]",
    ]
    lines += [f"  %{tag}_acc{r}_{k} = phi <8 x float> [zeroinitializer, %{tag}_vec], [%{tag}_sum{r}_{k}, %{tag}_tap]"
              for r, k in acc]
    lines += [
        f"  %{tag}_off_ptr = getelementptr i64, ptr %offs, i64 %{tag}_t",
        f"  %{tag}_off = load i64, ptr %{tag}_off_ptr, align 8",
        f"  %{tag}_idx = add i64 %{tag}_off, %{tag}_in_col",
        f"  %{tag}_x_ptr = getelementptr float, ptr %row_ptr, i64 %{tag}_idx",
        f"  %{tag}_w_ptr = getelementptr float, ptr %wts, i64 %{tag}_t",
        f"  %{tag}_w = load float, ptr %{tag}_w_ptr, align 4",
        f"  %{tag}_w_ins = insertelement <8 x float> poison, float %{tag}_w, i32 0",
        f"  %{tag}_ws = shufflevector <8 x float> %{tag}_w_ins, <8 x float> poison, <8 x i32> zeroinitializer",
    ]
    evens = ", ".join(f"i32 {2 * lane}" for lane in range(8))
    for r, k in acc:
        name = f"{tag}_x{r}_{k}"
        lines += [f"  %{tag}_xr{r}_{k} = getelementptr float, ptr %{tag}_x_ptr, i64 %row_step{r}",
                  f"  %{tag}_xp{r}_{k} = getelementptr float, ptr %{tag}_xr{r}_{k}, i64 {8 * stride * k}"]
        if stride == 1:
            lines += [f"  %{name} = load <8 x float>, ptr %{tag}_xp{r}_{k}, align 4"]
        else:
            lines += [f"  %{tag}_wide{r}_{k} = load <16 x float>, ptr %{tag}_xp{r}_{k}, align 4",
                      f"  %{name} = shufflevector <16 x float> %{tag}_wide{r}_{k}, <16 x float> poison, "
                      f"<8 x i32> <{evens}>"]
        lines += [
            f"  %{tag}_p{r}_{k} = fmul <8 x float> %{name}, %{tag}_ws",
            f"  %{tag}_sum{r}_{k} = fadd <8 x float> %{tag}_acc{r}_{k}, %{tag}_p{r}_{k}",
        ]
    lines += [
        f"  %{tag}_t_next = add i64 %{tag}_t, 1",
        f"  %{tag}_more_t = icmp slt i64 %{tag}_t_next, %taps",
        f"  br i1 %{tag}_more_t, label %{tag}_tap, label %{tag}_store",
        f"{tag}_store:",
        f"  %{tag}_out = getelementptr float, ptr %out_row, i64 %{tag}_col",
    ]
    for r, k in acc:
        lines += [f"  %{tag}_or{r}_{k} = getelementptr float, ptr %{tag}_out, i64 %row_len{r}",
                  f"  %{tag}_op{r}_{k} = getelementptr float, ptr %{tag}_or{r}_{k}, i64 {8 * k}",
                  f"  store <8 x float> %{tag}_sum{r}_{k}, ptr %{tag}_op{r}_{k}, align 4"]
    lines += [
        f"  %{tag}_v_next = add i64 %{tag}_v, {unroll}",
        f"  %{tag}_more_v = icmp slt i64 %{tag}_v_next, {stop}",
        f"  br i1 %{tag}_more_v, label %{tag}_vec, label %{next_label}",
    ]
    return lines


#: Output rows summed together when rows are narrow (fewer than 4 vectors of 8): four independent
#: accumulator chains instead of one per row (a 7x7 or 14x14 map would wait on each add's latency).
ROW_GROUP = 4


def _depthwise_ir(symbol: str, stride: int) -> str:
    """Narrow rows (fewer than 4 vectors): groups of ROW_GROUP rows one vector column at a time;
    then (and for wide rows, all) rows one at a time: vector columns by 4 up to the last multiple
    of 4, then by 1. Inside each, the taps."""
    g = ROW_GROUP
    lines = [
        f"define void @{symbol}(i64 %src_addr, i64 %row_step, i64 %offs_addr, i64 %wts_addr, "
        "i64 %taps, i64 %dst_addr, i64 %rows, i64 %vectors) {",
        "entry:",
        "  %src = inttoptr i64 %src_addr to ptr",
        "  %offs = inttoptr i64 %offs_addr to ptr",
        "  %wts = inttoptr i64 %wts_addr to ptr",
        "  %dst = inttoptr i64 %dst_addr to ptr",
        "  %row_len = shl i64 %vectors, 3",
        "  %quads = and i64 %vectors, -4",
    ]
    for r in range(g):
        lines += [f"  %row_step{r} = mul i64 %row_step, {r}", f"  %row_len{r} = mul i64 %row_len, {r}"]
    lines += [
        "  %narrow = icmp slt i64 %vectors, 4",
        f"  %grouped_rows = and i64 %rows, {-g}",
        "  %group_rows = select i1 %narrow, i64 %grouped_rows, i64 0",
        "  %some_taps = icmp sgt i64 %taps, 0",
        "  %groups_go = icmp sgt i64 %group_rows, 0",
        "  %go_groups = and i1 %groups_go, %some_taps",
        "  br i1 %go_groups, label %group, label %rows_check",
        "group:",
        "  %gr = phi i64 [0, %entry], [%gr_next, %group_end]",
        "  %g_row_off = mul i64 %gr, %row_step",
        "  %g_out_off = mul i64 %gr, %row_len",
        "  br label %g_setup",
        "g_setup:",
        "  %row_ptr_g = getelementptr float, ptr %src, i64 %g_row_off",
        "  %out_row_g = getelementptr float, ptr %dst, i64 %g_out_off",
        "  br label %g_check",
    ]
    lines += [line.replace("%row_ptr,", "%row_ptr_g,").replace("%out_row,", "%out_row_g,")
              for line in _depthwise_columns_ir("g", 1, g, stride, "0", "%vectors", "group_end")]
    lines += [
        "group_end:",
        f"  %gr_next = add i64 %gr, {g}",
        "  %more_gr = icmp slt i64 %gr_next, %group_rows",
        "  br i1 %more_gr, label %group, label %rows_check",
        "rows_check:",
        "  %first_row = phi i64 [0, %entry], [%group_rows, %group_end]",
        "  %rows_left = icmp slt i64 %first_row, %rows",
        "  %go = and i1 %rows_left, %some_taps",
        "  br i1 %go, label %row, label %done",
        "row:",
        "  %r = phi i64 [%first_row, %rows_check], [%r_next, %row_end]",
        "  %row_off = mul i64 %r, %row_step",
        "  %row_ptr = getelementptr float, ptr %src, i64 %row_off",
        "  %out_off = mul i64 %r, %row_len",
        "  %out_row = getelementptr float, ptr %dst, i64 %out_off",
        "  br label %q_check",
    ]
    lines += _depthwise_columns_ir("q", 4, 1, stride, "0", "%quads", "s_check")
    lines += _depthwise_columns_ir("s", 1, 1, stride, "%quads", "%vectors", "row_end")
    lines += [
        "row_end:",
        "  %r_next = add i64 %r, 1",
        "  %more_r = icmp slt i64 %r_next, %rows",
        "  br i1 %more_r, label %row, label %done",
        "done:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines)


def _function_ir(symbol: str, add: bool, taps: bool = False) -> str:
    """12 vector accumulators (6 rows x 2 vectors) over a loop on k; stored to c, or added to it.
    ``taps``: b's row q starts at the offset offsets[q] (the third argument's table), not q * ldb."""
    third = "%offs_addr" if taps else "%ldb"
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
    acc = [(i, j) for i in range(ROWS) for j in range(2)]
    lines += [f"  %s{i}_{j} = phi <8 x float> [zeroinitializer, %entry], [%r{i}_{j}, %loop]" for i, j in acc]
    if taps:
        lines += ["  %off_ptr = getelementptr i64, ptr %offs, i64 %q",
                  "  %b_off = load i64, ptr %off_ptr, align 8"]
    else:
        lines += ["  %b_off = mul i64 %q, %ldb"]
    lines += [
        "  %b_row = getelementptr float, ptr %b, i64 %b_off",
        "  %b_hi = getelementptr float, ptr %b_row, i64 8",
        "  %b0 = load <8 x float>, ptr %b_row, align 4",
        "  %b1 = load <8 x float>, ptr %b_hi, align 4",
        f"  %a_off = mul i64 %q, {ROWS}",
        "  %a_row = getelementptr float, ptr %a, i64 %a_off",
    ]
    for i in range(ROWS):
        lines += [
            f"  %a_ptr{i} = getelementptr float, ptr %a_row, i64 {i}",
            f"  %a_val{i} = load float, ptr %a_ptr{i}, align 4",
            f"  %a_ins{i} = insertelement <8 x float> poison, float %a_val{i}, i32 0",
            f"  %a{i} = shufflevector <8 x float> %a_ins{i}, <8 x float> poison, <8 x i32> zeroinitializer",
        ]
        lines += [f"  %r{i}_{j} = call <8 x float> @llvm.fma.v8f32(<8 x float> %a{i}, <8 x float> %b{j}, "
                  f"<8 x float> %s{i}_{j})" for j in range(2)]
    lines += [
        "  %q_next = add i64 %q, 1",
        "  %more = icmp slt i64 %q_next, %k",
        "  br i1 %more, label %loop, label %done",
        "done:",
    ]
    lines += [f"  %t{i}_{j} = phi <8 x float> [zeroinitializer, %entry], [%r{i}_{j}, %loop]" for i, j in acc]
    for i in range(ROWS):
        lines += [f"  %c_off{i} = mul i64 %ldc, {i}",
                  f"  %c_row{i} = getelementptr float, ptr %c, i64 %c_off{i}",
                  f"  %c_hi{i} = getelementptr float, ptr %c_row{i}, i64 8"]
        for j, ptr in ((0, f"%c_row{i}"), (1, f"%c_hi{i}")):
            value = f"%t{i}_{j}"
            if add:
                lines += [f"  %old{i}_{j} = load <8 x float>, ptr {ptr}, align 4",
                          f"  %new{i}_{j} = fadd <8 x float> %old{i}_{j}, %t{i}_{j}"]
                value = f"%new{i}_{j}"
            lines += [f"  store <8 x float> {value}, ptr {ptr}, align 4"]
    lines += ["  ret void", "}"]
    return "\n".join(lines)


_engine = None  # keeps the compiled code alive for the life of the process


def _compile() -> bool:
    """Compiles the kernel for the host CPU and binds its symbol; False when that fails."""
    global _engine
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        module = llvm.parse_assembly(_kernel_ir())
        module.verify()
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        addresses = {symbol: engine.get_function_address(symbol) for symbol in _SYMBOLS}
    except Exception:  # any llvmlite/LLVM failure: the callers fall back to OpenBLAS
        return False
    if not all(addresses.values()):
        return False
    for symbol, address in addresses.items():
        llvm.add_symbol(symbol, address)
    _engine = engine
    return True


AVAILABLE = _compile()

from numba import types  # noqa: E402  (after the symbol exists for cached code)

_i64 = types.int64
sgemm_6x16 = types.ExternalFunction(_SYMBOL, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
sgemm_6x16_add = types.ExternalFunction(_SYMBOL_ADD, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
conv_taps_6x16 = types.ExternalFunction(_SYMBOL_TAPS, types.void(_i64, _i64, _i64, _i64, _i64, _i64))
depthwise_rows = types.ExternalFunction(_SYMBOL_DEPTHWISE, types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64))
depthwise_rows_s2 = types.ExternalFunction(_SYMBOL_DEPTHWISE_S2,
                                           types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64))


def pack_panels(u: np.ndarray) -> np.ndarray:
    """(P, O, C) float32 -> (P, ceil(O/6), C, 6): each product's rows in panels of 6 output channels,
    channels along the second-last axis (the kernel's ``a`` operands); missing rows are zero."""
    positions, outs, channels = u.shape
    panels = -(-outs // ROWS)
    padded = np.zeros((positions, panels * ROWS, channels), np.float32)
    padded[:, :outs] = u
    return np.ascontiguousarray(padded.reshape(positions, panels, ROWS, channels).transpose(0, 1, 3, 2))
