"""Op families. Importing this package registers every op (one family per file)."""

from . import elemwise, image, nn, pool, qnn, reduce, transform  # noqa: F401
