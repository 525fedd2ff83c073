"""Container states of Docker and of engines that speak its API, mapped to tx states.

Docker's states are those of ``GET /containers/{id}/json`` ``State.Status``
(https://docs.docker.com/reference/api/engine/version/v1.43/#tag/Container/operation/ContainerInspect):
``created``, ``restarting``, ``running``, ``removing``, ``paused``, ``exited``, ``dead``.
Podman's compatible API reports its own names in some cases (``configured``, ``initialized``,
``stopping``, ``stopped`` where Docker says ``exited``). A state tx does not know is
``UNKNOWN``: never an error (TorchX 0.7.0 raises ``KeyError`` on podman's ``stopped``).
"""
from __future__ import annotations

import re
import signal
from typing import Any, Dict, List, Optional, Tuple

from tx.specs.api import NONE, AppState, is_terminal
from tx.specs.status import ReplicaStatus

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


def lost_while_running(state: Dict[str, Any]) -> Optional[str]:
    """Why the engine lost a container while it ran, from its inspect ``State``: it started
    (``StartedAt``) and its end was never recorded (``FinishedAt`` is the zero time), yet it
    no longer runs. That is what podman leaves after the host rebooted: at its first start
    after a boot it resets every container that ran to ``created`` (podman 4) or ``exited``
    with exit code 0 (podman 5; libpod's ``resetContainerState``), never recording an end,
    which read as "not started" and as SUCCEEDED. None where the container runs, never
    started, or ended as the engine saw it (whatever its exit code: a signal from outside is
    the container's failure). A container the engine restarted (``on-failure``) keeps its
    earlier run's end, so its loss in a later run is not seen; nor is an end before the
    start a sign (podman records a quick container's end before its start)."""
    status = str(state.get("Status") or "").strip().lower()
    if status in _LIVE or not _is_set(state.get("StartedAt")) or _is_set(state.get("FinishedAt")):
        return None
    return (f"the engine lost the container while it ran: started at {state['StartedAt'][:19]}Z, no end "
            f"recorded, now {status or 'unknown'} (the host rebooted, or the engine restarted after its "
            "container processes were killed)")


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
