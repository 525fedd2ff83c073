"""Waiting for changes without polling: inotify (through ctypes) and pidfds, Linux.

:class:`Notifier` wakes a waiter when a watched file or directory changes or a watched
process exits. Where inotify is not available it falls back to short sleeps that grow
from 1 ms to 100 ms while nothing changes (:meth:`Notifier.reset` after progress).

Closing an inotify descriptor waits for an RCU grace period (~10 ms): closed notifiers
remove their watches and return the descriptor to a pool that later notifiers reuse.
"""
from __future__ import annotations

import os
import select
import threading
import time
from typing import List, Optional

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000

_libc = None
_pool: List[int] = []
_pool_lock = threading.Lock()


def _load_libc():  # type: ignore[no-untyped-def]
    global _libc
    if _libc is None:
        import ctypes

        lib = ctypes.CDLL(None, use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        _libc = lib
    return _libc


def _acquire() -> int:
    with _pool_lock:
        if _pool:
            fd = _pool.pop()
            _drain(fd)
            return fd
    try:
        fd = _load_libc().inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    except (OSError, AttributeError):
        return -1
    return fd if fd >= 0 else -1


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except BlockingIOError:
        pass


class Notifier:
    """Waits until a watched path changes or a watched process exits.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self) -> None:
        self._pidfds: List[int] = []
        #: how many watched processes were seen to exit (a follower looks at the app again then)
        self.exited = 0
        self._wds: List[int] = []
        self._backoff = 0.001
        self.fd = _acquire()

    @property
    def available(self) -> bool:
        """True if changes are notified by the kernel (else :meth:`wait` sleeps)."""
        return self.fd >= 0

    def watch(self, path: str, mask: int = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) -> bool:
        """Watch ``path`` (a file or a directory); False if it cannot be watched."""
        if self.fd < 0:
            return False
        wd = _load_libc().inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            return False
        self._wds.append(wd)
        return True

    def watch_process(self, pid: int) -> bool:
        """Wake up when process ``pid`` exits (a pidfd); False if it cannot be watched."""
        if not hasattr(os, "pidfd_open"):
            return False
        try:
            self._pidfds.append(os.pidfd_open(pid))
        except OSError:
            return False
        return True

    def wait(self, timeout: Optional[float]) -> bool:
        """Block until something watched changes or ``timeout`` seconds pass (None: no
        limit). Returns True if woken by a change."""
        if self.fd < 0:
            delay = self._backoff if timeout is None else min(self._backoff, timeout)
            self._backoff = min(self._backoff * 2, 0.1)
            if not self._pidfds:
                time.sleep(delay)
                return False
            ready = self._poll(self._pidfds, delay)
            self._forget(ready)
            return bool(ready)
        ready = self._poll([self.fd] + self._pidfds, timeout)
        if self.fd in ready:
            _drain(self.fd)
        self._forget(ready)
        return bool(ready)

    def _forget(self, ready: List[int]) -> None:
        """Close the pidfds in ``ready``: their process exited, which wakes a waiter once
        (a pidfd stays readable, and would wake every later wait at once)."""
        for fd in ready:
            if fd in self._pidfds:
                self._pidfds.remove(fd)
                os.close(fd)
                self.exited += 1

    @staticmethod
    def _poll(fds: List[int], timeout: Optional[float]) -> List[int]:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        return [fd for fd, _ in poller.poll(None if timeout is None else max(0.0, timeout) * 1000)]

    def reset(self) -> None:
        """Progress was made: the next fallback sleep starts short again."""
        self._backoff = 0.001

    def close(self) -> None:
        """Stop watching; the inotify descriptor goes back to the pool."""
        for fd in self._pidfds:
            os.close(fd)
        if self.fd >= 0:
            lib = _load_libc()
            for wd in set(self._wds):
                lib.inotify_rm_watch(self.fd, wd)
            with _pool_lock:
                _pool.append(self.fd)
        self._pidfds, self._wds, self.fd = [], [], -1

    def __enter__(self) -> "Notifier":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
