"""An int8 dot-product microkernel on AVX-512 VNNI (``vpdpbusd``) for the fixed-point convolutions.

``vpdpbusd`` multiplies, in each of 16 int32 lanes, four unsigned bytes by four signed bytes and adds
the four products to the lane's int32 accumulator; the non-saturating form wraps modulo 2^32, which
is what docs/numerics.md §7.2 asks of an 8-bit-weight accumulator. The kernel is written in LLVM IR
(``llvm.x86.avx512.vpdpbusd.512``), compiled by llvmlite for the host CPU on first import and bound
to a symbol name that numba code calls by name, as emulator/fast/_microkernel.py does for its float
kernel (numba's on-disk cache then stays valid).

``vnni_tile(w, x, offsets, steps, bias, c, ldc)`` (all int64; w, x, offsets, bias, c are addresses):
for i < ROWS output channels and j < PIXELS pixels,
``c[i*ldc + j] = bias[i] + sum over q < steps of dot4(x[offsets[q] + 4j .. +4], w[q*ROWS + i])``
(int32, wrapping),
where ``w`` holds per step q one int32 of four signed weight bytes per channel (a ``steps x ROWS``
panel), ``x + offsets[q]`` points at PIXELS consecutive groups of four unsigned activation bytes,
and ``c`` rows are ``ldc`` int32 apart. The convolution (fast_kernels.py) lays its input out so that
every step of every output pixel block is one such offset.

Integer sums are exact modulo 2^32 in any order, so the result does not depend on the blocking or
the thread count. ``AVAILABLE`` is False when this CPU has no AVX-512 VNNI or llvmlite cannot compile
the kernel; the callers then use the int32 numba loops of the same bits.
"""

from __future__ import annotations

import numpy as np

ROWS = 8        # output channels per tile (broadcast weights)
VECTORS = 2     # zmm vectors of 16 pixels per tile
PIXELS = 16 * VECTORS
_SYMBOL = "tidlx_vnni_tile"
_PEAK_SYMBOL = "tidlx_vnni_peak"
_INTRINSIC = "llvm.x86.avx512.vpdpbusd.512"


def tile_kernel_ir(rows: int = ROWS, vectors: int = VECTORS, symbol: str = _SYMBOL) -> str:
    """The tile kernel in LLVM IR: rows x vectors accumulators of 16 int32 over a loop on the steps."""
    v16 = "<16 x i32>"
    lines = [
        f"declare {v16} @{_INTRINSIC}({v16}, {v16}, {v16})",
        f"define void @{symbol}(i64 %w_addr, i64 %x_addr, i64 %off_addr, i64 %steps, i64 %bias_addr, i64 %c_addr, "
        "i64 %ldc) {",
        "entry:",
        "  %bias = inttoptr i64 %bias_addr to ptr",
        "  %w = inttoptr i64 %w_addr to ptr",
        "  %x = inttoptr i64 %x_addr to ptr",
        "  %offs = inttoptr i64 %off_addr to ptr",
        "  %c = inttoptr i64 %c_addr to ptr",
    ]
    for i in range(rows):   # the accumulators start at the row's bias
        lines += [f"  %bias_ptr{i} = getelementptr i32, ptr %bias, i64 {i}",
                  f"  %bias_val{i} = load i32, ptr %bias_ptr{i}, align 4",
                  f"  %bias_ins{i} = insertelement {v16} poison, i32 %bias_val{i}, i32 0",
                  f"  %init{i} = shufflevector {v16} %bias_ins{i}, {v16} poison, <16 x i32> zeroinitializer"]
    lines += [
        "  %any = icmp sgt i64 %steps, 0",
        "  br i1 %any, label %loop, label %done",
        "loop:",
        "  %q = phi i64 [0, %entry], [%q_next, %loop]",
    ]
    acc = [(i, j) for i in range(rows) for j in range(vectors)]
    lines += [f"  %s{i}_{j} = phi {v16} [%init{i}, %entry], [%r{i}_{j}, %loop]" for i, j in acc]
    lines += [
        "  %off_ptr = getelementptr i64, ptr %offs, i64 %q",
        "  %off = load i64, ptr %off_ptr, align 8",
        "  %x_row = getelementptr i8, ptr %x, i64 %off",
    ]
    for j in range(vectors):
        lines += [f"  %x_ptr{j} = getelementptr i8, ptr %x_row, i64 {64 * j}",
                  f"  %b{j} = load {v16}, ptr %x_ptr{j}, align 4"]
    lines += [f"  %w_off = mul i64 %q, {rows}", "  %w_row = getelementptr i32, ptr %w, i64 %w_off"]
    for i in range(rows):
        lines += [
            f"  %w_ptr{i} = getelementptr i32, ptr %w_row, i64 {i}",
            f"  %w_val{i} = load i32, ptr %w_ptr{i}, align 4",
            f"  %w_ins{i} = insertelement {v16} poison, i32 %w_val{i}, i32 0",
            f"  %a{i} = shufflevector {v16} %w_ins{i}, {v16} poison, <16 x i32> zeroinitializer",
        ]
        lines += [f"  %r{i}_{j} = call {v16} @{_INTRINSIC}({v16} %s{i}_{j}, {v16} %b{j}, {v16} %a{i})"
                  for j in range(vectors)]
    lines += [
        "  %q_next = add i64 %q, 1",
        "  %more = icmp slt i64 %q_next, %steps",
        "  br i1 %more, label %loop, label %done",
        "done:",
    ]
    lines += [f"  %t{i}_{j} = phi {v16} [%init{i}, %entry], [%r{i}_{j}, %loop]" for i, j in acc]
    for i in range(rows):
        lines += [f"  %c_off{i} = mul i64 %ldc, {i}",
                  f"  %c_row{i} = getelementptr i32, ptr %c, i64 %c_off{i}"]
        for j in range(vectors):
            lines += [f"  %c_ptr{i}_{j} = getelementptr i32, ptr %c_row{i}, i64 {16 * j}",
                      f"  store {v16} %t{i}_{j}, ptr %c_ptr{i}_{j}, align 4"]
    lines += ["  ret void", "}"]
    return "\n".join(lines)


def peak_kernel_ir(chains: int = 24) -> str:
    """A register-only loop of ``chains`` independent ``vpdpbusd`` per iteration (the instruction's
    throughput, no memory): ``tidlx_vnni_peak(iterations)`` returns a checksum so nothing is dropped."""
    v16 = "<16 x i32>"
    lines = [
        f"declare {v16} @{_INTRINSIC}({v16}, {v16}, {v16})",
        f"define i32 @{_PEAK_SYMBOL}(i64 %n) {{",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %q = phi i64 [0, %entry], [%q_next, %loop]",
        f"  %bv = phi {v16} [<i32 " + ", i32 ".join(str(k + 1) for k in range(16)) + ">, %entry], [%bv, %loop]",
    ]
    lines += [f"  %s{k} = phi {v16} [zeroinitializer, %entry], [%r{k}, %loop]" for k in range(chains)]
    lines += [f"  %r{k} = call {v16} @{_INTRINSIC}({v16} %s{k}, {v16} %bv, {v16} %bv)" for k in range(chains)]
    lines += ["  %q_next = add i64 %q, 1", "  %more = icmp slt i64 %q_next, %n",
              "  br i1 %more, label %loop, label %done", "done:"]
    total = "%r0"
    for k in range(1, chains):
        lines.append(f"  %sum{k} = add {v16} {total}, %r{k}")
        total = f"%sum{k}"
    lines += [f"  %lane = extractelement {v16} {total}, i32 0", "  ret i32 %lane", "}"]
    return "\n".join(lines)


_engine = None  # keeps the compiled code alive for the life of the process


def _host_has_vnni(llvm) -> bool:
    features = llvm.get_host_cpu_features()
    return bool(features.get("avx512vnni", False)) and bool(features.get("avx512f", False))


def _compile() -> bool:
    """Compiles the kernels for the host CPU and binds their symbols; False without VNNI or on failure."""
    global _engine
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        if not _host_has_vnni(llvm):
            return False
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        module = llvm.parse_assembly(tile_kernel_ir() + "\n" + peak_kernel_ir().split("\n", 1)[1])
        module.verify()
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        tile = engine.get_function_address(_SYMBOL)
        peak = engine.get_function_address(_PEAK_SYMBOL)
    except Exception:  # any llvmlite/LLVM failure: the callers use the numba int32 loops
        return False
    if not tile or not peak:
        return False
    llvm.add_symbol(_SYMBOL, tile)
    llvm.add_symbol(_PEAK_SYMBOL, peak)
    _engine = engine
    return True


AVAILABLE = _compile()

from numba import types  # noqa: E402  (after the symbols exist for cached code)

_i64 = types.int64
vnni_tile = types.ExternalFunction(_SYMBOL, types.void(_i64, _i64, _i64, _i64, _i64, _i64, _i64))
vnni_peak = types.ExternalFunction(_PEAK_SYMBOL, types.int32(_i64))


def pack_panel_rows(v: np.ndarray) -> np.ndarray:
    """(G, Og) int32 per output channel -> (G, ceil(Og/ROWS), ROWS), missing channels 0 (the bias rows)."""
    groups, outs = v.shape
    panels = -(-outs // ROWS)
    padded = np.zeros((groups, panels * ROWS), np.int32)
    padded[:, :outs] = v
    return padded.reshape(groups, panels, ROWS)


def pack_weight_panels(w4: np.ndarray) -> np.ndarray:
    """(G, Og, steps) int32 words of four weight bytes -> (G, ceil(Og/ROWS), steps, ROWS): each group's
    output channels in panels of ROWS, steps along the second-last axis; missing channels are zero."""
    groups, outs, steps = w4.shape
    panels = -(-outs // ROWS)
    padded = np.zeros((groups, panels * ROWS, steps), np.int32)
    padded[:, :outs] = w4
    return np.ascontiguousarray(padded.reshape(groups, panels, ROWS, steps).transpose(0, 1, 3, 2))


__all__ = ["AVAILABLE", "PIXELS", "ROWS", "VECTORS", "pack_panel_rows", "pack_weight_panels", "tile_kernel_ir", "vnni_peak",
           "vnni_tile"]
