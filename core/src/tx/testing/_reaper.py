"""The session reaper: whatever way a test session ends (its last test, Ctrl-C, SIGTERM,
pytest-timeout's ``os._exit``, SIGKILL), nothing it started keeps running or holds a port.

Two halves, standard library only (the reaper process imports nothing of tx or pytest):

* **In pytest** (this module is a pytest plugin: the repository's ``conftest.py`` loads it
  with ``pytest_plugins``; ``-p tx.testing._reaper`` elsewhere), at session start:

  - ``TX_TEST_SESSION=<token>`` is set in ``os.environ``: every process the session starts
    from then on inherits it (backends, their daemons, ``tx`` and the apps it launches);
  - SIGTERM becomes ``KeyboardInterrupt`` (once), so pytest ends as after Ctrl-C: it
    tears down the session's fixtures, whose finalizers stop their backends;
  - the reaper process is started in its own session (a signal to pytest's process group
    does not reach it), holding the read end of a pipe whose write end only pytest has.

  Backends that are stopped by a command, not by a signal (a stop script that ends daemons
  it recorded, and the containers of an engine), record it in the session file
  (:func:`record_stop`; ``tx.testing.backends.ServiceProcess`` records its process group
  the same way), and clear the record once stopped.

* **The reaper** (``python -I _reaper.py PID FD TOKEN FILE``) waits for pytest's end (EOF
  on the pipe, or pytest's pid gone or a zombie, checked every second; it rereads the
  session file meanwhile, in case it is gone by then), then runs the stop
  commands still recorded (all at once), SIGTERMs the recorded process groups that are
  still theirs (same leader start time) and every process whose environment holds the
  session's token, waits up to 10 s, and SIGKILLs what is left. After a clean end it
  finds nothing; what it did goes to ``reaper.log`` beside the session file.
"""
from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

#: the environment variable that marks every process of a test session
TOKEN_ENV = "TX_TEST_SESSION"

#: this process's session: {"file": Path, "token": str, "write_fd": int, "reaper": Popen, "n": int}
_session: Dict[str, Any] = {}
_interrupted: List[bool] = []


def _proc_stat(pid: int) -> Optional[Tuple[str, int]]:
    """``(state, start time in clock ticks since boot)`` of ``pid``, None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[19])


def _start_time(pid: int) -> Optional[int]:
    """The start time of a living (not zombie) ``pid``; None otherwise."""
    st = _proc_stat(pid)
    return st[1] if st is not None and st[0] not in ("Z", "X") else None


# -- in pytest --------------------------------------------------------------------------
def _append(entry: Mapping[str, Any]) -> None:
    with open(_session["file"], "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def _record(entry: Dict[str, Any]) -> Callable[[], None]:
    """Append ``entry`` with a new id; return the function that clears it (idempotent)."""
    if not _session:
        return lambda: None
    _session["n"] += 1
    n = _session["n"]
    _append({"id": n, **entry})
    cleared: List[bool] = []

    def clear() -> None:
        if not cleared and _session:
            cleared.append(True)
            _append({"done": n})

    return clear


def record_stop(argv: Sequence[str], env: Optional[Mapping[str, str]] = None,
                cwd: Optional[str] = None) -> Callable[[], None]:
    """Record a command that stops a backend, for the reaper to run if the session ends
    before the returned function (call it once the backend is stopped) is called; a
    no-op outside a session that loaded this plugin."""
    return _record({"stop": [str(a) for a in argv], "env": dict(env) if env is not None else None,
                    "cwd": str(cwd) if cwd else None})


def record_group(pid: int) -> Callable[[], None]:
    """Record the process group led by ``pid`` (started with ``start_new_session``)."""
    start = _start_time(pid)
    return _record({"group": pid, "start": start}) if start is not None else (lambda: None)


def token() -> Optional[str]:
    """This session's token (``TX_TEST_SESSION``), None outside a session."""
    return _session.get("token")


def _on_sigterm(signum: int, frame: Any) -> None:
    if _interrupted:  # the second one: let the teardown that the first started finish
        return
    _interrupted.append(True)
    raise KeyboardInterrupt("SIGTERM: the test session stops its backends and ends")


def start_session(directory: Path) -> None:
    """Start this process's session: the token, the SIGTERM handler, the reaper (its
    session file and log in ``directory``). Done once per process."""
    if _session:
        return
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / "backends.jsonl"
    file.touch()
    tok = f"{os.getpid()}-{secrets.token_hex(8)}"
    read_fd, write_fd = os.pipe()  # not inherited by what pytest starts (PEP 446)
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    with open(directory / "reaper.log", "ab") as log:
        reaper = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), str(os.getpid()), str(read_fd), tok, str(file)],
            pass_fds=(read_fd,), start_new_session=True, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, env=env)
    os.close(read_fd)
    _session.update(file=file, token=tok, write_fd=write_fd, reaper=reaper, n=0)
    os.environ[TOKEN_ENV] = tok
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _on_sigterm)


def pytest_sessionstart(session: Any) -> None:
    """pytest hook: start the session (its files in the session's base temporary directory)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    base = Path(factory.getbasetemp()) if factory is not None else Path(tempfile.mkdtemp(prefix="tx-test-"))
    start_session(base / "tx-session")


# -- the reaper process ---------------------------------------------------------------
def _log(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} reaper {os.getpid()}: {text}", flush=True)


def _pending(file: Path) -> Optional[List[Dict[str, Any]]]:
    """The records not cleared, in the order they were made; None if the file is gone."""
    entries: Dict[int, Dict[str, Any]] = {}
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:  # a line cut short by the kill
            continue
        if "done" in e:
            entries.pop(e["done"], None)
        elif "id" in e:
            entries[e["id"]] = e
    return [entries[k] for k in sorted(entries)]


def _marked(tok: str) -> Set[int]:
    """Every process (not this one) whose environment holds ``TX_TEST_SESSION=<tok>``."""
    needle = f"{TOKEN_ENV}={tok}".encode()
    out: Set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and _start_time(int(name)) is not None:
            out.add(int(name))
    return out


def _signal_all(groups: List[Tuple[int, int]], pids: Set[int], sig: int) -> None:
    for pid, start in groups:
        if _start_time(pid) == start:
            try:
                os.killpg(pid, sig)
            except OSError:
                pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def reap(tok: str, pending: List[Dict[str, Any]], grace: float = 10.0) -> int:
    """Stop what the session left: the ``pending`` stop commands (all at once), then the
    pending process groups and the token's processes (SIGTERM, SIGKILL after ``grace``
    seconds). Returns how many processes were signalled."""
    def stop(e: Dict[str, Any]) -> None:
        _log(f"running {' '.join(e['stop'])}")
        try:
            subprocess.run(e["stop"], env=e["env"], cwd=e["cwd"], stdin=subprocess.DEVNULL, timeout=180)
        except (OSError, subprocess.SubprocessError) as err:
            _log(f"{' '.join(e['stop'])} failed: {err}")

    stops = list(reversed([e for e in pending if "stop" in e]))
    if stops:  # all at once: each stop script waits some seconds for its daemons to end
        with ThreadPoolExecutor(max_workers=len(stops)) as pool:
            list(pool.map(stop, stops))
    groups = [(e["group"], e["start"]) for e in pending if "group" in e]
    signalled: Set[int] = set()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        deadline = time.monotonic() + grace
        while True:
            live = [(p, s) for p, s in groups if _start_time(p) == s]
            pids = _marked(tok)
            if not live and not pids:
                break
            if sig == signal.SIGKILL or not (pids | {p for p, _ in live}) <= signalled:
                _log(f"{signal.Signals(sig).name} to groups {[p for p, _ in live]} and processes {sorted(pids)}")
                _signal_all(live, pids, sig)
                signalled |= pids | {p for p, _ in live}
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
    return len(signalled)


def main(argv: Sequence[str]) -> int:
    pid, fd, tok, file = int(argv[1]), int(argv[2]), argv[3], Path(argv[4])
    start = _start_time(pid)
    # read while pytest runs too: once it is gone, another session may clean its base
    # temporary directory up (pytest keeps the last 3) before this reads the file
    pending: List[Dict[str, Any]] = []
    while start is not None and _start_time(pid) == start:
        now = _pending(file)
        pending = pending if now is None else now
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready and not os.read(fd, 512):
            break
    last = _pending(file)
    n = reap(tok, pending if last is None else last)
    _log(f"session of pid {pid} over: {n} process(es) or group(s) were left" if n else
         f"session of pid {pid} over: nothing was left")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
