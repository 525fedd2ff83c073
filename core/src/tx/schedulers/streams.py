"""Log streams and line helpers shared by schedulers."""
from __future__ import annotations

import enum
import re
from typing import Iterable, Iterator, List, Optional

__all__ = ["filter_regex", "line_blocks", "split_lines", "split_lines_iterator", "Stream"]


class Stream(str, enum.Enum):
    """Which output of a replica to read."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"

    def __str__(self) -> str:
        return self.value


def filter_regex(regex: Optional[str], lines: Iterable[str]) -> Iterator[str]:
    """Yield the lines in which ``regex`` is found (``re.search``); all lines if None."""
    if not regex:
        yield from lines
        return
    pat = re.compile(regex)
    for line in lines:
        if pat.search(line):
            yield line


def split_lines(text: str) -> List[str]:
    """Split ``text`` into lines that keep their ``\\n`` (the last one may lack it)."""
    return _split_nl(text)


def _split_nl(text: str) -> List[str]:
    # only "\n" ends a line: a "\r" (progress bars) stays inside its line
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def split_lines_iterator(chunks: Iterable[str]) -> Iterator[str]:
    """Re-split an iterable of text chunks into whole lines (keeping ``\\n``)."""
    buf = ""
    for chunk in chunks:
        buf += chunk
        if "\n" not in buf:
            continue
        *whole, buf = buf.split("\n")
        for line in whole:
            yield line + "\n"
    if buf:
        yield buf


def line_blocks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Re-cut an iterable of byte chunks (a log as a backend streams it) into blocks that
    each end on a line boundary (``\n``); what follows the last ``\n`` comes with the next
    chunk, or last, as it is. The bytes are neither decoded nor changed: joined, the blocks
    are the chunks joined."""
    rest = b""
    for chunk in chunks:
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut]
        rest = data[cut:]
    if rest:
        yield rest
