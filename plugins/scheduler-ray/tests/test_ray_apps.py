"""Real apps on the private Ray head: cancel, failures, retries, resources that never fit,
two roles, elastic roles and the replica environment."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import requests

from tx.components.dist import ddp
from tx.specs import AppState, Resource, RetryPolicy
from tx.testing.backends import require_module
from tx_scheduler_ray import tx_ray_driver




def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie that nobody reaped yet is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _state_api(url: str, what: str) -> List[Dict[str, Any]]:
    r = requests.get(f"{url}/api/v0/{what}", params={"limit": 10000, "detail": 1}, timeout=30)
    r.raise_for_status()
    return r.json()["data"]["result"]["result"]


def _wait_gone(pids: List[int], timeout: float = 15) -> List[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if _alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.3)


def test_cancel_stops_every_replica_and_actor(apps: Any, ray_head: str, tmp_path: Path) -> None:
    """Cancel ends the app CANCELLED; the replicas, the processes they started and their
    actors are gone; nothing of the app is left on the cluster."""
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    script = f"sleep 600 & echo $! > {pids_dir}/child-${{replica_id}}; echo started; wait"
    app_id = apps.submit([apps.role("sleeper", script, replicas=2)], name="cancelme")
    desc = apps.wait_for(app_id, lambda d: d is not None and all(
        r.state == AppState.RUNNING for rs in d.roles_statuses for r in rs.replicas)
        and len(list(pids_dir.iterdir())) == 2)
    assert desc.state == AppState.RUNNING, desc
    pids = [m["pid"] for m in desc.metadata["replicas"].values()]
    children = [int((pids_dir / f"child-{k}").read_text()) for k in (0, 1)]
    assert all(_alive(p) for p in pids + children)
    job_id = desc.metadata["job_id"]

    apps.sched.cancel(app_id)
    final = apps.wait(app_id)
    assert final.state == AppState.CANCELLED
    assert [r.state for r in final.roles_statuses[0].replicas] == [AppState.CANCELLED] * 2
    assert _wait_gone(pids + children) == [], "replica processes left running"
    actors = [a for a in _state_api(ray_head, "actors") if a.get("job_id") == job_id]
    assert actors, "the state API shows no actor of the job"
    assert {a["state"] for a in actors} == {"DEAD"}, actors
    pgs = [p for p in _state_api(ray_head, "placement_groups") if (p.get("name") or "").startswith(f"tx-{app_id.split('-', 1)[1]}")]
    assert pgs and {p["state"] for p in pgs} == {"REMOVED"}, pgs
    apps.sched.cancel(app_id)  # idempotent
    assert apps.sched.describe(app_id).state == AppState.CANCELLED


def test_failing_replica_is_reported(apps: Any) -> None:
    """The first failed replica, its exit code, host and last stderr lines make the app's
    error; the replica that was still running is stopped."""
    script = ('if [ "${replica_id}" = 1 ]; then echo "loading data" >&2; echo "no such file: data.csv" >&2; '
              'exit 3; fi; sleep 60')
    app_id = apps.submit([apps.role("worker", script, replicas=2)], name="failing")
    desc = apps.wait(app_id)
    assert desc.state == AppState.FAILED
    err = desc.structured_error_msg
    assert err.startswith("worker/1 exited with code 3 on "), err
    assert "no such file: data.csv" in err and "\n" not in err, err
    r0, r1 = apps.replica(desc, "worker", 0), apps.replica(desc, "worker", 1)
    assert (r1.state, r1.exit_code) == (AppState.FAILED, 3)
    assert r1.hostname and "no such file: data.csv" in r1.structured_error_msg
    assert r0.state == AppState.CANCELLED and r0.exit_code == -15
    assert "worker/1 failed" in desc.msg


#: a DDP script whose rank 1 raises after init_process_group
FAILING_RANK = """\
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise RuntimeError("CUDA out of memory (simulated)")
dist.barrier()
"""


def test_failed_rank_is_named(apps: Any, tmp_path: Path) -> None:
    """dist.ddp -j 1x2 whose rank 1 raises: structured_error_msg names the rank, its
    exception and where it was raised, read by the scheduler (tx.schedulers.why) from the
    end of the replica's stderr the driver recorded: the one line every scheduler gives."""
    require_module("torch", "the DDP app runs torchrun: pip install torch==2.13.0")
    (tmp_path / "train.py").write_text(FAILING_RANK)  # in the working_dir uploaded with the job
    app = ddp(script="train.py", image="", j="1x2", cpu=1, memMB=512,
              env={"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin"})
    app_id = apps.sched.submit(app, {})
    apps.ids.append(app_id)
    desc = apps.wait(app_id, timeout=180)
    assert desc.state == AppState.FAILED, desc
    why = "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:5 (exit code 1)"
    assert desc.structured_error_msg == why, desc
    assert desc.root_cause is not None and (desc.root_cause.rank, desc.root_cause.exception_type) == (1, "RuntimeError")
    assert apps.replica(desc, "train", 0).structured_error_msg == why


def test_missing_program_fails_with_reason(apps: Any) -> None:
    role = apps.role("bad", "")
    role.entrypoint, role.args = "/nonexistent/program", []
    app_id = apps.submit([role], name="noprog")
    desc = apps.wait(app_id)
    assert desc.state == AppState.FAILED
    assert "bad/0" in desc.structured_error_msg and "nonexistent" in desc.structured_error_msg


def test_following_a_stream_that_stays_empty_ends_with_the_app_and_leaves_no_thread(apps: Any) -> None:
    """A replica that never writes to stderr: following its stderr ends when the app does, and
    no reader thread is left blocked on the log API (a long-lived `tx ui` would keep one per
    such log view)."""
    app_id = apps.submit([apps.role("w", "echo out; sleep 4")], name="quiet")
    apps.wait_for(app_id, lambda d: d is not None and d.state == AppState.RUNNING)
    assert "".join(apps.sched.log_iter(app_id, "w", 0, should_tail=True, streams="stderr")) == ""
    assert apps.sched.describe(app_id).state == AppState.SUCCEEDED
    deadline = time.monotonic() + 10
    reader = f"tx-ray-follow-{tx_ray_driver.log_name(apps.sched._parse(app_id)[1], 'w', 0, 'stderr')}"
    while [t for t in threading.enumerate() if t.name == reader]:
        assert time.monotonic() < deadline, [t.name for t in threading.enumerate()]
        time.sleep(0.2)
    assert "".join(apps.sched.log_iter(app_id, "w", 0, should_tail=True, streams="stdout")) == "out\n"


def test_retried_replica_replica_policy(apps: Any, tmp_path: Path) -> None:
    """REPLICA policy: only the failed replica restarts (same id); its log keeps both attempts."""
    marks = tmp_path / "marks"
    marks.mkdir()
    script = (f'echo "start ${{replica_id}}"; if [ "${{replica_id}}" = 1 ] && [ ! -e {marks}/once ]; then '
              f'touch {marks}/once; echo "attempt fails" >&2; exit 5; fi; sleep 2; echo "done ${{replica_id}}"')
    role = apps.role("w", script, replicas=2, max_retries=2, retry_policy=RetryPolicy.REPLICA)
    app_id = apps.submit([role], name="retry")
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.num_restarts == 1
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.SUCCEEDED] * 2
    assert desc.metadata["replicas"]["w/1"]["attempt"] == 1
    assert desc.metadata["replicas"]["w/0"]["attempt"] == 0
    assert apps.text(app_id, "w", 1, "stdout") == "start 1\nstart 1\ndone 1\n"
    assert apps.text(app_id, "w", 1, "stderr") == "attempt fails\n"
    assert apps.text(app_id, "w", 0, "stdout") == "start 0\ndone 0\n"


def test_retried_app_application_policy(apps: Any, tmp_path: Path) -> None:
    """APPLICATION policy: a failure restarts every replica; the retries run out -> FAILED.
    Replica 1 fails only once replica 0 of the same attempt has written its line (c3 of
    f07c5cc: replica 1 failed before replica 0 of the second attempt had started, and the
    test lost the line it hoped for); every line written must be in the log."""
    marks = tmp_path / "marks"
    marks.mkdir()
    script = (f'echo "run ${{replica_id}}"; echo >> {marks}/r${{replica_id}}; if [ "${{replica_id}}" = 1 ]; then '
              f'n=$(wc -l < {marks}/r1); until [ "$(cat {marks}/r0 2>/dev/null | wc -l)" -ge "$n" ]; do sleep 0.05; '
              'done; exit 7; fi; sleep 30')
    role = apps.role("w", script, replicas=2, max_retries=1, retry_policy=RetryPolicy.APPLICATION)
    app_id = apps.submit([role], name="appretry")
    desc = apps.wait(app_id)
    assert desc.state == AppState.FAILED
    assert desc.num_restarts == 1
    assert apps.text(app_id, "w", 0, "stdout") == "run 0\nrun 0\n"
    assert apps.text(app_id, "w", 1, "stdout") == "run 1\nrun 1\n"
    assert "w/1 exited with code 7" in desc.structured_error_msg and "(attempt 2)" in desc.structured_error_msg


def test_more_cpus_than_the_cluster_has_pends_then_cancels(apps: Any, ray_head: str) -> None:
    """An app asking for 64 CPUs waits PENDING with the placement group and the reason in
    msg; cancel ends it and removes the placement group."""
    role = apps.role("big", "echo never", replicas=2, resource=Resource(cpu=64, gpu=0, memMB=128))
    app_id = apps.submit([role], name="toobig")
    desc = apps.wait_for(app_id, lambda d: d is not None and "placement group" in d.msg)
    assert desc.state == AppState.PENDING, desc
    assert "infeasible" in desc.msg and "CPU 64" in desc.msg and "memory 128 MB" in desc.msg, desc.msg
    assert "cluster total: CPU 4" in desc.msg, desc.msg
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.PENDING] * 2
    apps.sched.cancel(app_id)
    final = apps.wait(app_id)
    assert final.state == AppState.CANCELLED
    sid = app_id.split("-", 1)[1]
    pgs = [p for p in _state_api(ray_head, "placement_groups") if p.get("name") == f"tx-{sid}"]
    assert pgs and {p["state"] for p in pgs} == {"REMOVED"}, pgs


def test_two_roles_and_the_replica_environment(apps: Any) -> None:
    """Two roles in one job; every replica gets tx's and TorchX's variables, rank 0's
    address and MASTER_ADDR/MASTER_PORT, and macros are expanded."""
    show = ('echo "role=$TX_ROLE_NAME/$TORCHX_ROLE_NAME idx=$TX_ROLE_IDX rep=$TX_REPLICA_ID/$TORCHX_REPLICA_IDX '
            'n=$TX_NUM_REPLICAS app=$TX_APP_ID/$TORCHX_APP_ID rank0=$TX_RANK0_HOST/$TORCHX_RANK0_HOST '
            'master=$MASTER_ADDR:$MASTER_PORT macro=${replica_id} env=${rank0_env} spec=${TX_RAY_DRIVER_SPEC:-none}"')
    app_id = apps.submit([apps.role("ps", show), apps.role("trainer", show, replicas=2)], name="tworoles")
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    rank0 = desc.metadata["rank0"]
    assert rank0["host"] == "127.0.0.1" and rank0["port"] > 0
    for role, idx, n, k in (("ps", 0, 1, 0), ("trainer", 1, 2, 0), ("trainer", 1, 2, 1)):
        line = apps.text(app_id, role, k, "stdout")
        assert line == (f"role={role}/{role} idx={idx} rep={k}/{k} n={n} app={app_id}/{app_id} "
                        f"rank0=127.0.0.1/127.0.0.1 master=127.0.0.1:{rank0['port']} macro={k} "
                        f"env=TX_RANK0_HOST spec=none\n"), line
    assert [rs.role for rs in desc.roles_statuses] == ["ps", "trainer"]
    assert [r.name for r in desc.roles] == ["ps", "trainer"]
    assert all(r.hostname for rs in desc.roles_statuses for r in rs.replicas)


def test_elastic_roles_start_with_min_replicas(apps: Any) -> None:
    """Every elastic role starts once its min_replicas are placed; a further replica runs
    when its resources are free, and one that never fits is given up when the app ends."""
    a = apps.role("a", "sleep 6; echo a ${replica_id}", replicas=2, min_replicas=1,
                  resource=Resource(cpu=2, gpu=0, memMB=64))
    b = apps.role("b", "sleep 6; echo b ${replica_id}", replicas=2, min_replicas=1,
                  resource=Resource(cpu=1, gpu=0, memMB=64))
    app_id = apps.submit([a, b], name="elastic")  # 4 CPUs: a0 (2) + b0 (1) + b1 (1); a1 never fits
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    states = {(rs.role, r.id): r.state for rs in desc.roles_statuses for r in rs.replicas}
    assert states == {("a", 0): AppState.SUCCEEDED, ("a", 1): AppState.CANCELLED,
                      ("b", 0): AppState.SUCCEEDED, ("b", 1): AppState.SUCCEEDED}, states
    assert desc.metadata["replicas"]["a/1"]["msg"] == "not placed before the app ended"
    assert apps.text(app_id, "b", 1, "stdout") == "b 1\n"


def test_retried_role_role_policy(apps: Any, tmp_path: Path) -> None:
    """ROLE policy: a failure restarts every replica of the failed replica's role only.
    Replica a/1 fails once a/0 of its attempt has written its line (as in the APPLICATION
    policy's test: the order forced, not hoped for)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    fail_once = (f'echo "run ${{replica_id}}"; echo >> {marks}/r${{replica_id}}; '
                 f'if [ "${{replica_id}}" = 1 ] && [ ! -e {marks}/once ]; then touch {marks}/once; '
                 f'until [ -s {marks}/r0 ]; do sleep 0.05; done; exit 9; fi; sleep 3')
    a = apps.role("a", fail_once, replicas=2, max_retries=1, retry_policy=RetryPolicy.ROLE)
    b = apps.role("b", 'echo "run b"; sleep 6')
    app_id = apps.submit([a, b], name="roleretry")
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.num_restarts == 1
    assert apps.text(app_id, "a", 0, "stdout") == "run 0\nrun 0\n"
    assert apps.text(app_id, "a", 1, "stdout") == "run 1\nrun 1\n"
    assert apps.text(app_id, "b", 0, "stdout") == "run b\n"
    assert desc.metadata["replicas"]["b/0"]["attempt"] == 0
