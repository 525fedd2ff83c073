"""The ``kubernetes`` scheduler on the fake cluster: why an app waits, why it failed,
retries (RestartJob, RestartTask), logs (follow, regex, streams, since), describe
rebuilding the roles, and the ``tx`` CLI in separate processes."""
import datetime as dt
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from k8s_apps import shared
from tx.specs import AppDef, AppState, Resource, Role, is_terminal
from tx.testing import find_replica
from tx_scheduler_k8s.kubernetes_scheduler import KubernetesScheduler, create_scheduler

CFG = {"queue": "default"}
SMALL = Resource(cpu=1, gpu=0, memMB=64)


def sh(name: str, script: str, replicas: int = 1, **kw: Any) -> Role:
    kw.setdefault("resource", SMALL)
    return Role(name, image="busybox:1.36", entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)


@pytest.fixture
def sched(fake_cluster: Dict[str, Any]) -> Iterator[KubernetesScheduler]:
    s = create_scheduler("tx")
    ids: List[str] = []
    s.submitted = ids  # type: ignore[attr-defined]
    yield s
    for app_id in ids:
        s.cancel(app_id)
    s.close()


def submit(sched: KubernetesScheduler, *roles: Role, name: str = "t") -> str:
    app_id = sched.submit(AppDef(name, roles=list(roles)), CFG)
    sched.submitted.append(app_id)  # type: ignore[attr-defined]
    return app_id


def wait(sched: KubernetesScheduler, app_id: str) -> Any:
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and is_terminal(desc.state), desc
    return desc


def test_pending_says_why(sched: KubernetesScheduler) -> None:
    app_id = submit(sched, sh("trainer", "echo never", 2, resource=Resource(cpu=1, gpu=2, memMB=64)))
    deadline = time.monotonic() + 30
    while True:
        desc = sched.describe(app_id)
        if "Insufficient" in desc.msg or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert desc.state == AppState.PENDING
    assert "0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in desc.msg, desc.msg
    sched.cancel(app_id)
    assert wait(sched, app_id).state == AppState.CANCELLED


def test_failure_says_which_replica_first(sched: KubernetesScheduler) -> None:
    script = 'if [ "$TX_REPLICA_ID" = 1 ]; then echo "loading"; echo "CUDA error: out of memory" >&2; exit 3; fi; sleep 30'
    app_id = submit(sched, sh("worker", script, 3))
    desc = wait(sched, app_id)
    assert desc.state == AppState.FAILED
    msg = desc.structured_error_msg
    assert msg.startswith("worker/1 (pod ") and "exit code 3" in msg and "Error" in msg, msg
    assert "CUDA error: out of memory" in msg and "\n" not in msg, msg
    assert find_replica(desc, "worker", 1).exit_code == 3


def test_application_retry_restarts_the_job(sched: KubernetesScheduler, tmp_path: Path) -> None:
    marker = tmp_path / "once"
    script = f'if [ -e {marker} ]; then echo second; else touch {marker}; echo first; exit 1; fi'
    app_id = submit(sched, sh("w", script, 2, max_retries=2, mounts=shared(tmp_path)))
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.num_restarts == 1
    assert "second" in "".join(sched.log_iter(app_id, "w", 0)) + "".join(sched.log_iter(app_id, "w", 1))


def test_replica_retry_restarts_the_task(sched: KubernetesScheduler, tmp_path: Path) -> None:
    marker = tmp_path / "once"
    script = (f'if [ "$TX_REPLICA_ID" = 1 ] && [ ! -e {marker} ]; then touch {marker}; exit 7; fi; '
              'echo done $TX_REPLICA_ID')
    app_id = submit(sched, sh("w", script, 2, max_retries=1, retry_policy="REPLICA", mounts=shared(tmp_path)))
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert list(sched.log_iter(app_id, "w", 1)) == ["done 1\n"]


def test_retries_run_out(sched: KubernetesScheduler) -> None:
    app_id = submit(sched, sh("w", "echo try; exit 2", 1, max_retries=2))
    desc = wait(sched, app_id)
    assert desc.state == AppState.FAILED and desc.num_restarts == 2
    assert "exit code 2" in desc.structured_error_msg


def test_logs_follow_regex_streams_since(sched: KubernetesScheduler) -> None:
    script = "for i in 1 2 3 4 5; do echo out $i; echo err $i >&2; sleep 0.3; done"
    app_id = submit(sched, sh("w", script))
    t0 = time.monotonic()
    followed = list(sched.log_iter(app_id, "w", 0, should_tail=True))
    assert time.monotonic() - t0 >= 1.0  # it waited for the lines to come
    assert [ln for ln in followed if ln.startswith("out")] == [f"out {i}\n" for i in range(1, 6)]
    assert len(followed) == 10
    assert list(sched.log_iter(app_id, "w", 0, regex=r"^err [24]")) == ["err 2\n", "err 4\n"]
    assert list(sched.log_iter(app_id, "w", 0, streams="combined")) == followed
    for stream in ("stdout", "stderr"):  # one log per container, as a cluster without alpha features keeps it
        with pytest.raises(ValueError, match="one combined log per container"):
            list(sched.log_iter(app_id, "w", 0, streams=stream))
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)
    assert list(sched.log_iter(app_id, "w", 0, since=future)) == []
    past = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    assert len(list(sched.log_iter(app_id, "w", 0, since=past))) == 10
    with pytest.raises(ValueError, match="no pod for replica w/3"):
        list(sched.log_iter(app_id, "w", 3))


def test_describe_rebuilds_the_roles(sched: KubernetesScheduler) -> None:
    role = Role("Trainer_Main", image="busybox:1.36", entrypoint="sh", args=["-c", "echo ${replica_id}"],
                env={"LR": "0.1"}, num_replicas=2, min_replicas=1, max_retries=1,
                resource=Resource(cpu=2, gpu=0, memMB=512), port_map={"http": 8080})
    app_id = submit(sched, role, sh("eval", "true"))
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED
    r0, r1 = desc.roles
    assert (r0.name, r0.image, r0.entrypoint, r0.args) == ("Trainer_Main", "busybox:1.36", "sh", ["-c", "echo ${replica_id}"])
    assert (r0.num_replicas, r0.min_replicas, r0.max_retries, r0.env) == (2, 1, 1, {"LR": "0.1"})
    assert (r0.resource.cpu, r0.resource.memMB, r0.port_map) == (2, 512, {"http": 8080})
    assert r1.name == "eval" and r1.num_replicas == 1
    assert [ln for ln in sched.log_iter(app_id, "Trainer_Main", 1)] == ["1\n"]
    host = find_replica(desc, "Trainer_Main", 0).hostname
    name = app_id.split(":")[1]
    assert host == f"{name}-trainer-main-0-0.{name}"


BIN = Path(sys.executable).parent


def tx(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    env["HOME"] = str(cwd)
    return subprocess.run([str(BIN / "tx"), *args], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=120)


def test_cli_run_log_status_describe_cancel(fake_cluster: Dict[str, Any], tmp_path: Path) -> None:
    p = tx("run", "-s", "kubernetes", "-cfg", "queue=default", "utils.sh", "--num_replicas", "2",
           "echo", "hello", "from", "${replica_id}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    handle = re.search(r"kubernetes://tx/default:[a-z0-9-]+", p.stdout + p.stderr).group(0)
    p = tx("log", "-f", handle, cwd=tmp_path)  # follows every replica until they end
    assert p.returncode == 0, p.stderr
    assert "hello from 0" in p.stdout and "hello from 1" in p.stdout, p.stdout
    p = tx("status", handle, cwd=tmp_path)
    assert p.returncode == 0 and "SUCCEEDED" in p.stdout, p.stdout + p.stderr
    p = tx("describe", handle, cwd=tmp_path)
    assert p.returncode == 0 and "sh" in p.stdout, p.stdout + p.stderr
    p = tx("list", "-s", "kubernetes", cwd=tmp_path)
    assert p.returncode == 0 and handle.split("/")[-1] in p.stdout, p.stdout + p.stderr
    p = tx("run", "-s", "kubernetes", "-cfg", "queue=default", "utils.sh", "sleep", "600", cwd=tmp_path)
    sleeper = re.search(r"kubernetes://tx/default:[a-z0-9-]+", p.stdout + p.stderr).group(0)
    p = tx("cancel", sleeper, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    desc = create_scheduler("tx").wait(sleeper.split("/")[-1], timeout=30, poll_interval=0.2)
    assert desc is not None and desc.state == AppState.CANCELLED


def test_list_uses_the_namespace_of_the_context(fake_cluster: Dict[str, Any], tmp_path: Path) -> None:
    """``tx list`` lists the namespace of the kubeconfig's current context, read from
    ``$KUBECONFIG`` as it is when the scheduler is used."""
    import yaml

    from tx_scheduler_k8s.testing import kubeconfig

    sched = create_scheduler("tx")
    app_id = sched.submit(AppDef("ns", roles=[sh("r", "true")]), {**CFG, "namespace": "team-a"})
    assert app_id.startswith("team-a:") and app_id not in [a.app_id for a in sched.list()]
    cfg = kubeconfig(fake_cluster["url"])
    cfg["contexts"][0]["context"]["namespace"] = "team-a"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    old = os.environ["KUBECONFIG"]
    os.environ["KUBECONFIG"] = str(path)
    try:
        assert app_id in [a.app_id for a in create_scheduler("tx").list()]
    finally:
        os.environ["KUBECONFIG"] = old
    assert wait(sched, app_id).state == AppState.SUCCEEDED
