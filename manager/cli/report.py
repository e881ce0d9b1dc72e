"""How the planning commands (`stability`, `simulate`, `plan`) show figures: times in the unit a
person reads best, aligned two-column tables, and plots saved with a clear error.

A plot needs matplotlib (`pip install 'workqueue[plot]'`); a folder that does not exist or cannot
be written is a `UserError` naming the file, found before any drawing.
"""

from __future__ import annotations

import math
import os

from ..errors import UserError


def seconds(value: float | None) -> str:
    """500 ms, 12.5 s, 4.2 min, 1.50 h; `never` for an infinite wait, `-` for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "never" if value > 0 else "-"
    if value >= 3600:
        return f"{value / 3600:.2f} h"
    if value >= 120:
        return f"{value / 60:.1f} min"
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value * 1000:.0f} ms"


def rows(pairs: list[tuple[str, str]]) -> str:
    """`label  value` lines, the values aligned."""
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in pairs)


def pyplot(path: str):
    """matplotlib's pyplot (headless), once `path` is known to be writable."""
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
        raise UserError("plots need matplotlib: pip install 'workqueue[plot]'") from None
    return plt


def save(plt, fig, path: str) -> None:
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
