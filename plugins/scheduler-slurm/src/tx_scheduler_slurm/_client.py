"""Running Slurm's client commands (sbatch, squeue, sacct, scontrol, scancel, sinfo).

Every call has a timeout: with slurmctld unreachable a client command retries for about
10 s before failing, and a hung controller must not hang tx. Failures become one-line
:class:`SlurmError` messages (the CLI prints them without a traceback). Every call goes
through the cluster's call budget (:mod:`tx_scheduler_slurm._plane`): it waits for a token,
and slurmctld's rate-limit answer is retried after a jittered backoff, never reported as
the command's failure (:class:`tx.schedulers.budget.ThrottledError` when it lasts).
"""
from __future__ import annotations

import os
import subprocess
from typing import List, Optional, Sequence

from tx.schedulers.api import SchedulerError
from tx.schedulers.budget import BackendThrottled

from tx_scheduler_slurm._plane import budget

#: seconds a Slurm client command may take (env ``TX_SLURM_TIMEOUT`` overrides)
DEFAULT_TIMEOUT: float = 30.0

INSTALL_HINT = (
    "install Slurm's client commands (Debian/Ubuntu: apt-get install slurm-client; "
    "RHEL/Rocky: dnf install slurm) or run tx on a Slurm login node"
)


class SlurmError(SchedulerError):
    """A Slurm client command failed; the message is one line and says which and why."""


class SlurmNotInstalledError(SlurmError):
    """A Slurm client command is not on PATH (Slurm is not installed on this machine)."""


class SlurmCommandError(SlurmError):
    """A Slurm client command exited non-zero.

    Attributes:
        argv: the command line.
        returncode: its exit status.
        stderr: its standard error (whole, possibly several lines).
    """

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        last = " ".join(_last_line(stderr).split()) or "no error message"
        super().__init__(f"{argv[0]} failed (exit {returncode}): {last}")


class SlurmTimeoutError(SlurmError):
    """A Slurm client command did not finish within its timeout."""


#: slurmctld's answer to a client over its rate limit (SLURMCTLD_COMMUNICATIONS_BACKOFF,
#: SlurmctldParameters=rl_enable); Slurm's own commands retry it a few times first
_RATE_LIMITED = b"Rate limit exceeded"


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def default_timeout() -> float:
    """The timeout of Slurm client calls in seconds: ``$TX_SLURM_TIMEOUT`` or 30.

    Raises:
        ValueError: ``TX_SLURM_TIMEOUT`` is not a positive number.
    """
    text = os.environ.get("TX_SLURM_TIMEOUT")
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"TX_SLURM_TIMEOUT must be a positive number of seconds, got {text!r}")
    return value


def run(
    argv: List[str],
    timeout: Optional[float] = None,
    check: bool = True,
    input: Optional[str] = None,
) -> subprocess.CompletedProcess:
    """Run a Slurm client command and return it finished, with text stdout and stderr.

    Args:
        argv: the command and its arguments (no shell is involved).
        timeout: seconds before the command is killed (default :func:`default_timeout`).
        check: raise :class:`SlurmCommandError` when it exits non-zero.
        input: text for its standard input (None: no input).

    Raises:
        SlurmNotInstalledError: ``argv[0]`` is not on PATH.
        SlurmTimeoutError: the command ran longer than ``timeout`` seconds.
        SlurmCommandError: it exited non-zero (with ``check``).
    """
    limit = default_timeout() if timeout is None else timeout

    def once() -> "subprocess.CompletedProcess[bytes]":
        proc = subprocess.run(
            argv,
            input=None if input is None else input.encode("utf-8"),
            stdin=subprocess.DEVNULL if input is None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=limit,
            # a session of its own: the terminal's Ctrl-C is tx's to handle (`tx run --wait`
            # cancels the app), not a SIGINT that kills squeue mid-call into a failed look
            # (a KeyboardInterrupt still kills the command: subprocess.run does on any exception)
            start_new_session=True,
        )
        if proc.returncode != 0 and _RATE_LIMITED in proc.stderr:
            raise BackendThrottled(proc.stderr.decode("utf-8", "replace"))
        return proc

    try:
        proc = budget().call(once, what=argv[0])
    except FileNotFoundError:
        raise SlurmNotInstalledError(f"{argv[0]} not found: Slurm is not installed here; {INSTALL_HINT}") from None
    except subprocess.TimeoutExpired:
        raise SlurmTimeoutError(
            f"{argv[0]} did not answer within {limit:g} s: is slurmctld up and reachable? "
            "(set TX_SLURM_TIMEOUT to wait longer)"
        ) from None
    out = subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )
    if check and out.returncode != 0:
        raise SlurmCommandError(argv, out.returncode, out.stderr)
    return out
