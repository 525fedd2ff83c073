"""Reading a replica's log files: whole-line blocks, lines, time windows, following.

Files are read in 1 MiB chunks and cut at the last ``\\n``: every block holds whole lines
(the last block of a finished app may end with an unterminated line). While the app runs,
a follower sleeps on inotify (file modified, state file replaced, supervisor exited) and
falls back to short growing sleeps where inotify is missing. After a wake-up that follows
a small read it waits 2 ms more so that a fast writer is relayed in large blocks (at most
~500 wake-ups a second, at most 2 ms of added latency).
"""
from __future__ import annotations

import bisect
import re
import time
from typing import Callable, Iterator, List, Optional, Tuple

from tx_scheduler_local._inotify import Notifier
from tx_scheduler_local._relay import TIME_RECORD

_CHUNK = 1 << 20
_RECHECK_S = 1.0
_COALESCE_S = 0.002


def iter_blocks(
    path: str,
    is_done: Callable[[], bool],
    follow: bool,
    notifier: Notifier,
) -> Iterator[Tuple[int, bytes]]:
    """Yield ``(offset, block)``: whole-line blocks of ``path`` and their byte offsets.

    Args:
        is_done: True once the app is terminal (its logs are then complete); evaluated
            before each read, so that everything written before that state is read.
        follow: keep reading until ``is_done()``; else read what is there now (complete
            lines only, unless the app is done).
        notifier: wakes the follower; this function adds a watch on ``path``.
    """
    f = None
    watched = False
    pending = b""
    pos = 0
    try:
        while True:
            done = is_done()
            if f is None:
                try:
                    f = open(path, "rb", buffering=0)
                except FileNotFoundError:
                    if done or not follow:
                        return
                    notifier.wait(0.05)
                    continue
            if follow and not watched:
                watched = notifier.watch(path)
            got = 0
            while True:
                data = f.read(_CHUNK)
                if not data:
                    break
                got += len(data)
                buf = pending + data if pending else data
                cut = buf.rfind(b"\n") + 1
                if cut:
                    yield pos, (buf if cut == len(buf) else buf[:cut])
                    pos += cut
                    pending = buf[cut:]
                else:
                    pending = buf
            if done:
                if pending:
                    yield pos, pending
                return
            if not follow:
                return
            if got:
                notifier.reset()
            if notifier.wait(_RECHECK_S) and got < _CHUNK:
                # output trickles in: let it gather a moment, so that a fast writer is
                # relayed in a few large blocks rather than one wake-up per write
                time.sleep(_COALESCE_S)
    finally:
        if f is not None:
            f.close()


class TimeIndex:
    """Arrival times of a log file's blocks, from the replica's ``times.bin``."""

    def __init__(self, path: str, stream: int) -> None:
        self.path = path
        self.stream = stream
        self.offsets: List[int] = []
        self.times: List[float] = []
        self._read = 0

    def refresh(self) -> None:
        """Read the records appended since the last call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._read)
                data = f.read()
        except FileNotFoundError:
            return
        size = TIME_RECORD.size
        whole = len(data) - len(data) % size
        for t, stream, off in TIME_RECORD.iter_unpack(data[:whole]):
            if stream == self.stream:
                self.offsets.append(off)
                self.times.append(t)
        self._read += whole

    def time_at(self, offset: int) -> float:
        """Arrival time (seconds since the epoch) of the byte at ``offset``."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.times[0] if self.times else 0.0
        return self.times[i]


def iter_lines(
    blocks: Iterator[Tuple[int, bytes]],
    regex: Optional[str],
    since: Optional[float],
    until: Optional[float],
    index: Optional[TimeIndex],
) -> Iterator[str]:
    """Lines of ``blocks`` (decoded as UTF-8, bad bytes as U+FFFD, each keeping its
    ``\\n``), filtered by ``regex`` (``re.search``) and by arrival time
    ``since <= t <= until`` (seconds since the epoch)."""
    pat = re.compile(regex) if regex else None
    timed = index is not None and (since is not None or until is not None)
    for offset, block in blocks:
        if not timed:
            text = block.decode("utf-8", "replace")
            lines = text.split("\n")
            last = lines.pop()
            for line in lines:
                line += "\n"
                if pat is None or pat.search(line):
                    yield line
            if last and (pat is None or pat.search(last)):
                yield last
            continue
        assert index is not None
        index.refresh()
        pos = offset
        for raw in _split_nl(block):
            t = index.time_at(pos)
            pos += len(raw)
            if until is not None and t > until:
                return
            if since is not None and t < since:
                continue
            line = raw.decode("utf-8", "replace")
            if pat is None or pat.search(line):
                yield line


def _split_nl(block: bytes) -> List[bytes]:
    parts = block.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def open_notifier(state_dir: str, supervisor_pid: Optional[int]) -> Notifier:
    """A notifier that wakes on changes of the app's state directory and on the exit of
    its supervisor."""
    n = Notifier()
    n.watch(state_dir)
    if supervisor_pid:
        n.watch_process(supervisor_pid)
    return n
