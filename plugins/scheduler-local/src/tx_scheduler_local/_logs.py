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
import os
import re
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from tx.schedulers import Stream
from tx_scheduler_local import _store
from tx_scheduler_local._inotify import Notifier
from tx_scheduler_local._relay import FILES, TIME_RECORD

#: the code of each stream in the supervisor's files (``FILES``) and time records
STREAM_CODE = {Stream.STDOUT: 0, Stream.STDERR: 1, Stream.COMBINED: 2}

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


#: how long a follower trusts the last look at an app whose state file has not changed (s)
DONE_TTL_S = 0.25


def unless_state_changed(app_dir: str, look: Callable[[], bool], notifier: Optional[Notifier] = None,
                         ttl: Optional[float] = None) -> Callable[[], bool]:
    """``is_done`` for :func:`iter_blocks` that calls ``look`` (a describe: state.json
    parsed, the replicas' statuses built) only when the state file of the app whose
    registry directory is ``app_dir`` is another file than at the last call, once
    ``notifier`` saw a watched process (the supervisor) exit since, or ``ttl`` seconds after
    that call (default :data:`DONE_TTL_S`); else it gives the last answer again. A describe per wake-up
    (~110 a second for a fast writer) was most of a follower's CPU; the supervisor replaces
    state.json on every change (``os.replace``: another inode, mtime and size), so while it
    is the same file the answer holds. A supervisor gone without a word changes no state
    file: its exit (``notifier``) or ``ttl`` makes the describe that finalizes the app."""
    state_path = os.path.join(app_dir, _store.STATE)
    trust = DONE_TTL_S if ttl is None else ttl
    last: List[Any] = [None, 0.0, False]  # (inode, mtime, size, exits) at the last look, when, the answer

    def done() -> bool:
        try:
            st = os.stat(state_path)
            key: Any = (st.st_ino, st.st_mtime_ns, st.st_size, notifier.exited if notifier is not None else 0)
        except OSError:  # gone (tx gc) or unreadable: look
            key = None
        now = time.monotonic()
        if key is not None and key == last[0] and now - last[1] < trust:
            return bool(last[2])
        answer = look()
        last[:] = [key, now, answer]
        return answer

    return done


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


def replica_file(apps_dir: str, app_id: str, request: Dict[str, Any], role_name: str, k: int,
                 streams: Any) -> Tuple[str, Stream]:
    """The log file of replica ``k`` of ``role_name`` of the app (its launch ``request``)
    for ``streams`` (``stdout``, ``stderr``, ``combined`` or None: combined), and the stream.

    Raises:
        ValueError: unknown stream, role or replica.
        FileNotFoundError: the file is gone (:func:`check_logs_exist`).
    """
    try:
        stream = Stream.COMBINED if streams is None else Stream(streams)
    except ValueError:
        raise ValueError(f"unknown log stream {streams!r}: use stdout, stderr or combined") from None
    for role in request["roles"]:
        if role["name"] == role_name:
            if not isinstance(k, int) or not 0 <= k < len(role["replicas"]):
                raise ValueError(
                    f"role {role_name!r} of {app_id} has replicas 0..{len(role['replicas']) - 1}, not {k!r}"
                )
            path = os.path.join(role["replicas"][k]["dir"], FILES[STREAM_CODE[stream]])
            if not os.path.exists(path):
                check_logs_exist(apps_dir, app_id, request, role_name, k, path)
            return path, stream
    names = ", ".join(r["name"] for r in request["roles"])
    raise ValueError(f"app {app_id} has no role {role_name!r} (roles: {names})")


def check_logs_exist(apps_dir: str, app_id: str, request: Dict[str, Any], role_name: str, k: int, path: str) -> None:
    """Raise FileNotFoundError if the log file ``path`` of a replica is gone: the app's
    log directory was deleted, or the replica ran (it has attempts) and its file is
    missing. A replica that has not started yet has no files and is not an error."""
    log_dir = request["log_dir"]
    if not os.path.isdir(log_dir):
        raise FileNotFoundError(
            f"the logs of {app_id} are gone: {log_dir} does not exist (deleted by hand or by a cleaner of "
            "the temporary directory?)"
        )
    state = _store.read_json(os.path.join(apps_dir, app_id, _store.STATE)) or {}
    if os.path.exists(path):  # created since it was looked for: the supervisor opens a
        return  # replica's files just before it records the replica's first attempt
    for role in state.get("roles") or []:
        if role.get("name") == role_name:
            for r in role.get("replicas", []):
                if r.get("id") == k and r.get("attempts"):
                    raise FileNotFoundError(f"the log of {role_name}/{k} of {app_id} is gone: {path} does not exist")


def epoch(value: Any) -> Optional[float]:
    """``since``/``until`` as seconds since the epoch (a datetime, naive in local time, or
    a number); None stays None. Raises TypeError for anything else."""
    if value is None:
        return None
    import datetime as _dt  # only for a time window

    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"since/until must be datetimes or seconds since the epoch, got {value!r}")
