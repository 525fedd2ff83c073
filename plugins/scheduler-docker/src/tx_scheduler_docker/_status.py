"""Containers as replicas: what tx reads back from a container's inspect record (its
labels, name, attempt, role) and why a failed app failed (the root cause the output of the
replica that failed first names, :func:`tx.schedulers.why.first_cause`). Used by
:class:`tx_scheduler_docker.scheduler.DockerScheduler`.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from tx.schedulers import first_cause, names_cause, root_cause
from tx.specs import NONE, AppState, ReplicaStatus, Role, RootCause

from tx_scheduler_docker import _states
from tx_scheduler_docker.request import LABEL_MEM_MB, LABEL_NUM_REPLICAS

__all__ = ["CANCELLED_SUFFIX", "CAUSE_TAIL_LINES", "ERROR_TAIL_LINES", "LABEL_ATTEMPT", "RETIRED", "attempt_of",
           "failure", "labels", "name_of", "role_from", "summary_name", "to_int"]

#: suffix cancel adds to a container's name: the engine then records the cancel for every
#: client (labels cannot change after creation; names can)
CANCELLED_SUFFIX = ".cancelled"
#: label of a replica's container started again after the engine lost the one before
#: (``infra_retries``): the app's attempt it belongs to (none: attempt 0)
LABEL_ATTEMPT = "tx.attempt"
#: the name a container the engine lost gets once its replica is started again: its own
#: name + ``.infra<attempt>`` (then ``.cancelled`` where the app was cancelled); it stays,
#: with its logs, but is no longer the replica's container
RETIRED = re.compile(r"\.infra(\d+)(?:" + re.escape(CANCELLED_SUFFIX) + r")?$")
#: lines of a failed replica's output quoted in ``structured_error_msg``
ERROR_TAIL_LINES = 5
#: lines of a failed replica's output read for its root cause (tx.schedulers.why)
CAUSE_TAIL_LINES = 1000


def labels(info: Dict[str, Any]) -> Dict[str, str]:
    """A container's labels from its inspect record."""
    return (info.get("Config") or {}).get("Labels") or {}


def attempt_of(info: Dict[str, Any]) -> int:
    """The app's attempt a container belongs to (its ``tx.attempt`` label; 0 without)."""
    return to_int(labels(info).get(LABEL_ATTEMPT), 0)


def name_of(info: Dict[str, Any]) -> str:
    """A container's name from its inspect record, without Docker's leading ``/``."""
    return str(info.get("Name") or "").lstrip("/")


def summary_name(summary: Dict[str, Any]) -> str:
    """A container's name from its list summary (``Names``' first), without the leading ``/``."""
    return str((summary.get("Names") or [""])[0]).lstrip("/")


def role_from(role: str, info: Dict[str, Any]) -> Role:
    """The role rebuilt from one of its containers' inspect record (image, command, the
    replica count label), for an app whose stored AppDef is not read."""
    cfg = info.get("Config") or {}
    cmd = list(cfg.get("Cmd") or [])
    return Role(name=role, image=cfg.get("Image") or "", entrypoint=cmd[0] if cmd else "", args=cmd[1:],
                num_replicas=to_int(labels(info).get(LABEL_NUM_REPLICAS), 1))


def to_int(value: Any, default: int) -> int:
    """``int(value)``, or ``default`` where it is not a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def failure(replicas: List[ReplicaStatus], infos: Dict[Tuple[str, int], Dict[str, Any]],
            output: Callable[[str], bytes], oom_reported: Callable[[], bool]) -> Tuple[str, Optional[RootCause]]:
    """Why the app failed: the root cause (a torchrun worker's exception,
    :mod:`tx.schedulers.why`) the output of the replica that is the app's cause names, set
    on that replica too; else how it ended and its last lines. That replica is the one
    whose container finished first (``State.FinishedAt``), except that among the replicas
    that finished within 10 s of it, one whose output names a cause other than a lost peer,
    or that the engine reports out-of-memory killed, comes first
    (:func:`tx.schedulers.why.first_cause`: a DDP rank that raises makes the others fail in
    their next collective, and which container ends first is a race); only those
    replicas' output is read. ``output(container id)``: the last :data:`CAUSE_TAIL_LINES`
    lines of a container's output; ``oom_reported()``: whether the engine reports every
    out-of-memory kill."""
    failed = [r for r in replicas if r.state == AppState.FAILED]
    if not failed:
        return NONE, None
    raws: Dict[Tuple[str, int], bytes] = {}
    unread: Dict[Tuple[str, int], str] = {}  # replicas whose output the engine did not give: why

    def state_of(r: ReplicaStatus) -> Dict[str, Any]:
        return infos[(r.role, r.id)].get("State") or {}

    def raw_of(r: ReplicaStatus) -> bytes:
        if (r.role, r.id) not in raws:
            try:
                raws[(r.role, r.id)] = output(infos[(r.role, r.id)]["Id"])
            except Exception as e:  # noqa: BLE001 - the message is still useful without the tail
                raws[(r.role, r.id)] = b""
                unread[(r.role, r.id)] = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return raws[(r.role, r.id)]

    def ended(r: ReplicaStatus) -> float:
        ns = _states.engine_time_ns(state_of(r).get("FinishedAt"))
        return ns / 1e9 if ns is not None else math.inf

    def cause_of(r: ReplicaStatus) -> Optional[RootCause]:
        cause = root_cause(r.role, r.id, raw_of(r), exit_code=int(state_of(r).get("ExitCode") or 0))
        return cause if names_cause(cause) else None

    first, cause = first_cause(failed, ended, cause_of, known=lambda r: bool(state_of(r).get("OOMKilled")))
    if cause is not None:
        first.structured_error_msg, first.root_cause = cause.text, cause
        return cause.text, cause
    info = infos[(first.role, first.id)]
    st = info.get("State") or {}
    labels = (info.get("Config") or {}).get("Labels") or {}
    mem = to_int(labels.get(LABEL_MEM_MB), 0) or None
    code = int(st.get("ExitCode") or 0)
    how = _states.describe_exit(code, bool(st.get("OOMKilled")), mem, oom_reported())
    name = (info.get("Name") or "").lstrip("/")
    text = f"{first.role}[{first.id}] (container {name}) failed first: {how}"
    if st.get("Error"):
        text += f"; engine: {st['Error']}"
    tail = raw_of(first).decode("utf-8", "replace").strip()
    if tail:
        text += "; last lines: " + " | ".join(tail.splitlines()[-ERROR_TAIL_LINES:])
    elif (first.role, first.id) in unread:  # not "it wrote nothing": the engine did not answer
        text += f"; its output could not be read: {unread[(first.role, first.id)]}"
    if len(failed) > 1:
        text += f" ({len(failed)} replicas failed)"
    return text, None
