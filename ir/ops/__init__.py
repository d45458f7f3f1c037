"""Op families. Importing this package registers every op (one family per file)."""

from . import elemwise, image, nn, pool, qnn, reduce, transform  # noqa: F401
from .. import analysis  # noqa: F401,E402  (the ir's own facet: macs)
