"""Op families. Importing this package registers every op (one family per file)."""

from . import elemwise, image, integer, nn, pool, qnn, reduce, rnn, transform  # noqa: F401
from .. import analysis  # noqa: F401,E402  (the ir's own facet: macs)
