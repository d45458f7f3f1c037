"""The float reference kernel set: one plain-numpy kernel per op, the definition of the emulator's
float semantics (facet ``emulator.reference``, one file per op family). No numba, no threads, no
size-dependent paths, no settings: what a fast kernel must reproduce (or say how far it may be
from). Importing registers them all."""

from . import (op_conv, op_deformable_conv, op_elemwise, op_image, op_integer, op_nn, op_pool, op_qnn,  # noqa: F401
               op_reduce, op_rnn, op_transform)
