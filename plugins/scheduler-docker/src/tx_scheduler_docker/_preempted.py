"""Preemption on ``local_docker`` (docs/recovery.md, "Preemption"): the engine stopping a
container from outside (``docker stop``, ``podman stop``, an engine shutting down its
containers) sends its stop signal (SIGTERM), then SIGKILL after the container's
``StopTimeout`` (the run option ``preempt_grace``, also the job's ``TX_PREEMPT_GRACE``). A
job that saves and leaves with ``tx.distributed.exit_preempted()`` dies of that signal,
which the container's init reports as exit code ``128 + signal`` (143).

A replica container that ended with that code without tx cancelling it (tx renames what it
cancels ``<name>.cancelled`` before stopping it) was preempted: its app's attempt is an
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

from tx.log import get_logger
from tx.schedulers.saves import what_saved

from tx_scheduler_docker import _states
from tx_scheduler_docker._status import CANCELLED_SUFFIX, labels, name_of
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
    the warning (:func:`warned_at`) or killed by the warning signal (exit code
    ``128 + signal``), as the engine recorded its end."""
    st = info.get("State") or {}
    if name_of(info).endswith(CANCELLED_SUFFIX) or _states.lost_while_running(st) is not None:
        return False
    if str(st.get("Status") or "").lower() not in ("exited", "stopped"):
        return False
    if warned_at(info) is not None:
        return True
    try:
        return int(st.get("ExitCode")) == 128 + warning_signal(info)
    except (TypeError, ValueError):
        return False


def is_live(info: Dict[str, Any]) -> bool:
    """Whether the container may still run (or start)."""
    return str((info.get("State") or {}).get("Status") or "").lower() in _LIVE


def _ended_ns(info: Dict[str, Any]) -> Optional[int]:
    return _states.engine_time_ns((info.get("State") or {}).get("FinishedAt"))


def first_preempted(infos: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The preempted container of ``infos`` warned first (its note's time), else the one
    that ended first; None where none was preempted."""
    pre = [i for i in infos if is_preempted(i)]
    noted = [(w, i) for i in pre for w in [warned_at(i)] if w is not None]
    if noted:
        return min(noted, key=lambda x: x[0])[1]
    return min(pre, key=lambda i: _ended_ns(i) or 0) if pre else None


def reason(infos: List[Dict[str, Any]]) -> str:
    """Why an attempt whose containers are ``infos`` (one at least preempted) ended:
    ``preempted: SIGTERM to train[1] (container X), not sent by tx; saved step 28 in
    0.05 s`` where the job noted the warning (the save named is one completed from then to
    the last container's end), ``preempted: train[1] (container X) killed by SIGTERM, not
    sent by tx; ...`` where it died of it unnoted: the engine records no time for a stop,
    so the warning is taken to have come at most the grace before that container ended."""
    first = first_preempted(infos)
    if first is None:
        return ""
    lb = labels(first)
    sig = signal.Signals(warning_signal(first)).name
    replica = f"{lb.get(LABEL_ROLE_NAME, 'unknown')}[{lb.get(LABEL_REPLICA_ID, 0)}] (container {_base_name(first)})"
    noted = warned_at(first)
    if noted is not None:
        text = f"preempted: {sig} to {replica}, not sent by tx"
        since = noted
    else:
        text = f"preempted: {replica} killed by {sig}, not sent by tx"
        end = (_ended_ns(first) or 0) / 1e9
        started = _states.engine_time_ns((first.get("State") or {}).get("StartedAt"))
        since = max(end - grace_of(first), (started or 0) / 1e9)
    until = max((_ended_ns(i) or 0) for i in infos) / 1e9 + 0.001
    saved = what_saved(env_of(first).get("TX_CHECKPOINT_DIR"), since, until)
    return text + (f"; {saved}" if saved else "")


def _base_name(info: Dict[str, Any]) -> str:
    from tx_scheduler_docker._status import RETIRED

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
