"""Helpers for tests that run against a real backend the test session starts itself.

The pattern every scheduler and tracker plugin of this repository follows:

* The backend is started by a **session-scoped fixture** of the plugin's ``conftest.py``
  in a private configuration: its own free ports on 127.0.0.1 (:func:`free_port`), its own
  state, config and temp directories (under pytest's ``tmp_path_factory``), never a
  user's cluster, server or engine, and it is stopped at the end of the session (only
  what the fixture started: :class:`ServiceProcess` kills its own process group).
* A backend with a start and a stop script (``scripts/start-*.sh`` print ``export K=V``
  lines) is run by :func:`script_backend`; :func:`environ` points this process's clients
  at it for the session and restores the environment after.
* A session that is interrupted (Ctrl-C, SIGTERM, a timeout, even SIGKILL) still stops
  every backend it started: the repository's ``conftest.py`` loads ``tx.testing._reaper``,
  which marks every process of the session (``TX_TEST_SESSION``) and starts a reaper
  process that stops what is left once pytest is gone. :class:`ServiceProcess` records its
  process group there; a backend stopped by a command records it with :func:`record_stop`
  (:func:`script_backend` does).
* Where the machine cannot run the backend (a missing package or binary, no root), the
  fixture calls :func:`backend_unavailable` with the reason and the fix. That is a skip
  with the reason in pytest's summary, except when ``TX_TEST_REQUIRE_BACKENDS=1`` is set
  (``.ci/run`` sets it): then it is a failure, so CI always runs every backend for real.
* A test that needs an optional Python package (torch, jsonschema, ...) gets it with
  :func:`require_module` (not ``pytest.importorskip``, which skips even in CI): the same
  skip, or failure under ``TX_TEST_REQUIRE_BACKENDS=1``.

Example::
    @pytest.fixture(scope="session")
    def moto_endpoint(tmp_path_factory):
        exe = shutil.which("moto_server")
        if exe is None:
            backend_unavailable("moto", "moto_server not found: pip install 'moto[server]'")
        port, svc = ServiceProcess.start_listening(
            lambda port: [exe, "-H", "127.0.0.1", "-p", str(port)],
            log=tmp_path_factory.mktemp("moto") / "moto.log", what="moto_server")
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            svc.stop()
"""
from __future__ import annotations

import contextlib
import importlib
import os
import random
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, NoReturn, Optional, Sequence, Set, Tuple, Union

import pytest

from tx.testing import _reaper

__all__ = [
    "backend_unavailable", "backends_required", "container_output", "environ", "free_port", "port_open",
    "record_stop", "REQUIRE_BACKENDS_ENV", "require_module", "script_backend", "ServiceProcess", "UNAVAILABLE_ENV", "wait_for",
]

#: set to ``1`` to turn every :func:`backend_unavailable` skip into a failure (CI)
REQUIRE_BACKENDS_ENV = "TX_TEST_REQUIRE_BACKENDS"
#: a comma-separated list of backends this machine cannot run, named by whoever sets up the
#: machine (``.ci/run`` names ``unshare`` where the kernel refuses user namespaces): these skip,
#: saying so, even under ``TX_TEST_REQUIRE_BACKENDS=1``
UNAVAILABLE_ENV = "TX_TEST_UNAVAILABLE"


def backends_required() -> bool:
    """True when ``TX_TEST_REQUIRE_BACKENDS`` is set to a true value (``1``, ``true``, ``yes``)."""
    return os.environ.get(REQUIRE_BACKENDS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def backend_unavailable(backend: str, reason: str) -> NoReturn:
    """Skip the test because ``backend`` cannot run on this machine, saying why (``reason``
    should name the fix); with ``TX_TEST_REQUIRE_BACKENDS=1``, fail instead, unless
    ``TX_TEST_UNAVAILABLE`` names ``backend`` (the machine is known not to run it).

    Raises:
        pytest.skip.Exception or pytest.fail.Exception (always).
    """

    text = f"{backend} cannot run here: {reason}"
    declared = {b.strip() for b in os.environ.get(UNAVAILABLE_ENV, "").split(",") if b.strip()}
    if backend in declared:
        pytest.skip(f"{text} ({UNAVAILABLE_ENV} names {backend})")
    if backends_required():
        pytest.fail(f"{text} ({REQUIRE_BACKENDS_ENV}=1: every backend must run)", pytrace=False)
    pytest.skip(text)


def _missing(name: str, error: ImportError) -> bool:
    """True if ``error`` says that module ``name`` (or a package above it) is not installed,
    rather than that an installed module failed to import."""
    missing = getattr(error, "name", None)
    return isinstance(error, ModuleNotFoundError) and bool(missing) and (
        name == missing or name.startswith(f"{missing}.")
    )


def require_module(name: str, why: str) -> ModuleType:
    """Import and return module ``name``, which a test needs; where it is not installed,
    skip the test (or, called at module level, the module) saying ``why`` (what needs it
    and how to install it); with ``TX_TEST_REQUIRE_BACKENDS=1``, fail instead. The
    replacement of ``pytest.importorskip`` in this repository's tests::

        torch = require_module("torch", "the DDP job runs torchrun: pip install torch")

    Raises:
        pytest.skip.Exception or pytest.fail.Exception: ``name`` is not installed.
        ImportError: ``name`` is installed but importing it failed (a broken install is
            a failure, never a skip).
    """
    try:
        return importlib.import_module(name)
    except ImportError as e:
        if not _missing(name, e):
            raise
    text = f"module {name} is not installed: {why}"
    if backends_required():
        pytest.fail(f"{text} ({REQUIRE_BACKENDS_ENV}=1: every optional dependency must be installed)", pytrace=False)
    pytest.skip(text, allow_module_level=True)


#: the lowest port :func:`free_port` hands out
PORTS_FROM = 15000
_port_lock = threading.Lock()
_port_next: Dict[Tuple[int, int], int] = {}


def _ephemeral_from() -> int:
    """The first port of the OS's ephemeral range (Linux: ``ip_local_port_range``; 32768
    where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago, for a backend or a job to listen
    on later (int).

    Below the OS's ephemeral range (from :data:`PORTS_FROM`): the kernel gives ports of that
    range to every outgoing connection, and one of them took a rendezvous port chosen there
    before the job's torchrun bound it (the LSF column of a full run: EADDRINUSE). Each
    pytest-xdist worker takes its own slice of the range, in turn from a random start, so
    that two workers, or two calls of one, do not hand out the same port; the OS picks one
    where the range below the ephemeral ports is too small (under 1,000 a worker).
    """
    low, high = PORTS_FROM, _ephemeral_from()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = (high - low) // max(count, 1)
    if size < 1000 or index >= count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    start = low + index * size
    with _port_lock:
        offset = _port_next.get((start, size))
        if offset is None:
            offset = random.randrange(size)
        for _ in range(size):
            port, offset = start + offset, (offset + 1) % size
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _port_next[(start, size)] = offset
            return port
    raise OSError(f"no free port in {start}-{start + size - 1} on {host}")


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class ServiceProcess:
    """A backend process started in its own session (process group), with its output in
    a log file; :meth:`stop` ends that process group and nothing else."""

    def __init__(self, proc: "subprocess.Popen[bytes]", log: Path) -> None:
        self.proc = proc
        self.log = log
        self._clear_record = _reaper.record_group(proc.pid)

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        log: Union[str, Path],
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Union[str, Path]] = None,
    ) -> "ServiceProcess":
        """Start ``argv`` with stdout and stderr appended to ``log``; ``env`` replaces the
        environment (default: this process's).

        Raises:
            OSError: the program cannot be started.
        """
        log = Path(log)
        log.parent.mkdir(parents=True, exist_ok=True)
        token = _reaper.token()
        if env is not None and token is not None:  # the session's reaper finds it and its children
            env = {**env, _reaper.TOKEN_ENV: token}
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None, cwd=str(cwd) if cwd else None,
                start_new_session=True,
            )
        return cls(proc, log)

    @classmethod
    def start_listening(
        cls,
        argv_for: Callable[[int], Sequence[str]],
        log: Union[str, Path],
        what: str,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Union[str, Path]] = None,
        timeout: float = 60.0,
        attempts: int = 3,
    ) -> Tuple[int, "ServiceProcess"]:
        """Start a server on a free port of 127.0.0.1 and wait until *it* listens there:
        ``argv_for(port)`` is its command line. Returns (port, service).

        :func:`free_port`'s port is only free a moment ago: another process (a test on
        another xdist worker, a replica's rendezvous store) may take it before the server
        binds it, and then :func:`port_open` answers for the wrong process, whose reply to
        the first request is a reset. So this waits for a listening socket of this
        service's own session (:meth:`listens`), and where the server exited because the
        port was taken by another process, starts it again on another port (at most
        ``attempts`` times).

        Raises:
            RuntimeError: the server exited or did not listen within ``timeout`` seconds
                (with its log's last lines).
        """
        for attempt in range(1, attempts + 1):
            port = free_port()
            svc = cls.start(argv_for(port), log=log, env=env, cwd=cwd)
            try:
                wait_for(lambda: svc.listens(port), timeout=timeout, what=f"{what} to listen on {port}",
                         service=svc)
                return port, svc
            except RuntimeError:
                svc.stop()
                # taken by another process, so the server could not bind it: another port
                taken = port_open(port) or "in use" in svc.log_tail(5)
                if not taken or attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def listens(self, port: int) -> bool:
        """True when a process of this service's session listens on TCP ``port`` (any
        address), read from Linux's ``/proc/net/tcp{,6}`` and the processes' descriptors."""
        inodes = _listening_inodes(port)
        if not inodes:
            return False
        want = {f"socket:[{i}]" for i in inodes}
        for pid in _session_pids(self.proc.pid):
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in want:
                        return True
                except OSError:
                    continue
        return False

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the log, for error messages."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds; idempotent."""
        if self.proc.poll() is not None:
            self._clear_record()
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            self._clear_record()
            return
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=grace)
        self._clear_record()


def _listening_inodes(port: int) -> Set[str]:
    """The socket inodes listening on TCP ``port`` in this network namespace."""
    found: Set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()  # sl local_address rem_address st ... uid timeout inode
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                found.add(cols[9])
    return found


def _session_pids(sid: int) -> List[int]:
    """The processes whose session id is ``sid`` (a :class:`ServiceProcess` and its children)."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # state ppid pgrp session ...
        if len(fields) > 3 and int(fields[3]) == sid:
            pids.append(int(name))
    return pids


def wait_for(
    check: Callable[[], object],
    timeout: float,
    what: str,
    interval: float = 0.2,
    service: Optional[ServiceProcess] = None,
) -> object:
    """Call ``check`` until it returns a true value (returned) or ``timeout`` seconds pass.

    Raises:
        RuntimeError: timed out, or ``service`` exited first (with its log's last lines).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if service is not None and not service.alive():
            raise RuntimeError(f"{what}: the process exited ({service.proc.returncode}):\n{service.log_tail()}")
        if time.monotonic() >= deadline:
            tail = f":\n{service.log_tail()}" if service is not None else ""
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}{tail}")
        time.sleep(interval)


@contextlib.contextmanager
def environ(values: Mapping[str, str], unset: Iterable[str] = ()) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` and remove the names in ``unset`` for the ``with``
    block, then put back exactly what was there (also names that were absent): how a
    session fixture points this process's clients at its private backend."""
    names = set(values) | set(unset)
    saved = {k: os.environ.get(k) for k in names}
    for k in unset:
        os.environ.pop(k, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def script_backend(
    start: Sequence[str], stop: Sequence[str], env: Mapping[str, str], timeout: float = 300,
) -> Iterator[Dict[str, str]]:
    """Start a backend with a start script that prints ``export K=V ...`` lines on stdout
    (as the repository's ``scripts/start-*.sh`` do) and yield those variables; at the end of
    the block run the stop script with ``env`` plus them. A failed start runs the stop
    script too, so nothing half-started is left.

    Args:
        start: the start command (``["bash", "scripts/start-podman.sh"]``).
        stop: the stop command.
        env: the environment both run with (the backend's private directories and ports).
        timeout: seconds each script may take.

    Raises:
        RuntimeError: the start script exited non-zero or timed out (its stderr tail in the
            message).
    """
    try:
        p = subprocess.run(list(start), env=dict(env), capture_output=True, text=True, timeout=timeout)
        failed = f"exited with {p.returncode}:\n{p.stderr[-2000:]}" if p.returncode != 0 else ""
    except subprocess.TimeoutExpired as e:
        p, failed = None, f"did not finish within {timeout:g} s:\n{(e.stderr or b'')[-2000:]!r}"
    exports: Dict[str, str] = {}
    if p is not None and not failed:
        for line in p.stdout.splitlines():
            if line.startswith("export "):
                for item in line[len("export "):].split():
                    k, _, v = item.partition("=")
                    exports[k] = v
    clear = record_stop(stop, {**env, **exports})
    try:
        if failed:
            raise RuntimeError(f"{' '.join(map(str, start))} {failed}")
        yield exports
    finally:
        subprocess.run(list(stop), env={**env, **exports}, capture_output=True, timeout=timeout)
        clear()


def record_stop(argv: Sequence[str], env: Optional[Mapping[str, str]] = None,
                cwd: Optional[Union[str, Path]] = None) -> Callable[[], None]:
    """Record the command that stops a backend (a stop script: what ends its daemons and
    containers) for the test session's reaper, which runs it if the session ends (killed,
    even with SIGKILL) before the returned function is called: call that once the backend
    is stopped. Outside a session with the reaper (``tx.testing._reaper`` not loaded) the
    record is a no-op.

    Args:
        argv: the stop command.
        env: its environment (None: the reaper's, which is pytest's).
        cwd: its working directory.
    """
    return _reaper.record_stop(argv, env, str(cwd) if cwd is not None else None)


def container_output(client: Any, image: str, command: Sequence[str], environment: Optional[Mapping[str, str]] = None,
                     timeout: float = 120.0) -> bytes:
    """Run ``command`` in a new container of ``image`` and return its output (stdout and
    stderr, interleaved as they were written), removing the container after.

    What docker-py's ``client.containers.run(..., remove=True)`` does, without its follow-mode
    log stream: podman 4.3's compat ``logs?follow=1`` can miss the container's end and never
    close the stream (seen twice in full CI runs: a 300 s hang, and once output cut short), so
    this waits for the exit (``POST /containers/{id}/wait``, at most ``timeout`` seconds) and
    then reads the whole log once (``GET /containers/{id}/logs``, not following).

    Args:
        client: a ``docker.DockerClient`` (docker-py) connected to the engine.
        image: the image to run; it must be present (nothing is pulled).
        command: the argv of the container's command.
        environment: variables set in the container.
        timeout: seconds to wait for the container to exit.

    Raises:
        RuntimeError: the command exited non-zero (the message holds its exit code and output).
        requests.exceptions.ConnectionError: the container did not exit within ``timeout``.
    """
    container = client.containers.create(image, list(command), environment=dict(environment or {}))
    try:
        container.start()
        code = container.wait(timeout=timeout)["StatusCode"]
        out: bytes = container.logs(stdout=True, stderr=True)
    finally:
        container.remove(force=True)
    if code != 0:
        raise RuntimeError(f"{image} {list(command)} exited with code {code}: {out.decode(errors='replace')!r}")
    return out
