"""Infrastructure failures on LSF are not the user's: run option ``infra_retries``.

The cluster tests requeue a running job as an administrator does (``brequeue``) and fail
the private OpenLava host under a job (``badmin hshutdown``, the job's processes killed,
sbatchd started again, as after a crash and reboot): LSF then does not know how it ended.
"""
import os
import re
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tx.runner import get_runner
from tx.specs import AppDef, AppState, Attempt, FailureKind, InvalidRunConfigException, Role
from tx.testing.backends import wait_for
from tx_scheduler_lsf._attempts import EXHAUSTED, build_attempts, read_attempts
from tx_scheduler_lsf._client import Capabilities
from tx_scheduler_lsf._parse import parse_bjobs_l
from tx_scheduler_lsf._status import HOST_LOST
from tx_scheduler_lsf.scheduler import create_scheduler


def test_attempts_tell_the_users_failures_from_the_infrastructures(tmp_path: Path) -> None:
    (tmp_path / "a.attempts").write_text("10 run\n12 infra requeued\n12 run\ngarbage\n15 user 3\n20 infra host\n"
                                         "20 exhausted\n")
    events = {"w[0]": read_attempts(str(tmp_path / "a.attempts")), "w[1]": [(11.0, "run", ""), (14.0, "user", "137")]}
    got = build_attempts(events, AppState.FAILED, (FailureKind.USER, "w[0]: exit code 1"))
    assert [(a.index, a.kind, a.reason, a.retried) for a in got] == [
        (0, FailureKind.INFRA, "w[0]: requeued by an administrator (brequeue)", True),
        (1, FailureKind.USER, "w[1]: killed by SIGKILL (exit code 137)", True),
        (2, FailureKind.USER, "w[0]: exit code 3", True),
        (3, FailureKind.INFRA, "w[0]: LSF ran the job again after its host failed", True),
        (4, FailureKind.INFRA, f"w[0]: {EXHAUSTED}", False),
    ]
    assert build_attempts({"w[0]": [(1.0, "run", "")]}, AppState.RUNNING) == [Attempt(0, AppState.RUNNING)]
    # a job that exited while its host was unreachable: OpenLava's words in bjobs -l
    lost = parse_bjobs_l("Job Id <7>, Job Name <x-w-0>, Status <EXIT>, Queue <normal>\n"
                         "Sat Nov 28 21:38:00: Exited. The CPU time used is unknown.\n")["7"]
    assert lost.host_lost and lost.exit_code is None


def test_every_job_is_rerunnable_with_infra_retries_and_the_option_is_checked(tmp_path: Path) -> None:
    sched = create_scheduler("t", caps=Capabilities(product="openlava project 4.0", major=4))
    app = AppDef("a", roles=[Role("w", image="", entrypoint="true")])
    req = sched.submit_dryrun(app, {"jobdir": str(tmp_path)}).request
    (rep,) = req.replicas.values()
    assert "-r" in rep.bsub and "infra_retries=3" in rep.script and "-gt 3 ]" in rep.script
    req = sched.submit_dryrun(app, {"jobdir": str(tmp_path), "infra_retries": 0}).request
    assert "-r" not in next(iter(req.replicas.values())).bsub
    with pytest.raises(InvalidRunConfigException, match="infra_retries must be an integer >= 0"):
        sched.submit_dryrun(app, {"jobdir": str(tmp_path), "infra_retries": -1})


def _counting(path: Path, then: str) -> str:
    """A program that prints ``attempt N`` (N counted in ``path``), then runs ``then``
    (shell, with ``$n``)."""
    return (f'n=$(cat {path} 2>/dev/null || echo 0); echo $((n + 1)) > {path}; echo "attempt $n"; '
            f'echo $$$$ > {path}.pid; {then}')  # $$: the role's macros read $$ as $


def _printed(apps: Any, app_id: str, attempt: int) -> None:
    out = apps.job_dir / f"{app_id}-w-0.out"
    wait_for(lambda: out.exists() and f"attempt {attempt}\n" in out.read_text(), timeout=60,
             what=f"attempt {attempt} to run")


@pytest.mark.lsf
def test_admin_requeue_spends_infra_retries_not_max_retries(apps: Any, lsf_cluster: Any, tmp_path: Path) -> None:
    """An administrator's ``brequeue`` of the running job is an infrastructure failure: the
    requeued app says so while it waits (not just PENDING), the retry comes from
    infra_retries=1, and max_retries=1 is left for the user's own failure (exit 3) that
    follows; the app then succeeds, with every attempt and why it ended in ``tx status``."""
    counter = tmp_path / "count"
    script = _counting(counter, 'if [ "$n" -eq 0 ]; then exec sleep 600; elif [ "$n" -eq 1 ]; then exit 3; fi')
    app_id = apps.submit([apps.role("w", "sh", ["-c", script], max_retries=1)], name="infra", infra_retries=1)
    _printed(apps, app_id, 0)
    job_id = apps.sched.describe(app_id).metadata["jobs"][f"{app_id}-w-0"]
    lsf_cluster.wait_started(job_id)
    p = lsf_cluster.run("brequeue", "-H", job_id)  # requeued on hold: it waits until bresume
    assert p.returncode == 0, p.stdout + p.stderr
    wait_for(lambda: "PSUSP" in apps.sched.describe(app_id).msg, timeout=60,
             what=f"the job held: {apps.sched.describe(app_id)}")
    desc = apps.sched.describe(app_id)
    assert desc.state == AppState.PENDING, desc
    assert desc.msg == (f"job {job_id} ({app_id}-w-0) requeued by an administrator (brequeue): it waits to run "
                        "again (PSUSP: suspended while pending (bresume it))"), desc.msg
    assert lsf_cluster.run("bresume", job_id).returncode == 0
    desc = apps.wait(app_id)
    assert desc.state == AppState.SUCCEEDED and desc.num_restarts == 2, desc
    assert [(a.kind, a.reason, a.retried) for a in desc.attempts] == [
        (FailureKind.INFRA, "w[0]: requeued by an administrator (brequeue)", True),
        (FailureKind.USER, "w[0]: exit code 3", True),
        (None, "", False),
    ], desc.attempts
    assert apps.text(app_id, "w") == "attempt 0\nattempt 1\nattempt 2\n"
    with get_runner() as runner:
        text = runner.status(f"lsf://tx/{app_id}").format()
    assert "  Attempts:\n    #0 FAILED (infra: w[0]: requeued by an administrator (brequeue)), retried" in text, text
    assert "#1 FAILED (user: w[0]: exit code 3), retried" in text, text


@pytest.mark.lsf
def test_infra_retries_run_out(apps: Any, lsf_cluster: Any, tmp_path: Path) -> None:
    """infra_retries=0 with max_retries=2: a requeue by the administrator is one
    infrastructure failure too many: the job fails without running the program again, and
    the user's retries are not spent on it."""
    counter = tmp_path / "count"
    app_id = apps.submit([apps.role("w", "sh", ["-c", _counting(counter, "exec sleep 600")], max_retries=2)],
                         name="infra-out", infra_retries=0)
    _printed(apps, app_id, 0)
    job_id = apps.sched.describe(app_id).metadata["jobs"][f"{app_id}-w-0"]
    lsf_cluster.wait_started(job_id)
    assert lsf_cluster.run("brequeue", job_id).returncode == 0
    desc = apps.wait(app_id)
    assert desc.state == AppState.FAILED and desc.num_restarts == 1, desc
    assert [(a.kind, a.retried) for a in desc.attempts] == [(FailureKind.INFRA, True), (FailureKind.INFRA, False)]
    assert desc.attempts[-1].reason == f"w[0]: {EXHAUSTED}"
    assert "infrastructure retries exhausted: 1 infrastructure failure(s), infra_retries=0" in desc.structured_error_msg
    assert counter.read_text() == "1\n"  # the program ran once


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.lsf
def test_a_job_lost_with_its_host_is_an_infra_failure(apps: Any, lsf_cluster: Any, tmp_path: Path) -> None:
    """The host fails under a running job, as in a crash and reboot: its sbatchd stops
    (``badmin hshutdown``), the job's processes die, and sbatchd starts again without them.
    LSF then reports the job EXIT without knowing how it ended. That is the
    infrastructure's failure, not a cancel (there is no exit code) nor the user's."""
    counter = tmp_path / "count"
    app_id = apps.submit([apps.role("w", "sh", ["-c", _counting(counter, "exec sleep 600")])], name="lost",
                         infra_retries=0)
    _printed(apps, app_id, 0)
    pgid = os.getpgid(int(Path(f"{counter}.pid").read_text()))
    assert pgid != os.getpgrp()
    desc = apps.sched.describe(app_id)
    lsf_cluster.wait_started(desc.metadata["jobs"][f"{app_id}-w-0"])
    host = desc.roles_statuses[0].replicas[0].hostname
    sbd_port = lsf_cluster.ports[3]  # LIM, RES, mbatchd, sbatchd (scripts/start-openlava.sh)
    assert lsf_cluster.run("badmin", "hshutdown", host).returncode == 0
    try:
        wait_for(lambda: _refused(sbd_port), timeout=30, what="sbatchd to stop")
        os.killpg(pgid, signal.SIGKILL)  # the host's processes die with it
    finally:
        sbatchd = os.path.join(lsf_cluster.env["LSF_SERVERDIR"], "sbatchd")
        assert subprocess.run([sbatchd], env=lsf_cluster.env, timeout=30).returncode == 0
    desc = apps.wait(app_id)
    rep = desc.roles_statuses[0].replicas[0]
    assert desc.state == AppState.FAILED and rep.state == AppState.FAILED, desc
    assert HOST_LOST in desc.structured_error_msg, desc.structured_error_msg
    assert [(a.kind, a.reason) for a in desc.attempts] == [(FailureKind.INFRA, f"w[0]: {HOST_LOST}")]
    with get_runner() as runner:
        text = runner.status(f"lsf://tx/{app_id}").format()
    assert re.search(r"^\s+#0 FAILED \(infra: w\[0\]: its host failed under it", text, re.MULTILINE), text
