"""The command line: every `workqueue` sub-command (see `main.py`)."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
