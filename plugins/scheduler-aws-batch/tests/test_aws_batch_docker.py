"""aws_batch against moto's Batch in Docker mode: nodes run as real containers (podman),
their output lands in CloudWatch Logs."""
from __future__ import annotations

import datetime
import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, List

import pytest

from tx.components.dist import ddp
from tx.specs import AppDef, AppState, Resource, Role
from tx.testing import find_replica
from tx.testing.backends import container_output, require_module
from tx_scheduler_aws_batch.scheduler import AwsBatchScheduler, create_scheduler
from tx_scheduler_aws_batch.testing import Moto

IMAGE = "localhost/busybox:tx"


def sh_role(name: str, script: str, **kw: Any) -> Role:
    kw.setdefault("resource", Resource(cpu=1, gpu=0, memMB=64))
    return Role(name, image=IMAGE, entrypoint="sh", args=["-c", script], **kw)


def wait(sched: AwsBatchScheduler, app_id: str, timeout: float = 120) -> Any:
    desc = sched.wait(app_id, timeout=timeout, poll_interval=0.5)
    assert desc is not None and desc.state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED), desc
    return desc


def test_two_role_app_runs_in_containers_with_logs(aws_docker: Moto) -> None:
    sched = create_scheduler("tx", poll_interval=0.5)
    script = 'echo "role=$TX_ROLE_NAME idx=$TX_ROLE_IDX replica=$TX_REPLICA_ID rank0=$TX_RANK0_HOST app=$TX_APP_ID"; sleep 2'
    app = AppDef("tworole", roles=[sh_role("trainer", script), sh_role("reader", script)])
    app_id = sched.submit(app, {"queue": aws_docker.queue})
    seen: List[AppState] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        d = sched.describe(app_id)
        if not seen or seen[-1] != d.state:
            seen.append(d.state)
        if d.state in (AppState.SUCCEEDED, AppState.FAILED):
            break
        time.sleep(0.3)
    assert AppState.RUNNING in seen and seen[-1] == AppState.SUCCEEDED, seen
    # each node writes a log stream of its own (its node job's), as on AWS Batch
    desc = sched.describe(app_id)
    trainer_host = find_replica(desc, "trainer", 0).hostname
    assert trainer_host.startswith("10."), desc
    assert list(sched.log_iter(app_id, "reader", 0)) == [
        f"role=reader idx=1 replica=0 rank0={trainer_host} app={app_id}\n"]
    assert list(sched.log_iter(app_id, "trainer", 0)) == [f"role=trainer idx=0 replica=0 rank0=localhost app={app_id}\n"]
    assert {rs.role: [(r.id, r.state, r.exit_code) for r in rs.replicas] for rs in desc.roles_statuses} == {
        "trainer": [(0, AppState.SUCCEEDED, 0)], "reader": [(0, AppState.SUCCEEDED, 0)]}
    assert desc.structured_error_msg == "<NONE>" and desc.num_restarts == 0


def test_failing_node(aws_docker: Moto) -> None:
    sched = create_scheduler("tx", poll_interval=0.5)
    app = AppDef("failnode", roles=[
        sh_role("ok", "echo fine; sleep 1"),
        sh_role("bad", 'echo "about to fail" ; echo "boom on $TX_ROLE_NAME" >&2; exit 3'),
    ])
    app_id = sched.submit(app, {"queue": aws_docker.queue})
    desc = wait(sched, app_id)
    assert desc.state == AppState.FAILED, desc
    # the failed node (its node job: exit code, log stream) and its last log lines, in one line
    assert desc.structured_error_msg == "bad[0] (node 1) failed with exit code 3; last lines: about to fail | boom on bad", (
        desc.structured_error_msg)
    assert (find_replica(desc, "bad", 0).state, find_replica(desc, "bad", 0).exit_code) == (AppState.FAILED, 3)
    assert (find_replica(desc, "ok", 0).state, find_replica(desc, "ok", 0).exit_code) == (AppState.SUCCEEDED, 0)
    assert "boom on bad\n" in list(sched.log_iter(app_id, "bad", 0))


def test_log_window_regex_and_tail(aws_docker: Moto) -> None:
    sched = create_scheduler("tx", poll_interval=0.5)
    app = AppDef("logs", roles=[sh_role("w", "for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done")])
    app_id = sched.submit(app, {"queue": aws_docker.queue})
    started = datetime.datetime.now()
    # tailing from submission re-polls until the job ends, and returns every line once
    tailed = list(sched.log_iter(app_id, "w", 0, should_tail=True))
    assert tailed == [f"line {i}\n" for i in range(1, 6)], tailed
    assert sched.describe(app_id).state == AppState.SUCCEEDED
    assert list(sched.log_iter(app_id, "w", 0, regex=r"line [24]")) == ["line 2\n", "line 4\n"]
    hour = datetime.timedelta(hours=1)
    assert list(sched.log_iter(app_id, "w", 0, since=started + hour)) == []
    assert list(sched.log_iter(app_id, "w", 0, until=started - hour)) == []
    assert list(sched.log_iter(app_id, "w", 0, since=started - hour, until=started + hour)) == tailed


def _transition(endpoint: str, seconds: float = 0) -> None:
    """moto's state manager: Batch jobs move to their next state every ``seconds``
    (0: back to moto's default)."""
    if seconds:
        path, body = "set-transition", {"model_name": "batch::job", "transition": {"progression": "time", "seconds": seconds}}
    else:
        path, body = "unset-transition", {"model_name": "batch::job"}
    req = urllib.request.Request(f"{endpoint}/moto-api/state-manager/{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req, timeout=10).read()


def test_runnable_job_says_why_it_waits_and_cancel_before_start(aws_docker: Moto) -> None:
    batch = aws_docker.client("batch")
    role = aws_docker.client("iam").create_role(RoleName="tx-batch-off", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    ce = batch.create_compute_environment(computeEnvironmentName="tx-ce-off", type="UNMANAGED", state="DISABLED",
                                          serviceRole=role)
    batch.create_job_queue(jobQueueName="tx-q-off", state="ENABLED", priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce["computeEnvironmentArn"]}])
    sched = create_scheduler("tx", poll_interval=0.5)
    _transition(aws_docker.endpoint, 1.5)
    try:
        app_id = sched.submit(AppDef("waits", roles=[sh_role("w", "echo never")]), {"queue": "tx-q-off"})
        deadline = time.monotonic() + 60
        msgs = []
        while time.monotonic() < deadline:
            d = sched.describe(app_id)
            msgs.append(d.msg)
            if d.msg.startswith("RUNNABLE"):
                break
            assert d.state == AppState.PENDING, d
            time.sleep(0.2)
        assert d.state == AppState.PENDING, msgs
        assert d.msg == "RUNNABLE: waiting for compute in queue tx-q-off; compute environment tx-ce-off is DISABLED", msgs
        sched.cancel(app_id)
        desc = wait(sched, app_id)
        assert desc.state == AppState.CANCELLED, desc
    finally:
        _transition(aws_docker.endpoint)


def test_wrapper_in_the_image_shell_with_aws_node_variables(aws_docker: Moto) -> None:
    """The node command in the container image's own shell (busybox), run directly with the
    variables AWS sets on node 3 of a job: replica 1 of the role starting at 2."""
    import docker

    app = AppDef("wrap", roles=[
        sh_role("first", "true", num_replicas=2),
        sh_role("second", 'printf "%s|%s|%s|%s|" "$TX_REPLICA_ID" "$TORCHX_REPLICA_IDX" "$TX_RANK0_HOST" "$1"; '
                          'echo "$TAG"', num_replicas=2, env={"TAG": "t${replica_id}"}),
    ])
    app.roles[1].args += ["x", "arg${replica_id}"]
    req = create_scheduler("tx").submit_dryrun(app, {"queue": aws_docker.queue}).request
    c = req.job_def["nodeProperties"]["nodeRangeProperties"][1]["container"]
    env = {e["name"]: e["value"] for e in c["environment"]}
    env.update(AWS_BATCH_JOB_NODE_INDEX="3", AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS="10.1.2.3")
    client = docker.DockerClient(base_url=aws_docker.extra_env["DOCKER_HOST"])
    try:
        out = container_output(client, IMAGE, c["command"], environment=env)
    finally:
        client.close()
    assert out.decode() == "1|1|10.1.2.3|arg1|t1\n"


#: a DDP script whose rank 1 raises after init_process_group
FAILING_RANK = """\
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise RuntimeError("CUDA out of memory (simulated)")
dist.barrier()
"""


def test_failed_rank_is_named(aws_docker: Moto, tmp_path: Any) -> None:
    """dist.ddp -j 1x2 in one container whose rank 1 raises: structured_error_msg names the
    rank, its exception and where it was raised, read from the job's CloudWatch log
    (tx.schedulers.why), the one line every scheduler gives. This interpreter, its
    environment (torch) and the script are bind-mounted read-only into the busybox image at
    the same paths (as the local_docker DDP tests do)."""
    require_module("torch", "the DDP app runs torchrun: pip install torch==2.13.0")
    (tmp_path / "train.py").write_text(FAILING_RANK)
    mounts = [f"type=bind,src={p},dst={p},readonly" for p in dict.fromkeys(
        os.path.realpath(x) for x in ("/usr", sys.base_prefix, sys.prefix, str(tmp_path)))
        if p == "/usr" or not p.startswith("/usr/")]
    app = ddp(script=str(tmp_path / "train.py"), image=IMAGE, j="1x2", cpu=1, memMB=1024,
              env={"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"},
              mounts=mounts)
    sched = create_scheduler("tx", poll_interval=0.5)
    app_id = sched.submit(app, {"queue": aws_docker.queue})
    desc = wait(sched, app_id, timeout=240)
    assert desc.state == AppState.FAILED, desc
    why = "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:5 (exit code 1)"
    assert desc.structured_error_msg == why, desc
    assert desc.root_cause is not None and (desc.root_cause.rank, desc.root_cause.exception_type) == (1, "RuntimeError")
    assert find_replica(desc, "train", 0).structured_error_msg == why


def test_sweep_array_children_run_their_trials(aws_docker: Moto, tmp_path: Any, monkeypatch: Any) -> None:
    """A 2x3 grid as one array job in moto's Docker mode: moto runs each child as a container
    (busybox: sh, base64, gunzip) with AWS_BATCH_JOB_ID = <array job id>:<index> (it sets no
    AWS_BATCH_JOB_ARRAY_INDEX), each child runs its own trial, and each trial's log is its
    child's CloudWatch stream (the DDP example's grid: the next test)."""
    from tx.runner import Runner
    from tx.specs.sweep import SweepSpec

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    app = AppDef("grid", roles=[sh_role("t", 'echo "lr=${lr} b=${b} trial=$TX_TRIAL_INDEX params=$TX_TRIAL_PARAMS"')])
    with Runner() as runner:
        handle = runner.run_sweep(app, SweepSpec(grid={"lr": [0.1, 1], "b": [1, 2, 3]}), "aws_batch",
                                  cfg={"queue": aws_docker.queue})
        deadline = time.monotonic() + 180
        while True:
            st = runner.sweep_status(handle)
            if all(t.state in (AppState.SUCCEEDED, AppState.FAILED) for t in st.trials) or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert [t.state for t in st.trials] == [AppState.SUCCEEDED] * 6, st.format()
        out = "".join(runner.log_lines(st.trials[4].app_handle, "t", 0))
    assert out.strip() == 'lr=1 b=2 trial=4 params={"b": 2, "lr": 1}', out


def test_an_ended_array_is_read_from_its_counts_and_its_failed_children(aws_docker: Moto, tmp_path: Any,
                                                                        monkeypatch: Any) -> None:
    """Once every child of a sweep's array has ended, its status is the parent's child counts
    (statusSummary: moto has them only in DescribeJobs) and one ListJobs of its FAILED
    children, the others SUCCEEDED, not a DescribeJobs per 100 children; while children
    run, they are described as before. Trials 1 and 3 exit 3 (moto runs the children as
    containers): the status names exactly those FAILED (the status of the sweep then also
    reads each FAILED trial's error, a describe each: ``tx status`` shows why it failed)."""
    from tx.runner import Runner
    from tx.runner import sweep as sw
    from tx.specs.sweep import SweepSpec

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    app = AppDef("ended", roles=[sh_role("t", 'test "$((${k} % 2))" = 1 && exit 3; exit 0')])
    with Runner() as runner:
        calls: List[str] = []
        runner.scheduler("aws_batch")._aws.batch.meta.events.register(
            "before-call.batch.*", lambda model, **_: calls.append(model.name))
        handle = runner.run_sweep(app, SweepSpec(grid={"k": [0, 1, 2, 3]}), "aws_batch",
                                  cfg={"queue": aws_docker.queue})
        deadline = time.monotonic() + 180
        while True:
            calls.clear()
            st = runner.sweep_status(handle)
            if all(t.state in (AppState.SUCCEEDED, AppState.FAILED) for t in st.trials):
                break
            assert time.monotonic() < deadline, st.format()
            time.sleep(1)
        assert [t.state for t in st.trials] == [AppState.SUCCEEDED, AppState.FAILED] * 2, st.format()
        ids = [t.attempts[-1] for t in sw.load_record(handle).trials]
        calls.clear()
        states = runner.scheduler("aws_batch").states_of(ids)
        assert states == dict(zip(ids, [AppState.SUCCEEDED, AppState.FAILED] * 2)), states
        # the array by name, its counts (the parent), its failed children: no child described
        assert calls == ["ListJobs", "DescribeJobs", "ListJobs"], calls
    with Runner() as fresh:  # as `tx status SWEEP` in a process of its own
        calls.clear()
        fresh.scheduler("aws_batch")._aws.batch.meta.events.register(
            "before-call.batch.*", lambda model, **_: calls.append(model.name))
        st = fresh.sweep_status(handle)
        # then the FAILED trials described for why they failed, by 100 in one DescribeJobs (it was
        # one each): the array's id is kept, no ListJobs more
        assert calls == ["ListJobs", "DescribeJobs", "ListJobs", "DescribeJobs"], calls
        assert [t.state for t in st.trials] == [AppState.SUCCEEDED, AppState.FAILED] * 2, st.format()
        whys = [t.why for t in st.trials if t.state == AppState.FAILED]
    for t in st.trials[1::2]:  # the same why as a trial described alone, by a process of its own
        with Runner() as alone:
            desc = alone.scheduler("aws_batch").describe(str(t.app_handle).rsplit("/", 1)[1])
            assert desc is not None and desc.state == AppState.FAILED
            assert whys[t.index // 2] == " ".join((desc.structured_error_msg if desc.structured_error_msg != "<NONE>"
                                                   else desc.msg).split())[:120], (whys, desc)
    with Runner() as fresh:
        fresh.scheduler("aws_batch")._aws.batch.meta.events.register(
            "before-call.batch.*", lambda model, **_: calls.append(model.name))
        fresh.sweep_status(handle)
        calls.clear()
        assert fresh.sweep_status(handle).format() == st.format()
        assert calls == ["ListJobs", "DescribeJobs", "ListJobs"], calls  # a FAILED child's record is final: kept


#: a trial's program for the CLI sweep: python reads its parameters (``--lr``,
#: ``--batch-size``, as the DDP example would); the trials with batch 32 wait for the file
#: ``--gate`` (the test creates it once they are cancelled: their cancel cannot come too
#: late; they give up after 200 s); each writes its parameters with its TX_TRIAL_INDEX to
#: ``<--output-dir>/result.json`` and prints them. Cheap on purpose: a trial is an array
#: child whatever it runs; the DDP example as a sweep trains for real in
#: tests/test_sweep_e2e.py, and DDP on aws_batch in test_failed_rank_is_named and
#: tests/test_portability.py
GATED_TRIAL = """import json, os, sys, time
a = dict(zip(sys.argv[1::2], sys.argv[2::2]))
r = dict(trial=int(os.environ["TX_TRIAL_INDEX"]), lr=float(a["--lr"]), batch=int(a["--batch-size"]))
t0 = time.monotonic()
while r["batch"] == 32 and not os.path.exists(a["--gate"]):
    assert time.monotonic() - t0 < 200, "no gate: the test was to cancel this trial"
    time.sleep(0.1)
os.makedirs(a["--output-dir"], exist_ok=True)
json.dump(r, open(os.path.join(a["--output-dir"], "result.json"), "w"))
print("trained", json.dumps(r, sort_keys=True))
"""


@pytest.mark.timeout(300)
def test_a_2x3_grid_one_array_and_resume_reruns_exactly_the_cancelled(
        aws_docker: Moto, tmp_path: Any, monkeypatch: Any) -> None:
    """`tx sweep -s aws_batch ... utils.sh --entrypoint python -- -c GATED_TRIAL ...`: one
    array job whose children moto runs as containers, each finding its trial from
    AWS_BATCH_JOB_ID (``<array job id>:<i>``, all moto sets: it has no
    AWS_BATCH_JOB_ARRAY_INDEX), each writing its result (a bind mount). Trials 1 and 4 wait
    for the gate and are cancelled (``terminate_job`` of their children); `tx sweep resume`
    reruns exactly those, as one new array job of two children. Python is bind-mounted read-only into the
    busybox image at its paths, as in :func:`test_failed_rank_is_named`; ``python -S``: the
    trial needs only the standard library, and the environment's .pth files (editable
    installs) name paths that are not mounted in the container."""
    import subprocess

    from tx.runner import Runner
    from tx.runner import sweep as sw

    out = tmp_path / "out"
    out.mkdir()
    gate = out / "go"
    mounts = [f"type=bind,src={p},dst={p},readonly" for p in dict.fromkeys(
        os.path.realpath(x) for x in ("/usr", sys.base_prefix, sys.prefix))
        if p == "/usr" or not p.startswith("/usr/")]
    mounts += [f"type=bind,src={out},dst={out}"]
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", HOME=str(tmp_path), TX_STATE_DIR=str(tmp_path / "state"))

    def tx(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "tx"), *args], cwd=str(tmp_path), env=env, capture_output=True,
                              text=True, timeout=200)

    p = tx("sweep", "-s", "aws_batch", "-cfg", f"queue={aws_docker.queue}", "--grid", "lr=0.05,0.1",
           "--grid", "batch=16,32,64", "utils.sh", "--image", IMAGE, "--cpu", "1", "--memMB", "256",
           "--env", f"PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin,HOME=/tmp", "--mounts", ",".join(mounts),
           "--entrypoint", "python", "--", "-S", "-c", GATED_TRIAL, "--lr", "${lr}", "--batch-size", "${batch}",
           "--output-dir", f"{out}/${{lr}}-${{batch}}", "--gate", str(gate))
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    handle = p.stdout.splitlines()[0]
    monkeypatch.setenv("TX_STATE_DIR", env["TX_STATE_DIR"])
    with Runner() as runner:
        rec = sw.load_record(handle)
        array = rec.trials[0].attempts[0].rsplit(":", 1)[0]
        assert [t.attempts for t in rec.trials] == [[f"{array}:{i}"] for i in range(6)]  # one array job
        session = handle.rsplit("/", 1)[0]
        for i in (1, 4):
            runner.cancel(f"{session}/{array}:{i}")
        deadline = time.monotonic() + 150
        while True:
            st = runner.sweep_status(handle)
            if all(t.state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED) for t in st.trials):
                break
            assert time.monotonic() < deadline, st.format()
            time.sleep(0.5)
        assert [t.state for t in st.trials] == [AppState.SUCCEEDED, AppState.CANCELLED, AppState.SUCCEEDED] * 2, \
            st.format()
        log = "".join(runner.log_lines(st.trials[5].app_handle, "sh", 0))
        assert log.strip() == 'trained {"batch": 64, "lr": 0.1, "trial": 5}', log
    assert sorted(os.listdir(out)) == ["0.05-16", "0.05-64", "0.1-16", "0.1-64"]  # the cancelled wrote nothing
    gate.write_text("")
    r = tx("sweep", "resume", handle, "--wait")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.startswith(f"{handle}: resumed 2 trial(s): 1,4\n"), r.stdout
    st = json.loads(tx("status", handle, "--json").stdout)
    assert st["state"] == "SUCCEEDED" and [t["attempts"] for t in st["trials"]] == [1, 2, 1, 1, 2, 1], st
    # the reruns are the two children of one new array job
    again = st["trials"][1]["app_handle"].rsplit(":", 1)[0]
    assert again != f"{session}/{array}", st
    assert [st["trials"][i]["app_handle"] for i in (1, 4)] == [f"{again}:0", f"{again}:1"], st
    trials = [(lr, b) for lr in (0.05, 0.1) for b in (16, 32, 64)]
    assert sorted(os.listdir(out)) == sorted([f"{lr}-{b}" for lr, b in trials] + ["go"])
    for k, (lr, b) in enumerate(trials):
        assert json.loads((out / f"{lr}-{b}" / "result.json").read_text()) == {"trial": k, "lr": lr, "batch": b}
