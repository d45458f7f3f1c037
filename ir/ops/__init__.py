"""Op families. Importing this package registers every op (one family per file)."""

from . import elemwise, nn  # noqa: F401
