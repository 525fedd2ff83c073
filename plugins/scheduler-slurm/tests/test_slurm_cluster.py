"""The slurm scheduler against the real local cluster (scripts/start-slurm.sh), API level:
a DDP run whose rank fails, two roles, a failing replica, cancel, a requeue retry, list, logs
(tail, regex, streams), quoting, errors. The two-node DDP run with rendezvous through the
rank-0 node's address is test_slurm_cli.py's (through the CLI)."""
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, List

import pytest

from tx.runner import get_runner
from tx.specs import AppDef, AppState, InvalidRunConfigException, Resource, Role
from tx.workspace.api import WorkspaceError
from tx_scheduler_slurm import _client
from tx_scheduler_slurm._client import SlurmCommandError
from tx_scheduler_slurm._parse import parse_config
from tx_scheduler_slurm._cluster import query_cluster
from tx_scheduler_slurm.scheduler import SlurmScheduler
from tx.testing.backends import backend_unavailable, require_module

pytestmark = pytest.mark.slurm


def accounting_enabled() -> bool:
    """Whether the cluster runs accounting (scripts/start-slurm.sh: only with SLURM_ACCT=1)."""
    conf = parse_config(_client.run(["scontrol", "show", "config"]).stdout)
    return conf.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none"


def cluster_has_gpus() -> bool:
    """Whether the nodes have GRES gpu (scripts/start-slurm.sh: fake ones, SLURM_FAKE_GPUS)."""
    return "gpu:" in _client.run(["sinfo", "--noheader", "--format=%G"]).stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_node_names_do_not_resolve_on_the_test_cluster(slurm_nodes: List[str]) -> None:
    """The premise of the rendezvous test: Slurm's node names are not host names here."""
    assert {"node1", "node2"} <= set(slurm_nodes)
    with pytest.raises(OSError):
        socket.getaddrinfo("node1", 29500)


#: a DDP script whose rank 1 raises after init_process_group (torch's excepthook then
#: prefixes its traceback with ``[rank1]:``)
FAILING_RANK = """\
import os
import torch.distributed as dist

dist.init_process_group("gloo")
print(f"PET_LOCAL_ADDR={os.environ.get('PET_LOCAL_ADDR')}", flush=True)
if dist.get_rank() == 1:
    raise RuntimeError("CUDA out of memory (simulated)")
dist.barrier()
"""


def test_failed_rank_is_named(slurm_nodes: List[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dist.ddp -j 1x2 whose rank 1 raises: structured_error_msg names the rank, its
    exception and where it was raised, read from the replica's stderr (tx.schedulers.why),
    in the same one line as every scheduler; the launcher gave torchrun the node's NodeAddr
    as PET_LOCAL_ADDR."""
    require_module("torch", "the DDP app runs torchrun: pip install torch==2.13.0")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    script = tmp_path / "train.py"
    script.write_text(FAILING_RANK)
    with get_runner() as runner:
        handle = runner.run_component(
            "dist.ddp", ["-j", "1x2", "--rdzv_port", str(free_port()), "--script", str(script)],
            "slurm", cfg={"job_dir": str(tmp_path / "job")},
        )
        status = runner.wait(handle, wait_interval=1, timeout=300)
        out = "".join(runner.log_lines(handle, "train", 0))
    assert status is not None and status.state == AppState.FAILED, status
    why = "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:7 (exit code 1)"
    assert status.structured_error_msg == why, status.format()
    assert status.root_cause is not None and (status.root_cause.rank, status.root_cause.exception_type) == (
        1, "RuntimeError")
    assert status.roles[0].replicas[0].structured_error_msg == why
    assert "PET_LOCAL_ADDR=127.0.0.1" in out, out  # the NodeAddr


def test_two_roles_each_replica_gets_its_env(apps: Any) -> None:
    prog = ("import json,os; print(json.dumps({k: os.environ[k] for k in "
            "('TX_ROLE_NAME','TX_REPLICA_ID','TX_APP_ID','TX_RANK0_HOST','FEED')}))")
    trainer = apps.role("trainer", apps.py, ["-c", prog], env={"FEED": "t-${replica_id}"})
    reader = apps.role("reader", apps.py, ["-c", prog], env={"FEED": "r-${replica_id}-${app_id}"})
    app_id = apps.submit([trainer, reader], name="tworoles")
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert [(r.name, r.num_replicas) for r in desc.roles] == [("trainer", 1), ("reader", 1)]
    assert [r.resource.cpu for r in desc.roles] == [1, 1]
    assert {rs.role: [r.state for r in rs.replicas] for rs in desc.roles_statuses} == {
        "trainer": [AppState.SUCCEEDED], "reader": [AppState.SUCCEEDED]}
    assert json.loads(apps.text(app_id, "trainer")) == {
        "TX_ROLE_NAME": "trainer", "TX_REPLICA_ID": "0", "TX_APP_ID": app_id,
        "TX_RANK0_HOST": "127.0.0.1", "FEED": "t-0"}
    assert json.loads(apps.text(app_id, "reader"))["FEED"] == f"r-0-{app_id}"
    assert desc.metadata["work_dir"] == str(apps.job_dir)


def test_failing_replica_is_failed_with_its_exit_code(apps: Any) -> None:
    """Replica 1 exits 7; srun's --kill-on-bad-exit then terminates replica 0 (SIGTERM: exit
    code 143). Replica 1 fails only once replica 0's program runs (its ``up`` line is in
    its file). Failing at once, it had replica 0's step terminated 0.06 s after that step
    was launched (slurmd's log), while replica 0 was still starting (slurmstepd's task
    setup, tx's launcher): what replica 0 then records depended on where its start was,
    and a program that started after the SIGTERM ran on until the SIGKILL KillWait (5 s)
    later: exit code 137, as once in a full run at load 13-25. (The launcher now also
    passes a SIGTERM that reaches it on to its program, or does not start it.)"""
    script = ('if [ "${replica_id}" = 1 ]; then '
              'for i in $(seq 600); do grep -qx up "slurm-$TX_APP_ID-worker-0.out" && break; sleep 0.1; done; '
              'echo "bad input file" >&2; exit 7; fi; echo up; sleep 30')
    app_id = apps.submit([apps.role("worker", "sh", ["-c", script], replicas=2)], name="fail")
    desc = apps.wait(app_id)
    assert desc.state == AppState.FAILED and desc.msg.startswith("FAILED"), desc
    bad = apps.replica(desc, "worker", 1)
    assert (bad.state, bad.exit_code, bad.structured_error_msg) == (AppState.FAILED, 7, "bad input file")
    assert desc.structured_error_msg == f"worker[1] (het component 1 on {bad.hostname}): exit code 7: bad input file"
    other = apps.replica(desc, "worker", 0)  # killed by srun --kill-on-bad-exit
    assert other.state == AppState.FAILED and other.exit_code == 143, other
    assert (apps.job_dir / f"slurm-{app_id}-worker-0.exitcode").read_text() == "0 143\n"  # its own record
    with get_runner() as runner:
        text = runner.status(f"slurm://tx/{app_id}").format()
    assert "worker[1]:FAILED (exit code 7)" in text, text


def test_cancel(apps: Any) -> None:
    app_id = apps.submit([apps.role("sleeper", "sh", ["-c", "echo up; sleep 600"], replicas=2)], name="c")
    for _line in apps.sched.log_iter(app_id, "sleeper", 1, should_tail=True, regex="^up"):
        break  # the replica runs
    apps.sched.cancel(app_id)
    desc = apps.wait(app_id)
    assert desc.state == AppState.CANCELLED, desc
    assert all(r.state == AppState.CANCELLED for rs in desc.roles_statuses for r in rs.replicas), desc
    apps.sched.cancel(app_id)  # idempotent
    assert apps.sched.describe(app_id).state == AppState.CANCELLED


def test_requeue_retry(apps: Any) -> None:
    """max_retries=1: the first attempt fails, the script requeues the job, the second
    attempt succeeds; num_restarts counts it and the logs keep both attempts.

    In attempt 0 replica 1 writes its line and then runs until srun's --kill-on-bad-exit
    terminates it; replica 0 fails only once replica 1's line is in its file. (With both
    replicas failing at once, a replica the load made slow was terminated before it wrote
    anything: its log then rightly held only ``attempt 1``.) So this also shows that what a
    terminated replica wrote stays, across the requeue (``--open-mode=append``)."""
    script = ('n=${SLURM_RESTART_COUNT:-0}; echo "attempt $n"; [ "$n" -ge 1 ] && exit 0; '
              'if [ "$TX_REPLICA_ID" = 1 ]; then exec sleep 600; fi; '
              'for i in $(seq 600); do grep -qx "attempt 0" "slurm-$TX_APP_ID-flaky-1.out" && exit 1; '
              'sleep 0.1; done; exit 9')
    app_id = apps.submit([apps.role("flaky", "sh", ["-c", script], replicas=2, max_retries=1)], name="rq")
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED and desc.num_restarts == 1, desc
    assert all(r.exit_code == 0 for r in desc.roles_statuses[0].replicas)
    for k in (0, 1):
        assert apps.text(app_id, "flaky", k) == "attempt 0\nattempt 1\n"
    batch = (apps.job_dir / f"slurm-{app_id}.out").read_text()
    assert "[tx] requeueing (retry 1 of 1)" in batch, batch
    assert "Exited with exit code 1\n" in batch, batch  # replica 0 failed (exit 9: it timed out)


def test_retries_run_out(apps: Any) -> None:
    app_id = apps.submit([apps.role("bad", "sh", ["-c", "exit 5"], max_retries=1)], name="rq2")
    desc = apps.wait(app_id)
    assert desc.state == AppState.FAILED and desc.num_restarts == 1, desc
    assert apps.replica(desc, "bad", 0).exit_code == 5


def test_list(apps: Any) -> None:
    done = apps.submit([apps.role("one", "true", [])], name="l1")
    apps.wait(done)
    running = apps.submit([apps.role("two", "sleep", ["600"])], name="l2")
    listed = {a.app_id: a for a in apps.sched.list()}
    assert listed[done].state == AppState.SUCCEEDED and listed[done].name == "l1"
    assert listed[running].state in (AppState.PENDING, AppState.RUNNING)
    assert all(isinstance(a.state, AppState) for a in listed.values())
    with get_runner() as runner:
        handles = [a.app_handle for a in runner.list("slurm")]
    assert f"slurm://tx/{running}" in handles


def test_logs_tail_regex_and_streams(apps: Any) -> None:
    script = 'for i in 1 2 3 4 5; do echo "line $i"; echo "warn $i" >&2; sleep 0.2; done; printf "no newline"'
    app_id = apps.submit([apps.role("talker", "sh", ["-c", script])], name="logs")
    followed: List[str] = []
    reader = threading.Thread(target=lambda: followed.extend(apps.sched.log_iter(app_id, "talker", 0, should_tail=True)))
    reader.start()  # follows from before the job starts to after it ends
    reader.join(timeout=300)
    assert not reader.is_alive()
    assert followed == [f"line {i}\n" for i in range(1, 6)] + ["no newline"]
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    assert list(apps.sched.log_iter(app_id, "talker", 0, regex=r"line [24]")) == ["line 2\n", "line 4\n"]
    assert list(apps.sched.log_iter(app_id, "talker", 0, streams="stderr")) == [f"warn {i}\n" for i in range(1, 6)]
    blocks = list(apps.sched.log_iter_blocks(app_id, "talker", 0))
    assert b"".join(blocks) == b"".join(f"line {i}\n".encode() for i in range(1, 6)) + b"no newline"
    with pytest.raises(ValueError, match="separate files"):
        apps.sched.log_iter(app_id, "talker", 0, streams="combined")
    with pytest.raises(ValueError, match=r"no replica talker/3; replicas: talker/0"):
        apps.sched.log_iter(app_id, "talker", 3)


def test_arguments_and_env_reach_the_program_unchanged(apps: Any) -> None:
    nasty = [":", "+:", "a;b", "$(touch pwned)", "`id`", "'", '"', "l1\nl2", "", " sp ", "\\", "*",
             "$HOME", "${app_id}", "a,b", "%j", "é"]
    prog = "import json,os,sys; print(json.dumps([sys.argv[1:], os.environ['V']]))"
    app_id = apps.submit([apps.role("q", apps.py, ["-c", prog, *nasty], env={"V": "x,y;$(z) '\"\n%"})], name="q")
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    argv, env = json.loads(apps.text(app_id, "q"))
    assert argv == [a.replace("${app_id}", app_id) for a in nasty]
    assert env == "x,y;$(z) '\"\n%"
    assert not (apps.job_dir / "pwned").exists()


def test_describe_unknown_and_finished_jobs(apps: Any) -> None:
    assert apps.sched.describe("2147480001") is None
    assert apps.sched.describe("not-a-job-id") is None
    app_id = apps.submit([apps.role("one", "true", [])], name="d")
    apps.wait(app_id)
    desc = apps.sched.describe(app_id)
    assert desc.state == AppState.SUCCEEDED and desc.metadata["source"] == "squeue"


def test_jobcomp_file_describes_a_finished_job(apps: Any) -> None:
    """Without accounting, jobs slurmctld forgot are read from the jobcomp/filetxt file."""
    # replica 1 fails a second after replica 0 ended, so srun kills nothing
    app_id = apps.submit([apps.role("w", "sh", ["-c", "sleep ${replica_id}; exit ${replica_id}"], replicas=2)],
                         name="jc")
    live = apps.wait(app_id)
    recs = apps.sched._jobcomp(app_id)
    assert [(r.name, r.state, r.work_dir) for r in recs] == [
        ("jc@w-0", "FAILED", str(apps.job_dir)), ("jc@w-1", "FAILED", str(apps.job_dir))]
    if not accounting_enabled():
        assert apps.sched._sacct(["--jobs", app_id], app_id) == []
    from tx_scheduler_slurm._status import build_describe

    desc = build_describe(app_id, recs, "jobcomp")
    assert desc.state == AppState.FAILED and [r.exit_code for r in desc.roles_statuses[0].replicas] == [0, 1]
    assert [r.state for r in desc.roles_statuses[0].replicas] == [
        r.state for r in live.roles_statuses[0].replicas]


def test_cluster_facts_shape_the_request(slurm_nodes: List[str], sched: SlurmScheduler) -> None:
    info = query_cluster()
    assert info.partitions["debug"].nodes == len(slurm_nodes) and info.partitions["debug"].default
    assert info.version is not None
    with pytest.raises(InvalidRunConfigException, match="no partition 'nosuch'"):
        sched.submit_dryrun(AppDef("p", roles=[Role("r", entrypoint="true")]), {"partition": "nosuch"})
    too_many = Role("r", entrypoint="true", num_replicas=len(slurm_nodes) + 1)
    with pytest.raises(ValueError, match="Slurm never puts two components on one node"):
        sched.submit_dryrun(AppDef("p", roles=[too_many]), {})


def test_cluster_facts_from_one_partition_rpc_are_sinfos(slurm_nodes: List[str], sbatch_calls: List[List[str]]) -> None:
    """One ``scontrol show partition`` (one RPC) with slurm.conf's nodes gives what sinfo
    (two RPCs) gives, GraceTime included in the same answer."""
    from tx_scheduler_slurm._parse import SINFO_FORMAT, parse_sinfo

    sinfo = parse_sinfo(_client.run(["sinfo", "--noheader", "--noconvert", f"--format={SINFO_FORMAT}"]).stdout)
    sbatch_calls.clear()  # the sinfo above is the test's own
    info = query_cluster()
    assert info.partitions == sinfo
    assert [a for a in sbatch_calls if a != ["sinfo", "--version"]] == [["scontrol", "show", "partition", "--oneliner"]]
    assert "GraceTime=" in (info.partition_text or "")


def test_sbatch_refusal_is_one_line(apps: Any) -> None:
    with pytest.raises(SlurmCommandError) as e:
        apps.submit([apps.role("g", "true", [])], name="gres", gres="nosuch:1")
    assert str(e.value).startswith("sbatch failed (exit 1): ") and "\n" not in str(e.value), str(e.value)


def test_job_dir_workspace(apps: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.sh").write_text("echo from-workspace; pwd\n")
    job_dir = tmp_path / "copied"
    role = apps.role("w", "sh", ["main.sh"])
    app_id = apps.sched.submit(AppDef("ws", roles=[role]), {"job_dir": str(job_dir)}, workspace=str(ws))
    apps.ids.append(app_id)
    assert apps.wait(app_id).state == AppState.SUCCEEDED
    out = (job_dir / f"slurm-{app_id}-w-0.out").read_text()
    assert out == f"from-workspace\n{job_dir}\n"
    assert (job_dir / "tx-sbatch.sh").read_text().startswith("#!/bin/bash")
    with pytest.raises(WorkspaceError, match="already exists"):
        apps.sched.submit(AppDef("ws", roles=[role]), {"job_dir": str(job_dir)}, workspace=str(ws))


def test_gpus_are_allocated_per_replica(apps: Any) -> None:
    """Roles asking 2 and 1 GPUs get them (the test cluster's GPUs are fake devices that
    Slurm allocates; nothing computes on them)."""
    if not cluster_has_gpus():
        backend_unavailable("slurm GPUs", "the test cluster has no GPUs (scripts/start-slurm.sh makes fake ones with SLURM_FAKE_GPUS where mknod is allowed)")
    prog = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ['SLURM_GPUS_ON_NODE'])"
    two = apps.role("two", apps.py, ["-c", prog], resource=Resource(cpu=1, gpu=2, memMB=64))
    one = apps.role("one", apps.py, ["-c", prog], resource=Resource(cpu=1, gpu=1, memMB=64))
    app_id = apps.submit([two, one], name="gpu")
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert [(r.name, r.resource.gpu) for r in desc.roles] == [("two", 2), ("one", 1)]
    assert apps.text(app_id, "two") == "0,1 2\n" and apps.text(app_id, "one") == "0 1\n"


def test_sbatch_accepts_every_run_option(sched: SlurmScheduler, tmp_path: Path) -> None:
    """The generated command and script, with every run option, pass sbatch's own checks
    (``sbatch --test-only``: validated by slurmctld, nothing submitted)."""
    cfg = {"partition": "debug", "time": "1-0:10", "account": "ml", "comment": "nightly, v2 'x'",
           "constraint": "tx&node1|tx", "mail-user": "me@example.com", "mail-type": "END,FAIL",
           "job_dir": str(tmp_path / "j"), "qos": "normal", "exclusive": True, "nodelist": "node[1-3]",
           "exclude": "node4", "dependency": "singleton", "signal": "USR1@60", "requeue": False}
    gpus = 1 if cluster_has_gpus() else 0
    roles = [Role("a", entrypoint="true", num_replicas=2, resource=Resource(cpu=2, gpu=gpus, memMB=512)),
             Role("b", entrypoint="true", resource=Resource(cpu=1, gpu=0, memMB=256))]
    req = sched.submit_dryrun(AppDef("t", roles=roles), cfg).request
    cmd = [c for c in req.cmd if c != "--parsable"] + ["--test-only"]
    p = subprocess.run(cmd, input=req.materialize(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "to start at" in p.stderr, p.stderr
