"""The ECS stop sequence of a Spot reclaim on aws_batch, against moto's Batch in Docker mode
(the job's nodes run as real containers of the session's private podman engine).

moto cannot drive the sequence itself: its TerminateJob kills the container at once
(``docker kill``, SIGKILL). So the test does to moto's container what the ECS agent does
when it stops a task (``docker stop`` with ``ECS_CONTAINER_STOP_TIMEOUT``: SIGTERM, SIGKILL
after the timeout), through the engine's own stop, then ends the job with the status reason
of a Spot reclaim (``Host EC2 (instance i-...) terminated.``) through moto's TerminateJob,
once the container has stopped. The job runs the real ``tx.distributed`` (this
interpreter, torch and the sources bind-mounted into the busybox image, as
test_aws_batch_docker's DDP test does): it saves the step it reached and dies of SIGTERM
within the grace; the attempt is infra and names that step. A job that ignores the warning
is SIGKILLed when the stop timeout ends, and tx says nothing was saved."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

from tx.distributed import latest_checkpoint
from tx.specs import AppDef, AppState, FailureKind, Resource, Role
from tx.testing.backends import require_module
from tx.testing.preemption import TRAIN, until
from tx_scheduler_aws_batch.scheduler import AwsBatchScheduler, create_scheduler
from tx_scheduler_aws_batch.testing import Moto

IMAGE = "localhost/busybox:tx"
RECLAIMED = "Host EC2 (instance i-0123456789abcdef0) terminated."



#: this checkout: tx's sources, where the environment's editable installs (.pth files) and
#: PYTHONPATH, if set, point
REPO = Path(__file__).resolve().parents[3]


def mounts(*rw: Path) -> List[str]:
    """This interpreter, its environment and tx's sources (this checkout, and PYTHONPATH's
    entries) read-only at the same paths, and ``rw`` read-write."""
    ro = [os.path.realpath(x) for x in ("/usr", sys.base_prefix, sys.prefix, str(REPO),
                                        *os.environ.get("PYTHONPATH", "").split(os.pathsep)) if x]
    keep = [p for p in dict.fromkeys(ro) if (p == "/usr" or not p.startswith("/usr/")) and os.path.exists(p)]
    return [f"type=bind,src={p},dst={p},readonly" for p in keep] + [f"type=bind,src={p},dst={p}" for p in rw]


def role(tmp_path: Path, entrypoint: str, args: List[str]) -> Role:
    from tx.specs import parse_mounts

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    return Role("w", image=IMAGE, entrypoint=entrypoint, args=args, resource=Resource(cpu=1, gpu=0, memMB=1024),
                env={"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
                     "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "TX_CHECKPOINT_DIR": str(ckpt)},
                mounts=parse_mounts(mounts(tmp_path)))


def reclaim(aws: Moto, sched: AwsBatchScheduler, app_id: str, started: Path, grace: int) -> Tuple[float, int]:
    """Once ``started`` exists, stop the job's container as the ECS agent does (the engine's
    stop: SIGTERM, SIGKILL after ``grace`` s), then end the job as a Spot reclaim; the
    seconds the stop took (the engine's own cleanup included) and the container's exit code
    (137: SIGKILLed at the end of the grace; 143: it died of the warning's SIGTERM)."""
    import docker

    until(started.exists, timeout=180, every=0.2)
    job_id = sched.describe(app_id).metadata["job_id"]  # type: ignore[union-attr]
    client = docker.DockerClient(base_url=aws.extra_env["DOCKER_HOST"])
    try:
        (container,) = [c for c in client.containers.list() if job_id in c.name]
        # waiting from before the stop: the answer names the exit code even if moto removes
        # the container as soon as it sees it stopped
        ended: Dict[str, Any] = {}
        waiter = threading.Thread(target=lambda: ended.update(container.wait(timeout=grace + 120)), daemon=True)
        waiter.start()
        t0 = time.monotonic()
        container.stop(timeout=grace)
        took = time.monotonic() - t0
        waiter.join(grace + 120)
    finally:
        client.close()
    aws.client("batch").terminate_job(jobId=job_id, reason=RECLAIMED)
    assert "StatusCode" in ended, f"the engine's wait did not answer (the stop took {took:.2f} s)"
    return took, int(ended["StatusCode"])


def test_a_reclaimed_job_saves_in_the_stop_timeout(aws_docker: Moto, tmp_path: Path) -> None:
    require_module("torch", "the job saves with tx.distributed.save_checkpoint: pip install torch==2.13.0")
    sched = create_scheduler("tx", poll_interval=0.5)
    app_id = sched.submit(AppDef("spot", roles=[role(tmp_path, "python", ["-c", TRAIN, str(tmp_path / "started")])]),
                          {"queue": aws_docker.queue, "infra_retries": 0, "preempt_grace": 20})
    took, code = reclaim(aws_docker, sched, app_id, tmp_path / "started", 20)
    # it left on the warning (exit_preempted: SIGTERM, 143), not by the SIGKILL at the grace's end (137)
    assert code == 143, (code, took)
    desc = sched.wait(app_id, timeout=120, poll_interval=0.5)
    assert desc is not None and desc.state == AppState.FAILED, desc
    logs = "".join(sched.log_iter(app_id, "w", 0))
    assert "started grace 20.0\n" in logs, logs
    # the step the job saved, by its completion marker (moto's log collection may miss the
    # job's last line, printed as the container stops)
    found = latest_checkpoint(str(tmp_path / "ckpt"))
    assert found is not None, sorted(str(p) for p in tmp_path.rglob("*"))
    last = desc.attempts[-1]
    assert last.kind == FailureKind.INFRA, desc.attempts
    assert last.reason.startswith(f"{RECLAIMED[:-1]}; saved step {found[0]} in "), desc.attempts


def test_a_job_that_ignores_the_warning_is_killed_at_the_stop_timeout(aws_docker: Moto, tmp_path: Path) -> None:
    sched = create_scheduler("tx", poll_interval=0.5)
    script = f"trap 'echo warned' TERM; touch {tmp_path}/started; while true; do sleep 0.1; done"
    app_id = sched.submit(AppDef("spot", roles=[role(tmp_path, "sh", ["-c", script])]),
                          {"queue": aws_docker.queue, "infra_retries": 0, "preempt_grace": 2})
    took, code = reclaim(aws_docker, sched, app_id, tmp_path / "started", 2)
    assert code == 137 and took >= 2, (code, took)  # SIGKILLed at the end of the grace, not before
    desc = sched.wait(app_id, timeout=120, poll_interval=0.5)
    assert desc is not None and desc.state == AppState.FAILED, desc
    last = desc.attempts[-1]
    assert (last.kind, last.reason) == (
        FailureKind.INFRA, f"{RECLAIMED[:-1]}; no checkpoint saved before the kill; starts fresh"), desc.attempts


def test_dryrun_shows_the_grace(tx: Any, one_line_error: Any) -> None:
    """`tx run --dryrun` (the CLI) shows TX_PREEMPT_GRACE in the containers' env: 30 s (ECS's
    default stop timeout) unless preempt_grace says; a negative one is a one-line error."""
    for cfg, want in (("queue=q", 30), ("queue=q,preempt_grace=90", 90)):
        out = tx("run", "--dryrun", "-s", "aws_batch", "-cfg", cfg, "utils.echo")
        assert out.returncode == 0, out.stderr
        assert f"- name: TX_PREEMPT_GRACE\n          value: '{want}'\n" in out.stdout, out.stdout
    one_line_error(tx("run", "--dryrun", "-s", "aws_batch", "-cfg", "queue=q,preempt_grace=-1", "utils.echo"),
                   "preempt_grace must be whole seconds >= 0")


def test_a_checkpoint_dir_this_host_cannot_read_names_the_reclaim_only(tmp_path: Path) -> None:
    from tx_scheduler_aws_batch._attempts import batch_attempts, saves_of

    def job(loc: str) -> dict:
        env = [{"name": "TX_CHECKPOINT_DIR", "value": loc}, {"name": "TX_PREEMPT_GRACE", "value": "45"}]
        return {"nodeProperties": {"nodeRangeProperties": [{"container": {"environment": env}}]}}

    assert saves_of(job(str(tmp_path / "not-here"))) is None
    assert saves_of(job("s3://bucket/run")) is None
    assert saves_of(job(str(tmp_path))) == (str(tmp_path), 45.0)
    rec = {"statusReason": RECLAIMED, "container": {"exitCode": 143}, "stoppedAt": 1_800_000_000_000}
    assert batch_attempts([rec], AppState.FAILED)[0].reason == RECLAIMED
    assert batch_attempts([rec], AppState.FAILED, "", saves_of(job(str(tmp_path))))[0].reason == \
        f"{RECLAIMED[:-1]}; no checkpoint saved before the kill; starts fresh"
    # moto keeps the reason on the job only: the last attempt takes it
    assert batch_attempts([{"container": {"exitCode": 143}}], AppState.FAILED, RECLAIMED)[0].kind == FailureKind.INFRA
