"""Formatting shared by the CLI commands: durations, ages, tables, colored state names
(standard library only: every command's module imports it at the top)."""
from __future__ import annotations

from typing import Any

__all__ = ["STATE_COLORS", "color_state", "format_age", "format_duration", "table"]

#: ANSI colors of the app states on a terminal
STATE_COLORS = {"SUCCEEDED": "32", "FAILED": "31", "CANCELLED": "33", "RUNNING": "36",
                "PENDING": "35", "SUBMITTED": "35", "UNSUBMITTED": "35", "UNKNOWN": "2"}


def color_state(name: str, color: bool) -> str:
    """``name`` (an app state's name) in its color from :data:`STATE_COLORS` when ``color``."""
    code = STATE_COLORS.get(name)
    return f"\x1b[{code}m{name}\x1b[0m" if color and code else name


def format_duration(seconds: float) -> str:
    """``0.4 s``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = int(round(seconds))
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


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


def format_age(seconds: Any) -> str:
    """``42s``, ``5m``, ``3h``, ``12d``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"
