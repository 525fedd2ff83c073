"""Turning an app's LSF jobs and its replicas' files into a DescribeAppResponse (pure but
for reading the replicas' files in the job directory).

A replica's state is its job's (:data:`tx_scheduler_lsf._parse.LSF_STATES`), refined by
what its script recorded in ``<app id>-<role>-<k>.exitcode`` (``<status>`` or ``<status>
<signal>`` when LSF signalled the script, as ``bkill`` does) and by why LSF ended it:

* EXIT after ``bkill`` (tx's cancel writes ``<app id>.cancelled`` in the job directory;
  LSF 10 says ``TERM_OWNER``/``TERM_ADMIN``; the script recorded the signal; a job killed
  while pending has no exit code; TorchX's rule: exit code 130) is CANCELLED;
* EXIT for another reason is FAILED, with the exit code, LSF 10's termination reason
  (``TERM_RUNLIMIT``, ``TERM_MEMLIMIT``...) and the root cause in the replica's stderr;
* EXIT of a run LSF signalled, which LSF gives no ``TERM_*`` reason for (OpenLava) and has
  not yet written the report of into the job's ``-o`` file, is still RUNNING: OpenLava says
  EXIT before it writes the report that tells a ``brequeue`` (the job runs again) from a
  ``bkill`` (:data:`REPORT_WAIT_S`).

The app is FAILED as soon as one replica failed (its script then ends the others),
CANCELLED once every job ended and one was cancelled, SUCCEEDED when every job is DONE,
else RUNNING while one runs, else PENDING (``msg``: LSF's pending reasons).
"""
from __future__ import annotations

import os
import re
import time
from typing import Dict, List, Optional, Tuple

from tx.schedulers import (
    DescribeAppResponse, first_cause, names_cause, read_tail, root_cause, signal_text, telling_line)
from tx.specs import NONE, AppState, FailureKind, ReplicaStatus, RoleStatus, RootCause, is_terminal

from tx_scheduler_lsf._attempts import Event, build_attempts, read_attempts, runs
from tx_scheduler_lsf._parse import STATE_TEXT, Job, appstate_from_lsf, split_job_name
from tx_scheduler_lsf.request import replica_file

#: LSF 10 termination reasons that mean someone killed the job
CANCEL_REASONS = ("TERM_OWNER", "TERM_ADMIN", "TERM_FORCE_OWNER", "TERM_FORCE_ADMIN")
#: LSF 10 termination reasons that are the infrastructure's doing, not the program's
INFRA_REASONS = ("TERM_HOST", "TERM_UNKNOWN", "TERM_REQUEUE_ADMIN", "TERM_REQUEUE_OWNER", "TERM_ZOMBIE")

#: why a job whose host failed under it ended (OpenLava: "Exited. The CPU time used is
#: unknown": its sbatchd came back without the job; the script recorded no exit status)
HOST_LOST = "its host failed under it and LSF lost the job (it does not know how the job ended)"

#: seconds after a signalled run's script ended during which LSF's report of the run (in
#: the job's ``-o`` file) is awaited before its EXIT is taken as an end: OpenLava marks a
#: requeued job EXIT some milliseconds before the report that says it will run again (a
#: report that never comes, sbatchd lost, does not hold the app up longer)
REPORT_WAIT_S = 30.0

#: OpenLava's and LSF's pending reasons explained where the words alone say little
PENDING_HINTS: Dict[str, str] = {
    "Job dependency condition not satisfied": "it waits for rank 0's job to start (-w started(...))",
    "Job's resource requirements not satisfied": "no host has the slots, memory or select[] it asks for",
    "New job is waiting for scheduling": "LSF has not scheduled it yet",
    "The queue is inactive": "its queue is inactive (badmin qact)",
    "The job was suspended by the user while pending": "it was suspended while pending (bresume it)",
}


def read_exit_file(path: str) -> Tuple[Optional[int], bool]:
    """``(status, signalled)`` the replica's script recorded; ``(None, False)`` without a
    readable file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = f.read().split()
    except OSError:
        return None, False
    if not words or not words[0].lstrip("-").isdigit():
        return None, False
    return int(words[0]), len(words) > 1


#: the line of a job's report (its ``-o`` file) that says LSF killed it to run it again
_REQUEUED = re.compile(r"^Job was killed by .* will be re-queued", re.MULTILINE)


def requeued(report_path: str, detail: Optional[Job]) -> bool:
    """Whether LSF killed the job to run it again (``brequeue`` by its owner or an
    administrator; host failures with REQUEUE_EXIT_VALUES): LSF 10's ``TERM_REQUEUE_*``
    reason, or the last report in the job's ``-o`` file saying so on a line of its own
    (``Job was killed by user or admin, and will be re-queued ...``; the report also quotes
    the job's script, whose lines do not count). OpenLava reports such a job EXIT for a
    moment before it pends again."""
    if detail is not None and detail.term_reason.startswith("TERM_REQUEUE"):
        return True
    text = read_tail(report_path, 64 * 1024).decode("utf-8", "replace") if report_path else ""
    return bool(_REQUEUED.search(text.rpartition("\nSender: ")[2]))


_ELEMENT_ID = re.compile(r"(\d+)\[(\d+)\]")


def report_file(job_dir: str, job: Job) -> str:
    """The job's ``-o`` file: ``<job name>.<job id>.lsf.out``; an array element's (job
    ``<base>_<i>-<role>-0``, id ``N[i]``: :func:`tx_scheduler_lsf._array.element_job`) is
    the array's ``<base>-<role>-0.N.i.lsf.out`` (its ``bsub -o ...%J.%I...``)."""
    m = _ELEMENT_ID.fullmatch(job.job_id)
    if m is not None and job.project.endswith(f"_{m.group(2)}") and job.name.startswith(f"{job.project}-"):
        name = job.project[:-len(m.group(2)) - 1] + job.name[len(job.project):]
        return os.path.join(job_dir, f"{name}.{m.group(1)}.{m.group(2)}.lsf.out")
    return os.path.join(job_dir, f"{job.name}.{job.job_id}.lsf.out")


def starts(evs: List[Event]) -> int:
    """How many times LSF started the job: its script's ``run`` events, and the run that
    found ``infra_retries`` spent (``exhausted``: it ends before its ``run``)."""
    return sum(1 for _, what, _ in evs if what in ("run", "exhausted"))


def reports(report_path: str) -> int:
    """How many of LSF's job reports (one per run that ended, each beginning with a
    ``Sender:`` line) the job's ``-o`` file holds; 0 without a readable file."""
    try:
        with open(report_path, "rb") as f:
            text = f.read()
    except OSError:
        return 0
    return text.count(b"\nSender: ") + text.startswith(b"Sender: ")


def unreported(job: Job, detail: Optional[Job], code: Optional[int], signalled: bool, evs: List[Event],
               exit_path: str, report_path: str, now: float) -> bool:
    """Whether the job's EXIT cannot be read yet: LSF signalled its run (the script recorded
    a signal, or no status), gives no reason of its own (no ``TERM_*``, host not lost), and
    has not written the run's report (fewer reports than starts) within :data:`REPORT_WAIT_S`
    of the run's end (its ``.exitcode`` file, else its last recorded event)."""
    if job.stat != "EXIT" or not (signalled or code is None) or not report_path:
        return False
    if detail is not None and (detail.term_reason or detail.host_lost):
        return False
    if reports(report_path) >= starts(evs):
        return False
    ended = max([_mtime(exit_path) if exit_path else 0.0, *(when for when, _, _ in evs)])
    return now - ended < REPORT_WAIT_S


def replica_state(job: Job, detail: Optional[Job], code: Optional[int], signalled: bool,
                  cancelled: bool, again: bool = False) -> Tuple[AppState, Optional[int]]:
    """A replica's state and exit code from its job, its ``bjobs -l`` detail (for EXIT
    jobs), the status its script recorded, whether tx cancelled the app and whether LSF
    requeued the job (``again``: PENDING, it runs again)."""
    state = appstate_from_lsf(job.stat)
    reason = detail.term_reason if detail is not None else ""
    if job.stat == "EXIT" and again and not cancelled:
        return AppState.PENDING, code
    if code is None and detail is not None:
        code = detail.exit_code
    if job.stat == "DONE":
        if code not in (None, 0):  # never seen: DONE is exit 0
            return AppState.FAILED, code
        return (AppState.CANCELLED, None) if cancelled and code is None else (AppState.SUCCEEDED, 0)
    if job.stat != "EXIT":
        return state, code
    if not cancelled and (reason.startswith(INFRA_REASONS) or (detail is not None and detail.host_lost)):
        return AppState.FAILED, code  # its host failed under it: not a cancel, whatever the signal
    if reason.startswith(CANCEL_REASONS) or cancelled or signalled or code is None:
        return AppState.CANCELLED, code
    if code == 130 and not reason:
        return AppState.CANCELLED, code  # TorchX 0.7's rule: bkill's SIGINT
    return AppState.FAILED, code


def pending_msg(jobs: List[Job], details: Dict[str, Job]) -> str:
    """``PEND: <reason>: <what it means>`` of the app's first pending job."""
    for job in jobs:
        if appstate_from_lsf(job.stat) != AppState.PENDING:
            continue
        if job.stat in STATE_TEXT:
            return f"{job.stat}: {STATE_TEXT[job.stat]}"
        detail = details.get(job.job_id)
        reasons = detail.pending if detail is not None else []
        if not reasons:
            return f"PEND: job {job.job_id} ({job.name}) waits to be scheduled"
        texts = []
        for r in reasons:
            key = r.split(":")[0].strip()
            hint = next((h for k, h in PENDING_HINTS.items() if key.startswith(k)), "")
            texts.append(f"{r} ({hint})" if hint else r)
        return f"PEND: job {job.job_id} ({job.name}): " + "; ".join(texts)
    return "PEND"


def build_describe(app_id: str, jobs: List[Job], details: Dict[str, Job], job_dir: str,
                   location: Optional[str] = None, now: Optional[float] = None) -> Optional[DescribeAppResponse]:
    """The description of ``app_id`` from its jobs (``bjobs -w``), the ``bjobs -l`` details
    of its pending and exited jobs, and its job directory ("" when unknown); None when no
    job is one of its replicas. ``location``: its ``TX_CHECKPOINT_DIR``, where a requeued
    run's reason names what it saved (:func:`tx_scheduler_lsf._attempts.build_attempts`).
    ``now``: the epoch seconds the look is made at (default the clock; :func:`unreported`)."""
    now = time.time() if now is None else now
    ending: List[str] = []
    cancelled = bool(job_dir) and os.path.exists(os.path.join(job_dir, f"{app_id}.cancelled"))
    roles: Dict[str, List[ReplicaStatus]] = {}
    failures: List[Tuple[float, ReplicaStatus, Job, Optional[Job]]] = []
    states: List[AppState] = []
    events: Dict[str, List[Event]] = {}
    requeues: List[str] = []
    for job in jobs:
        rr = split_job_name(app_id, job.name)
        if rr is None:
            continue
        role, k = rr
        detail = details.get(job.job_id)
        exit_path = os.path.join(job_dir, replica_file(app_id, role, k, "exitcode")) if job_dir else ""
        code, signalled = read_exit_file(exit_path) if exit_path else (None, False)
        evs = read_attempts(os.path.join(job_dir, replica_file(app_id, role, k, "attempts"))) if job_dir else []
        events[f"{role}[{k}]"] = evs
        report = report_file(job_dir, job) if job_dir else ""
        # the last report is this run's only when there is one per start of the job
        again = job.stat == "EXIT" and requeued(report if reports(report) >= starts(evs) else "", detail)
        if not (again or cancelled) and unreported(job, detail, code, signalled, evs, exit_path, report, now):
            state = AppState.RUNNING  # LSF ended the run and has not said yet whether it runs again
            ending.append(f"job {job.job_id} ({job.name}) ended: LSF has not reported yet whether it runs again")
        else:
            state, code = replica_state(job, detail, code, signalled, cancelled, again)
        if not cancelled and (again or (appstate_from_lsf(job.stat) == AppState.PENDING and runs(evs) > 0)):
            why = ("requeued by an administrator (brequeue)" if requeued(report, detail)
                   else "run again by LSF after its host failed")
            requeues.append(f"job {job.job_id} ({job.name}) {why}: it waits to run again")
        rep = ReplicaStatus(id=k, state=state, role=role, hostname=job.exec_host, exit_code=code)
        if state == AppState.FAILED:
            when = _mtime(exit_path) if exit_path else 0.0
            failures.append((when or float("inf"), rep, job, detail))
        roles.setdefault(role, []).append(rep)
        states.append(state)
    if not states:
        return None
    app_state = _app_state(states, cancelled)
    error, cause = NONE, None
    final: Optional[Tuple[FailureKind, str]] = None
    if app_state == AppState.FAILED and failures:
        (_, rep, job, detail), (error, cause) = _first_cause(app_id, failures, job_dir)
        rep.structured_error_msg = error
        rep.root_cause = cause
        final = _final_kind(rep, detail)
    attempts = build_attempts(events, app_state, final, location)
    msg = _msg(app_state, jobs, details, cancelled)
    if requeues and app_state == AppState.PENDING:
        msg = "; ".join(requeues) + ("" if msg == "PEND" else f" ({msg})")
    if ending and app_state == AppState.RUNNING:
        msg = "; ".join([msg, *ending])
    return DescribeAppResponse(
        app_id=app_id,
        state=app_state,
        num_restarts=len(attempts) - 1,
        attempts=attempts,
        msg=msg,
        structured_error_msg=error,
        root_cause=cause,
        roles_statuses=[RoleStatus(role, sorted(reps, key=lambda r: r.id)) for role, reps in roles.items()],
        metadata={"work_dir": job_dir, "jobs": {j.name: j.job_id for j in jobs},
                  "attempts": [a.to_json() for a in attempts]},
    )


def _first_cause(app_id: str, failures: List[Tuple[float, ReplicaStatus, Job, Optional[Job]]], job_dir: str
                 ) -> Tuple[Tuple[float, ReplicaStatus, Job, Optional[Job]], Tuple[str, Optional[RootCause]]]:
    """The failure that is the app's cause and why it failed (:func:`_why_failed`), by
    :func:`tx.schedulers.why.first_cause`: the replica whose script recorded its exit
    status first (its ``.exitcode`` file's mtime), except that among the replicas that
    failed within 10 s of it, one whose stderr names a cause other than a lost peer, or one
    LSF says why it ended (a ``TERM_*`` reason, its host lost), comes first (a DDP rank that
    raises makes the others fail in their next collective, and which script records first
    is a race). Only those replicas' stderr is read."""
    whys: Dict[Tuple[str, int], Tuple[str, Optional[RootCause]]] = {}

    def why(f: Tuple[float, ReplicaStatus, Job, Optional[Job]]) -> Tuple[str, Optional[RootCause]]:
        if (f[1].role, f[1].id) not in whys:
            whys[(f[1].role, f[1].id)] = _why_failed(app_id, f[1], f[2], f[3], job_dir)
        return whys[(f[1].role, f[1].id)]

    def known(f: Tuple[float, ReplicaStatus, Job, Optional[Job]]) -> bool:
        return f[3] is not None and (bool(f[3].term_reason) or f[3].host_lost)

    chosen, _ = first_cause(failures, lambda f: f[0], lambda f: why(f)[1], known=known)
    return chosen, why(chosen)


def _final_kind(rep: ReplicaStatus, detail: Optional[Job]) -> Tuple[FailureKind, str]:
    """Whose failure ended the app, and why, from the failed replica that is its cause."""
    who = f"{rep.role}[{rep.id}]"
    if detail is not None and detail.host_lost:
        return FailureKind.INFRA, f"{who}: {HOST_LOST}"
    reason = detail.term_reason if detail is not None else ""
    if reason.startswith(INFRA_REASONS):
        return FailureKind.INFRA, f"{who}: {reason}"
    return FailureKind.USER, f"{who}: " + (signal_text(rep.exit_code) if rep.exit_code is not None else "EXIT") + (
        f"; {reason}" if reason else "")


def _app_state(states: List[AppState], cancelled: bool) -> AppState:
    if AppState.FAILED in states:
        return AppState.FAILED
    if all(is_terminal(s) for s in states):
        if AppState.CANCELLED in states:
            return AppState.CANCELLED
        return AppState.SUCCEEDED
    if AppState.RUNNING in states:
        return AppState.RUNNING
    if AppState.UNKNOWN in states:
        return AppState.UNKNOWN
    return AppState.PENDING


def _msg(state: AppState, jobs: List[Job], details: Dict[str, Job], cancelled: bool) -> str:
    if state == AppState.PENDING:
        return pending_msg(jobs, details)
    odd = [j for j in jobs if j.stat in STATE_TEXT]
    if odd:
        return f"{odd[0].stat} (job {odd[0].job_id}, {odd[0].name}): {STATE_TEXT[odd[0].stat]}"
    if state == AppState.RUNNING:
        hosts = sorted({j.exec_host for j in jobs if j.exec_host})
        return "RUN on " + ",".join(hosts) if hosts else "RUN"
    if state == AppState.CANCELLED:
        return "cancelled (bkill)" + (" by tx" if cancelled else "")
    return {AppState.SUCCEEDED: "DONE", AppState.FAILED: "EXIT"}.get(state, str(state))


def _why_failed(app_id: str, rep: ReplicaStatus, job: Job, detail: Optional[Job],
                job_dir: str) -> Tuple[str, Optional[RootCause]]:
    """One line: ``<role>[k] (job <id> on <host>): exit code N[; TERM_...]: <last stderr line>``,
    or the root cause that the replica's stderr names (a torchrun worker's exception)."""
    err = os.path.join(job_dir, replica_file(app_id, rep.role, rep.id, "err")) if job_dir else ""
    tail = read_tail(err) if err else b""
    code = rep.exit_code
    reason = detail.term_reason if detail is not None else ""
    if code is not None and not reason:
        status = -(code - 128) if 128 < code < 160 else code
        cause = root_cause(rep.role, rep.id, tail, exit_code=status)
        if names_cause(cause):
            return cause.text, cause
    where = f"job {job.job_id}" + (f" on {job.exec_host}" if job.exec_host else "")
    text = f"{rep.role}[{rep.id}] ({where}): " + (signal_text(code) if code is not None else "EXIT")
    if reason:
        text += f"; {reason}"
    if detail is not None and detail.host_lost:
        text += f"; {HOST_LOST}"
    line = telling_line(tail)
    return (text + (f": {line}" if line else "")), None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
