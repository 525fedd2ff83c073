"""Log streams and line helpers shared by schedulers."""
from __future__ import annotations

import enum
import re
import time
from typing import BinaryIO, Callable, Iterable, Iterator, List, Optional

__all__ = ["filter_regex", "follow_file", "line_blocks", "split_lines", "split_lines_iterator", "Stream"]

_BLOCK_SIZE = 65536  # bytes per read of a followed file


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


def follow_file(
    path: str,
    is_done: Optional[Callable[[], bool]] = None,
    poll_interval: float = 0.2,
    check_interval: float = 1.0,
) -> Iterator[bytes]:
    """Yield the bytes of the file at ``path`` (a replica's log that a batch system writes,
    read as it grows) in blocks that each end on a ``\\n`` (the last block may end mid-line
    when the file does); each read is at most 64 KiB.

    Args:
        path: the file; a missing file yields nothing unless following.
        is_done: follow the file (``tail -f``) until this returns True, then read what is
            left and stop; it is called at most every ``check_interval`` seconds, only
            when the reader is at the end of the file. None: read what is there and stop.
        poll_interval: seconds between reads at the end of a followed file.
        check_interval: seconds between calls of ``is_done``.
    """
    f: Optional[BinaryIO] = None
    pending = b""
    next_check = 0.0
    try:
        while True:
            if f is None:
                try:
                    f = open(path, "rb")
                except FileNotFoundError:
                    if is_done is None or is_done():
                        return
                    time.sleep(check_interval)
                    continue
            data = f.read(_BLOCK_SIZE)
            if data:
                pending += data
                cut = pending.rfind(b"\n")
                if cut >= 0:
                    yield pending[: cut + 1]
                    pending = pending[cut + 1:]
                continue
            # at the end of the file
            if is_done is None:
                break
            now = time.monotonic()
            if now >= next_check:
                next_check = now + check_interval
                if is_done():
                    rest = f.read()  # written before the app ended
                    while rest:
                        pending += rest
                        rest = f.read()
                    break
            time.sleep(poll_interval)
        if pending:
            yield pending
    finally:
        if f is not None:
            f.close()
