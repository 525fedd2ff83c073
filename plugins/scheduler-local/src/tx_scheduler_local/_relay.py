"""Log files of one replica, written by the supervisor. Standard library only.

In ``<log_dir>/<session>/<app_id>/<role>/<k>/``:

* ``stdout.log`` and ``stderr.log``: the bytes of each stream exactly as the replica wrote
  them, appended as they arrive (one writer each, so nothing is reordered or split).
* ``combined.log``: both streams, written by the supervisor alone and only in whole lines
  (everything up to the last ``\\n`` of what was read), so a line of one stream is never
  cut by a line of the other. When a stream closes, its unterminated last line is written
  followed by a ``\\n``. A line longer than 8 MiB without ``\\n`` is written in pieces as
  it comes; meanwhile the other stream's lines wait (up to 64 MiB of them) so that they
  are written after it ends, never inside it.
* ``times.bin``: when each block of output arrived: records ``(time, stream, offset)``
  (``struct`` ``<dBQ``: seconds since the epoch, 0/1/2 for stdout/stderr/combined, byte
  offset of the block in that stream's file), at most one per stream and millisecond.
  ``log_iter(since=, until=)`` gives each line the time of the block it starts in.

Restarts append the next attempt's output to the same files; a ``\\n`` is added first where
the previous attempt ended mid-line. ``state.json`` records each attempt's start offsets.
"""
from __future__ import annotations

import errno
import os
import struct
import time
from typing import List, Optional

OUT, ERR, COMBINED = 0, 1, 2
FILES = ("stdout.log", "stderr.log", "combined.log")
TIMES = "times.bin"
TIME_RECORD = struct.Struct("<dBQ")
_MAX_PARTIAL = 8 << 20
_MAX_HELD = 64 << 20  # the other stream's lines held back while a long line is written
_FULL = (errno.ENOSPC, errno.EDQUOT)
_TAIL_BYTES = 8192
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _last_byte(path: str) -> bytes:
    """The last byte of the file ``path`` (b"" if it is empty or cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1)
    except OSError:
        return b""


class ReplicaLogs:
    """The open log files of one replica (see the module docstring for the format)."""

    __slots__ = ("dir", "fds", "sizes", "times_fd", "last_t", "partial", "ends_nl", "tail", "owner", "full")

    def __init__(self, directory: str) -> None:
        try:
            os.mkdir(directory)
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
        except FileExistsError:
            pass
        self.dir = directory
        self.fds: List[int] = [os.open(os.path.join(directory, n), _FLAGS, 0o644) for n in FILES]
        self.sizes = [os.fstat(fd).st_size for fd in self.fds]
        for i, n in enumerate(FILES):  # a line of an earlier supervisor's, cut when the
            if self.sizes[i] and _last_byte(os.path.join(directory, n)) != b"\n":  # app was lost
                write_all(self.fds[i], b"\n")
                self.sizes[i] += 1
        self.times_fd = -1  # times.bin is created with the first output
        self.last_t = [-1.0, -1.0, -1.0]
        self.partial = [b"", b""]
        self.ends_nl = [True, True]
        self.tail = b""
        #: the stream whose over-long line is being written to combined.log in pieces
        self.owner: Optional[int] = None
        #: set when a write failed for lack of space (ENOSPC, EDQUOT): the mount point of
        #: the log directory; output is dropped from then on
        self.full: Optional[str] = None

    def _raw(self, stream: int, data: bytes, now: float) -> None:
        if self.full is not None:
            return
        try:
            if now - self.last_t[stream] >= 0.001:
                if self.times_fd < 0:
                    self.times_fd = os.open(os.path.join(self.dir, TIMES), _FLAGS, 0o644)
                write_all(self.times_fd, TIME_RECORD.pack(now, stream, self.sizes[stream]))
                self.last_t[stream] = now
            write_all(self.fds[stream], data)
        except OSError as e:
            if e.errno not in _FULL:
                raise
            self.full = mount_point(self.dir)
            return
        self.sizes[stream] += len(data)

    def write(self, stream: int, data: bytes, now: float) -> None:
        """Append ``data`` read from ``stream`` (OUT or ERR): raw to its own file, and its
        complete lines to combined.log."""
        self._raw(stream, data, now)
        self.ends_nl[stream] = data.endswith(b"\n")
        if stream == ERR:
            self.tail = (self.tail + data)[-_TAIL_BYTES:]
        buf = self.partial[stream] + data if self.partial[stream] else data
        if self.owner == 1 - stream and len(buf) <= _MAX_HELD:
            self.partial[stream] = buf  # after the other stream's long line
            return
        self._combine(stream, buf, now)

    def _combine(self, stream: int, buf: bytes, now: float) -> None:
        cut = buf.rfind(b"\n") + 1
        if cut:
            self._raw(COMBINED, buf[:cut] if cut < len(buf) else buf, now)
            self.partial[stream] = buf[cut:]
            if self.owner == stream:  # its long line ended: the other stream's lines now
                self._release(now)
        elif len(buf) > _MAX_PARTIAL:
            self._raw(COMBINED, buf, now)
            self.partial[stream] = b""
            self.owner = stream
        else:
            self.partial[stream] = buf

    def _release(self, now: float) -> None:
        held = 1 - self.owner if self.owner is not None else None
        self.owner = None
        if held is not None and self.partial[held]:
            buf, self.partial[held] = self.partial[held], b""
            self._combine(held, buf, now)

    def close_stream(self, stream: int) -> None:
        """The stream's pipe closed: end its unterminated last line in combined.log with a
        ``\\n`` (nothing is added after a line that ended)."""
        held = self.partial[stream]
        if self.owner == 1 - stream:  # written after the other stream's long line
            if held and not held.endswith(b"\n"):  # held whole lines end as they are
                self.partial[stream] += b"\n"
            return
        # the unterminated rest: the bytes not written yet, or nothing when a long line's
        # last piece went out whole (the line is still open in combined.log)
        if held or self.owner == stream:
            self._raw(COMBINED, held + b"\n", time.time())
            self.partial[stream] = b""
        if self.owner == stream:
            self._release(time.time())

    def note(self, text: str) -> None:
        """Write a line from tx itself (e.g. why a replica could not start) to the replica's
        stderr, as if the replica had written it."""
        self.write(ERR, text.encode("utf-8", "replace") + b"\n", time.time())

    def new_attempt(self) -> List[int]:
        """Start the next attempt: end the previous one's unterminated lines and return the
        start offsets of stdout, stderr and combined."""
        for stream in (OUT, ERR):
            if not self.ends_nl[stream]:
                self._raw(stream, b"\n", time.time())
                self.ends_nl[stream] = True
        self.tail = b""
        return list(self.sizes)

    def tail_text(self, max_lines: int = 20) -> str:
        """The last lines the current attempt wrote to stderr."""
        text = self.tail.decode("utf-8", "replace")
        return "\n".join(text.rstrip("\n").split("\n")[-max_lines:]) if text.strip() else ""

    def close(self) -> None:
        """Close the files (partial lines must have been flushed by close_stream)."""
        for fd in self.fds + ([self.times_fd] if self.times_fd >= 0 else []):
            os.close(fd)
        self.fds, self.times_fd = [], -1


def mount_point(path: str) -> str:
    """The mount point of the file system holding ``path`` (``path`` itself if unknown)."""
    try:
        path = os.path.realpath(path)
        dev = os.stat(path).st_dev
        while path != "/":
            parent = os.path.dirname(path)
            if os.stat(parent).st_dev != dev:
                break
            path = parent
    except OSError:
        pass
    return path
