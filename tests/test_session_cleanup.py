"""A test session that is interrupted still stops every backend it started
(tx.testing._reaper): a pytest in a subprocess starts the fake Kubernetes API server (a real
server process on a port of its own) and a backend with a stop script, then hangs in its
test; it is stopped with SIGTERM or SIGKILL, or by pytest-timeout's thread method (os._exit),
and the server's port must close, its processes end and the stop script run, within a
bounded wait."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

import pytest

from tx.testing._reaper import _marked, _start_time
from tx.testing.backends import port_open, require_module, wait_for

pytestmark = pytest.mark.slow  # each case starts a pytest (8-17 s at load 9)

REPO = Path(__file__).resolve().parents[1]
K8S_TESTS = REPO / "plugins" / "scheduler-k8s" / "tests"

INNER = textwrap.dedent('''
    import os
    import time
    from pathlib import Path

    from tx.testing.backends import script_backend


    def test_hold(fake_cluster, tmp_path):
        stopped = os.environ["TX_TEST_STOPPED"]
        with script_backend(["sh", "-c", "echo export X=1"], ["sh", "-c", f"echo $X > {stopped}"], dict(os.environ)):
            Path(os.environ["TX_TEST_MARK"]).write_text(f"{fake_cluster['port']} {os.environ['TX_TEST_SESSION']}")
            time.sleep(600)  # a hung test: the outer test stops this session
''')


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job's ignored SIGINT: pytest's Ctrl-C again


#: how the inner session ends: a signal from outside, or pytest-timeout's thread method,
#: which ends a hung test's process with os._exit (no finalizer runs), as SIGKILL would
HOW = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL, "timeout-thread": None}
TIMEOUT_ARGS = ["--timeout=8", "--timeout-method=thread", "-o", "timeout_func_only=true"]


# SIGINT is pytest's own KeyboardInterrupt, which SIGTERM becomes here
@pytest.mark.parametrize("how", sorted(HOW))
def test_an_interrupted_session_stops_its_backends(tmp_path: Path, how: str) -> None:
    require_module("tx_scheduler_k8s", "the fake Kubernetes API server is its test server: pip install -e plugins/scheduler-k8s")
    (tmp_path / "test_inner.py").write_text(INNER)
    mark, stopped, basetemp = tmp_path / "mark", tmp_path / "stopped", tmp_path / "inner"
    env = dict(os.environ, TX_TEST_MARK=str(mark), TX_TEST_STOPPED=str(stopped),
               PYTHONPATH=os.pathsep.join(p for p in (str(K8S_TESTS), os.environ.get("PYTHONPATH")) if p))
    env.pop("TX_TEST_SESSION", None)
    argv = [sys.executable, "-m", "pytest", "-c", os.devnull, "--rootdir", str(tmp_path), "-p", "no:cacheprovider",
            "-p", "tx.testing._reaper", "-p", "tx_scheduler_k8s.testing", f"--basetemp={basetemp}", "-q", "-s", "test_inner.py",
            *(TIMEOUT_ARGS if HOW[how] is None else [])]
    inner = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             preexec_fn=_default_sigint)
    try:
        wait_for(lambda: mark.exists() and len(mark.read_text().split()) == 2 or inner.poll() is not None,
                 timeout=120, what="the inner session to start its backends")
        assert inner.poll() is None, inner.communicate()[0].decode(errors="replace")
        port, token = mark.read_text().split()
        procs: List[int] = sorted(_marked(token) - {inner.pid})  # the fake server (and nothing of the outer)
        assert procs and port_open(int(port)), procs
        starts = {p: _start_time(p) for p in procs}
        if HOW[how] is not None:
            os.kill(inner.pid, HOW[how])
        out = inner.communicate(timeout=120)[0].decode(errors="replace")
        log = basetemp / "tx-session" / "reaper.log"
        wait_for(lambda: log.exists() and "over:" in log.read_text(), timeout=60, what="the reaper to finish")
        # the port is closed, every process of the backend gone, its stop script run: at once
        assert not port_open(int(port)), log.read_text()
        assert [p for p in procs if _start_time(p) == starts[p]] == [], log.read_text()
        assert stopped.read_text() == "1\n", log.read_text()
        if how in ("SIGKILL", "timeout-thread"):  # nothing of the session's teardown ran: the reaper did it
            assert inner.returncode == (-signal.SIGKILL if how == "SIGKILL" else 1), out
            assert "process(es) or group(s) were left" in log.read_text() and "stop" in log.read_text()
        else:  # a clean pytest exit: the fixtures' finalizers stopped everything, the reaper found nothing
            assert inner.returncode == 2 and "KeyboardInterrupt" in out, out
            assert "nothing was left" in log.read_text(), log.read_text()
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()
