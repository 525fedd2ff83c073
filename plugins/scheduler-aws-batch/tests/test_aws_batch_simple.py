"""aws_batch through boto3 against moto's Batch in simple mode (jobs end inside SubmitJob):
the job definition and tags as the emulator returns them, describe, list, cancel, and the
AWS error paths as one-line errors."""
from __future__ import annotations

import subprocess
import sys
from typing import Any, Dict

import pytest

from tx.schedulers import SchedulerError
from tx.specs import AppDef, AppState, Resource, Role
from tx_scheduler_aws_batch.request import TAG_APP_NAME, TAG_SESSION, TAG_USER, TAG_VERSION
from tx_scheduler_aws_batch.scheduler import AwsBatchScheduler, create_scheduler
from tx_scheduler_aws_batch.testing import Moto

FaultProxy = Any  # the fault_proxy fixture's type, of conftest.py (not importable with --import-mode=importlib)


def two_role_app(**meta: str) -> AppDef:
    return AppDef("train app", metadata=dict(meta), roles=[
        Role("trainer", image="repo/img:1", entrypoint="python", args=["-m", "train", "--rank", "${replica_id}"],
             env={"LR": "0.1", "TAG": "n${replica_id}"}, num_replicas=2, max_retries=2,
             resource=Resource(cpu=4, gpu=1, memMB=2048, capabilities={"node.kubernetes.io/instance-type": "g5.xlarge"})),
        Role("ps", image="repo/ps:1", entrypoint="echo", args=["ps"], resource=Resource(cpu=0, gpu=0, memMB=256)),
    ])


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text, text
    return text


def test_job_definition_and_tags_as_moto_returns_them(aws_simple: Moto) -> None:
    sched = create_scheduler("tsess")
    app_id = sched.submit(two_role_app(team="vision"), {"queue": aws_simple.queue, "user": "alice"})
    queue, name = app_id.rsplit(":", 1)
    assert queue == aws_simple.queue and name.startswith("train-app-")
    batch = aws_simple.client("batch")
    (jd,) = batch.describe_job_definitions(jobDefinitionName=name)["jobDefinitions"]
    assert jd["type"] == "multinode" and jd["status"] == "ACTIVE"
    (job,) = batch.describe_jobs(jobs=[batch.list_jobs(jobQueue=queue, filters=[
        {"name": "JOB_NAME", "values": [name]}])["jobSummaryList"][0]["jobId"]])["jobs"]
    # moto's describe_job_definitions leaves nodeProperties out; describe_jobs has them
    nodes = jd.get("nodeProperties") or job["nodeProperties"]
    assert nodes["numNodes"] == 3 and nodes["mainNode"] == 0
    trainer, ps = nodes["nodeRangeProperties"]
    assert [trainer["targetNodes"], ps["targetNodes"]] == ["0:1", "2:2"]
    c = trainer["container"]
    assert c["image"] == "repo/img:1"
    assert c["resourceRequirements"] == [
        {"type": "VCPU", "value": "4"}, {"type": "MEMORY", "value": "2048"}, {"type": "GPU", "value": "1"}]
    assert c["instanceType"] == "g5.xlarge"
    assert c["linuxParameters"]["sharedMemorySize"] == 2048
    assert c["linuxParameters"]["initProcessEnabled"] is True  # signals from inside reach the role
    assert c["logConfiguration"] == {"logDriver": "awslogs"}
    env = {e["name"]: e["value"] for e in c["environment"]}
    assert env["TX_ROLE_NAME"] == env["TORCHX_ROLE_NAME"] == "trainer"
    assert env["TX_ROLE_IDX"] == "0" and env["TX_APP_ID"] == app_id and env["LR"] == "0.1"
    assert ps["container"]["resourceRequirements"][0] == {"type": "VCPU", "value": "1"}  # at least 1 vCPU
    assert jd["retryStrategy"]["attempts"] == 6  # 2 retries + 1 + infra_retries (3) spares for host failures
    rules = [{k: v.upper() if k == "action" else v for k, v in r.items()} for r in jd["retryStrategy"]["evaluateOnExit"]]
    assert rules == [{"onStatusReason": "Host EC2*", "action": "RETRY"}, {"onReason": "*", "action": "RETRY"}]
    tags = jd["tags"]
    assert tags[TAG_APP_NAME] == "train app" and tags[TAG_USER] == "alice" and tags[TAG_SESSION] == "tsess"
    assert tags[TAG_VERSION] and tags["team"] == "vision"
    assert batch.list_tags_for_resource(resourceArn=job["jobArn"])["tags"] == tags
    assert job["jobDefinition"] == jd["jobDefinitionArn"]

    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    assert desc.ui_url == f"https://console.aws.amazon.com/batch/home?region=us-east-1#jobs/mnp-job/{job['jobId']}"
    got = {rs.role: sorted(r.id for r in rs.replicas) for rs in desc.roles_statuses}
    assert got == {"trainer": [0, 1], "ps": [0]}
    trainer_role = desc.roles[0]
    assert (trainer_role.name, trainer_role.image, trainer_role.entrypoint) == ("trainer", "repo/img:1", "python")
    assert trainer_role.args == ["-m", "train", "--rank", "${replica_id}"]
    assert trainer_role.env == {"LR": "0.1", "TAG": "n${replica_id}"}
    assert (trainer_role.num_replicas, trainer_role.resource.cpu, trainer_role.resource.gpu,
            trainer_role.resource.memMB) == (2, 4, 1, 2048)
    assert trainer_role.resource.capabilities == {"node.kubernetes.io/instance-type": "g5.xlarge"}


def test_share_id_and_priority_reach_submit_job(aws_simple: Moto) -> None:
    """botocore validates the parameters against the Batch API model and moto accepts them;
    moto does not return them (no fair-share scheduling), so the request is checked."""
    sched = create_scheduler("tx")
    info = sched.submit_dryrun(two_role_app(), {"queue": aws_simple.queue, "share_id": "teamA", "priority": 7})
    req = info.request
    assert req.submit["shareIdentifier"] == "teamA" and req.submit["schedulingPriorityOverride"] == 7
    assert req.job_def["schedulingPriority"] == 7
    app_id = sched.schedule(info)
    assert app_id.rsplit(":", 1)[1].startswith("train-app-teamA-")
    assert sched.describe(app_id).state == AppState.SUCCEEDED
    plain = sched.submit_dryrun(two_role_app(), {"queue": aws_simple.queue, "priority": 7}).request
    assert "shareIdentifier" not in plain.submit and "schedulingPriority" not in plain.job_def


def test_list_keeps_only_tx_jobs_and_fresh_process_sees_them(aws_simple: Moto) -> None:
    sched = create_scheduler("tx")
    app_id = sched.submit(two_role_app(), {"queue": aws_simple.queue})
    batch = aws_simple.client("batch")
    jd = batch.register_job_definition(jobDefinitionName="not-tx", type="container",
                                       containerProperties={"image": "x", "command": ["true"],
                                                            "resourceRequirements": [{"type": "VCPU", "value": "1"},
                                                                                     {"type": "MEMORY", "value": "64"}]})
    batch.submit_job(jobName="not-tx-job", jobQueue=aws_simple.queue, jobDefinition=jd["jobDefinitionArn"])
    listed = {a.app_id: a.state for a in sched.list()}
    assert listed[app_id] == AppState.SUCCEEDED
    assert not [a for a in listed if a.endswith(":not-tx-job")]
    # a fresh process configured only through the environment, as `tx status` would be
    code = (
        "from tx.plugins import get_registry; s = get_registry().get('schedulers', 'aws_batch').load()('tx'); "
        f"d = s.describe({app_id!r}); print(d.state.name, len(d.roles))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["SUCCEEDED", "2"]


def test_cancel_of_a_finished_or_unknown_app_changes_nothing(aws_simple: Moto) -> None:
    sched = create_scheduler("tx")
    app_id = sched.submit(two_role_app(), {"queue": aws_simple.queue})
    sched.cancel(app_id)
    assert sched.describe(app_id).state == AppState.SUCCEEDED
    sched.cancel(f"{aws_simple.queue}:never-submitted-123")
    sched.cancel("no-such-queue:never-submitted-123")
    assert sched.describe(f"{aws_simple.queue}:never-submitted-123") is None
    assert sched.describe("no-such-queue:never-submitted-123") is None
    assert sched.describe("not an app id") is None


def test_simple_mode_keeps_no_logs(aws_simple: Moto) -> None:
    sched = create_scheduler("tx")
    app_id = sched.submit(two_role_app(), {"queue": aws_simple.queue})
    assert list(sched.log_iter(app_id, "trainer", 1)) == []
    with pytest.raises(ValueError, match="replicas 0..1, not 2"):
        list(sched.log_iter(app_id, "trainer", 2))
    with pytest.raises(ValueError, match="no role 'nope'"):
        list(sched.log_iter(app_id, "nope", 0))
    with pytest.raises(ValueError, match="one combined log"):
        list(sched.log_iter(app_id, "ps", 0, streams="stderr"))


def test_log_of_replica_k_reads_node_role_start_plus_k(fault_proxy: FaultProxy, aws_simple: Moto) -> None:
    """TorchX's 2023 fix: the k-th replica of a role is node ``role start + k``."""
    sched = create_scheduler("tx")
    app_id = sched.submit(two_role_app(), {"queue": aws_simple.queue})  # trainer: nodes 0-1, ps: node 2
    job_id = sched.describe(app_id).metadata["job_id"]
    fault_proxy.bodies.clear()
    assert list(sched.log_iter(app_id, "ps", 0)) == []
    asked = [b for b in fault_proxy.bodies if f"{job_id}#".encode() in b]
    assert asked and all(f'"{job_id}#2"'.encode() in b for b in asked), asked
    fault_proxy.bodies.clear()
    list(sched.log_iter(app_id, "trainer", 1))
    assert any(f'"{job_id}#1"'.encode() in b for b in fault_proxy.bodies)


# -- error paths: one line each, nothing left behind ------------------------------------
def test_unknown_queue_deregisters_the_job_definition(aws_simple: Moto) -> None:
    sched = create_scheduler("tx")
    info = sched.submit_dryrun(two_role_app(), {"queue": "no-such-queue"})
    name = info.request.name
    with pytest.raises(SchedulerError) as ei:
        sched.schedule(info)
    text = one_line(ei.value)
    assert f"submitting job {name} to queue no-such-queue" in text and "does not exist" in text, text
    defs = aws_simple.client("batch").describe_job_definitions(jobDefinitionName=name)["jobDefinitions"]
    assert [d["status"] for d in defs] == ["INACTIVE"], defs


def test_throttling_is_retried_by_botocore(fault_proxy: FaultProxy, aws_simple: Moto) -> None:
    sched = create_scheduler("tx")
    fault_proxy.fail("ThrottlingException", 400, times=2)
    app_id = sched.submit(two_role_app(), {"queue": aws_simple.queue})
    assert fault_proxy.injected == 2 and fault_proxy.forwarded >= 2
    assert sched.describe(app_id).state == AppState.SUCCEEDED


def test_throttling_beyond_the_retries(fault_proxy: FaultProxy, aws_simple: Moto,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    sched = create_scheduler("tx")
    fault_proxy.fail("ThrottlingException", 400, times=-1)
    with pytest.raises(SchedulerError) as ei:
        sched.submit(two_role_app(), {"queue": aws_simple.queue})
    assert "throttled the request (ThrottlingException)" in one_line(ei.value)
    assert fault_proxy.injected == 2  # AWS_MAX_ATTEMPTS is honoured


def test_expired_credentials(fault_proxy: FaultProxy, aws_simple: Moto) -> None:
    fault_proxy.fail("ExpiredTokenException", 403, times=-1)
    with pytest.raises(SchedulerError) as ei:
        create_scheduler("tx").submit(two_role_app(), {"queue": aws_simple.queue})
    assert "AWS credentials expired (ExpiredTokenException)" in one_line(ei.value)
    assert fault_proxy.injected == 1  # not retried


def test_access_denied(moto_auth: Dict[str, str], monkeypatch: pytest.MonkeyPatch, aws_simple: Moto) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_auth["endpoint"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto_auth["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto_auth["secret"])
    with pytest.raises(SchedulerError) as ei:
        create_scheduler("tx").submit(two_role_app(), {"queue": "q"})
    text = one_line(ei.value)
    assert "registering job definition" in text and "access denied (AccessDenied:" in text and "batch:registerjobdefinition" in text, text
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIANOSUCHKEY0000000")
    with pytest.raises(SchedulerError) as ei:
        create_scheduler("tx").describe("q:some-job-1")
    assert "AWS rejected the credentials" in one_line(ei.value)


def test_no_region(aws_simple: Moto, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(SchedulerError) as ei:
        create_scheduler("tx").describe(f"{aws_simple.queue}:x-1")
    assert "no AWS region configured: set AWS_DEFAULT_REGION" in one_line(ei.value)


def test_service_endpoint_variables(aws_simple: Moto, monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_ENDPOINT_URL_BATCH / _LOGS point one service each, as for any AWS SDK."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL_BATCH", aws_simple.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_LOGS", aws_simple.endpoint)
    sched: AwsBatchScheduler = create_scheduler("tx")
    app_id = sched.submit(two_role_app(), {"queue": aws_simple.queue})
    assert sched.describe(app_id).state == AppState.SUCCEEDED
    assert list(sched.log_iter(app_id, "ps", 0)) == []


def test_constructor_arguments_win(aws_simple: Moto, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    sched = create_scheduler("tx", region="us-east-1", endpoint_url=aws_simple.endpoint)
    app_id = sched.submit(two_role_app(), {"queue": aws_simple.queue})
    desc = sched.describe(app_id)
    assert desc.state == AppState.SUCCEEDED and "region=us-east-1" in desc.ui_url


def test_unreachable_endpoint(aws_simple: Moto, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(SchedulerError) as ei:
        create_scheduler("tx").submit(two_role_app(), {"queue": aws_simple.queue})
    assert "cannot reach AWS" in one_line(ei.value)


def _cfg(moto: Moto) -> Dict[str, Any]:
    return {"queue": moto.queue}


def test_tx_cli_end_to_end(aws_simple: Moto, tmp_path: Any) -> None:
    """`tx run`, then `tx status`, `tx describe` and `tx list` as separate processes,
    located only through the environment."""
    tx = [sys.executable, "-m", "tx.cli.main"]

    def run(*args: str) -> str:
        p = subprocess.run([*tx, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p.stdout

    out = run("run", "-s", "aws_batch", "-cfg", f"queue={aws_simple.queue}", "utils.echo", "--msg", "hi")
    handle = next(w for w in out.split() if w.startswith("aws_batch://"))
    assert handle.startswith(f"aws_batch://tx/{aws_simple.queue}:echo-"), out
    assert "SUCCEEDED" in run("status", handle)
    assert "echo" in run("describe", handle)
    assert handle.rsplit("/", 1)[1] in run("list", "-s", "aws_batch")


def test_the_log_reads_every_attempts_stream_oldest_first(aws_simple: Moto) -> None:
    """A retry writes a new CloudWatch stream and CloudWatch keeps the old one: the log is
    every attempt's stream in turn, so the end of attempt 1 is never lost, even when the
    log archive last copied it before attempt 2 began. The job record is AWS's
    (AttemptDetail: each ended attempt's ``container.logStreamName``); moto never retries a
    job, its CloudWatch Logs are real."""
    import time as _time

    logs = aws_simple.client("logs")
    group = "/tx-test/attempts"
    logs.create_log_group(logGroupName=group)
    now = int(_time.time() * 1000)
    for stream, lines in (("j/1", ["attempt 1 line 1", "attempt 1 last line"]), ("j/2", ["attempt 2\n"])):
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        logs.put_log_events(logGroupName=group, logStreamName=stream,
                            logEvents=[{"timestamp": now + i, "message": m} for i, m in enumerate(lines)])
    job = {"jobId": "j", "status": "SUCCEEDED", "attempts": [{"container": {"logStreamName": "j/1"}},
                                                            {"container": {"logStreamName": "j/2"}}],
           "container": {"logStreamName": "j/2", "logConfiguration": {"options": {"awslogs-group": group}}}}
    sched = create_scheduler("tsess")
    assert list(sched._events(job, 0, None, None, tail=False)) == [
        "attempt 1 line 1\n", "attempt 1 last line\n", "attempt 2\n"]
    running = dict(job, status="RUNNING", attempts=job["attempts"][:1], container={**job["container"], "logStreamName": "j/2"})
    assert list(sched._events(running, 0, None, None, tail=False))[-1] == "attempt 2\n"  # the live one last
