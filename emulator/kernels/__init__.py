"""Kernel families, one file per op family (op_<family>.py). Importing registers them all."""

from . import op_conv, op_elemwise, op_image, op_nn, op_pool, op_qnn, op_reduce, op_transform  # noqa: F401
