"""How long finished apps are kept: ``[cli:gc] keep`` (``tx gc``, and ``tx run`` on the
local schedulers), as a duration such as ``7d``, ``12h``, ``30m`` or ``3600`` (seconds)."""
from __future__ import annotations

import re

__all__ = ["GC_KEEP", "GC_SECTION", "parse_duration"]

#: the section holding the setting, as ``(prefix, name)``: ``[cli:gc]``
GC_SECTION = ("cli", "gc")
#: the key of the setting in :data:`GC_SECTION`
GC_KEEP = "keep"

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number with an optional unit ``s``, ``m``, ``h``, ``d`` or
    ``w`` (``90``, ``90s``, ``30m``, ``12h``, ``7d``, ``2w``).

    Raises:
        ValueError: not a non-negative number with one of those units (message for users).
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(text))
    if not m:
        raise ValueError(f"bad duration {text!r}: use a number and a unit s, m, h, d or w (e.g. 7d, 12h)")
    return float(m.group(1)) * _UNITS[m.group(2)]
