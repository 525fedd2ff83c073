"""The process side of one replica: runs the role's command and keeps its output.

:class:`ReplicaProcess` is plain Python (tested without Ray); :func:`actor_class` wraps it
into a threaded Ray actor so that ``stop`` can run while ``wait`` blocks.
"""
from __future__ import annotations

import os
import signal
import socket
import string
import subprocess
import threading
import time
from typing import IO, Any, Dict, List, Mapping, Optional

from . import STREAMS

#: bytes a partial line may reach before it is written to ``combined`` without its end
_PARTIAL_LIMIT = 1 << 20
_TAIL_BYTES = 8192
#: bytes of the end of a replica's stderr (this attempt's) kept for why it failed
#: (``cause_tail``, read by tx.schedulers.why in the scheduler): torchrun prints its report
#: after the failed worker's traceback
CAUSE_TAIL_BYTES = 128 << 10


def substitute(text: str, values: Mapping[str, str]) -> str:
    """tx's macros (``${app_id}``, ``${replica_id}``, ``${img_root}``, ``${rank0_env}``) in
    ``text``; unknown ``$names`` stay as written, ``$$`` is ``$`` (``string.Template``)."""
    return string.Template(text).safe_substitute(values) if "$" in text else text


class _Pump(threading.Thread):
    """Copies one pipe to its stream file as it comes, and whole lines to ``combined``."""

    def __init__(self, fd: int, out: IO[bytes], combined: IO[bytes], lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.fd, self.out, self.combined, self.lock = fd, out, combined, lock

    def run(self) -> None:
        partial = b""
        try:
            while True:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                self.out.write(chunk)
                self.out.flush()
                data = partial + chunk
                cut = data.rfind(b"\n") + 1
                if cut == 0 and len(data) < _PARTIAL_LIMIT:
                    partial = data
                    continue
                if cut == 0:
                    cut = len(data)
                whole, partial = data[:cut], data[cut:]
                with self.lock:
                    self.combined.write(whole)
                    self.combined.flush()
        except OSError:
            pass  # the descriptor was closed by stop(): a child kept the pipe open
        finally:
            if partial:  # ended within a line: end it in combined, so the other stream's next line stays whole
                with self.lock:
                    self.combined.write(partial + b"\n")
                    self.combined.flush()
            try:
                os.close(self.fd)
            except OSError:
                pass


class ReplicaProcess:
    """Runs one replica's command as a child process in its own process group, with
    stdout and stderr written to ``<logs_dir>/<log_names[stream]>`` (appended).

    Args:
        logs_dir: the node's Ray log directory.
        log_names: stream (``stdout``, ``stderr``, ``combined``) -> path relative to it.
    """

    def __init__(self, logs_dir: str, log_names: Mapping[str, str]) -> None:
        self.logs_dir = logs_dir
        self.paths = {s: os.path.join(logs_dir, log_names[s]) for s in STREAMS}
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.watchdog: Optional[subprocess.Popen[bytes]] = None
        self.pumps: List[_Pump] = []
        self.files: List[IO[bytes]] = []
        self.result: Optional[Dict[str, Any]] = None
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.stopping = False
        self.stderr_start = 0
        for path in self.paths.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "ab").close()  # exists from the start: readers never see "not found"

    def start(self, argv: List[str], env: Dict[str, str], cwd: str) -> Dict[str, Any]:
        """Start the command; returns ``{"pid": int, "started": epoch seconds}``.

        Raises:
            OSError: the program cannot be started (not found, not executable).
        """
        self.done.clear()
        self.result = None
        self.stopping = False
        self.stderr_start = _size(self.paths["stderr"])  # the streams are appended across attempts
        files = {s: open(p, "ab", buffering=0) for s, p in self.paths.items()}
        self.files = list(files.values())
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, cwd=cwd, env=env,
                start_new_session=True,
            )
        except BaseException:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            for f in self.files:
                f.close()
            raise
        os.close(out_w)
        os.close(err_w)
        # if this actor's process ends without stopping the replica (Ray stopped or lost it:
        # ray stop, ray.kill, SIGKILL, its node removed), the watchdog warns the replica's
        # process group within a second (TX_PREEMPT_SIGNAL, default SIGTERM: the job's
        # tx.distributed.preempted()) and SIGKILLs it TX_PREEMPT_GRACE seconds later
        # It holds the output pipes' read ends too, and copies what the replica writes after
        # the actor is gone to its files: a job's print while it saves must not fail (EPIPE)
        self.watchdog = subprocess.Popen(
            ["sh", "-c", WATCHDOG, "tx-watchdog", str(os.getpid()), str(self.proc.pid),
             str(_grace(env)), _signal_name(env), self.paths["stdout"], self.paths["stderr"],
             self.paths["combined"]],
            stdin=out_r, stdout=subprocess.DEVNULL, stderr=err_r,  # the read ends, as fds 0 and 2 (sh: one digit)
            start_new_session=True,
        )
        # the pumps after the watchdog: a pump closes its read end at the replica's end, and
        # a closed fd given to Popen (or its number reused by Popen's own pipe) hung it
        lock = threading.Lock()
        self.pumps = [_Pump(out_r, files["stdout"], files["combined"], lock),
                      _Pump(err_r, files["stderr"], files["combined"], lock)]
        for p in self.pumps:
            p.start()
        return {"pid": self.proc.pid, "started": time.time()}

    def _finish(self, rc: int) -> Dict[str, Any]:
        with self.lock:
            if self.result is not None:
                return self.result
            assert self.proc is not None
            _killpg(self.proc.pid, signal.SIGKILL)  # what the command left behind in its group
            for p in self.pumps:
                p.join(5.0)
            for p in self.pumps:
                if p.is_alive():  # a process outside the group holds the pipe open
                    try:
                        os.close(p.fd)
                    except OSError:
                        pass
                    p.join(2.0)
            for f in self.files:
                f.close()
            if self.watchdog is not None and self.watchdog.poll() is None:
                self.watchdog.kill()
                self.watchdog.wait()
            self.result = {
                "exit_code": rc,
                "ended": time.time(),
                "sizes": {s: _size(p) for s, p in self.paths.items()},
                "stderr_tail": _tail(self.paths["stderr"]),
                "cause_tail": _end(self.paths["stderr"], self.stderr_start, CAUSE_TAIL_BYTES),
                "stopped": self.stopping,
            }
            self.done.set()
            return self.result

    def wait(self) -> Dict[str, Any]:
        """Block until the command exits; returns ``{"exit_code": int (negative: signal),
        "ended": epoch s, "sizes": {stream: bytes}, "stderr_tail": str (its last 10 lines),
        "cause_tail": str (the end of this attempt's stderr), "stopped": bool}``."""
        assert self.proc is not None
        rc = self.proc.wait()
        return self._finish(rc)

    def stop(self, grace: float) -> Dict[str, Any]:
        """SIGTERM the replica's process group, SIGKILL it after ``grace`` seconds; returns
        what :meth:`wait` returns."""
        if self.proc is None:
            return {"exit_code": None, "ended": time.time(), "sizes": {}, "stderr_tail": "", "cause_tail": "",
                    "stopped": True}
        self.stopping = True
        if self.proc.poll() is None:
            _killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                _killpg(self.proc.pid, signal.SIGKILL)
        rc = self.proc.wait()
        return self._finish(rc)


#: the watchdog (sh; no ``--`` after kill's signal: dash, Debian's sh, takes it for a pid):
#: $1 the actor's pid, $2 the replica's process group, $3 the grace (s), $4 the warning signal's name, $5 $6 $7 the stdout, stderr and combined files; its stdin
#: and stderr are the read ends of the replica's stdout and stderr pipes
WATCHDOG = ('exec 3<&0 4<&2 0</dev/null 2>/dev/null; while kill -0 "$1"; do sleep 1; done; '
            'kill -0 "-$2" || exit 0; '
            '(tee -a "$5" <&3 >>"$7" &); (tee -a "$6" <&4 >>"$7" &); exec 3<&- 4<&-; '
            'kill -"$4" "-$2" || exit 0; '
            'n=0; while [ "$n" -lt "$3" ] && kill -0 "-$2"; do sleep 1; n=$((n+1)); done; kill -KILL "-$2"')


def _grace(env: Mapping[str, str]) -> int:
    """The replica's ``TX_PREEMPT_GRACE`` in whole seconds (rounded up; 0 where unset or bad)."""
    try:
        return max(0, int(-(-float(env.get("TX_PREEMPT_GRACE", "0")) // 1)))
    except (ValueError, OverflowError):
        return 0


def _signal_name(env: Mapping[str, str]) -> str:
    """The replica's warning signal for ``kill -SIG``: its ``TX_PREEMPT_SIGNAL`` (a name or
    a number), else ``TERM``."""
    raw = env.get("TX_PREEMPT_SIGNAL", "").strip().upper()
    try:
        sig = signal.Signals(int(raw)) if raw.isdigit() else signal.Signals[raw if raw.startswith("SIG") else "SIG" + raw]
    except (KeyError, ValueError):
        sig = signal.SIGTERM
    return sig.name[3:]


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _end(path: str, start: int, size: int) -> str:
    """The last ``size`` bytes of a file from offset ``start`` on, decoded ("" when it
    cannot be read)."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(start, end - size))
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return ""


def _tail(path: str, lines: int = 10) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, _size(path) - _TAIL_BYTES))
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return "\n".join([ln for ln in text.splitlines() if ln.strip()][-lines:])


def free_port() -> int:
    """A TCP port that was free on this node a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def logs_dir() -> str:
    """This node's Ray log directory (served by the dashboard's log API).

    Ray has no public call for it; ``ray._private.worker._global_node`` is the node this
    worker belongs to (Ray 2.9 to 2.60 at least)."""
    import ray

    node = ray._private.worker._global_node  # noqa: SLF001 - no public equivalent
    return str(node.get_logs_dir_path())


class ReplicaActor:
    """The body of the per-replica Ray actor (see :func:`actor_class`)."""

    def __init__(self, log_names: Mapping[str, str]) -> None:
        self.logs_dir = logs_dir()
        self.rp = ReplicaProcess(self.logs_dir, log_names)

    def info(self) -> Dict[str, Any]:
        """Where this replica runs: node id and address, host name, working directory."""
        import ray

        ctx = ray.get_runtime_context()
        return {
            "node_id": ctx.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(),
            "cwd": os.getcwd(),
            "actor_pid": os.getpid(),
        }

    def free_port(self) -> int:
        return free_port()

    def start(self, argv: List[str], env_add: Dict[str, str], drop: List[str], macro_values: Dict[str, str]) -> Dict[str, Any]:
        """Substitute macros (``img_root`` is this actor's working directory), build the
        environment (the actor's, minus ``drop``, plus ``env_add``) and start the command."""
        values = {**macro_values, "img_root": os.getcwd()}
        argv = [substitute(a, values) for a in argv]
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env.update({k: substitute(v, values) for k, v in env_add.items()})
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            return self.rp.start(argv, env, os.getcwd())
        except OSError as e:
            return {"error": f"cannot run {argv[0]!r}: {e.strerror or e}"}

    def wait(self) -> Dict[str, Any]:
        return self.rp.wait()

    def stop(self, grace: float) -> Dict[str, Any]:
        return self.rp.stop(grace)


def actor_class() -> Any:
    """:class:`ReplicaActor` as a threaded Ray actor class (``stop`` runs beside ``wait``)."""
    import ray

    return ray.remote(max_concurrency=4)(ReplicaActor)
