"""Which failed replica is an LSF app's cause when a DDP rank raises and its peer then fails in
its next collective: the peer's script may record its exit status first. ``bjobs`` records and
the files the replicas' scripts leave in the job directory (tmp_path); no LSF."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional

from tx.specs import AppState, FailureKind
from tx_scheduler_lsf._parse import Job
from tx_scheduler_lsf._status import build_describe
from tx_scheduler_lsf.request import job_name, replica_file
from tx.testing.failures import peer_lost_text, raised_text

APP = "ddp-abc"
PEER = peer_lost_text(peer="10.0.0.7:41234")
RAISED = raised_text()


def _replica(d: Path, k: int, recorded: float, code: int, err: str) -> Job:
    (d / replica_file(APP, "trainer", k, "err")).write_text(err)
    exit_file = d / replica_file(APP, "trainer", k, "exitcode")
    exit_file.write_text(f"{code} \n")
    os.utime(exit_file, (recorded, recorded))
    return Job(job_id=str(100 + k), stat="EXIT", name=job_name(APP, "trainer", k), exec_host=f"node{k}")


def _describe(d: Path, details: Optional[Dict[str, Job]] = None, **replicas: tuple):
    jobs = [_replica(d, int(k[1:]), *args) for k, args in replicas.items()]
    desc = build_describe(APP, jobs, details or {}, str(d))
    assert desc is not None and desc.state == AppState.FAILED
    return desc


def test_the_rank_that_raised_is_the_cause_though_its_peer_recorded_first(tmp_path: Path) -> None:
    desc = _describe(tmp_path, r0=(1_800_000_000.0, 1, PEER), r1=(1_800_000_000.4, 2, RAISED))
    cause = desc.root_cause
    assert cause is not None and (cause.replica, cause.rank, cause.exception_type, cause.message) == (
        1, 1, "RuntimeError", "rank 1 fails on purpose"), desc.structured_error_msg
    assert desc.structured_error_msg == "trainer/1 rank 1: RuntimeError: rank 1 fails on purpose at fail.py:5 (exit code 2)"
    reps = desc.roles_statuses[0].replicas
    assert reps[1].root_cause == cause and reps[0].root_cause is None
    assert (desc.attempts[-1].kind, desc.attempts[-1].reason) == (FailureKind.USER, "trainer[1]: exit code 2")


def test_a_cause_more_than_2_min_after_the_first_failure_is_another_failure(tmp_path: Path) -> None:
    desc = _describe(tmp_path, r0=(1_800_000_000.0, 1, PEER), r1=(1_800_000_130.5, 2, RAISED))
    assert desc.root_cause is not None and desc.root_cause.replica == 0
    assert "Connection closed by peer" in desc.root_cause.message
    assert desc.attempts[-1].reason == "trainer[0]: exit code 1"


def test_a_replica_lsf_says_why_it_ended_comes_before_a_peer_that_recorded_first(tmp_path: Path) -> None:
    detail = Job(job_id="101", stat="EXIT", name=job_name(APP, "trainer", 1), exit_code=137,
                 term_reason="TERM_MEMLIMIT: job killed after reaching LSF memory usage limit")
    desc = _describe(tmp_path, {"101": detail}, r0=(1_800_000_000.0, 1, PEER), r1=(1_800_000_001.0, 137, "allocating\n"))
    assert desc.root_cause is None and desc.structured_error_msg.startswith(
        "trainer[1] (job 101 on node1): killed by SIGKILL (exit code 137); TERM_MEMLIMIT"), desc.structured_error_msg
