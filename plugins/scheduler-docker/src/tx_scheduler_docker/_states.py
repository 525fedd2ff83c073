"""Container states of Docker and of engines that speak its API, mapped to tx states.

Docker's states are those of ``GET /containers/{id}/json`` ``State.Status``
(https://docs.docker.com/reference/api/engine/version/v1.43/#tag/Container/operation/ContainerInspect):
``created``, ``restarting``, ``running``, ``removing``, ``paused``, ``exited``, ``dead``.
Podman's compatible API reports its own names in some cases (``configured``, ``initialized``,
``stopping``, ``stopped`` where Docker says ``exited``). A state tx does not know is
``UNKNOWN``: never an error (TorchX 0.7.0 raises ``KeyError`` on podman's ``stopped``).
"""
from __future__ import annotations

import datetime
import re
import signal
from typing import Any, Dict, List, Optional, Tuple

from tx.specs import NONE, AppState, ReplicaStatus, is_terminal

#: container state -> tx state for states that say nothing about the exit code
_STATES = {
    "created": AppState.SUBMITTED,
    "configured": AppState.SUBMITTED,    # podman: created, not yet initialized
    "initialized": AppState.SUBMITTED,   # podman: ready to start
    "restarting": AppState.PENDING,
    "paused": AppState.PENDING,
    "running": AppState.RUNNING,
    "stopping": AppState.RUNNING,        # podman: being stopped, still running
    "removing": AppState.PENDING,
    "dead": AppState.FAILED,
}
#: states after which the exit code decides: 0 SUCCEEDED, else FAILED
_ENDED = ("exited", "stopped")


def container_state(status: Optional[str], exit_code: Optional[int]) -> AppState:
    """The tx state of one container from its engine ``status`` string and ``exit_code``.

    Returns:
        an :class:`AppState`; ``UNKNOWN`` for a status this table does not know (logged by
        the caller), never an exception.
    """
    s = (status or "").strip().lower()
    if s in _ENDED:
        if exit_code is None:
            return AppState.UNKNOWN
        return AppState.SUCCEEDED if exit_code == 0 else AppState.FAILED
    return _STATES.get(s, AppState.UNKNOWN)


def known_state(status: Optional[str]) -> bool:
    """True for a container status this module maps (False: it became ``UNKNOWN``)."""
    s = (status or "").strip().lower()
    return s in _STATES or s in _ENDED


#: states in which a container's processes may still be running
_LIVE = ("running", "paused", "restarting", "stopping", "removing")
#: the engines' zero time (Go's ``time.Time{}``): a container that never started or never ended
_ZERO_TIME = "0001-01-01"


def _is_set(text: Any) -> bool:
    """Whether an engine's time field (``2026-11-26T01:14:04.027457985Z``) holds a time, not
    Go's zero time or nothing."""
    return isinstance(text, str) and bool(text.strip()) and not text.startswith(_ZERO_TIME)


#: podman's names for a container not started since it was (re)initialized: what its reset at
#: boot leaves of one that had not exited (podman 4: Configured, reported ``created``)
_NOT_STARTED = ("created", "configured", "initialized")
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def engine_time_ns(text: Any) -> Optional[int]:
    """An engine's RFC 3339 time (``2026-11-26T04:16:57.098501383Z``, nanoseconds, trailing
    zeros dropped) as nanoseconds since the epoch; None where it is not one, or Go's zero time."""
    m = _TIME.match(text) if _is_set(text) else None
    if m is None:
        return None
    when = datetime.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return int(when.timestamp()) * 1_000_000_000 + int((m.group(2) or "0").ljust(9, "0"))


def lost_while_running(state: Dict[str, Any]) -> Optional[str]:
    """Why the engine lost a container while it ran, from its inspect ``State``; None where
    it runs, never started, or ended as the engine saw it (whatever its exit code: a signal
    from outside is the container's failure). What podman leaves after the host rebooted:
    at its first start after a boot it resets every container that ran (libpod's
    ``resetContainerState``) without recording an end, to ``created`` (podman 4) or
    ``exited`` with exit code 0 (podman 5), which read as "not started" and as SUCCEEDED.
    Two signs, both what podman 4.3 really reports (the plugin's tests/test_docker_states.py
    keeps its records):

    * it started (``StartedAt``), its end was never recorded (``FinishedAt`` is the zero
      time), and it no longer runs (podman 4 and 5);
    * it is ``created`` again (podman 4's reset: only a container that had not reached
      ``exited`` is put back), with a recorded start later than its recorded end: that end
      is an earlier run's, one the engine restarted (``on-failure``), and the run it started
      then never ended. The reset also zeroes ``RestartCount``.

    Not a sign: a start later than the end of a container that is ``exited``. Podman
    records a quick run's end before its start (the exit file is older than the start's
    timestamp): a replica restarted once that then exited 0 within milliseconds reads
    ``StartedAt`` 8 ms after ``FinishedAt``, as a lost one does on podman 5 (``exited``,
    code 0, the earlier run's end), so podman 5 leaves a restarted replica's loss unseen.
    Nor can podman 4 tell one case: a container that had just ended when the power went
    (``stopped`` for the moment before podman cleans it up) is reset to ``created`` too;
    its end is its own, recorded after its start, unless that run was shorter than podman
    takes to record a start (milliseconds): then it reads as lost and runs again."""
    status = str(state.get("Status") or "").strip().lower()
    start, end = engine_time_ns(state.get("StartedAt")), state.get("FinishedAt")
    if status in _LIVE or start is None:
        return None
    if not _is_set(end):
        ended = "no end recorded"
    elif status in _NOT_STARTED and (engine_time_ns(end) or start) < start:  # (an end tx cannot read: not a sign)
        ended = f"no end recorded after it was restarted (the last end, {str(end)[:19]}Z, is an earlier run's)"
    else:
        return None
    return (f"the engine lost the container while it ran: started at {state['StartedAt'][:19]}Z, {ended}, "
            f"now {status or 'unknown'} (the host rebooted, or the engine restarted after its container "
            "processes were killed)")


_EXITED = re.compile(r"^\s*(?:exited|stopped)\s*\((-?\d+)\)", re.IGNORECASE)


def exit_code_from_status_text(text: str) -> Optional[int]:
    """The exit code in a container list's ``Status`` text (``"Exited (3) 2 seconds ago"``),
    or None."""
    m = _EXITED.match(text or "")
    return int(m.group(1)) if m else None


def describe_exit(exit_code: int, oom_killed: bool = False, mem_mb: Optional[int] = None,
                  oom_reported: bool = False) -> str:
    """Words for how a container ended, saying only what the engine knows: ``exit code 3``,
    ``killed by SIGKILL (exit code 137)``, ``killed: out of memory (memory limit 16 MB,
    exit code 137)``.

    Exit codes above 128 are ``128 + signal number`` (a shell's and Docker's convention), so
    they are named as signals; a program that calls ``exit(137)`` itself reads the same.

    Args:
        oom_killed: the engine's ``State.OOMKilled``.
        mem_mb: the container's memory limit (MB), if it had one.
        oom_reported: the engine reports every out-of-memory kill (cgroup v2, where it reads
            ``memory.events``). On cgroup v1 podman misses them, so a SIGKILL of a container
            with a limit may still have been the limit, and the message says so.
    """
    if oom_killed:
        limit = f"memory limit {mem_mb} MB, " if mem_mb else ""
        return f"killed: out of memory ({limit}exit code {exit_code})"
    if 128 < exit_code < 128 + 65:
        try:
            name = signal.Signals(exit_code - 128).name
        except ValueError:
            name = f"signal {exit_code - 128}"
        text = f"killed by {name} (exit code {exit_code})"
        if exit_code == 137 and mem_mb:
            if oom_reported:
                text += "; not by the memory limit (the engine reports no out-of-memory kill)"
            else:
                text += (f"; the engine reports no out-of-memory kill but cannot see one on cgroup v1:"
                         f" the memory limit is {mem_mb} MB")
        return text
    return f"exit code {exit_code}"


def app_state(replicas: List[ReplicaStatus], cancelled: bool) -> Tuple[AppState, str]:
    """The app's state and message from its replicas' states."""
    states = [r.state for r in replicas]
    if cancelled and all(is_terminal(s) for s in states):
        return AppState.CANCELLED, "cancelled"
    if states and all(is_terminal(s) for s in states):
        if all(s == AppState.SUCCEEDED for s in states):
            return AppState.SUCCEEDED, NONE
        failed = [f"{r.role}[{r.id}]" for r in replicas if r.state != AppState.SUCCEEDED]
        return AppState.FAILED, f"failed: {', '.join(failed)}"
    if cancelled:
        return AppState.RUNNING, "cancelling: waiting for the containers to stop"
    for r in replicas:
        if not is_terminal(r.state):
            msg = NONE
            if r.state == AppState.SUBMITTED:
                msg = f"{r.role}[{r.id}]: container created, not started yet"
            elif r.state == AppState.PENDING:
                msg = f"{r.role}[{r.id}]: container restarting (retries left) or paused"
            elif r.state == AppState.UNKNOWN:
                msg = f"{r.role}[{r.id}]: the engine reports a state tx does not know"
            failed = [f"{x.role}[{x.id}]" for x in replicas if x.state == AppState.FAILED]
            if failed:
                msg = (msg + "; " if msg != NONE else "") + f"failed: {', '.join(failed)}, others still running"
            return r.state, msg
    return AppState.UNKNOWN, NONE  # pragma: no cover - no replicas
