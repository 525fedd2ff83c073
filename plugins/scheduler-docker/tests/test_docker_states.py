"""Container states tx does not expect. Podman reports ``stopped`` where Docker says
``exited`` (TorchX 0.7.0 raises KeyError on it), and engines add states over time. The
session's podman 4.3 answers ``stopped`` only for a moment after a container exits (TorchX
hits it in bench/RESULTS-docker.md), then ``exited``, so these tests put a small
HTTP relay between tx and that real engine which renames the state of chosen containers
(``stopped``, or a state no engine has) and changes nothing else: tx must map ``stopped``
by exit code, report an unknown state as UNKNOWN with its name in the message, and never
crash."""
import http.client
import json
import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from tx.specs import AppDef, AppState, Role
from tx.testing import find_replica
from tx_scheduler_docker.scheduler import DockerScheduler
from tx_scheduler_docker._states import (
    container_state, describe_exit, exit_code_from_status_text, known_state, lost_while_running,
)

#: app name -> the state the relay reports for its ended containers
RENAMED = {"unkstopped": "stopped", "unkmystery": "hibernating"}


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def _rename(obj: Any) -> None:
    """Rename the ended containers' state in an inspect or list answer."""
    items = obj if isinstance(obj, list) else [obj]
    for c in items:
        if not isinstance(c, dict):
            continue
        labels = c.get("Labels") or (c.get("Config") or {}).get("Labels") or {}
        new = RENAMED.get(labels.get("tx.app-name", ""))
        if new is None:
            continue
        # podman itself answers "stopped" for a moment before "exited": both are renamed
        if isinstance(c.get("State"), dict) and c["State"].get("Status") in ("exited", "stopped"):
            c["State"]["Status"] = new
        elif c.get("State") in ("exited", "stopped"):
            c["State"] = new
            c["Status"] = c.get("Status", "").replace("Exited", new.capitalize(), 1).replace("Stopped", new.capitalize(), 1)


def _handler(engine: str) -> type:
    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            conn = _UnixHTTPConnection(engine)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "content-length")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            if "json" in (resp.getheader("Content-Type") or "") and "/containers/" in self.path:
                try:
                    obj = json.loads(data)
                    _rename(obj)
                    data = json.dumps(obj).encode()
                except ValueError:
                    pass
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _relay

    return Relay


@pytest.fixture
def relayed(podman_engine: Dict[str, str], tmp_path: Path) -> Iterator[DockerScheduler]:
    """local_docker talking to the session's engine through the renaming relay."""
    import docker

    engine = podman_engine["DOCKER_HOST"][len("unix://"):]
    sock = str(tmp_path / "relay.sock")
    server = socketserver.ThreadingUnixStreamServer(sock, _handler(engine))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = docker.DockerClient(base_url=f"unix://{sock}", timeout=60)
    try:
        yield DockerScheduler("t", client=client)
    finally:
        client.close()
        server.shutdown()
        server.server_close()


def _sh(name: str, image: str, script: str, n: int = 1) -> Role:
    return Role(name, image=image, entrypoint="sh", args=["-c", script], num_replicas=n)


def test_podman_stopped_is_exited(relayed: DockerScheduler, scheduler: DockerScheduler, image: str) -> None:
    app = AppDef("unkstopped", roles=[_sh("w", image, 'if [ "${replica_id}" = 1 ]; then exit 3; fi', n=2)])
    app_id = relayed.submit(app, {})
    try:
        assert scheduler.wait(app_id, timeout=60, poll_interval=0.2) is not None  # the engine's own view
        desc = relayed.describe(app_id)
        assert desc is not None and desc.state == AppState.FAILED, desc
        assert find_replica(desc, "w", 0).state == AppState.SUCCEEDED
        r1 = find_replica(desc, "w", 1)
        assert (r1.state, r1.exit_code) == (AppState.FAILED, 3)
        assert "unknown" not in desc.msg
        listed = {a.app_id: a.state for a in relayed.list()}
        assert listed[app_id] == AppState.FAILED
    finally:
        scheduler.cancel(app_id)


def test_unknown_state_is_unknown(relayed: DockerScheduler, scheduler: DockerScheduler, image: str) -> None:
    app_id = relayed.submit(AppDef("unkmystery", roles=[_sh("w", image, "echo hi")]), {})
    try:
        assert scheduler.wait(app_id, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED  # type: ignore[union-attr]
        desc = relayed.describe(app_id)
        assert desc is not None and desc.state == AppState.UNKNOWN, desc
        assert find_replica(desc, "w", 0).state == AppState.UNKNOWN
        assert "'hibernating'" in desc.msg, desc.msg
        assert {a.app_id: a.state for a in relayed.list()}[app_id] == AppState.UNKNOWN
        assert list(relayed.log_iter(app_id, "w", 0)) == ["hi\n"]
        relayed.cancel(app_id)  # no crash on a state it does not know
    finally:
        scheduler.cancel(app_id)


@pytest.mark.parametrize("status,code,state", [
    ("exited", 0, AppState.SUCCEEDED), ("exited", 2, AppState.FAILED), ("stopped", 0, AppState.SUCCEEDED),
    ("stopped", 137, AppState.FAILED), ("Exited", 1, AppState.FAILED), ("running", None, AppState.RUNNING),
    ("created", None, AppState.SUBMITTED), ("configured", None, AppState.SUBMITTED),
    ("restarting", None, AppState.PENDING), ("paused", None, AppState.PENDING), ("dead", 1, AppState.FAILED),
    ("stopping", None, AppState.RUNNING), ("hibernating", 0, AppState.UNKNOWN), ("", None, AppState.UNKNOWN),
    (None, None, AppState.UNKNOWN), ("exited", None, AppState.UNKNOWN),
])
def test_state_table(status: Any, code: Any, state: AppState) -> None:
    assert container_state(status, code) == state
    assert known_state(status) == (state != AppState.UNKNOWN or status == "exited")


def test_exit_code_from_list_text() -> None:
    assert exit_code_from_status_text("Exited (3) 2 seconds ago") == 3
    assert exit_code_from_status_text("Stopped (137) 1 minute ago") == 137
    assert exit_code_from_status_text("Up 3 seconds") is None


def test_sigkill_message_says_what_the_engine_knows() -> None:
    """137 with OOMKilled: the limit; without it on cgroup v2 (every OOM kill reported): not
    the limit; on cgroup v1 (podman misses OOM kills): the limit, and that it cannot tell."""
    assert describe_exit(137, True, 16) == "killed: out of memory (memory limit 16 MB, exit code 137)"
    assert describe_exit(137, False, 16, oom_reported=True) == (
        "killed by SIGKILL (exit code 137); not by the memory limit (the engine reports no out-of-memory kill)")
    assert describe_exit(137, False, 16) == (
        "killed by SIGKILL (exit code 137); the engine reports no out-of-memory kill but cannot see one on"
        " cgroup v1: the memory limit is 16 MB")
    assert describe_exit(137) == "killed by SIGKILL (exit code 137)"
    assert describe_exit(143, False, 16) == "killed by SIGTERM (exit code 143)"


def _state(status: str, started: str, finished: str, code: int = 0) -> Dict[str, Any]:
    return {"Status": status, "ExitCode": code, "StartedAt": started, "FinishedAt": finished}


_ZERO = "0001-01-01T00:00:00Z"


@pytest.mark.parametrize("state,lost", [
    # inspect States of the session's podman 4.3, before and after a simulated host reboot
    # (test_docker_host_reboot.py's): a quick run records its end before its start
    (_state("exited", "2026-11-26T04:15:54.584291138Z", "2026-11-26T04:15:54.5842058Z"), False),
    (_state("stopped", "2026-11-26T04:15:56.319721933Z", "2026-11-26T04:15:57.320205919Z", 3), False),
    (_state("running", "2026-11-26T04:16:57.098501383Z", "2026-11-26T04:16:56.892208505Z"), False),  # restarted
    # restarted once on failure, then exited 0 at once: its start 8 ms after its end, not lost
    (_state("exited", "2026-11-26T04:16:56.520167951Z", "2026-11-26T04:16:56.512208488Z"), False),
    (_state("created", _ZERO, _ZERO), False),  # never started
    # after the reboot: running, never restarted (no end); running after a restart (an earlier end)
    (_state("created", "2026-11-26T04:16:56.65926681Z", _ZERO), True),
    (_state("created", "2026-11-26T04:16:57.098501383Z", "2026-11-26T04:16:56.892208505Z"), True),
    (_state("exited", "2026-11-26T04:16:56.65926681Z", _ZERO), True),  # podman 5's reset
    # ended just before the power went (reset from "stopped"): its own end, after its start
    (_state("created", "2026-11-26T04:16:56.6Z", "2026-11-26T04:16:58Z"), False),
])
def test_lost_while_running_reads_what_podman_records(state: Dict[str, Any], lost: bool) -> None:
    why = lost_while_running(state)
    assert (why is not None) == lost, why
    if why is not None and state["FinishedAt"] != _ZERO:
        assert "no end recorded after it was restarted (the last end, 2026-11-26T04:16:56Z, is an earlier run's)" in why
