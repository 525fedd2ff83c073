"""Submitting with ``sbatch``, and a submission whose answer never came.

sbatch has no idempotency key: when slurmctld is slow (a loaded controller, a rate limit)
tx stops an sbatch at its timeout, or sbatch gives up itself ("Socket timed out on
send/recv operation"), but the request may already be in slurmctld's hands, and it may
accept the job after the client has gone. Such a job would run with no record in tx, while
tx reported the submit as failed, and a retry would run the work twice.

So every sbatch carries a submission token in its ``--comment``
(``tx-app:<name>; tx-submit:<token>[; <user comment>]``: the app's name stays first, where
:class:`tx_scheduler_slurm._parse.JobRecord` reads it). When an sbatch goes unanswered, tx
looks for the token in the user's queue (``squeue --user <uid> --format=%i|%k``) until
slurmctld has answered two looks (at most twice the command timeout), cancels the jobs that
carry it, and raises the submit's error saying what it found. Where slurmctld answered no
look, the error names the token, so that the user can find the job.

Slurm docs: https://slurm.schedmd.com/sbatch.html (``--comment``, ``--parsable``),
https://slurm.schedmd.com/squeue.html (``%k``: the comment).
"""
from __future__ import annotations

import os
import re
import time
import uuid
from typing import Callable, List, Optional, Tuple

from tx import get_logger

from tx_scheduler_slurm import _client, _plane
from tx_scheduler_slurm._client import SlurmCommandError, SlurmError, SlurmTimeoutError
from tx_scheduler_slurm.request import COMMENT_MARKER

__all__ = ["SCRIPT_NAME", "TOKEN_MARKER", "sbatch", "with_token"]

log = get_logger(__name__)

#: the batch script's file name in the job directory (``job_dir`` set)
SCRIPT_NAME = "tx-sbatch.sh"
#: the submission token's prefix in the job's comment
TOKEN_MARKER = "tx-submit:"
#: sbatch's own words for a request sent whose answer never came (the job may exist)
_UNANSWERED = ("Socket timed out on send/recv operation", "Zero Bytes were transmitted or received")


def with_token(cmd: List[str]) -> Tuple[List[str], str]:
    """``cmd`` with a fresh submission token in its ``--comment`` (added after the app's
    name, before a user's comment), and the token (12 hex digits)."""
    token = uuid.uuid4().hex[:12]
    out, done = [], False
    for word in cmd:
        if not done and word.startswith("--comment=" + COMMENT_MARKER):
            name, sep, rest = word.partition("; ")
            word = f"{name}; {TOKEN_MARKER}{token}" + (f"; {rest}" if sep else "")
            done = True
        out.append(word)
    if not done:
        out.insert(1, f"--comment={TOKEN_MARKER}{token}")
    return out, token


def _unanswered(e: SlurmError) -> bool:
    """Whether sbatch's request may have reached slurmctld without its answer reaching tx."""
    if isinstance(e, SlurmTimeoutError):
        return True
    return isinstance(e, SlurmCommandError) and any(w in e.stderr for w in _UNANSWERED)


def _withdraw(token: str, timeout: Optional[float], cancel: Callable[[List[str]], None]) -> Tuple[List[str], int]:
    """Cancel (with ``cancel``: the scheduler's ``cancel_many``) the jobs whose comment
    carries ``token``; returns their ids and how many looks slurmctld answered (2, or fewer
    where it answered none within twice ``timeout``)."""
    wait = 2 * (timeout if timeout is not None else _client.default_timeout())
    end, answered, found = time.monotonic() + wait, 0, []
    argv = ["squeue", "--noheader", "--user", str(os.getuid()), "--format=%i|%k"]
    while answered < 2 and time.monotonic() < end:
        try:
            out = _client.run(argv, max(1.0, end - time.monotonic())).stdout
        except SlurmError as e:
            log.warning("slurm_withdraw_look_failed", token=token, error=str(e))
            continue
        answered += 1
        ids = sorted({m[1] for m in (re.match(r"^(\d+)", ln) for ln in out.splitlines()
                                     if f"{TOKEN_MARKER}{token}" in ln) if m} - set(found))
        if ids:
            cancel(ids)
            found += ids
    return found, answered


def sbatch(cmd: List[str], script: str, job_dir: Optional[str], timeout: Optional[float],
           cancel: Callable[[List[str]], None]) -> str:
    """Run ``cmd`` (an ``sbatch --parsable`` command line) with ``script`` (written to
    ``job_dir`` as :data:`SCRIPT_NAME` when set, else given on stdin) and a submission token;
    returns the job id sbatch printed. ``cancel``: how a job accepted after sbatch gave up is
    cancelled (the scheduler's ``cancel_many``: ids -> None, raises as ``scancel`` fails).

    Raises:
        SlurmNotInstalledError: sbatch is not on PATH.
        SlurmCommandError, SlurmTimeoutError: sbatch refused the job, or did not answer; an
            unanswered sbatch's error also says which jobs carrying its token were
            cancelled, or that slurmctld could not be asked (and the token to look for).
        SlurmError: sbatch printed no job id.
    """
    stdin: Optional[str] = script
    if job_dir:
        os.makedirs(job_dir, exist_ok=True)
        path = os.path.join(os.path.abspath(job_dir), SCRIPT_NAME)
        with open(path, "w", encoding="utf-8") as f:
            f.write(script)
        cmd, stdin = [*cmd, path], None
    cmd, token = with_token(cmd)
    try:
        out = _client.run(cmd, timeout, input=stdin)
    except SlurmError as e:
        if not _unanswered(e):
            raise
        found, answered = _withdraw(token, timeout, cancel)
        log.warning("slurm_sbatch_unanswered", token=token, cancelled=found, looks=answered)
        if found:
            what = f"slurmctld accepted it anyway as job {', '.join(found)}, which tx cancelled"
        elif answered:
            what = "slurmctld holds no job of it (tx looked after the timeout)"
        else:
            what = (f"tx could not check whether slurmctld accepted it: a job whose comment has "
                    f"{TOKEN_MARKER}{token} (squeue --me --format='%i %k') is that submit's, cancel it")
        error = SlurmTimeoutError if isinstance(e, SlurmTimeoutError) else SlurmError
        raise error(f"{e}; {what}") from None
    finally:
        _plane.plane().invalidate()  # the next look asks Slurm
    job_id = out.stdout.strip().split(";")[0].strip()
    if not re.match(r"^\d+$", job_id):
        raise SlurmError(f"sbatch printed no job id (stdout {out.stdout.strip()!r})")
    return job_id
