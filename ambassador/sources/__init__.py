"""Where items come from. `Source` is the interface; the file system is the source built now."""

from .base import Source
from .filesystem import FilesystemSource

__all__ = ["FilesystemSource", "Source"]
