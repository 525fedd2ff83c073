"""An sbatch whose answer never came (tx_scheduler_slurm._sbatch), on the session's private
cluster: slurmctld is stopped (SIGSTOP: the kernel still takes the connection and the
request, nothing answers) while tx submits, so tx stops its sbatch at the timeout; slurmctld,
once continued, accepts the job from the request it already holds. tx must not report a
failed submit and leave that job running: it finds the job by the submission token in its
comment and cancels it, or, where slurmctld answers nothing in time, names the token."""
import os
import re
import signal
import uuid
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from tx.specs import AppDef, Resource, Role
from tx.testing.backends import wait_for
from tx_scheduler_slurm import _client
from tx_scheduler_slurm._client import SlurmTimeoutError
from tx_scheduler_slurm._sbatch import TOKEN_MARKER, with_token
from tx_scheduler_slurm.scheduler import SlurmScheduler

TIMEOUT = 3.0  # s: each Slurm command of the scheduler under test


def test_the_token_goes_after_the_apps_name() -> None:
    """Offline: the token follows the app's name in ``--comment`` (the name is read from the
    comment's first part), before a user's comment; each call makes a new one."""
    cmd, token = with_token(["sbatch", "--parsable", "--comment=tx-app:a; nightly", "--account=x"])
    assert re.fullmatch(r"[0-9a-f]{12}", token)
    assert cmd == ["sbatch", "--parsable", f"--comment=tx-app:a; {TOKEN_MARKER}{token}; nightly", "--account=x"]
    cmd, again = with_token(["sbatch", "--comment=tx-app:b"])
    assert cmd == ["sbatch", f"--comment=tx-app:b; {TOKEN_MARKER}{again}"] and again != token


@pytest.fixture
def stopped(slurm_cluster: Any, slurm_nodes: List[str]) -> Iterator[int]:
    """slurmctld's pid; the test stops it, and it is continued at the end whatever happened."""
    pid = int((slurm_cluster.base / "run" / "slurmctld.pid").read_text())
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)


def _submit_while_stopped(pid: int, tmp_path: Path, name: str) -> Any:
    sched = SlurmScheduler("tx", timeout=TIMEOUT)
    app = AppDef(name, roles=[Role("r", image="", entrypoint="sleep", args=["600"],
                                   resource=Resource(cpu=1, gpu=0, memMB=64))])
    info = sched.submit_dryrun(app, {"job_dir": str(tmp_path)})  # the cluster facts, while slurmctld answers
    os.kill(pid, signal.SIGSTOP)
    return sched, info


def _jobs(cluster: Any, name: str) -> List[List[str]]:
    """``[job id, state, comment]`` of the jobs of app ``name`` (any state slurmctld remembers)."""
    p = cluster.run("squeue", "--noheader", "--states=all", "--format=%i|%T|%k|%j")
    assert p.returncode == 0, p.stderr
    return [ln.split("|")[:3] for ln in p.stdout.splitlines() if ln.endswith(f"|{name}@r-0")]


def test_a_job_accepted_after_sbatch_timed_out_is_cancelled(stopped: int, slurm_cluster: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The order forced: sbatch times out, then slurmctld goes on and accepts the job, then
    tx looks for it: the job is cancelled and the error says which it was."""
    name = f"unanswered-{uuid.uuid4().hex[:6]}"
    real, looks = _client.run, []

    def run(argv: List[str], *a: Any, **kw: Any) -> Any:
        if argv[0] == "squeue" and not looks:  # tx's first look after the timeout
            os.kill(stopped, signal.SIGCONT)
            wait_for(lambda: _jobs(slurm_cluster, name), 60, "slurmctld to accept the job it held")
        if argv[0] == "squeue":
            looks.append(argv)
        return real(argv, *a, **kw)

    sched, info = _submit_while_stopped(stopped, tmp_path, name)
    monkeypatch.setattr(_client, "run", run)
    with pytest.raises(SlurmTimeoutError) as e:
        sched.schedule(info)
    monkeypatch.undo()
    msg = str(e.value)
    assert "\n" not in msg and f"did not answer within {TIMEOUT:g} s" in msg, msg
    (job_id, state, comment), = _jobs(slurm_cluster, name)
    assert f"slurmctld accepted it anyway as job {job_id}, which tx cancelled" in msg, msg
    assert state == "CANCELLED" and comment.startswith(f"tx-app:{name}; {TOKEN_MARKER}"), (state, comment)
    assert len(looks) == 2  # looked until slurmctld had answered twice


def test_a_controller_that_answers_nothing_gets_the_token_named(stopped: int, slurm_cluster: Any,
                                                                tmp_path: Path) -> None:
    """slurmctld answers no look within twice the timeout: the error says that tx could not
    check and names the token, and the job slurmctld accepts later carries that token."""
    name = f"unchecked-{uuid.uuid4().hex[:6]}"
    sched, info = _submit_while_stopped(stopped, tmp_path, name)
    with pytest.raises(SlurmTimeoutError) as e:
        sched.schedule(info)
    msg = str(e.value)
    m = re.search(rf"could not check whether slurmctld accepted it: a job whose comment has {TOKEN_MARKER}([0-9a-f]+)",
                  msg)
    assert m and "\n" not in msg, msg
    os.kill(stopped, signal.SIGCONT)
    (job_id, _, comment), = wait_for(lambda: _jobs(slurm_cluster, name), 60, "slurmctld to accept the job it held")
    assert f"{TOKEN_MARKER}{m[1]}" in comment, comment
    _client.run(["scancel", job_id])
