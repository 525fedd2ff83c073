"""Formatting shared by the CLI commands: tables, colored state names, and the durations and
ages of :mod:`tx.durations` (standard library only: every command's module imports it at the top)."""
from __future__ import annotations

from typing import Any

from tx.durations import format_age, format_duration  # re-exported: the commands import them from here

__all__ = ["STATE_COLORS", "color_state", "format_age", "format_duration", "table"]

#: ANSI colors of the app states on a terminal
STATE_COLORS = {"SUCCEEDED": "32", "FAILED": "31", "CANCELLED": "33", "RUNNING": "36",
                "PENDING": "35", "SUBMITTED": "35", "UNSUBMITTED": "35", "UNKNOWN": "2"}


def color_state(name: str, color: bool) -> str:
    """``name`` (an app state's name) in its color from :data:`STATE_COLORS` when ``color``."""
    code = STATE_COLORS.get(name)
    return f"\x1b[{code}m{name}\x1b[0m" if color and code else name


def table(headers: Any, rows: Any, paint: Any = None) -> str:
    """Columns padded to their widest cell, two spaces apart, headers underlined with
    dashes (the look of ``tabulate``'s "simple" format, without its cost on thousands of rows).
    ``paint(column, text)``, where given, wraps a body cell's text (colors) after padding."""
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(str(c))) for w, c in zip(widths, r)]

    def line(cells: Any, body: bool = False) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            text = str(c)
            out.append(paint(i, text) + " " * (w - len(text)) if body and paint else text.ljust(w))
        return "  ".join(out).rstrip() + "\n"

    return line(headers) + line("-" * w for w in widths) + "".join(line(r, True) for r in rows)
