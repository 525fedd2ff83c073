"""OpenLava marks a job that ``brequeue`` killed EXIT some milliseconds before it writes
the report (the job's ``-o`` file) saying the job will run again, and gives no ``TERM_*``
reason: in that moment the job looked like a ``bkill`` (CANCELLED), an end the app then
left, and ``tx run --fallback`` recorded the run as ended (seen once in a full run:
``test_lsf_infrastructure_failure_after_infra_retries_fails_over``). Measured on OpenLava
here: EXIT without the report for 0-10 ms of each ``brequeue``. The order is forced with
the files the replica's script and OpenLava leave in the job directory (tmp_path); no LSF:
the real requeue is ``test_lsf_cli.py::test_requeued_job_is_not_an_end``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from tx.specs import AppState, FailureKind
from tx_scheduler_lsf._parse import Job
from tx_scheduler_lsf._status import REPORT_WAIT_S, build_describe, report_file
from tx_scheduler_lsf.request import job_name, replica_file

APP = "sh-abc"
NOW = 1_800_000_100.0
NAME = job_name(APP, "sh", 0)
REQUEUED = ("Sender: OpenLava System <root@vm>\nSubject: Job 7: <x> Exited\n\n------\n# LSBATCH: User input\n"
            "------\n\nJob was killed by user or admin, and will be re-queued with the same jobid..\n")
KILLED = "Sender: OpenLava System <root@vm>\nSubject: Job 7: <x> Exited\n\nExited with exit code 130.\n"


def _replica(d: Path, exit_text: str, ended: float, attempts: str = f"{NOW - 60} run\n",
             report: Optional[str] = None) -> None:
    exit_file = d / replica_file(APP, "sh", 0, "exitcode")
    exit_file.write_text(exit_text)
    os.utime(exit_file, (ended, ended))
    (d / replica_file(APP, "sh", 0, "attempts")).write_text(attempts)
    if report is not None:
        (d / f"{NAME}.7.lsf.out").write_text(report)


def _state(d: Path, detail: Optional[Job] = None, now: float = NOW):
    job = Job(job_id="7", stat="EXIT", name=NAME, exec_host="vm")
    desc = build_describe(APP, [job], {"7": detail} if detail else {}, str(d), now=now)
    assert desc is not None
    return desc


def test_a_signalled_exit_without_its_report_is_not_an_end_until_the_report_says(tmp_path: Path) -> None:
    _replica(tmp_path, "130 2\n", NOW - 0.01)
    desc = _state(tmp_path)
    assert desc.state == AppState.RUNNING, desc
    assert "job 7 (sh-abc-sh-0) ended: LSF has not reported yet whether it runs again" in desc.msg, desc.msg
    (tmp_path / f"{NAME}.7.lsf.out").write_text(REQUEUED)
    desc = _state(tmp_path)
    assert desc.state == AppState.PENDING and "requeued by an administrator (brequeue)" in desc.msg, desc
    (tmp_path / f"{NAME}.7.lsf.out").write_text(KILLED)
    assert _state(tmp_path).state == AppState.CANCELLED


def test_a_second_run_waits_for_its_own_report(tmp_path: Path) -> None:
    """The file holds the first run's report (requeued); the second run was killed and
    its report is not written yet: not an end, and not the first run's requeue either."""
    _replica(tmp_path, "130 2\n", NOW - 1, attempts=f"{NOW - 60} run\n{NOW - 50} infra requeued\n{NOW - 50} run\n",
             report=REQUEUED)
    assert _state(tmp_path).state == AppState.RUNNING
    (tmp_path / f"{NAME}.7.lsf.out").write_text(REQUEUED + KILLED)
    assert _state(tmp_path).state == AppState.CANCELLED


def test_the_run_that_finds_infra_retries_spent_fails_at_once(tmp_path: Path) -> None:
    """Requeued with ``infra_retries=0``: the job's second start records ``exhausted`` and
    exits 1 before its report is written; the first run's report (requeued) is not its."""
    _replica(tmp_path, "1 \n", NOW, report=REQUEUED,
             attempts=f"{NOW - 60} run\n{NOW - 1} warned 2\n{NOW} infra requeued\n{NOW} exhausted\n")
    desc = _state(tmp_path)
    assert desc.state == AppState.FAILED, desc
    assert (desc.attempts[-1].kind, desc.attempts[-1].reason) == (
        FailureKind.INFRA, "sh[0]: infra_retries exhausted: the job failed without running the program again")


def test_a_report_that_never_comes_holds_the_end_back_only_so_long(tmp_path: Path) -> None:
    _replica(tmp_path, "130 2\n", NOW - REPORT_WAIT_S - 1)
    assert _state(tmp_path).state == AppState.CANCELLED
    assert _state(tmp_path, now=NOW - REPORT_WAIT_S + 2).state == AppState.RUNNING


def test_an_end_lsf_or_the_script_explains_is_read_at_once(tmp_path: Path) -> None:
    _replica(tmp_path, "1 \n", NOW)  # the program failed: the script recorded its status, no signal
    desc = _state(tmp_path)
    assert desc.state == AppState.FAILED and desc.attempts[-1].kind == FailureKind.USER, desc
    _replica(tmp_path, "130 2\n", NOW)
    requeue = Job(job_id="7", stat="EXIT", name=NAME, term_reason="TERM_REQUEUE_ADMIN: job killed and requeued")
    assert _state(tmp_path, requeue).state == AppState.PENDING  # LSF 10 says why
    lost = Job(job_id="7", stat="EXIT", name=NAME, host_lost=True)
    assert _state(tmp_path, lost).state == AppState.FAILED
    (tmp_path / f"{APP}.cancelled").write_text("")  # tx cancelled the app
    assert _state(tmp_path).state == AppState.CANCELLED


def test_an_array_elements_report_is_the_arrays_file(tmp_path: Path) -> None:
    """An element of a sweep's job array (``element_job``: job ``<base>_3-sh-0``, id
    ``42[3]``) reports into the array's ``<base>-sh-0.42.3.lsf.out``; requeue is read there."""
    element = Job(job_id="42[3]", stat="EXIT", name="sw-1_3-sh-0", project="sw-1_3")
    assert report_file(str(tmp_path), element) == str(tmp_path / "sw-1-sh-0.42.3.lsf.out")
    plain = Job(job_id="42", stat="EXIT", name=NAME, project=APP)
    assert report_file(str(tmp_path), plain) == str(tmp_path / f"{NAME}.42.lsf.out")
    exit_file = tmp_path / replica_file("sw-1_3", "sh", 0, "exitcode")
    exit_file.write_text("130 2\n")
    os.utime(exit_file, (NOW, NOW))
    (tmp_path / replica_file("sw-1_3", "sh", 0, "attempts")).write_text(f"{NOW - 9} run\n")
    desc = build_describe("sw-1_3", [element], {}, str(tmp_path), now=NOW)
    assert desc is not None and desc.state == AppState.RUNNING, desc
    (tmp_path / "sw-1-sh-0.42.3.lsf.out").write_text(REQUEUED)
    desc = build_describe("sw-1_3", [element], {}, str(tmp_path), now=NOW)
    assert desc is not None and desc.state == AppState.PENDING, desc
