"""Why a Slurm app failed (issue 18), with and without accounting, on two more private
clusters that hold each step to its memory (``memory_clusters`` of
:mod:`tx_scheduler_slurm.testing`).

The same four failing apps run on both at once: a replica that raises, one killed by a
signal, one over its memory, a job over its time limit (``why_failed_apps`` in this
directory's conftest.py submits them at the session's first slurm test, so that the minute
or more a time limit takes passes while the other tests run). With accounting the cluster
forgets finished jobs after 2 s, so the answer comes from ``sacct``; without, from
``squeue`` and ``scontrol``. Either way ``structured_error_msg`` is the one line a user acts on, and ``tx
status`` in another process shows it.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from tx.schedulers.api import PartialListError

from tx.specs import AppDef, AppState, Role
from tx.testing.backends import backend_unavailable
from tx_scheduler_slurm import _client, _plane
from tx_scheduler_slurm.scheduler import SlurmScheduler, create_scheduler

pytestmark = pytest.mark.slurm

PY = sys.executable
BIN = Path(PY).parent
CLUSTERS = ("accounting", "no accounting")


def _source(name: str) -> str:
    return "sacct" if name == "accounting" else "squeue"


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_replica_that_raises_is_named_with_its_exit_code_and_error(why_failed_apps: Dict[str, Any],
                                                                     name: str) -> None:
    desc = why_failed_apps[name].final("raises")
    assert desc.state == AppState.FAILED and desc.metadata["source"] == _source(name), desc
    # the one line every scheduler gives (tx.schedulers.why), read from the replica's stderr
    msg = desc.structured_error_msg
    assert msg == "worker/0: ValueError: bad shard 7 at <string>:1 (exit code 1)", msg
    assert desc.root_cause is not None and desc.root_cause.exception_type == "ValueError"
    worker = next(rs for rs in desc.roles_statuses if rs.role == "worker").replicas[0]
    assert worker.exit_code == 1 and worker.structured_error_msg == msg
    trainer = next(rs for rs in desc.roles_statuses if rs.role == "trainer").replicas[0]
    assert trainer.exit_code == 143 and trainer.state == AppState.FAILED  # srun stopped it
    # with SIGTERM, recorded by its own launcher: proctrack/cgroup signals only the launcher,
    # which passes it on (it kept it, and the batch script wrote '0 143 slurm' for the
    # SIGKILL that came KillWait later)
    sub = why_failed_apps[name]
    assert (sub.job_dir / f"slurm-{sub.ids['raises']}-trainer-0.exitcode").read_text() == "0 143\n"


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_replica_killed_by_a_signal_is_named_with_the_signal(why_failed_apps: Dict[str, Any], name: str) -> None:
    desc = why_failed_apps[name].final("signal")
    assert desc.state == AppState.FAILED and desc.metadata["source"] == _source(name), desc
    assert desc.structured_error_msg.startswith("crash[0] (het component 0 on node"), desc.structured_error_msg
    assert "killed by SIGSEGV (exit code 139)" in desc.structured_error_msg
    assert desc.roles_statuses[0].replicas[0].exit_code == 139


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_job_over_its_memory_is_named_out_of_memory(why_failed_apps: Dict[str, Any], name: str) -> None:
    sub = why_failed_apps[name]
    desc = sub.final("memory")
    assert desc.state == AppState.FAILED and desc.metadata["source"] == _source(name), desc
    msg = desc.structured_error_msg
    assert msg.startswith("OUT_OF_MEMORY: the job was killed: a replica used more memory than it asked for "
                          "(resource memMB)"), msg
    assert "hog[0] (het component 1 on node" in msg and "killed by SIGKILL (exit code 137)" in msg, msg
    assert "\n" not in msg
    assert desc.msg.startswith("OUT_OF_MEMORY: was killed"), desc.msg
    # tx status in another process says the same, as text and as a JSON field
    env = {**sub.cluster.env, "TX_STATE_DIR": str(sub.cluster.base / "tx-state")}
    handle = f"slurm://tx/{sub.ids['memory']}"
    p = subprocess.run([str(BIN / "tx"), "status", handle], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "OUT_OF_MEMORY: the job was killed" in p.stdout, p.stdout + p.stderr
    p = subprocess.run([str(BIN / "tx"), "status", "--json", handle], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["structured_error_msg"] == msg


def test_sacct_alone_names_out_of_memory(why_failed_apps: Dict[str, Any]) -> None:
    """With accounting, sacct records OUT_OF_MEMORY on the step whose replica ran out of
    memory: named even when the batch output that says so is gone."""
    sub = why_failed_apps["accounting"]
    if not sub.cluster.mem_cgroup:
        backend_unavailable("slurm", "no writable cgroup v1 memory controller (/sys/fs/cgroup/memory): Slurm "
                            "kills steps over their memory by polling, and sacct does not say OUT_OF_MEMORY")
    sub.final("memory")
    app_id = sub.ids["memory"]
    out = sub.job_dir / f"slurm-{app_id}.out"
    out.rename(out.with_suffix(".moved"))
    try:
        with sub.cluster.active():
            steps = _client.run(["sacct", "--noheader", "--parsable2", "--format=JobID,State", "--jobs", app_id]).stdout
            assert f"{app_id}+1.0|OUT_OF_MEMORY" in steps.splitlines(), steps
            desc = create_scheduler("tx").describe(app_id)
    finally:
        out.with_suffix(".moved").rename(out)
    assert desc is not None and desc.metadata["source"] == "sacct"
    assert desc.structured_error_msg.startswith("OUT_OF_MEMORY: the job was killed"), desc.structured_error_msg


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_job_over_its_time_limit_is_named_timeout(why_failed_apps: Dict[str, Any], name: str) -> None:
    desc = why_failed_apps[name].final("time-limit")
    assert desc.state == AppState.FAILED and desc.metadata["source"] == _source(name), desc
    assert desc.structured_error_msg.startswith("TIMEOUT: the job reached its time limit (run option time)"), desc
    assert desc.msg.startswith("TIMEOUT: reached its time limit")


@pytest.mark.parametrize("name", CLUSTERS)
def test_tx_list_shows_every_app_by_name_and_only_tx_apps(why_failed_apps: Dict[str, Any], name: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``tx list`` gives the failed apps by name, and not a job tx did not submit: with
    accounting from sacct once slurmctld forgot them, in one squeue and one sacct call;
    without, in one squeue call (no sacct)."""
    sub = why_failed_apps[name]
    for case in sub.ids:
        sub.final(case)
    calls: List[str] = []
    real = _client.run
    monkeypatch.setattr(_client, "run", lambda argv, *a, **kw: calls.append(argv[0]) or real(argv, *a, **kw))
    with sub.cluster.active():
        _plane.plane().invalidate()  # no shared answer of the status plane: the list asks
        listed = {a.app_id: a for a in create_scheduler("tx").list()}
    assert {case: (listed[app_id].name, listed[app_id].state) for case, app_id in sub.ids.items()} == {
        case: (case, AppState.FAILED) for case in sub.ids}
    assert sub.plain not in listed
    assert calls == (["squeue", "sacct"] if name == "accounting" else ["squeue"])


def test_a_hanging_slurmdbd_lists_what_squeue_knows_and_says_what_is_missing(
        why_failed_apps: Dict[str, Any], tmp_path: Path) -> None:
    """With accounting, a sacct that never answers (slurmdbd stopped, SIGSTOP: it accepts
    the connection and says nothing) leaves the list partial, and says so: the apps squeue
    knows are listed (PartialListError.apps), and the error names sacct and what is missing.
    Never a silent list without the finished jobs only sacct knows."""
    cluster = why_failed_apps["accounting"].cluster
    with cluster.active():
        sched = create_scheduler("tx")
        sleeper = sched.submit(AppDef("sleeper", roles=[Role("sleep", image="/tmp", entrypoint="sleep", args=["120"])]),
                               {"job_dir": str(tmp_path)})
    pid = int((cluster.base / "run" / "slurmdbd.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        with cluster.active(), pytest.raises(
                PartialListError, match="sacct did not answer within 2 s.*only sacct knows cannot be listed") as info:
            SlurmScheduler("tx", timeout=2).list()
    finally:
        os.kill(pid, signal.SIGCONT)
        with cluster.active():
            sched.cancel(sleeper)
    assert sleeper in {a.app_id for a in info.value.apps}, info.value.apps
