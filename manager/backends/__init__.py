"""Backends run one unit of work per item. `base.Outcome` is what they report; `local` runs a
child process per item (the embedded default)."""

from .base import Outcome

__all__ = ["Outcome"]
