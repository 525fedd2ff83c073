"""Starting an app's supervisor as a detached process (own session, not our child).

Two ways, same result:

* ``fork``: fork the launching process twice (the middle process calls ``setsid`` and
  exits at once, so the supervisor is re-parented away from us). No interpreter start-up,
  nothing imported: the fast path. Only safe in a single-threaded process.
* ``exec``: ``posix_spawn`` a fresh interpreter running ``tx_scheduler_local._supervise``,
  which forks once to leave us. Costs an interpreter start (~15-30 ms); works anywhere.

``auto`` forks when this process has one thread (counted in /proc/self/task, so threads
started by C libraries count too) and execs otherwise.

The supervisor acknowledges through a pipe once it has written its first ``state.json``;
:func:`start_supervisor` returns its pid, or raises with the supervisor's own log if it
could not start.
"""
from __future__ import annotations

import fcntl
import gc
import os
import select
import signal
import sys
import time
import traceback
from typing import Any, Dict

from tx_scheduler_local import _store
from tx_scheduler_local._supervise import supervise  # loaded here: a forked child needs no import

METHODS = ("auto", "fork", "exec")
_ACK_TIMEOUT_S = 60.0


class SupervisorStartError(RuntimeError):
    """The supervisor of an app could not start; the message holds its log."""


def single_threaded() -> bool:
    """True if this process runs exactly one thread (Linux: /proc/self/task; False where
    that cannot be known)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: threads started by C libraries cannot be seen, so exec
        return False


def start_supervisor(request: Dict[str, Any], app_dir: str, method: str = "auto") -> int:
    """Start the supervisor of the app whose registry directory is ``app_dir`` (holding
    ``request.json``); return its pid once it is running.

    Args:
        request: the JSON form of the request (handed over in memory when forking).
        method: ``auto``, ``fork`` or ``exec`` (see the module docstring).

    Raises:
        SupervisorStartError: it did not start (or acknowledge within 60 s).
    """
    if method not in METHODS:
        raise ValueError(f"supervisor start method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "auto":
        method = "fork" if single_threaded() else "exec"
    rd, wr = os.pipe()
    wr_high = fcntl.fcntl(wr, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(wr)
    try:
        middle = _fork(request, app_dir, rd, wr_high) if method == "fork" else _exec(app_dir, wr_high)
    finally:
        os.close(wr_high)
    try:
        ack = _read_ack(rd)
    finally:
        os.close(rd)
        try:
            os.waitpid(middle, 0)
        except ChildProcessError:  # SIGCHLD ignored here: the kernel reaped it
            pass
    if not ack.startswith("ok "):
        log = _log_tail(app_dir)
        raise SupervisorStartError(
            f"the supervisor of app {request['app_id']} did not start ({method}): "
            f"{ack.strip() or 'no acknowledgement'}" + (f"\n{log}" if log else "")
        )
    return int(ack.split()[1])


def _read_ack(fd: int) -> str:
    deadline = time.monotonic() + _ACK_TIMEOUT_S
    data = b""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while time.monotonic() < deadline:
        if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        if data.endswith(b"\n"):
            break
    return data.decode("utf-8", "replace")


def _log_tail(app_dir: str) -> str:
    try:
        with open(os.path.join(app_dir, _store.SUPERVISOR_LOG), "r", errors="replace") as f:
            return "".join(f.readlines()[-20:]).rstrip()
    except OSError:
        return ""


def _open_log(app_dir: str) -> int:
    return os.open(
        os.path.join(app_dir, _store.SUPERVISOR_LOG),
        os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644,
    )


def _exec(app_dir: str, ack_fd: int) -> int:
    log_fd = _open_log(app_dir)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); "
        "from tx_scheduler_local._supervise import _entry; _entry(sys.argv[1:])"
    )
    try:
        return os.posix_spawn(
            sys.executable,
            [sys.executable, "-c", code, pkg_parent, app_dir, "3"],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, devnull, 0),
                (os.POSIX_SPAWN_DUP2, log_fd, 1),
                (os.POSIX_SPAWN_DUP2, log_fd, 2),
                (os.POSIX_SPAWN_DUP2, ack_fd, 3),
            ],
            setsid=True,
            setsigdef=_default_signals(),
            setsigmask=(),
        )
    finally:
        os.close(log_fd)
        os.close(devnull)


def _default_signals() -> set:
    return {s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP) and s < 32}


def _fork(request: Dict[str, Any], app_dir: str, rd: int, ack_fd: int) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        _become_supervisor(app_dir, ack_fd)
        code = supervise(request, app_dir, 3)
    except BaseException:  # noqa: BLE001 - the child must never return into the caller
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)
    return 0  # unreachable


#: in a forked supervisor: the launching process's sys.stdin / stdout / stderr, kept alive
_PARENT_STREAMS: list = []


def _become_supervisor(app_dir: str, ack_fd: int) -> None:
    """In the forked child: keep nothing of the launching process but the ack pipe (as fd
    3) and our own stdio (/dev/null in, supervisor.log out), drop its signal handlers."""
    gc.freeze()  # the parent's objects are never collected here (their fds are closed)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    signal.set_wakeup_fd(-1)
    faulthandler = sys.modules.get("faulthandler")
    if faulthandler is not None:  # it holds a descriptor of the parent's (closed below)
        faulthandler.cancel_dump_traceback_later()
        faulthandler.disable()
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if signal.getsignal(sig) not in (signal.SIG_DFL, None):
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            pass
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    log_fd = _open_log(app_dir)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.dup2(ack_fd, 3, inheritable=False)
    os.closerange(4, _max_fd())
    # The caller's own streams (sys.stdout made a file of its own, on fd 3 say) must never be
    # freed here: freeing one closes its descriptor, by now the ack pipe or another of ours.
    _PARENT_STREAMS.extend((sys.stdin, sys.stdout, sys.stderr))
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = sys.stderr = open(2, "w", buffering=1, closefd=False)
    if faulthandler is not None:
        faulthandler.enable(file=sys.stderr)
    os.umask(0o022)


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 65536
