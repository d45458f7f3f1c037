"""The fast kernel set: numba loops, Winograd, im2col with BLAS, threads, the LLVM microkernel, fusion.

It overlays the reference set (``emulator.fast`` before ``emulator.reference``): an op runs its fast
kernel where one is registered (op_<family>.py here, only where it is faster), else its reference
kernel. Its plan transforms run hard-swish, hard-sigmoid and swish chains as one step each
(_activations.py) and channel shuffles as one copy (_shuffle.py), then fuse element-wise chains into their producer (_fusion.py), then specialize each
step to its call site (_prepared.py); around each run it keeps
freed memory for reuse (_memory.py) and sets up the threads and BLAS (_parallel.py), all from the
run's EmulatorConfig. Importing registers the kernels and the set ("fast").
"""

from contextlib import contextmanager

from ..registry import FAST, REFERENCE, KernelSet, register_kernel_set
from . import op_conv, op_elemwise, op_image, op_nn, op_pool  # noqa: F401  (registers the fast kernels)
from ._activations import ACTIVATIONS
from ._fusion import FUSION
from ._memory import keep_freed_memory
from ._prepared import PREPARED
from ._shuffle import CHANNEL_SHUFFLE


@contextmanager
def run_context(config):
    """Around a fast run: malloc keeps freed pages (once per process), then threads and BLAS."""
    from ._parallel import run_context as threads_and_blas

    keep_freed_memory(config.keep_memory)
    with threads_and_blas(config):
        yield


FAST_SET = register_kernel_set(KernelSet("fast", (FAST, REFERENCE), (ACTIVATIONS, CHANNEL_SHUFFLE, FUSION, PREPARED), run_context))
