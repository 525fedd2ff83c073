"""The supervisor's model of roles and replicas, and how a replica process is started.
Standard library only."""
from __future__ import annotations

import fcntl
import os
import signal
from typing import Any, Dict, List, Optional, Tuple

from tx_scheduler_local._relay import ReplicaLogs

_PIPE_SIZE = 1 << 18
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return "signal"


def exit_reason(code: int) -> str:
    """``exited with code 3``, ``was killed by signal SIGKILL (9)``, or for a shell's
    ``128+n`` status ``exited with code 139 (128+11: a process it ran was killed by SIGSEGV)``."""
    if code >= 0:
        if 128 < code < 128 + 65:
            return f"exited with code {code} (128+{code - 128}: a process it ran was killed by {_signal_name(code - 128)})"
        return f"exited with code {code}"
    return f"was killed by signal {_signal_name(-code)} ({-code})"


def killed_by_sigkill(code: int) -> bool:
    """Whether exit status ``code`` (negative: the signal) is SIGKILL's, directly or as a
    shell's ``128+9``: what the kernel's OOM killer leaves."""
    return code in (-signal.SIGKILL, 128 + signal.SIGKILL)


def oom_reason(code: int, limit_mb: Optional[int]) -> str:
    """:func:`exit_reason` of a replica the kernel's OOM killer killed (``code`` is SIGKILL's),
    with its memory cgroup's limit (MB) where it has one."""
    limit = f"; its memory cgroup's limit is {limit_mb} MB" if limit_mb else ""
    if code < 0:
        return f"was killed by the kernel's OOM killer (SIGKILL{limit})"
    return f"exited with code {code} (128+9: a process it ran was killed by the kernel's OOM killer{limit})"


def _error_file_line(replica_dir: str) -> str:
    """The TorchElastic error file's message and where it was raised, as one line
    (``RuntimeError: boom (train.py:42)``); its raw first line if it is not the JSON
    TorchElastic writes; ``""`` without one."""
    import json
    import re

    text = error_file(replica_dir).strip()
    if not text:
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:300]
    msg = data.get("message") if isinstance(data, dict) else None
    where = ""
    if isinstance(msg, dict):
        stack = (msg.get("extraInfo") or {}).get("py_callstack") or ""
        frames = re.findall(r'File "([^"]+)", line (\d+)', str(stack))
        if frames:
            where = f" ({os.path.basename(frames[-1][0])}:{frames[-1][1]})"
        msg = msg.get("message")
    first = str(msg).strip().splitlines()[0] if msg else text.splitlines()[0]
    return first[:300] + where


def failure_line(name: str, why: str, code: int, replica_dir: str, stderr_tail: str,
                 oom: Optional[bool] = None) -> str:
    """Why replica ``name`` (``role/k``) failed, in one line a user can act on: ``why``
    (its exit code or signal by name, :func:`exit_reason` or :func:`oom_reason`), then the
    TorchElastic error file's message and location when it wrote one (TorchX sets
    ``TORCHELASTIC_ERROR_FILE``), else its last stderr line. ``oom``: whether the kernel's
    OOM killer killed it (its memory cgroup's counter, :mod:`tx_scheduler_local._memory`);
    where that is unknown (None) a SIGKILL gets a hint that it may have."""
    head = f"replica {name} {why}"
    if oom is None and killed_by_sigkill(code):
        head += " (SIGKILL is also what the kernel's OOM killer sends: check the replica's memory)"
    detail = _error_file_line(replica_dir)
    if not detail:
        lines = [ln.strip() for ln in stderr_tail.splitlines() if ln.strip()]
        detail = lines[-1][:300] if lines else ""
    return f"{head}: {detail}" if detail else head


class Role:
    """A role of the request: where and what its replicas run, its retries so far."""

    __slots__ = ("name", "cwd", "entrypoint", "max_retries", "policy", "retries", "replicas")

    def __init__(self, spec: Dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.cwd: str = spec["cwd"]
        self.entrypoint: str = spec["entrypoint"]
        self.max_retries: int = spec["max_retries"]
        self.policy: str = spec["retry_policy"]
        self.retries = 0
        self.replicas: List[Replica] = [Replica(self, r) for r in spec["replicas"]]


class Replica:
    """One replica: its spec, log files, current process, state and attempts. A stopped
    replica has ``stop_reason`` "cancel", "failed" (another replica failed the app) or
    "restart", and ``stop_deadline``: when SIGKILL follows SIGTERM (monotonic seconds)."""

    __slots__ = (
        "role", "id", "argv", "env", "dir", "logs", "pid", "state", "exit_code", "error",
        "reason", "attempts", "pipes", "stop_reason", "stop_deadline", "oom_base", "cause", "history_entry",
    )

    def __init__(self, role: Role, spec: Dict[str, Any]) -> None:
        self.role = role
        self.id: int = spec["id"]
        self.argv: List[str] = spec["argv"]
        self.env: Dict[str, str] = spec["env"]
        self.dir: str = spec["dir"]
        self.logs: Optional[ReplicaLogs] = None
        self.pid: Optional[int] = None
        self.state = "PENDING"
        self.exit_code: Optional[int] = None
        self.error = ""
        self.reason = ""
        self.attempts: List[Dict[str, Any]] = []
        self.pipes: Dict[int, int] = {}  # read fd -> stream
        self.stop_reason: Optional[str] = None  # "cancel", "failed" (app), "restart"
        self.stop_deadline: Optional[float] = None
        self.oom_base: Optional[int] = None  # OOM kills of its memory cgroup when it started
        #: why its last attempt failed, recorded once its output is complete (the fields of a
        #: tx.specs.RootCause; None: nothing beyond the exit status); False: not recorded
        self.cause: Any = False
        #: the ``history`` entry of a failure that is being restarted, until its cause is recorded
        self.history_entry: Optional[Dict[str, Any]] = None

    @property
    def name(self) -> str:
        """``role/k``, as messages name the replica."""
        return f"{self.role.name}/{self.id}"

    def to_json(self) -> Dict[str, Any]:
        """The replica's entry in state.json."""
        out = {
            "id": self.id, "state": self.state, "pid": self.pid, "exit_code": self.exit_code,
            "error": self.error, "reason": self.reason, "attempts": self.attempts,
        }
        if self.cause is not False:
            out["cause"] = self.cause
        return out


class Spawner:
    """Starts replica processes with ``os.posix_spawn``: a new session (so a process group
    of its own), stdin from /dev/null, stdout and stderr into new pipes, default signal
    dispositions, an empty signal mask, in the given working directory."""

    def __init__(self) -> None:
        self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        # children start with default dispositions (Python ignores SIGPIPE, we ignore SIGHUP)
        self._sigdef = {s for s in signal.valid_signals() if s < 32 and s not in (signal.SIGKILL, signal.SIGSTOP)}
        self._cwd: Optional[str] = None

    def spawn(self, cwd: str, path: str, argv: List[str], env: Dict[str, str]) -> Tuple[int, int, int]:
        """Start ``path`` with ``argv`` and ``env`` in ``cwd``; returns ``(pid, stdout read
        fd, stderr read fd)``, the read ends non-blocking.

        Raises:
            OSError: the directory, the program or its interpreter cannot be used, or no
                pipe can be made (nothing is left open).
        """
        fds: List[int] = []
        try:
            for _ in range(2):
                rd, wr = os.pipe()
                fds += [rd, wr]
                try:
                    fcntl.fcntl(wr, _F_SETPIPE_SZ, _PIPE_SIZE)
                except OSError:
                    pass
            if self._cwd != cwd:
                self._cwd = None
                os.chdir(cwd)
                self._cwd = cwd
            pid = os.posix_spawn(
                path, argv, env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, self._devnull, 0),
                    (os.POSIX_SPAWN_DUP2, fds[1], 1),
                    (os.POSIX_SPAWN_DUP2, fds[3], 2),
                ],
                setsid=True, setsigdef=self._sigdef, setsigmask=(),
            )
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        os.close(fds[1])
        os.close(fds[3])
        os.set_blocking(fds[0], False)
        os.set_blocking(fds[2], False)
        return pid, fds[0], fds[2]

    @property
    def in_cwd(self) -> Optional[str]:
        """The directory the last spawn ran in (None if changing to it failed)."""
        return self._cwd


def set_aside_error_file(replica_dir: str, attempt: int) -> None:
    """Rename an earlier attempt's error.json to error.<attempt>.json."""
    try:
        os.replace(os.path.join(replica_dir, "error.json"), os.path.join(replica_dir, f"error.{attempt}.json"))
    except OSError:
        pass


def error_file(replica_dir: str) -> str:
    """The torchelastic error file of a replica (``TORCHELASTIC_ERROR_FILE``), if written."""
    try:
        with open(os.path.join(replica_dir, "error.json"), "r", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def os_error_text(e: OSError) -> str:
    """What an OSError means for a user: the open-file limits named ("too many open files:
    ulimit -n is 1024"), else its strerror."""
    import errno

    if e.errno == errno.EMFILE:
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            return f"too many open files: ulimit -n is {soft}"
        except (ImportError, OSError, ValueError):
            return "too many open files (ulimit -n)"
    if e.errno == errno.ENFILE:
        return "too many open files in the system (sysctl fs.file-max)"
    return str(e.strerror or e)


def raise_fd_limit(needed: int) -> None:
    """Raise the soft limit of open files to ``needed`` (at most the hard limit): the
    supervisor holds 6 descriptors per replica (4 log files, 2 pipes)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < needed:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else min(hard, needed), hard))
    except (ImportError, ValueError, OSError):
        pass
