"""Recovery on the private Ray head (docs/recovery.md): a replica whose actor's worker
process is SIGKILLed from outside the job is an infrastructure failure, retried within
``infra_retries`` without spending ``max_retries``; the log archive stands in for a job the
head no longer knows (the head restarted for real: that test runs last)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Tuple

import pytest

from tx.runner import get_runner
from tx.specs import AppDef, AppState, FailureKind, Resource, Role
from tx_scheduler_ray.testing import RayHead


def _actor(desc: Any, name: str) -> Any:
    return (desc.metadata.get("replicas") or {}).get(name) or {} if desc is not None else {}


def test_replica_lost_to_the_infrastructure(apps: Any, tmp_path: Path) -> None:
    """Attempt 0: the replica actor's worker process is SIGKILLed (Ray: WORKER_DIED), an
    infra retry; attempt 1 exits 3, the user's retry (max_retries=1); attempt 2 lost again
    with infra_retries=1 spent: FAILED as an infrastructure failure, which failover moves."""
    count = tmp_path / "count"
    script = (f'n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; echo "attempt $n"; '
              f'[ "$n" = 1 ] && exit 3; exec sleep 600')
    app_id = apps.submit([apps.role("w", script, max_retries=1)], name="lost", cfg={"infra_retries": 1})
    killed = []
    for attempt in (0, 2):
        desc = apps.wait_for(app_id, lambda d: _actor(d, "w/0").get("attempt") == attempt and count.exists()
                             and count.read_text().strip() == str(attempt + 1)
                             and apps.replica(d, "w", 0).state == AppState.RUNNING)
        pid = _actor(desc, "w/0").get("actor_pid")
        assert pid and pid not in killed, desc
        os.kill(pid, signal.SIGKILL)  # from outside the job: Ray sees the actor's worker die
        killed.append(pid)
    final = apps.wait(app_id)
    assert final.state == AppState.FAILED, final
    got = [(a.index, a.state, a.kind, a.retried) for a in final.attempts]
    assert got == [(0, AppState.FAILED, FailureKind.INFRA, True), (1, AppState.FAILED, FailureKind.USER, True),
                   (2, AppState.FAILED, FailureKind.INFRA, False)], final.attempts
    assert "WORKER_DIED" in final.attempts[0].reason and "exit code 3" in final.attempts[1].reason
    assert final.attempts[2].reason.startswith("infra_retries exhausted"), final.attempts[2]
    assert final.num_restarts == 2
    assert final.metadata["infra_retries"] == {"infra_retries": 1, "infra_used": 1}
    assert apps.text(app_id, "w") == "attempt 0\nattempt 1\nattempt 2\n"  # nothing lost with the actors
    with get_runner() as runner:  # tx status lists the attempts; failover reads the last one's kind
        status = runner.status(f"ray://tx/{app_id}")
    assert status is not None and status.attempts[-1].kind == FailureKind.INFRA
    text = status.format()
    assert "#0 FAILED (infra: w/0: WORKER_DIED" in text and "), retried" in text, text
    assert "#1 FAILED (user: w/0: exit code 3), retried" in text, text


SCRIPT = r'for i in 1 2 3; do printf "line %s \377 end\n" "$i"; done; printf "tail, no newline"'


@pytest.mark.restarts_engine  # run last (conftest.py): no other Ray test meets the head restarting
def test_logs_outlive_the_head(ray_head_service: RayHead, ray_head: str, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The Runner archives the replica's log while it waits; once the job's files are gone
    from the node's Ray log directory (Ray's log cleanup), and once the head has restarted
    (a new GCS that knows none of the old jobs: 404 for it), ``tx log`` prints the same
    bytes from the archive and says so; ``tx status`` says the app is gone."""
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\ninterval = 0.3\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    monkeypatch.chdir(tmp_path)  # the working_dir uploaded with the job: small
    role = Role("talker", image="", entrypoint="bash", args=["-c", SCRIPT], resource=Resource(cpu=1, gpu=0, memMB=64))
    with get_runner() as runner:
        handle = runner.run(AppDef("archived", roles=[role]), "ray")
        assert runner.wait(handle, wait_interval=0.5, timeout=120).state == AppState.SUCCEEDED
        backend = b"".join(runner.log_blocks(handle, "talker", 0))
        assert runner.log_archive is not None and runner.log_archive.is_complete(handle)
    # combined ends a last line without "\n" (tx_ray_driver's _Pump)
    assert backend == b"".join(b"line %d \xff end\n" % i for i in (1, 2, 3)) + b"tail, no newline\n"
    from ray.job_submission import JobSubmissionClient

    # the driver's own log names the app's directory: "... state in <logs>/tx/<sid>"
    sid = handle.rsplit("/", 1)[1].split("-", 1)[1]
    app_dir = JobSubmissionClient(ray_head).get_job_logs(sid).split(" state in ", 1)[1].split()[0]
    assert app_dir.endswith(f"/tx/{sid}") and (Path(app_dir) / "talker-0.combined").is_file(), app_dir
    shutil.rmtree(app_dir)
    expected = b"".join(b"talker/0 " + ln for ln in backend.splitlines(keepends=True))

    def tx(*args: str) -> "subprocess.Popen[bytes]":
        return subprocess.Popen([str(Path(sys.executable).parent / "tx"), *args, handle], env=dict(os.environ),
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ended(p: "subprocess.Popen[bytes]") -> Tuple[int, bytes, bytes]:
        out, err = p.communicate(timeout=120)
        return p.returncode, out, err

    rc, out, err = ended(tx("log"))
    assert (rc, out) == (0, expected), (out, err)
    assert b"reading the log from tx's log archive (the backend's log is gone)" in err, err
    ray_head_service.restart(wait_agent=False)  # SIGKILL the whole head, start it again on the same ports
    try:
        assert JobSubmissionClient(ray_head).list_jobs() == []  # the new GCS knows none of the old jobs
        log, status = tx("log"), tx("status")  # while the head's dashboard agent still starts
        rc, out, err = ended(log)
        assert (rc, out) == (0, expected), (out, err)
        assert b"reading the log from tx's log archive (unknown app " in err, err
        rc, out, err = ended(status)
        assert (rc, out) == (1, b""), (out, err)
        assert err.decode().strip().splitlines()[-1].endswith(
            f"app {handle} does not exist (or its scheduler no longer keeps it); "
            f"tx's log archive has its logs: tx log {handle}"), err
    finally:
        ray_head_service.wait_agent()  # the head takes jobs again, for whatever runs next


def test_tx_log_reads_the_archive_when_the_head_is_down(tmp_path: Path) -> None:
    """No dashboard answers at the app's address any more: ``tx log`` prints the archived
    bytes and says why, instead of failing (a head that answers 404: the test above)."""
    from tx.runner.archive import LogArchive
    from tx.testing.backends import free_port

    addr = f"127.0.0.1:{free_port()}"
    handle = f"ray://tx/{addr}-gone-1a2b3c"
    data = b"line 1 \xff end\nlast line\n"
    LogArchive(str(tmp_path / "archive")).copy(handle, [("talker", 0)], lambda r, k: iter([data]), ended="SUCCEEDED")
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    p = subprocess.run([str(Path(sys.executable).parent / "tx"), "log", handle], env={**env, "TXCONFIG": str(conf)},
                       cwd=tmp_path, capture_output=True, timeout=120)
    assert (p.returncode, p.stdout) == (0, b"talker/0 line 1 \xff end\ntalker/0 last line\n"), p.stderr
    assert b"reading the log from tx's log archive (no Ray dashboard answers at" in p.stderr, p.stderr


def test_infra_reason_reads_rays_death_causes() -> None:
    """Ray's own ActorDiedError, built from the GCS's death causes (its sentences), says
    whether the infrastructure lost the replica; the user's own OOM and tx's errors do not."""
    from ray.core.generated.common_pb2 import ActorDiedErrorContext, NodeDeathInfo
    from ray.exceptions import ActorDiedError

    from tx_scheduler_ray.tx_ray_driver._app import infra_reason

    def died(msg: str, **kw: Any) -> ActorDiedError:
        return ActorDiedError(ActorDiedErrorContext(error_message=msg, actor_id=b"\1" * 16, class_name="ReplicaActor",
                                                    pid=42, **kw))

    worker = ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
              "detail: Worker unexpectedly exits with a connection error code 2. End of file.")
    assert infra_reason(died(worker)) == "WORKER_DIED: the replica actor's worker process died (SYSTEM_ERROR)"
    assert infra_reason(died("The actor died because its node has died. Node Id: 1a2b")).startswith("NODE_DIED")
    preempted = died("The actor died because its node has died. Node Id: 1a2b",
                     node_death_info=NodeDeathInfo(reason=NodeDeathInfo.AUTOSCALER_DRAIN_PREEMPTED))
    assert infra_reason(preempted) == "NODE_DIED: the replica actor's node was preempted"
    oom = "The actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY Worker exit"
    assert infra_reason(died(oom)) == ""  # Ray's memory monitor: the replica's own out-of-memory
    assert infra_reason(ValueError("tx's own bug")) == ""


def test_a_lost_driver_is_an_infra_failure() -> None:
    """A Ray job that FAILED while the driver's state still said RUNNING lost its driver
    (its process or node died): the last attempt is the infrastructure's, so failover moves
    it; a driver that wrote its own end is not."""
    from types import SimpleNamespace

    from tx_scheduler_ray._describe import _attempts

    info = SimpleNamespace(error_type="JOB_ENTRYPOINT_COMMAND_ERROR", message="Job entrypoint command failed with exit code -9")
    [lost] = _attempts(AppState.FAILED, {"state": "RUNNING", "num_restarts": 0}, info)
    assert (lost.kind, lost.reason) == (FailureKind.INFRA, "the job's driver was lost: JOB_ENTRYPOINT_COMMAND_ERROR "
                                        "Job entrypoint command failed with exit code -9")
    ended = {"state": "FAILED", "num_restarts": 1, "attempts": [
        {"index": 0, "state": "FAILED", "kind": "user", "reason": "w/0: exit code 3", "retried": True},
        {"index": 1, "state": "FAILED", "kind": "user", "reason": "w/0: exit code 3", "retried": False}]}
    assert [a.text for a in _attempts(AppState.FAILED, ended, info)] == [
        "#0 FAILED (user: w/0: exit code 3), retried", "#1 FAILED (user: w/0: exit code 3)"]

