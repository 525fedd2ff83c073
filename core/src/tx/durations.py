"""How long, as tx prints it: durations (``12.3 s``, ``4 min 05 s``) and ages (``5m``).

One home for the rounding, so that ``tx list``, ``tx status`` (of an app or a sweep), ``tx
run`` and ``tx ui`` show the same time the same way. Standard library only: the CLI's cold
paths import it at the top.
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["format_age", "format_duration"]


def format_duration(seconds: Optional[float]) -> str:
    """How long something ran: ``0.4 s``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``.

    Args:
        seconds: the duration in seconds (a negative one is 0, clock skew); None: unknown.

    Returns:
        Tenths of a second below a minute, rounded to the nearest (59.96 s is ``1 min 00
        s``, never ``60.0 s``); whole seconds below an hour; minutes above; ``-`` when unknown.
    """
    if seconds is None:
        return "-"
    seconds = max(0.0, float(seconds))
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    s = int(round(seconds))
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def format_age(seconds: Any) -> str:
    """``42s``, ``5m``, ``3h``, ``12d``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))  # whole units passed: 59.9 s old is 59s, as `ls`/`kubectl` count
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"
