"""Compiles LLVM IR kernels for the host CPU and binds their symbols, for numba code to call by name.

The fast set's hand-written vector kernels (_microkernel.py: products, depthwise rows, direct
convolutions; _sums.py: numpy's pairwise sums) are LLVM IR text. Each module is compiled once per
process by llvmlite for the host CPU (its name and features, -O3) and every function's address is
bound to its symbol name with ``llvm.add_symbol``, so numba code declaring the symbol as an
``ExternalFunction`` links against it by name (which keeps numba's on-disk cache valid across
processes). The engines are kept for the life of the process (their code must stay mapped).
"""

from __future__ import annotations

from typing import Iterable

_engines: list = []


def compile_and_bind(ir_text: str, symbols: Iterable[str]) -> bool:
    """Compiles ``ir_text`` and binds each of ``symbols`` to its compiled address; False (nothing
    bound) when llvmlite cannot compile it for this CPU or a symbol is missing."""
    symbols = list(symbols)
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        module = llvm.parse_assembly(ir_text)
        module.verify()
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        addresses = {symbol: engine.get_function_address(symbol) for symbol in symbols}
    except Exception:  # noqa: BLE001  (any llvmlite/LLVM failure: the callers fall back)
        return False
    if not all(addresses.values()):
        return False
    for symbol, address in addresses.items():
        llvm.add_symbol(symbol, address)
    _engines.append(engine)
    return True


def host_has_avx512() -> bool:
    """Whether LLVM sees AVX-512 F on this CPU (the host features it compiles for)."""
    try:
        import llvmlite.binding as llvm

        return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")
    except Exception:  # noqa: BLE001  (no llvmlite host query: the 8-float kernels)
        return False
