"""Where items come from: one module per source type behind one registry (registry.py).

`Source` is the interface (base.py); `filesystem` (a folder), `s3` (an object store) and
`redis_set` (a Redis set) implement it, the last two through `listed.ListedSource`.
"""

from .base import Source
from .filesystem import FilesystemSource
from .registry import SourceConfigError, SourceSpec, open_source, resolve, source_type

__all__ = [
    "FilesystemSource",
    "Source",
    "SourceConfigError",
    "SourceSpec",
    "open_source",
    "resolve",
    "source_type",
]
