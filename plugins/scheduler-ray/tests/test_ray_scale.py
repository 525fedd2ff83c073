"""ray at scale (issue 40, docs/scale.md): the status of every app followed on a Ray head
comes from one shared job list a tick (``list_jobs``, ``GET /api/jobs/``), counted at the
head: every HTTP request to the private head's dashboard goes through a counting proxy this
module starts in front of it (the apps' ids name the proxy, so every later look does too).
A driver's ``state.json`` is read only for the apps described, once per snapshot whoever
looks (an ended job's once). A busy head (503, 429) is retried with jitter, never shown as a
failed app."""
from __future__ import annotations

import http.client
import http.server
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, List, Tuple
from urllib.parse import urlparse

import pytest

from tx.schedulers import SchedulerError, budget as budget_mod
from tx.specs import AppDef, AppState, Resource, Role, is_terminal
from tx_scheduler_ray import _plane
from tx_scheduler_ray.scheduler import RayScheduler, create_scheduler


class CountingProxy:
    """An HTTP proxy in front of the dashboard at ``target`` that counts each request by
    ``(method, path)`` (the query left out) and can answer the next ``times`` GETs of
    ``fail_path`` with ``status`` instead of forwarding them."""

    def __init__(self, target: str) -> None:
        self.target = urlparse(target)
        self.requests: List[Tuple[str, str]] = []
        self.fail_path, self.status, self.times, self.injected = "", 503, 0, 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0]
                with proxy.lock:
                    proxy.requests.append((self.command, path))
                    inject = self.command == "GET" and path == proxy.fail_path and proxy.times > 0
                    if inject:
                        proxy.times -= 1
                        proxy.injected += 1
                if inject:
                    data = b"injected: the head is busy"
                    self.send_response(proxy.status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length", "server", "date"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def counts(self) -> Counter:
        """Requests since the last :meth:`reset`, by ``"METHOD path"``."""
        with self.lock:
            return Counter(f"{m} {p}" for m, p in self.requests)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def proxy(ray_head: str) -> Iterator[CountingProxy]:
    p = CountingProxy(ray_head)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="module")
def finished(proxy: CountingProxy, ray_head: str, tmp_path_factory: pytest.TempPathFactory) -> List[str]:
    """3 tx apps submitted through the proxy (their ids name it), each ended (few: a Ray job
    takes seconds to start and end on a loaded machine)."""
    work = tmp_path_factory.mktemp("ray-scale")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)  # the working_dir uploaded with each job: small
        mp.setenv("TX_STATE_DIR", str(work / "state"))
        sched = create_scheduler("tx", dashboard_address=proxy.address)
        try:
            app = AppDef("scale", roles=[Role("r", image="", entrypoint="true", resource=Resource(cpu=1, gpu=0, memMB=64))])
            ids = [sched.submit(app, {}) for _ in range(3)]
            for app_id in ids:
                desc = sched.wait(app_id, timeout=300, poll_interval=1.0)
                assert desc is not None and desc.state == AppState.SUCCEEDED, desc
        finally:
            sched.close()
    return ids


@pytest.fixture(scope="module")
def waiting(proxy: CountingProxy, finished: List[str]) -> Iterator[List[str]]:
    """97 more apps followed, cheaply: Ray jobs with tx's ``tx_app`` metadata whose
    entrypoint asks for more CPUs than the head has, so they stay PENDING without a
    process (submitted with Ray's SDK as setup; stopped at the end)."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(f"http://{proxy.address}")
    sids = [client.submit_job(entrypoint="true", entrypoint_num_cpus=10_000, metadata={"tx_app": "waiting"})
            for _ in range(97)]
    yield [f"{proxy.address}-{sid}" for sid in sids]
    for sid in sids:
        client.stop_job(sid)


@pytest.fixture(scope="module")
def unfollowed(proxy: CountingProxy, finished: List[str]) -> List[str]:
    """2 ended Ray jobs with tx's ``tx_app`` metadata that no test follows (the head of a
    long-lived cluster holds thousands): a look at other apps must not read their state
    (submitted with Ray's SDK as setup, waited for until they ended)."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(f"http://{proxy.address}")
    sids = [client.submit_job(entrypoint="true", metadata={"tx_app": "unfollowed"}) for _ in range(2)]
    deadline = time.monotonic() + 300
    while any(str(getattr(s, "value", s)) not in _plane.ENDED for s in (client.get_job_status(i) for i in sids)):
        assert time.monotonic() < deadline, "the unfollowed jobs did not end within 300 s"
        time.sleep(0.5)
    return sids


@pytest.fixture
def sched(proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[RayScheduler]:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))  # a host with no snapshot yet
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "600")  # a tick is one snapshot however long it takes here
    monkeypatch.delenv("TXCONFIG", raising=False)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    budget_mod._reset_for_tests()
    s = create_scheduler("tx", dashboard_address=proxy.address)
    yield s
    s.close()
    budget_mod._reset_for_tests()


def _tick(sched: RayScheduler, proxy: CountingProxy, ids: List[str], finished: List[str]) -> Counter:
    """The head's requests of one tick: the snapshot's age is up (as it is each tick at
    the default age of 1 s), then each app is described once (and its state checked)."""
    _plane.plane(f"http://{proxy.address}").invalidate()
    proxy.reset()
    for app_id in ids:
        desc = sched.describe(app_id)
        assert desc is not None, app_id
        if app_id in finished:
            assert desc.state == AppState.SUCCEEDED, desc
            assert desc.roles_statuses[0].replicas[0].state == AppState.SUCCEEDED, desc  # the driver's final state
        else:
            assert desc.state == AppState.PENDING, desc
    return proxy.counts()


def test_calls_per_tick_do_not_grow_with_the_apps(sched: RayScheduler, proxy: CountingProxy, ray_head: str,
                                                  finished: List[str], waiting: List[str],
                                                  unfollowed: List[str]) -> None:
    """Following 10 apps or 100 (3 ended, the others PENDING): the first tick lists the
    jobs once and reads the final ``state.json`` of each ended app described, once: not of
    the head's other ended tx jobs (2 here, and the earlier tests' apps; the old code read
    every ended tx job's on the host's first snapshot); every later tick is one
    ``GET /api/jobs/``, for 10 apps as for 100 (the old code before the plane: a ``GET
    /api/jobs/<id>`` per app and tick and a log-API read per app with a driver, and with
    ``RAY_ADDRESS`` set, every call asked at that head rather than the app id's)."""
    sched._job_client(f"http://{proxy.address}")  # its version check (once per process), outside the ticks
    ten, every = finished + waiting[:7], finished + waiting
    from ray.job_submission import JobSubmissionClient

    ended = [j for j in JobSubmissionClient(ray_head).list_jobs()  # straight to the head, not counted
             if "tx_app" in (j.metadata or {}) and str(getattr(j.status, "value", j.status)) in _plane.ENDED]
    assert len(ended) >= len(finished) + len(unfollowed)
    first = _tick(sched, proxy, every, finished)
    assert first == Counter({"GET /api/jobs/": 1, "GET /api/v0/logs/file": len(finished)}), (first, len(ended))
    tens = [_tick(sched, proxy, ten, finished) for _ in range(2)]
    many = [_tick(sched, proxy, every, finished) for _ in range(2)]
    assert tens == [Counter({"GET /api/jobs/": 1})] * 2, tens
    assert many == [Counter({"GET /api/jobs/": 1})] * 2, many
    listed = {a.app_id: a.state for a in sched.list() if a.app_id in every}  # tx list reads the same snapshot
    assert listed == {**{i: AppState.SUCCEEDED for i in finished}, **{i: AppState.PENDING for i in waiting}}
    assert proxy.counts() == Counter({"GET /api/jobs/": 1}), proxy.counts()  # no call more for tx list


def test_a_busy_head_is_retried_never_a_failed_app(sched: RayScheduler, proxy: CountingProxy,
                                                   finished: List[str]) -> None:
    """The job list answered 503, then 429: the look retries with jitter and answers the
    apps' true state; the budget counts the throttling answers it saw."""
    sched.describe(finished[0])
    _plane.plane(f"http://{proxy.address}").invalidate()
    proxy.fail_path, proxy.status, proxy.times = "/api/jobs/", 503, 1
    desc = sched.describe(finished[1])
    assert desc is not None and desc.state == AppState.SUCCEEDED and is_terminal(desc.state)
    _plane.plane(f"http://{proxy.address}").invalidate()
    proxy.status, proxy.times = 429, 1
    desc = sched.describe(finished[2])
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert proxy.injected >= 2 and proxy.times == 0
    assert _plane.budget(f"http://{proxy.address}").counts().get("throttled") == 2
    proxy.times = 0


def test_a_failed_list_is_shared_like_an_answer(sched: RayScheduler, proxy: CountingProxy,
                                                finished: List[str]) -> None:
    """The job list answered an error (400, not a busy answer: not retried): the looks at
    other apps within the snapshot's age get that error, saying how old it is, without a
    request; a stale mark (a submit or cancel from this host) asks again."""
    url = f"http://{proxy.address}"
    _plane.plane(url).invalidate()
    proxy.reset()
    proxy.fail_path, proxy.status, proxy.times = "/api/jobs/", 400, 1
    try:
        with pytest.raises(SchedulerError, match="status code 400") as first:
            sched.describe(finished[0])
        assert "shared status plane" not in str(first.value)
        for app_id in finished[1:]:
            with pytest.raises(SchedulerError, match=r"status code 400.*\(the shared status plane's look \d+\.\d s ago"):
                sched.describe(app_id)
        assert proxy.counts()["GET /api/jobs/"] == 1, proxy.counts()
    finally:
        proxy.times = 0
    _plane.plane(url).invalidate()
    desc = sched.describe(finished[0])
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    assert proxy.counts()["GET /api/jobs/"] == 2, proxy.counts()


def test_the_budget_is_set_in_txconfig(sched: RayScheduler, proxy: CountingProxy, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``.txconfig`` ``[ray] max_calls_per_minute`` sets the head's bucket (shared through
    its file under the state directory); a bad value is a one-line configuration error."""
    from tx.config.files import ConfigError

    url = f"http://{proxy.address}"
    assert _plane.budget(url).per_minute == _plane.DEFAULT_CALLS_PER_MINUTE
    (tmp_path / ".txconfig").write_text("[ray]\nmax_calls_per_minute = 4\nmax_call_burst = 40\n")
    budget_mod._reset_for_tests()
    b = _plane.budget(url)
    assert (b.per_minute, b.burst) == (4.0, 40.0)
    (tmp_path / ".txconfig").write_text("[ray]\nmax_calls_per_minute = lots\n")
    budget_mod._reset_for_tests()
    with pytest.raises(ConfigError, match=r"\[ray\] max_calls_per_minute"):
        _plane.budget(url)


def test_a_running_apps_state_is_read_once_per_snapshot(sched: RayScheduler, proxy: CountingProxy,
                                                        tmp_path: Path) -> None:
    """A running app looked at three times within one snapshot (three followers) costs one
    job list and one ``state.json`` read, and ``tx status`` in another process of the host
    none (the old code: a read per look); the next snapshot reads it again (it changes while
    the app runs)."""
    app = AppDef("running", roles=[Role("r", image="", entrypoint="sleep", args=["600"],
                                        resource=Resource(cpu=1, gpu=0, memMB=64))])
    app_id = sched.submit(app, {})
    try:
        deadline = time.monotonic() + 300
        while True:  # the driver has written its state: the replica is RUNNING
            _plane.plane(f"http://{proxy.address}").invalidate()
            desc = sched.describe(app_id)
            assert desc is not None and not is_terminal(desc.state), desc
            if desc.state == AppState.RUNNING and desc.roles_statuses[0].replicas[0].state == AppState.RUNNING:
                break
            assert time.monotonic() < deadline, f"not running within 300 s: {desc}"
            time.sleep(0.5)
        _plane.plane(f"http://{proxy.address}").invalidate()
        proxy.reset()
        for _ in range(3):
            desc = sched.describe(app_id)
            assert desc is not None and desc.roles_statuses[0].replicas[0].state == AppState.RUNNING, desc
        assert proxy.counts() == Counter({"GET /api/jobs/": 1, "GET /api/v0/logs/file": 1}), proxy.counts()
        proxy.reset()
        tx = str(Path(sys.executable).parent / "tx")
        p = subprocess.run([tx, "status", f"ray://tx/{app_id}"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "TX_STATUS_MAX_AGE": "600"}, cwd=str(tmp_path))
        assert p.returncode == 0 and "RUNNING" in p.stdout, (p.stdout, p.stderr)
        looks = proxy.counts()
        assert looks["GET /api/jobs/"] == 0 and looks["GET /api/v0/logs/file"] == 0, looks
        _plane.plane(f"http://{proxy.address}").invalidate()
        proxy.reset()
        assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]
        assert proxy.counts() == Counter({"GET /api/jobs/": 1, "GET /api/v0/logs/file": 1}), proxy.counts()
    finally:
        sched.cancel(app_id)
