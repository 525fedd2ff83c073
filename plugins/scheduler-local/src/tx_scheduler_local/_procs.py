"""Process helpers: identity (pid + start time), liveness, descendants, subreaper, killing,
the open-files limit.

Standard library only (the supervisor imports it). Linux uses ``/proc``; elsewhere the
helpers fall back to ``os.kill(pid, 0)`` and know no descendants.
"""
from __future__ import annotations

import os
import signal
from typing import Dict, Iterable, List, Optional, Tuple

_PR_SET_NAME = 15
_PR_SET_CHILD_SUBREAPER = 36


def _stat(pid: int) -> Optional[Tuple[str, int, int]]:
    """``(state, ppid, start time in clock ticks)`` of ``pid`` from /proc, None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name may hold spaces and parentheses: fields start after the last ')'
    rest = data[data.rfind(b")") + 2 :].split()
    return rest[0].decode(), int(rest[1]), int(rest[19])


def start_time(pid: int) -> Optional[int]:
    """Start time of ``pid`` (clock ticks after boot, from /proc), None if unknown."""
    st = _stat(pid)
    return st[2] if st else None


def is_alive(pid: Optional[int], start: Optional[int] = None) -> bool:
    """True if ``pid`` runs and (when ``start`` is given) is the process that started at
    ``start`` (so a reused pid is not mistaken for it). Zombies count as dead."""
    if not pid:
        return False
    if os.path.isdir("/proc/self"):
        st = _stat(pid)
        if st is None or st[0] in ("Z", "X"):
            return False
        return start is None or st[2] == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_process(pid: int, start: Optional[int], sig: int) -> bool:
    """Send ``sig`` to ``pid`` if it is still the process that started at ``start``;
    uses a pidfd where available so that a pid reused in between is never signalled.
    Returns True if the signal was sent."""
    pidfd = -1
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return False
    try:
        if not is_alive(pid, start):
            return False
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def killpg(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``; a group that no longer exists is ignored."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill(pid: int, sig: int) -> None:
    """Send ``sig`` to ``pid``; a process that no longer exists is ignored."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _all_pids() -> List[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except FileNotFoundError:
        return []


def descendants(root: int) -> List[int]:
    """Live descendants of ``root`` (children first), from a scan of /proc."""
    children: Dict[int, List[int]] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            children.setdefault(st[1], []).append(pid)
    out: List[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def environ_matches(pid: int, needles: Iterable[bytes]) -> bool:
    """True if every ``KEY=value`` in ``needles`` is in the environment of ``pid``."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = set(f.read().split(b"\0"))
    except OSError:
        return False
    return all(n in env for n in needles)


def pids_with_env(needles: Iterable[bytes]) -> List[int]:
    """Live processes of this user whose environment holds every ``KEY=value`` of
    ``needles`` (every process a replica starts inherits ``TX_APP_ID`` and friends)."""
    want = list(needles)
    me = os.getpid()
    return [p for p in _all_pids() if p != me and environ_matches(p, want)]


def _prctl(option: int, arg: object) -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_child_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux
    ``PR_SET_CHILD_SUBREAPER``), so that processes that leave their process group or
    session (``setsid``, double forks) stay findable and killable. False elsewhere."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def set_process_name(name: str) -> None:
    """Set this process's name as ``ps`` and ``top`` show it (Linux, 15 bytes at most)."""
    _prctl(_PR_SET_NAME, name.encode()[:15])


def check_fd_limit(replicas: int) -> None:
    """Raise ValueError if the supervisor of an app of ``replicas`` replicas could not open
    its files (6 per replica, see :func:`tx_scheduler_local._replica.raise_fd_limit`): the
    hard limit of open files is below what it needs."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 6 * replicas + 24  # its own: std streams, epoll, wake pipe, state and lock files
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise ValueError(
            f"too many open files: ulimit -n is {soft} (at most {hard}); the supervisor of {replicas} "
            f"replica(s) needs {needed}: raise it (ulimit -n {needed}) or run fewer replicas"
        )
