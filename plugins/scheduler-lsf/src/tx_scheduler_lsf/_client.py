"""Running LSF's client commands (bsub, bjobs, bkill, lsid) and asking the cluster once
what it speaks.

Every call has a timeout (a hung mbatchd must not hang tx), and failures become one-line
:class:`LsfError` messages (the CLI prints them without a traceback).

OpenLava (the LSF 4 lineage) speaks a subset of IBM Spectrum LSF 10's options, and its
``getopt`` silently misreads the LSF 10 options it lacks (``bsub -oo F`` is ``-o o`` plus
the command ``F``; ``-cwd D`` is a CPU limit; ``-gpu ...`` names job group ``pu``, which
crashed mbatchd). So tx asks the cluster once per process (:func:`capabilities`, keyed by
``LSF_ENVDIR``) which product and version it is, and uses LSF 10's forms (``bjobs -o``,
``-json``, ``bsub -cwd``, ``-oo``/``-eo``, ``-gpu``, memory with units) on IBM LSF 10
only; everywhere else the portable subset.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
from typing import Dict, List, Optional, Sequence

import attrs

from tx.schedulers import BatchClient as Client, SchedulerError, failure_line

#: seconds an LSF client command may take (env ``TX_LSF_TIMEOUT`` overrides)
DEFAULT_TIMEOUT: float = 30.0

INSTALL_HINT = (
    "install LSF's client commands and source its profile (. $LSF_ENVDIR/profile.lsf, or "
    "OpenLava's etc/openlava.sh), or run tx on an LSF login node"
)


class LsfError(SchedulerError):
    """An LSF client command failed; the message is one line and says which and why."""


class LsfNotInstalledError(LsfError):
    """An LSF client command is not on PATH."""


class LsfCommandError(LsfError):
    """An LSF client command exited non-zero.

    Attributes:
        argv: the command line.
        returncode: its exit status.
        output: its standard error, else its standard output (LSF prints some errors there).
    """

    def __init__(self, argv: Sequence[str], returncode: int, output: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.output = output
        super().__init__(failure_line(argv, returncode, output))


class LsfTimeoutError(LsfError):
    """An LSF client command did not finish within its timeout."""


_CLIENT = Client(
    product="LSF", daemon="mbatchd", timeout_var="TX_LSF_TIMEOUT", install_hint=INSTALL_HINT,
    not_installed=LsfNotInstalledError, timed_out=LsfTimeoutError, failed=LsfCommandError,
    default_timeout=DEFAULT_TIMEOUT, output_fallback=True,
)


def default_timeout() -> float:
    """The timeout of LSF client calls in seconds: ``$TX_LSF_TIMEOUT`` or 30.

    Raises:
        ValueError: ``TX_LSF_TIMEOUT`` is not a positive number.
    """
    return _CLIENT.default_timeout()


def run(
    argv: List[str],
    timeout: Optional[float] = None,
    check: bool = True,
    input: Optional[str] = None,
    cwd: Optional[str] = None,
) -> "subprocess.CompletedProcess[str]":
    """Run an LSF client command and return it finished, with text stdout and stderr.

    Args:
        argv: the command and its arguments (no shell is involved).
        timeout: seconds before the command is killed (default :func:`default_timeout`).
        check: raise :class:`LsfCommandError` when it exits non-zero.
        input: text for its standard input (None: no input).
        cwd: the directory it runs in (``bsub`` records it as the job's working directory).

    Raises:
        LsfNotInstalledError: ``argv[0]`` is not on PATH.
        LsfTimeoutError: the command ran longer than ``timeout`` seconds.
        LsfCommandError: it exited non-zero (with ``check``); its output is stderr, else
            stdout (LSF prints some errors there).
    """
    return _CLIENT.run(argv, timeout, check=check, input=input, cwd=cwd)


@attrs.frozen
class Capabilities:
    """What the cluster's commands speak, from ``lsid``.

    Attributes:
        product: ``lsid``'s first line (``IBM Spectrum LSF Standard 10.1.0.13, ...`` or
            ``openlava project 4.0, ...``).
        major: the product's major version (0 when unknown).
        modern: IBM (Spectrum/Platform) LSF 10 or later: ``bjobs -o``/``-json``, ``bsub
            -cwd``, ``-oo``/``-eo``, ``-gpu`` and memory with units exist. False for
            OpenLava and anything unknown: only the portable subset is used.
    """

    product: str = ""
    major: int = 0
    modern: bool = False

    @property
    def name(self) -> str:
        """``IBM LSF 10`` / ``OpenLava 4`` / the product line, for messages."""
        if self.modern:
            return f"IBM LSF {self.major}"
        if "openlava" in self.product.lower():
            return f"OpenLava {self.major}" if self.major else "OpenLava"
        return self.product or "an unknown LSF"


_VERSION = re.compile(r"(?:LSF|openlava|project)\D{0,40}?(\d+)\.\d+", re.IGNORECASE)


def parse_lsid(text: str) -> Capabilities:
    """The :class:`Capabilities` ``lsid``'s output says (pure)."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    m = _VERSION.search(first)
    major = int(m.group(1)) if m else 0
    low = first.lower()
    modern = ("ibm" in low or "platform lsf" in low or "spectrum" in low) and "openlava" not in low and major >= 10
    return Capabilities(product=first, major=major, modern=modern)


_cache: Dict[str, Capabilities] = {}
_lock = threading.Lock()


def capabilities(timeout: Optional[float] = None) -> Capabilities:
    """The cluster's :class:`Capabilities`, asked with ``lsid`` once per process and
    cluster (``LSF_ENVDIR``).

    Raises:
        LsfNotInstalledError, LsfTimeoutError, LsfCommandError: lsid failed.
    """
    key = os.environ.get("LSF_ENVDIR", "")
    with _lock:
        if key in _cache:
            return _cache[key]
    caps = parse_lsid(run(["lsid"], timeout).stdout)
    with _lock:
        _cache[key] = caps
    return caps


def lsf_conf() -> Dict[str, str]:
    """``$LSF_ENVDIR/lsf.conf`` (default ``/etc/lsf.conf``) as a dict; {} where unreadable."""
    path = os.path.join(os.environ.get("LSF_ENVDIR") or "/etc", "lsf.conf")
    out: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.split("#", 1)[0].strip().partition("=")
                if sep:
                    out[key.strip()] = value.strip().strip('"')
    except OSError:
        pass
    return out
