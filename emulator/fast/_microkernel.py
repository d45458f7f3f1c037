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

``AVAILABLE`` is False when llvmlite cannot compile for this CPU; callers then use OpenBLAS.
"""

from __future__ import annotations

import numpy as np

ROWS = 6  # output channels per panel (broadcast operands)
COLUMNS = 16  # tiles per block: two vectors of 8 floats
_SYMBOL = "tidlx_sgemm_6x16"
_SYMBOL_ADD = "tidlx_sgemm_6x16_add"


def _kernel_ir() -> str:
    """Both kernels in LLVM IR."""
    return "\n".join(["declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)",
                      _function_ir(_SYMBOL, add=False), _function_ir(_SYMBOL_ADD, add=True)])


def _function_ir(symbol: str, add: bool) -> str:
    """12 vector accumulators (6 rows x 2 vectors) over a loop on k; stored to c, or added to it."""
    lines = [
        f"define void @{symbol}(i64 %a_addr, i64 %b_addr, i64 %ldb, i64 %c_addr, i64 %ldc, i64 %k) {{",
        "entry:",
        "  %a = inttoptr i64 %a_addr to ptr",
        "  %b = inttoptr i64 %b_addr to ptr",
        "  %c = inttoptr i64 %c_addr to ptr",
        "  %any = icmp sgt i64 %k, 0",
        "  br i1 %any, label %loop, label %done",
        "loop:",
        "  %q = phi i64 [0, %entry], [%q_next, %loop]",
    ]
    acc = [(i, j) for i in range(ROWS) for j in range(2)]
    lines += [f"  %s{i}_{j} = phi <8 x float> [zeroinitializer, %entry], [%r{i}_{j}, %loop]" for i, j in acc]
    lines += [
        "  %b_off = mul i64 %q, %ldb",
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
        addresses = {symbol: engine.get_function_address(symbol) for symbol in (_SYMBOL, _SYMBOL_ADD)}
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


def pack_panels(u: np.ndarray) -> np.ndarray:
    """(P, O, C) float32 -> (P, ceil(O/6), C, 6): each product's rows in panels of 6 output channels,
    channels along the second-last axis (the kernel's ``a`` operands); missing rows are zero."""
    positions, outs, channels = u.shape
    panels = -(-outs // ROWS)
    padded = np.zeros((positions, panels * ROWS, channels), np.float32)
    padded[:, :outs] = u
    return np.ascontiguousarray(padded.reshape(positions, panels, ROWS, channels).transpose(0, 1, 3, 2))
