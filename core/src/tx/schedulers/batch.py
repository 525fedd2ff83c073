"""What the schedulers of batch systems whose jobs run programs on the hosts of a shared
filesystem (Slurm, LSF) have in common: running the system's client commands (``sbatch``,
``bsub``, ...) with a timeout and one-line errors, the files kept beside the jobs, and the
checks of an AppDef such a system can run. Standard library and :mod:`tx.log` only.

A plugin describes its commands once with a :class:`Client` (its product's name, its
daemon's, the variable that sets the timeout, how to install it, its own error classes) and
calls :meth:`Client.run`; its errors stay its own classes, so callers catch them as before.
"""
from __future__ import annotations

import os
import re
import subprocess
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Type

from tx.log import get_logger

if TYPE_CHECKING:
    from tx.specs import AppDef

__all__ = [
    "CAUSE_TAIL_BYTES", "Client", "ENV_NAME", "ROLE_NAME", "failure_line", "last_line", "read_tail", "read_text",
    "run_program", "timeout_from_env", "validate_host_app", "write_atomic",
]

#: a role name that can name jobs and log files: letters, digits, ``.``, ``_``, ``-`` (not first)
ROLE_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")
#: bytes of the end of a failed replica's stderr read for its root cause (torchrun prints its
#: report after the worker's traceback, and other workers' lines may follow it)
CAUSE_TAIL_BYTES = 256 * 1024
#: an environment variable name a shell script can set
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: how a call is made: ``via(once, what)`` calls ``once()`` (maybe more than once, as a call
#: budget retrying a throttled answer does) and returns its result; ``what`` is argv[0]
Via = Callable[[Callable[[], "subprocess.CompletedProcess[bytes]"], str], "subprocess.CompletedProcess[bytes]"]


def last_line(text: str) -> str:
    """The last line of ``text`` with anything but whitespace on it ("" where none)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def failure_line(argv: Sequence[str], returncode: int, output: str) -> str:
    """``sbatch failed (exit 1): <the last line of output, whitespace squeezed>``: the one-line
    message of a client command that exited non-zero (``no error message`` without output)."""
    last = " ".join(last_line(output).split()) or "no error message"
    return f"{argv[0]} failed (exit {returncode}): {last}"


def timeout_from_env(var: str, default: float) -> float:
    """Seconds from the environment variable ``var`` (a positive number), else ``default``.

    Raises:
        ValueError: ``var`` is set to something other than a positive number.
    """
    text = os.environ.get(var)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"{var} must be a positive number of seconds, got {text!r}")
    return value


class Client:
    """How one batch system's client commands are run and their failures worded.

    Args:
        product: the system's name in messages (``Slurm``, ``LSF``).
        daemon: the daemon a command that does not answer waits for (``slurmctld``).
        timeout_var: the environment variable that sets the timeout (``TX_SLURM_TIMEOUT``).
        install_hint: what to do when a command is not on PATH (one clause).
        not_installed, timed_out: the error classes raised (with the message) when a command
            is not on PATH / does not finish in time.
        failed: the error raised for a non-zero exit, called as ``failed(argv, returncode,
            output)``.
        default_timeout: seconds a command may take where ``timeout_var`` is unset.
        output_fallback: a failure's ``output`` is stderr, else (True) stdout where stderr is
            empty (LSF prints some errors on stdout).
        new_session: run each command in a session of its own, so that the terminal's Ctrl-C
            is tx's to handle (``tx run --wait`` cancels the app), not a SIGINT that kills the
            command mid-call (an exception in tx still kills it: subprocess.run does).
    """

    def __init__(self, *, product: str, daemon: str, timeout_var: str, install_hint: str,
                 not_installed: Type[Exception], timed_out: Type[Exception],
                 failed: Callable[[List[str], int, str], Exception], default_timeout: float = 30.0,
                 output_fallback: bool = False, new_session: bool = False) -> None:
        self.product = product
        self.daemon = daemon
        self.timeout_var = timeout_var
        self.install_hint = install_hint
        self.not_installed = not_installed
        self.timed_out = timed_out
        self.failed = failed
        self.default_timeout_s = default_timeout
        self.output_fallback = output_fallback
        self.new_session = new_session

    def default_timeout(self) -> float:
        """Seconds a command may take: ``$<timeout_var>`` or the default.

        Raises:
            ValueError: the variable is not a positive number.
        """
        return timeout_from_env(self.timeout_var, self.default_timeout_s)

    def run(self, argv: List[str], timeout: Optional[float] = None, check: bool = True,
            input: Optional[str] = None, cwd: Optional[str] = None, via: Optional[Via] = None,
            ) -> "subprocess.CompletedProcess[str]":
        """Run a client command (no shell) and return it finished, with text stdout and stderr
        (undecodable bytes replaced).

        Args:
            argv: the command and its arguments.
            timeout: seconds before the command is killed (default :meth:`default_timeout`).
            check: raise the ``failed`` error when it exits non-zero.
            input: text for its standard input (None: no input, stdin is /dev/null).
            cwd: the directory it runs in (None: this process's).
            via: how the call is made (see :data:`Via`; a call budget); None: directly.

        Raises:
            not_installed: ``argv[0]`` is not on PATH.
            timed_out: the command ran longer than ``timeout`` seconds.
            failed: it exited non-zero (with ``check``).
            ValueError: no ``timeout`` and a malformed ``timeout_var``.
        """
        limit = self.default_timeout() if timeout is None else timeout

        def once() -> "subprocess.CompletedProcess[bytes]":
            return subprocess.run(
                argv,
                input=None if input is None else input.encode("utf-8"),
                stdin=subprocess.DEVNULL if input is None else None,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=limit,
                cwd=cwd,
                start_new_session=self.new_session,
            )

        try:
            proc = once() if via is None else via(once, argv[0])
        except FileNotFoundError:
            raise self.not_installed(
                f"{argv[0]} not found: {self.product} is not installed here; {self.install_hint}") from None
        except subprocess.TimeoutExpired:
            raise self.timed_out(
                f"{argv[0]} did not answer within {limit:g} s: is {self.daemon} up and reachable? "
                f"(set {self.timeout_var} to wait longer)"
            ) from None
        out = subprocess.CompletedProcess(
            proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )
        if check and out.returncode != 0:
            output = (out.stderr.strip() or out.stdout) if self.output_fallback else out.stderr
            raise self.failed(argv, out.returncode, output)
        return out


def run_program(redirect: str, ignore: str = "") -> str:
    """Bash lines of a replica's launcher script that run its program and take its exit
    status, for a script that traps the signals its batch system ends jobs with (TERM, INT,
    HUP: each trap sets ``tx_sig`` to the signal's number and may pass it on to ``$tx_pid``).

    The program (``"${tx_argv[@]}"``) runs in the background, so that the script's traps
    run while it runs, with the default SIGINT and SIGQUIT (which bash takes from background
    commands: a batch system's SIGINT must reach it, and torchrun's workers must not inherit
    an ignored one) and TERM, INT and HUP as the script was given them. Its status comes from
    a recorder process that ignores those signals and waits for it: bash's own ``wait``,
    interrupted by a trap as the program dies, can lose the status (-1 in 4-7 of 20-30 tries
    on Slurm), and a loop of waits took the trap's 128+N for the program's. A signal trapped
    while the program started is sent to it once it runs. After the lines ``$tx_pid`` is the
    program's pid and ``$tx_rc`` its status, empty where the recorder was SIGKILLed.

    Args:
        redirect: the program's redirections; file descriptor 4 is the script's stdout
            (``<&0 >&4``: the script's stdin and stdout).
        ignore: more signals (shell words, e.g. ``$tx_ws``) that the recorder ignores and the
            program starts with ignored.
    """
    return f"""exec 4>&1
exec 3< <(trap '' TERM INT HUP{" " + ignore if ignore else ""}; (trap - TERM INT HUP QUIT; exec "${{tx_argv[@]}}" 3<&- 4>&-) {redirect} 4>&- &
  echo "$!"; wait "$!"; echo "$?")
exec 4>&-
until read -r tx_pid <&3; [ $? -le 128 ]; do :; done  # a trap ends a read: read on
if [ -n "$tx_sig" ]; then kill -s "$(kill -l "$tx_sig")" "$tx_pid" 2>/dev/null; fi  # came while it started
tx_rc=; until read -r tx_rc <&3; [ $? -le 128 ]; do :; done; exec 3<&-"""


def write_atomic(path: str, text: str, what: str = "") -> bool:
    """Write ``text`` to ``path`` through a temporary file beside it (readers see the old
    file or the whole new one). A failure is logged as a warning (``<what>: cannot write
    <path>: <error>``), never raised; returns whether the file was written."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        return True
    except OSError as e:
        get_logger(__name__).warning(f"{what or 'tx'}: cannot write {path}: {e}")
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def read_text(path: str) -> Optional[str]:
    """The text of ``path`` (UTF-8); None where it cannot be read or decoded."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def read_tail(path: str, size: int = CAUSE_TAIL_BYTES) -> bytes:
    """The last ``size`` bytes of the file at ``path`` (b"" where it cannot be read); a big
    file is not read whole."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - size))
            return f.read(size)
    except OSError:
        return b""


def validate_host_app(app: "AppDef", scheduler: str, jobs: str) -> None:
    """Reject what a scheduler that runs each replica as a shell script on a host of a
    shared filesystem cannot run.

    Args:
        app: the AppDef.
        scheduler: the scheduler's name in messages (``slurm``).
        jobs: what its role names name (``Slurm jobs``).

    Raises:
        ValueError: a role name that is not a safe job/file name, an env name that is not a
            shell identifier, or mounts (the jobs use the cluster's shared filesystems).
    """
    for role in app.roles:
        if not ROLE_NAME.match(role.name):
            raise ValueError(
                f"role name {role.name!r} cannot name {jobs} and log files: use letters, "
                "digits, '.', '_' and '-' (not first)"
            )
        for key in role.env:
            if not ENV_NAME.match(key):
                raise ValueError(
                    f"role {role.name!r}: env name {key!r} is not a valid shell variable name "
                    "([A-Za-z_][A-Za-z0-9_]*)"
                )
        if role.mounts:
            raise ValueError(
                f"role {role.name!r} has mounts: the {scheduler} scheduler runs on the cluster's "
                "shared filesystems and supports no mounts; remove them"
            )
