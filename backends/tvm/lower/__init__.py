"""The ``tvm.lower`` facets, one file per op family (as ``ir/ops/<family>.py``). Importing this
package registers them all; no TVM is imported until a lowering runs."""

from . import elemwise, image, nn, pool, qnn, reduce, transform  # noqa: F401  (registers the facets)
