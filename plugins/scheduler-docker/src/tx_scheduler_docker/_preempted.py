"""Preemption on ``local_docker`` (docs/recovery.md, "Preemption"): the engine stopping a
container from outside (``docker stop``, ``podman stop``, an engine shutting down its
containers) sends its stop signal (SIGTERM), then SIGKILL after the container's
``StopTimeout`` (the run option ``preempt_grace``, also the job's ``TX_PREEMPT_GRACE``).

A job that calls ``tx.distributed.preempted()`` notes the warning in its
``TX_PREEMPT_NOTE`` (a file beside the run's checkpoints, where ``TX_CHECKPOINT_DIR`` is a
host path: :func:`tx_scheduler_docker.request.preempt_note`). A replica container that
ended after such a note without tx cancelling it (tx renames what it cancels
``<name>.cancelled`` before stopping it) was preempted: its app's attempt is an
infrastructure failure. :meth:`tx_scheduler_docker.scheduler.DockerScheduler.describe`
warns the replicas still running (the warning signal; SIGKILL once the grace has passed
since the first preempted replica ended) and, once none runs, starts every replica again as
the next attempt within ``infra_retries``. The attempt's reason names what the job saved,
read from the completion markers under its ``TX_CHECKPOINT_DIR`` where that is a path of
this host (:func:`tx.schedulers.saves.what_saved`).
"""
from __future__ import annotations

import signal
import time
from typing import Any, Dict, List, Optional

from tx import get_logger
from tx.schedulers import what_saved

from tx_scheduler_docker import _states
from tx_scheduler_docker._status import CANCELLED_SUFFIX, RETIRED, labels, name_of
from tx_scheduler_docker.request import LABEL_REPLICA_ID, LABEL_ROLE_NAME, PREEMPT_GRACE_ENV, PREEMPT_NOTE_ENV

__all__ = ["is_preempted", "reason", "warn_the_others"]

log = get_logger(__name__)

#: the states of a container whose processes may still run
_LIVE = ("running", "paused", "restarting", "stopping", "removing", "created", "configured", "initialized")


def env_of(info: Dict[str, Any]) -> Dict[str, str]:
    """A container's environment from its inspect record (``Config.Env``, ``K=V`` each)."""
    out: Dict[str, str] = {}
    for kv in (info.get("Config") or {}).get("Env") or []:
        k, _, v = str(kv).partition("=")
        out[k] = v
    return out


def warning_signal(info: Dict[str, Any]) -> int:
    """The signal that warns the container's job: its ``TX_PREEMPT_SIGNAL`` (a name or a
    number), else SIGTERM (the engine's stop signal tx sets)."""
    raw = env_of(info).get("TX_PREEMPT_SIGNAL", "").strip().upper()
    if not raw:
        return int(signal.SIGTERM)
    try:
        return int(signal.Signals(int(raw)) if raw.isdigit() else signal.Signals[raw if raw.startswith("SIG")
                                                                                     else "SIG" + raw])
    except (KeyError, ValueError):
        return int(signal.SIGTERM)


def grace_of(info: Dict[str, Any]) -> float:
    """The container's grace (seconds): its ``StopTimeout``, else its ``TX_PREEMPT_GRACE``,
    else Docker's default 10."""
    cfg = info.get("Config") or {}
    for raw in (cfg.get("StopTimeout"), env_of(info).get(PREEMPT_GRACE_ENV)):
        try:
            if raw is not None and float(raw) >= 0:
                return float(raw)
        except (TypeError, ValueError):
            continue
    return 10.0


def warned_at(info: Dict[str, Any]) -> Optional[float]:
    """When the container's job noted the warning (seconds since the epoch: the first line
    of its ``TX_PREEMPT_NOTE``, written by ``tx.distributed.preempted()``'s handler), where
    that note is this container's (written while it ran); else None."""
    note = env_of(info).get(PREEMPT_NOTE_ENV, "")
    if not note:
        return None
    try:
        with open(note, encoding="utf-8") as f:
            when = float(f.readline().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    st = info.get("State") or {}
    start, end = _states.engine_time_ns(st.get("StartedAt")), _states.engine_time_ns(st.get("FinishedAt"))
    if start is None or when < start / 1e9 - 1 or (end is not None and end > start and when > end / 1e9 + 1):
        return None
    return when


def is_preempted(info: Dict[str, Any]) -> bool:
    """Whether a replica's container ended, without tx cancelling it, after its job noted
    the warning (:func:`warned_at`), as the engine recorded its end. A container killed by
    SIGTERM (exit code 143) without a note is not: the engine records no stop, and a job's
    own ``kill -TERM`` reads the same (the app's own failure, as before)."""
    st = info.get("State") or {}
    if name_of(info).endswith(CANCELLED_SUFFIX) or _states.lost_while_running(st) is not None:
        return False
    if str(st.get("Status") or "").lower() not in ("exited", "stopped"):
        return False
    return warned_at(info) is not None


def is_live(info: Dict[str, Any]) -> bool:
    """Whether the container may still run (or start)."""
    return str((info.get("State") or {}).get("Status") or "").lower() in _LIVE


def _ended_ns(info: Dict[str, Any]) -> Optional[int]:
    return _states.engine_time_ns((info.get("State") or {}).get("FinishedAt"))


def first_preempted(infos: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The preempted container of ``infos`` warned first (its note's time); None where
    none was preempted."""
    noted = [(w, i) for i in infos if is_preempted(i) for w in [warned_at(i)] if w is not None]
    return min(noted, key=lambda x: x[0])[1] if noted else None


def reason(infos: List[Dict[str, Any]]) -> str:
    """Why an attempt whose containers are ``infos`` (one at least preempted) ended:
    ``preempted: SIGTERM to train[1] (container X), not sent by tx; saved step 28 in
    0.05 s``: the save named is one completed from the job's note of the warning to the
    last container's end."""
    first = first_preempted(infos)
    if first is None:
        return ""
    lb = labels(first)
    sig = signal.Signals(warning_signal(first)).name
    replica = f"{lb.get(LABEL_ROLE_NAME, 'unknown')}[{lb.get(LABEL_REPLICA_ID, 0)}] (container {_base_name(first)})"
    text = f"preempted: {sig} to {replica}, not sent by tx"
    since = warned_at(first) or 0.0
    until = max((_ended_ns(i) or 0) for i in infos) / 1e9 + 0.001
    saved = what_saved(env_of(first).get("TX_CHECKPOINT_DIR"), since, until)
    return text + (f"; {saved}" if saved else "")


def _base_name(info: Dict[str, Any]) -> str:
    return RETIRED.sub("", name_of(info))


def warn_the_others(client: Any, infos: List[Dict[str, Any]]) -> None:
    """Deliver the warning to the replicas still running beside a preempted one: the
    warning signal at once, SIGKILL once the grace has passed since the first preempted one
    ended (each describe sends what is due; nothing waits here)."""
    first = first_preempted(infos)
    if first is None:
        return
    overdue = time.time() > (_ended_ns(first) or 0) / 1e9 + grace_of(first)
    for info in infos:
        if not is_live(info):
            continue
        sig = "SIGKILL" if overdue else signal.Signals(warning_signal(info)).name
        try:
            client.api.kill(info["Id"], signal=sig)
            log.info("warned a replica of its app's preemption", container=name_of(info), signal=sig)
        except Exception as e:  # noqa: BLE001 - ended meanwhile; the next describe looks again
            log.debug("replica not signalled", container=name_of(info), error=str(e))
