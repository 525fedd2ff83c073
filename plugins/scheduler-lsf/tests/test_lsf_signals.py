"""A replica's script against the signals LSF ends a job with, without a cluster: ``bkill``
and ``brequeue`` send every process group of the job SIGINT, then SIGTERM and SIGKILL
``JOB_TERMINATE_INTERVAL`` apart (OpenLava's sbd.sig.c ``jobsig1``). The script runs here
in a session of its own and gets SIGINT as its process group, as LSF sends it. On the
cluster: test_lsf_preemption.py."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

from tx.specs import AppDef, Role
from tx_scheduler_lsf._client import parse_terminate_interval
from tx_scheduler_lsf.request import build_request

REPO = Path(__file__).resolve().parents[3]


def _script(tmp_path: Path, argv: List[str]) -> str:
    app = AppDef("s", roles=[Role("w", image="", entrypoint=argv[0], args=argv[1:])])
    return build_request(app, "s-1", {}, job_dir=str(tmp_path), grace=10).replicas["w-0"].script


def _run_and_interrupt(tmp_path: Path, argv: List[str]) -> str:
    """Run the replica's script, wait for the program's ``up`` file, send SIGINT to the
    script's process group; the script's exit code file."""
    p = subprocess.Popen(["bash", "-c", _script(tmp_path, argv)], cwd=tmp_path, start_new_session=True,
                         env={**os.environ, "LSB_JOBID": "1", "LSB_HOSTS": "h", "UP": str(tmp_path / "up")})
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "up").exists():
            assert p.poll() is None and time.monotonic() < deadline, p.poll()
            time.sleep(0.01)
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    return (tmp_path / "s-1-w-0.exitcode").read_text()


def test_program_starts_with_the_signals_a_process_started_by_hand_has(tmp_path: Path) -> None:
    """The old script ran the program as a plain background command, with SIGINT and
    SIGQUIT ignored: LSF's first signal never reached it, and the script turned it into
    a SIGTERM to the process group instead."""
    p = subprocess.run(["bash", "-c", _script(tmp_path, ["sh", "-c", "grep SigIgn /proc/self/status"])],
                       cwd=tmp_path, env={**os.environ, "LSB_JOBID": "1", "LSB_HOSTS": "h"}, timeout=60)
    same = subprocess.run(["grep", "SigIgn", "/proc/self/status"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and (tmp_path / "s-1-w-0.out").read_text() == same.stdout


def test_torchrun_shaped_replica_saves_on_lsfs_sigint(tmp_path: Path) -> None:
    """A parent that, as torchrun does, passes the SIGINT it got on to its worker (in a
    session of its own) and waits; the worker asks ``tx.distributed.preempted()``, saves and
    leaves with ``exit_preempted()``. The script gives it ``TX_PREEMPT_SIGNAL=INT`` and the
    grace; the old script armed it for SIGTERM (SIGINT was a KeyboardInterrupt: no save)
    and sent the parent SIGTERM."""
    worker = ("import os, sys, time\n"
              f"sys.path.insert(0, {str(REPO / 'core' / 'src')!r})\n"
              "from tx.distributed import exit_preempted, preempted, preempt_grace\n"
              "preempted(); open(os.environ['UP'], 'w').close()\n"
              "while not preempted(): time.sleep(0.01)\n"
              "open('saved', 'w').write(str(preempt_grace())); exit_preempted()\n")
    parent = ("import signal, subprocess, sys\n"
              f"w = subprocess.Popen([sys.executable, '-c', {worker!r}], start_new_session=True)\n"
              "signal.signal(signal.SIGINT, lambda *a: w.send_signal(signal.SIGINT))\n"
              "sys.exit(w.wait() and 1)\n")
    assert _run_and_interrupt(tmp_path, [sys.executable, "-c", parent]) == "1 2\n"
    assert (tmp_path / "saved").read_text() == "10.0"


def test_the_programs_own_status_is_recorded(tmp_path: Path) -> None:
    """A program that handles LSF's SIGINT and leaves with its own status (7): the old
    script sent it SIGTERM on the SIGINT and recorded 143."""
    prog = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGINT, lambda *a: (time.sleep(0.3), sys.exit(7)))\n"
            "open(os.environ['UP'], 'w').close()\n"
            "time.sleep(60)\n")
    assert _run_and_interrupt(tmp_path, [sys.executable, "-c", prog]) == "7 2\n"


def test_terminate_interval_is_read_from_bparams() -> None:
    text = "System default queue for batch jobs:  normal\n    JOB_TERMINATE_INTERVAL = 10 \n\n"
    assert parse_terminate_interval(text) == 10
    assert parse_terminate_interval("The interval for terminating a job:\n  JOB_TERMINATE_INTERVAL = 30 (seconds)\n") == 30
    assert parse_terminate_interval("Job Dispatch Interval:  1 seconds\n") is None


def test_requeued_run_names_what_it_saved_after_the_warning(tmp_path: Path) -> None:
    """The script notes the first of LSF's signals (``warned``); an infrastructure failure
    after it names the newest checkpoint completed between the warning and the next run
    (the old script wrote no such line, and the reason said only who requeued it)."""
    import json

    from tx.specs import AppState, FailureKind
    from tx_scheduler_lsf._attempts import build_attempts, read_attempts

    ckpt = tmp_path / "ckpt"
    for step, done in ((10, 1000.2), (12, 1003.5)):
        (ckpt / f"step-{step:09d}").mkdir(parents=True)
        (ckpt / f"step-{step:09d}" / ".tx-complete").write_text(
            json.dumps({"step": step, "seconds": 0.31, "completed": done}))
    att = tmp_path / "a.attempts"
    att.write_text("990 run\n1003.25 warned 2\n1009 infra requeued\n1009 run\n")
    events = {"train[0]": read_attempts(str(att))}
    got = build_attempts(events, AppState.RUNNING, location=str(ckpt))
    assert [(a.kind, a.reason) for a in got] == [
        (FailureKind.INFRA, "train[0]: requeued by an administrator (brequeue); saved step 12 in 0.31 s"),
        (None, ""),
    ]
    att.write_text("990 run\n1004.0 warned 2\n1009 infra requeued\n1009 run\n")  # saved before the warning
    got = build_attempts({"train[0]": read_attempts(str(att))}, AppState.RUNNING, location=str(ckpt))
    assert got[0].reason.endswith("; no checkpoint saved before the kill; resumed from step 12"), got[0].reason


def test_every_replica_is_armed_for_sigint_and_a_roles_own_values_win(tmp_path: Path) -> None:
    own = Role("o", image="", entrypoint="x", env={"TX_PREEMPT_SIGNAL": "TERM"})
    app = AppDef("s", roles=[Role("w", image="", entrypoint="x"), own])
    req = build_request(app, "s-1", {}, job_dir=str(tmp_path), grace=10)
    assert "export TX_PREEMPT_SIGNAL=INT\nexport TX_PREEMPT_GRACE=10\n" in req.replicas["w-0"].script
    assert "export TX_PREEMPT_SIGNAL=TERM\n" in req.replicas["o-0"].script
    assert "TX_PREEMPT_GRACE" not in build_request(app, "s-1", {}, job_dir=str(tmp_path)).replicas["w-0"].script
