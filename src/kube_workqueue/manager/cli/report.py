"""How the planning commands (`stability`, `simulate`, `plan`) show figures: times in the unit a
person reads best, aligned two-column tables, and plots saved with a clear error.

A plot needs matplotlib (`pip install 'kube-workqueue[plot]'`); a folder that does not exist or
cannot be written is a `UserError` naming the file, found before any drawing.
"""

from __future__ import annotations

import os

from kube_workqueue.safelog.logs import for_terminals
from kube_workqueue.safelog.redaction import redact_text

from ..durations import human
from ..errors import UserError

seconds = human  # durations for people (`manager.durations.human`)


def one_line(text: str) -> str:
    """A message on one line, whatever a user typed into it: control characters (a newline in
    a path, say) are shown escaped, and the secrets of any URL in it hidden."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in redact_text(text))


class ForPeople:
    """A text stream whose writes have their control characters escaped (`for_terminals`):
    every command's stdout, so an item's name never reaches a terminal raw. JSON written
    through it is unchanged (JSON escapes control characters itself)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(for_terminals(text))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def rows(pairs: list[tuple[str, str]]) -> str:
    """`label  value` lines, the values aligned."""
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in pairs)


PLOT_FORMATS = ("png", "svg", "pdf", "jpg", "jpeg", "webp", "tif", "tiff", "eps", "ps")


def pyplot(path: str):
    """matplotlib's pyplot (headless), once `path` is known to be a writable file of a format
    it writes (named by its extension: matplotlib would otherwise add ".png" to a name without
    one - `--plot /tmp` wrote /tmp.png - or refuse `out.txt` with a traceback)."""
    if os.path.isdir(path):
        raise UserError(f"cannot write {path}: it is a folder; give a file name like plot.png")
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    if extension not in PLOT_FORMATS:
        said = f"'.{extension}' is not" if extension else "no extension names"
        raise UserError(f"cannot write {path}: {said} an image format; end it with "
                        ".png, .svg or .pdf")  # fmt: skip
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"cannot write {path}: no folder {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UserError(f"cannot write {path}: permission denied")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("plots need matplotlib: pip install 'kube-workqueue[plot]'") from None
    return plt


def save(plt, fig, path: str) -> None:
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
