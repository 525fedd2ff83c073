"""Text for terminals: reStructuredText markup of docstrings turned into plain text, and
whether to color a stream (https://no-color.org: ``NO_COLOR`` set to anything non-empty
turns color off; ``FORCE_COLOR`` turns it on; otherwise only terminals get color, never
pipes or files, nor ``TERM=dumb``)."""
from __future__ import annotations

import os
import re
from typing import Any

from tx.cli._live import wanted

_LITERAL = re.compile(r"``(.+?)``")
_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`~?([^`<]+?)(?:\s*<[^>]*>)?`")
_LINK = re.compile(r"`([^`<]+?)\s*<([^>]+)>`__?")
_REF = re.compile(r"`([^`]+)`__?")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(\w+)::\s*", re.M)


def plain(text: str) -> str:
    """``text`` without reStructuredText inline markup or directives: ````x```` -> ``x``,
    ``:func:`x``` -> ``x``, ```text <url>`_`` -> ``text (url)``, ``**x**`` -> ``x``,
    ``.. note::`` -> ``Note:``, a paragraph-ending ``::`` -> ``:``. Other text is unchanged."""
    text = _LITERAL.sub(r"\1", text)
    text = _ROLE.sub(r"\1", text)
    text = _LINK.sub(r"\1 (\2)", text)
    text = _REF.sub(r"\1", text)
    text = _STRONG.sub(r"\1", text)
    text = _DIRECTIVE.sub(lambda m: f"{m.group(1)}{m.group(2).capitalize()}: ", text)
    return re.sub(r"(\S)::$", r"\1:", text, flags=re.M)


def use_color(stream: Any) -> bool:
    """Whether to write ANSI colors to ``stream``."""
    if os.environ.get("NO_COLOR", ""):
        return False
    if os.environ.get("FORCE_COLOR", ""):
        return True
    return wanted(stream)  # a terminal, and not TERM=dumb: as for the live line
