"""The command line: every `workqueue` sub-command (see `main.py`)."""

from .main import build_parser, console, main

__all__ = ["build_parser", "console", "main"]
