"""Parsing what ``bjobs`` prints (pure), and LSF's job states.

* ``bjobs -a -noheader -w``: one line per job, ``JOBID USER STAT QUEUE FROM_HOST
  EXEC_HOST JOB_NAME SUBMIT_TIME`` (the same columns on OpenLava and IBM LSF 10);
* ``bjobs -l``: one block per job, separated by a line of dashes, whose long lines LSF
  wraps at 80 columns with 21 spaces before the continuation (mid-word, even inside
  ``<...>``); pending reasons under `` PENDING REASONS:``; on LSF 10 the termination reason
  (``TERM_RUNLIMIT: job killed after reaching LSF run time limit``).

States (https://www.ibm.com/docs/en/spectrum-lsf/10.1.0?topic=execution-about-job-states):
a state this table does not know maps to UNKNOWN, never to an exception.
"""
from __future__ import annotations

import re
from typing import Dict, List, Mapping, Optional

import attrs

from tx.specs import AppState

LSF_STATES: Mapping[str, AppState] = {
    "PEND": AppState.PENDING,
    "PSUSP": AppState.PENDING,  # suspended by its owner or an admin while pending
    "RUN": AppState.RUNNING,
    "USUSP": AppState.RUNNING,  # suspended while running: it holds its slots and resumes
    "SSUSP": AppState.RUNNING,  # suspended by LSF (load, preemption) while running
    "WAIT": AppState.PENDING,  # chunk job members waiting
    "PROV": AppState.PENDING,  # provisioning its host
    "DONE": AppState.SUCCEEDED,
    "EXIT": AppState.FAILED,
    "ZOMBI": AppState.UNKNOWN,  # killed while its host was unreachable: LSF does not know its end yet
    "UNKWN": AppState.UNKNOWN,  # mbatchd lost contact with its sbatchd
}

#: what the states that say little mean, for ``AppStatus.msg``
STATE_TEXT: Mapping[str, str] = {
    "PSUSP": "suspended while pending (bresume it)",
    "USUSP": "suspended by its owner or an administrator (bresume it)",
    "SSUSP": "suspended by LSF (host load, or preempted by a job of higher priority)",
    "ZOMBI": "killed while its host was unreachable: LSF does not know yet how it ended",
    "UNKWN": "mbatchd lost contact with the sbatchd of its host",
}


def appstate_from_lsf(stat: str) -> AppState:
    """Map an LSF job state (``RUN``...) to an AppState; UNKNOWN for states not in
    :data:`LSF_STATES` (including empty text)."""
    return LSF_STATES.get(stat.strip().upper(), AppState.UNKNOWN)


@attrs.define
class Job:
    """One LSF job, as ``bjobs`` reports it.

    Attributes:
        job_id: the job id (``123``, an array element ``123[4]``).
        stat: LSF's state (``PEND``, ``RUN``, ``DONE``, ``EXIT``...).
        name: the job name.
        exec_host: the first execution host ("" while pending).
        queue: the queue.
        project: the project ("" where the line did not say).
        cwd: the job's working directory (from ``-l``; "" otherwise).
        exit_code: from ``-l``: ``Exited with exit code N`` (None otherwise).
        pending: from ``-l``: the pending reasons, one per item.
        term_reason: from ``-l`` on LSF 10: ``TERM_...: text`` ("" otherwise).
        host_lost: from ``-l``: the job's host failed under it, so LSF does not know how it
            ended (OpenLava: ``Exited. The CPU time used is unknown``, its sbatchd came back
            without the job).
    """

    job_id: str
    stat: str
    name: str
    exec_host: str = ""
    queue: str = ""
    project: str = ""
    cwd: str = ""
    exit_code: Optional[int] = None
    pending: List[str] = attrs.field(factory=list)
    term_reason: str = ""
    host_lost: bool = False


def _first_host(text: str) -> str:
    """``vm`` of ``vm``, ``vm:vm``, ``2*vm``; "" of ``-``."""
    if text in ("", "-"):
        return ""
    first = re.split(r"[:\s]", text)[0]
    return first.split("*", 1)[-1]


def parse_bjobs_w(text: str) -> List[Job]:
    """The jobs of ``bjobs -noheader -w`` (header lines and messages such as ``No job
    found`` are skipped)."""
    jobs = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 7 or not re.match(r"^\d+(?:\[\d+\])?$", f[0]):
            continue
        jobs.append(Job(job_id=f[0], stat=f[2], queue=f[3], exec_host=_first_host(f[5]), name=f[6]))
    return jobs


def _wrapped(pattern: str, flags: int = 0) -> "re.Pattern[str]":
    """``pattern`` with each of its spaces optional: where ``bjobs -l`` wraps a line at a
    space, it drops that space (OpenLava's ``prtLine``: at column 80 it prints a newline and
    21 spaces and skips a space that comes next), so ``Project <p>`` can read ``Project<p>``
    once :func:`unwrap` has joined the lines."""
    return re.compile(pattern.replace(" ", " ?"), flags)


_BLOCK_SEP = re.compile(r"^-{20,}\s*$", re.MULTILINE)
_FIELD = _wrapped(r"(Job Id|Job|Job Name|Project|Status|Queue|CWD|Execution CWD) <([^>]*)>")
#: a field's name as matched (a dropped space removed) -> its name
_FIELD_NAMES = {"JobId": "Job Id", "Job": "Job Id", "JobName": "Job Name", "ExecutionCWD": "Execution CWD"}
_EXIT = _wrapped(r"Exited with exit code (\d+)")
_TERM = _wrapped(r"\b(TERM_[A-Z_]+): ([^;.\n]*)")
_HOST_LOST = _wrapped(r"Exited\.? The CPU time used is unknown")
_STARTED = _wrapped(r"Started (?:\d+ Task\(s\) )?on (?:Host\(s\) )?<(?:\d+\*)?([^>]*)>", re.IGNORECASE)


def unwrap(block: str) -> str:
    """Join the lines ``bjobs -l`` wrapped (a line that starts with 21 spaces continues the
    previous one, mid-word)."""
    out: List[str] = []
    for line in block.splitlines():
        if line.startswith(" " * 21) and out and out[-1].strip():
            out[-1] += line[21:]
        else:
            out.append(line)
    return "\n".join(out)


def parse_bjobs_l(text: str) -> Dict[str, Job]:
    """Job id -> :class:`Job` of ``bjobs -l`` (with cwd, exit code, pending reasons and
    termination reason)."""
    jobs: Dict[str, Job] = {}
    for block in _BLOCK_SEP.split(text):
        flat = unwrap(block)
        fields: Dict[str, str] = {}
        for key, value in _FIELD.findall(flat):
            key = key.replace(" ", "")
            fields.setdefault(_FIELD_NAMES.get(key, key), value)
        if "Job Id" not in fields:
            continue
        job = Job(job_id=fields["Job Id"], stat=fields.get("Status", ""), name=fields.get("Job Name", ""),
                  queue=fields.get("Queue", ""), project=fields.get("Project", ""),
                  cwd=fields.get("CWD") or fields.get("Execution CWD", ""))
        m = _EXIT.search(flat)
        if m:
            job.exit_code = int(m.group(1))
        m = _TERM.search(flat)
        if m:
            job.term_reason = f"{m.group(1)}: {m.group(2).strip()}"
        job.host_lost = job.exit_code is None and bool(_HOST_LOST.search(flat))
        m = _STARTED.search(flat)
        if m:
            job.exec_host = m.group(1)
        job.pending = _pending_reasons(flat)
        jobs[job.job_id] = job
    return jobs


def _pending_reasons(flat: str) -> List[str]:
    lines = flat.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "PENDING REASONS:":
            out = []
            for reason in lines[i + 1:]:
                if not reason.strip():
                    break
                out.append(reason.strip().rstrip(";"))
            return out
    return []


def split_job_name(app_id: str, name: str) -> Optional[tuple]:
    """``(role, replica)`` of job ``<app id>-<role>-<replica>``; None for another name."""
    prefix = f"{app_id}-"
    if not name.startswith(prefix):
        return None
    role, sep, idx = name[len(prefix):].rpartition("-")
    if not sep or not role or not idx.isdigit():
        return None
    return role, int(idx)
