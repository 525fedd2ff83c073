"""Running Slurm's client commands (sbatch, squeue, sacct, scontrol, scancel, sinfo).

Every call has a timeout: with slurmctld unreachable a client command retries for about
10 s before failing, and a hung controller must not hang tx. Failures become one-line
:class:`SlurmError` messages (the CLI prints them without a traceback). Every call goes
through the cluster's call budget (:mod:`tx_scheduler_slurm._plane`): it waits for a token,
and slurmctld's rate-limit answer is retried after a jittered backoff, never reported as
the command's failure (:class:`tx.schedulers.budget.ThrottledError` when it lasts).
"""
from __future__ import annotations

import subprocess
from typing import Callable, List, Optional, Sequence

from tx.schedulers import BackendThrottled, BatchClient as Client, SchedulerError, failure_line

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
        super().__init__(failure_line(argv, returncode, stderr))


class SlurmTimeoutError(SlurmError):
    """A Slurm client command did not finish within its timeout."""


#: slurmctld's answer to a client over its rate limit (SLURMCTLD_COMMUNICATIONS_BACKOFF,
#: SlurmctldParameters=rl_enable); Slurm's own commands retry it a few times first
_RATE_LIMITED = b"Rate limit exceeded"


_CLIENT = Client(
    product="Slurm", daemon="slurmctld", timeout_var="TX_SLURM_TIMEOUT", install_hint=INSTALL_HINT,
    not_installed=SlurmNotInstalledError, timed_out=SlurmTimeoutError, failed=SlurmCommandError,
    default_timeout=DEFAULT_TIMEOUT, new_session=True,
)


def default_timeout() -> float:
    """The timeout of Slurm client calls in seconds: ``$TX_SLURM_TIMEOUT`` or 30.

    Raises:
        ValueError: ``TX_SLURM_TIMEOUT`` is not a positive number.
    """
    return _CLIENT.default_timeout()


def _through_budget(once: Callable[[], "subprocess.CompletedProcess[bytes]"], what: str,
                    ) -> "subprocess.CompletedProcess[bytes]":
    """``once()`` through the cluster's call budget; slurmctld's rate-limit answer is
    :class:`BackendThrottled` (the budget retries it after a backoff)."""
    def checked() -> "subprocess.CompletedProcess[bytes]":
        proc = once()
        if proc.returncode != 0 and _RATE_LIMITED in proc.stderr:
            raise BackendThrottled(proc.stderr.decode("utf-8", "replace"))
        return proc

    return budget().call(checked, what=what)


def run(
    argv: List[str],
    timeout: Optional[float] = None,
    check: bool = True,
    input: Optional[str] = None,
) -> "subprocess.CompletedProcess[str]":
    """Run a Slurm client command and return it finished, with text stdout and stderr.

    Each command runs in a session of its own (the terminal's Ctrl-C is tx's to handle:
    ``tx run --wait`` cancels the app, rather than a SIGINT killing squeue mid-call).

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
    return _CLIENT.run(argv, timeout, check=check, input=input, via=_through_budget)
