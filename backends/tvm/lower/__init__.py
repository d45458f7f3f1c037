"""The ``tvm.lower`` facets, one file per op family (as ``ir/ops/<family>.py``). Importing this
package registers them all; no TVM is imported until a lowering runs."""

from . import elemwise, image, integer, nn, pool, qnn, reduce, rnn, transform  # noqa: F401  (registers the facets)
