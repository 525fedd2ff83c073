"""Preemption on ``local_docker`` (docs/recovery.md, "Preemption"): the engine stopping a
container from outside (``docker stop``, ``podman stop``, an engine shutting down its
containers) sends its stop signal (SIGTERM), then SIGKILL after the container's
``StopTimeout`` (the run option ``preempt_grace``, also the job's ``TX_PREEMPT_GRACE``).

A replica container that ended without tx cancelling it (tx renames what it cancels
``<name>.cancelled`` before stopping it) was preempted where one of these says the warning
reached it, in this order:

1. **The job's note.** A job that calls ``tx.distributed.preempted()`` notes the warning in
   its ``TX_PREEMPT_NOTE`` (a file beside the run's checkpoints, where
   ``TX_CHECKPOINT_DIR`` is a host path: :func:`tx_scheduler_docker.request.preempt_note`).
2. **The engine's own record**, for a container that ended non-zero without a note (the
   warning came before the job's first ``preempted()``, in its start-up, or the job never
   calls it): a ``stop`` or ``kill`` event of the container (``GET /events``, one call per
   describe for all such containers, :func:`stopped_from_outside`) at most its grace + 5 s
   before it ended, of its stop signal, its warning signal or SIGKILL where the engine names
   the signal (another, such as a SIGUSR1 for a stack dump, is not a stop).
   Docker records ``kill`` (``signal``) and ``stop`` for ``docker stop``; podman 4.3
   records ``kill`` for ``podman kill`` and the API's kill, but for ``podman stop`` and
   the API's ``POST /containers/{id}/stop`` only ``die`` (its exit code), as for a
   container whose own process ended: no ``stop``, no ``kill``, and its inspect record
   has no "stopped by user" (checked on the engine the tests start). tx's own signals are
   not such a record: cancel renames first, and tx only warns the other replicas of an
   attempt already preempted.
3. **torchrun's own report**, where the engine records no stop (podman's stop): the
   container's output ends (last 20 lines) with torchrun's agent's ``SignalException:
   Process N got signal: 15`` (the container's stop signal), and it exited 1. The engine's stop
   signals the container's main process (through its init), torchrun, which stops its
   workers and raises that; a job's own ``kill -TERM`` of itself reaches a worker, whose
   torchrun reports ``ChildFailedError`` (``exitcode: -15``) and no SignalException: the
   app's own failure, as before. (local_cwd reads that worker report instead: there the
   host's stop signals the workers themselves.) Not told apart: a job that signals its own
   torchrun; not detected on podman: a replica command that is not torchrun, or torchrun
   stopped before it handles signals (killed by SIGTERM, exit code 143, as a job's own
   ``kill -TERM`` reads).

A preempted replica's app's attempt is an infrastructure failure.
:meth:`tx_scheduler_docker.scheduler.DockerScheduler.describe` warns the replicas still
running (the warning signal; SIGKILL once the grace has passed since the first preempted
replica ended) and, once none runs, starts every replica again as the next attempt within
``infra_retries`` (the new containers keep the attempt's reason in their label
:data:`LABEL_RETRIED_BECAUSE`). The attempt's reason names what the job saved, read from
the completion markers under its ``TX_CHECKPOINT_DIR`` where that is a path of this host
(:func:`tx.schedulers.saves.what_saved`), from the warning (the note, the event; the
container's end where torchrun's report is the evidence).
"""
from __future__ import annotations

import json
import re
import signal
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from tx import get_logger
from tx.schedulers import what_saved

from tx_scheduler_docker import _states
from tx_scheduler_docker._status import CANCELLED_SUFFIX, RETIRED, labels, name_of
from tx_scheduler_docker.request import LABEL_REPLICA_ID, LABEL_ROLE_NAME, PREEMPT_GRACE_ENV, PREEMPT_NOTE_ENV

__all__ = ["LABEL_RETRIED_BECAUSE", "Stop", "is_preempted", "reason", "stopped_from_outside", "warn_the_others"]

log = get_logger(__name__)

#: the states of a container whose processes may still run
_LIVE = ("running", "paused", "restarting", "stopping", "removing", "created", "configured", "initialized")
#: label of the containers of an attempt tx started after a preempted one: why that one ended
#: (its evidence is not read again: the engine's events and the output stay where they were)
LABEL_RETRIED_BECAUSE = "tx.retried-because"
#: seconds beyond a container's grace within which a stop or kill event must precede its end
_SLACK = 5.0
#: torchrun's agent stopped by a signal to itself (torch.distributed.elastic.multiprocessing.api)
_AGENT_SIGNALLED = re.compile(r"SignalException: Process \d+ got signal: (\d+)\s*$")
#: last lines of a container's output where torchrun's report must be
_REPORT_LINES = 20


class Stop(NamedTuple):
    """Evidence that the engine stopped a container before its job noted the warning."""

    when: float  #: seconds since the epoch: the engine's event, else the container's end
    sig: int  #: the signal
    how: str  #: the evidence, for the attempt's reason


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


def _ended_on_its_own(info: Dict[str, Any]) -> bool:
    st = info.get("State") or {}
    if name_of(info).endswith(CANCELLED_SUFFIX) or _states.lost_while_running(st) is not None:
        return False
    return str(st.get("Status") or "").lower() in ("exited", "stopped")


def is_preempted(info: Dict[str, Any], stops: Optional[Dict[str, Stop]] = None) -> bool:
    """Whether a replica's container ended, without tx cancelling it, after its job noted
    the warning (:func:`warned_at`), or where ``stops`` (:func:`stopped_from_outside`) has
    the engine's stop of it, as the engine recorded its end."""
    if not _ended_on_its_own(info):
        return False
    return warned_at(info) is not None or str(info.get("Id")) in (stops or {})


def _needs_evidence(info: Dict[str, Any]) -> bool:
    """Ended non-zero on its own, without the job's note: what only the engine's record or
    torchrun's report can say was preempted."""
    code = (info.get("State") or {}).get("ExitCode")
    return _ended_on_its_own(info) and code not in (None, 0, "0") and warned_at(info) is None


def _signal_number(raw: Any) -> Optional[int]:
    """A signal the engine names (``15``, ``SIGTERM``, ``TERM``); None where it does not."""
    text = str(raw or "").strip().upper()
    if not text:
        return None
    try:
        return int(text) if text.isdigit() else int(signal.Signals[text if text.startswith("SIG") else "SIG" + text])
    except KeyError:
        return None


def stop_signal(info: Dict[str, Any]) -> int:
    """The signal the engine's stop sends the container: its ``Config.StopSignal`` (tx sets
    SIGTERM), else SIGTERM."""
    return _signal_number((info.get("Config") or {}).get("StopSignal")) or int(signal.SIGTERM)


def _window(info: Dict[str, Any]) -> Optional[tuple]:
    st = info.get("State") or {}
    start, end = _states.engine_time_ns(st.get("StartedAt")), _states.engine_time_ns(st.get("FinishedAt"))
    return None if start is None or end is None else (start / 1e9, end / 1e9)


def engine_stops(events: List[Dict[str, Any]], infos: List[Dict[str, Any]]) -> Dict[str, Stop]:
    """The containers of ``infos`` that the engine's ``events`` (``GET /events`` records)
    say it stopped or killed while they ran, at most their grace + 5 s before they ended,
    with their stop signal, warning signal or SIGKILL where the event names one (Docker's ``kill`` has
    ``Actor.Attributes.signal``; podman's has none); container id to the first such."""
    by_id = {str(i.get("Id")): i for i in infos}
    out: Dict[str, Stop] = {}
    for e in events:
        action = str(e.get("Action") or e.get("status") or "")
        actor = e.get("Actor") or {}
        cid = str(actor.get("ID") or e.get("id") or "")
        info = by_id.get(cid)
        window = _window(info) if info is not None and action in ("kill", "stop") else None
        if window is None:
            continue
        when = int(e["timeNano"]) / 1e9 if e.get("timeNano") else float(e.get("time") or 0)
        start, end = window
        if not start - 1 <= when <= end + 1 or end - when > grace_of(info) + _SLACK:
            continue
        named = _signal_number((actor.get("Attributes") or {}).get("signal"))
        if named is not None and named not in (stop_signal(info), warning_signal(info), int(signal.SIGKILL)):
            continue  # another signal (SIGUSR1 to dump stacks ...): not a stop
        if cid not in out or when < out[cid].when:
            out[cid] = Stop(when, named or stop_signal(info), f"the engine's {action} event")
    return out


def torchrun_stopped(info: Dict[str, Any], output: bytes) -> Optional[Stop]:
    """The container exited 1 and its ``output`` ends (last :data:`_REPORT_LINES` lines)
    with torchrun's agent's ``SignalException`` for its stop signal (SIGTERM): the signal
    reached torchrun itself, the container's main process, as the engine's stop does."""
    if int((info.get("State") or {}).get("ExitCode") or 0) != 1:
        return None
    window = _window(info)
    warn = stop_signal(info)
    for line in reversed(output.decode("utf-8", "replace").splitlines()[-_REPORT_LINES:]):
        m = _AGENT_SIGNALLED.search(line)
        if m:
            if int(m.group(1)) != warn or window is None:
                return None
            return Stop(window[1], warn, "torchrun's SignalException")
    return None


def stopped_from_outside(client: Any, infos: List[Dict[str, Any]], output: Callable[[str], bytes],
                         podman: bool) -> Dict[str, Stop]:
    """The containers of ``infos`` that ended non-zero without the job's note and that the
    engine stopped from outside (the module's evidence 2 and 3): container id to
    :class:`Stop`. One ``GET /events`` for them all, only where there is such a container;
    torchrun's report (``output(container id)``: its output's tail) only for those the
    engine records no stop of. ``podman``: the engine is podman, whose compatible
    ``/events`` (4.3) returns nothing for an ``until`` in the past, streams until a later
    one, and ends at once with ``stream=false``: it gets ``stream=false`` and an ``until``
    2 s ahead (a podman without ``stream`` ends there); Docker's ends at ``until``, now."""
    cands = [i for i in infos if _needs_evidence(i) and _window(i) is not None]
    if not cands:
        return {}
    since = min(w[0] for i in cands for w in [_window(i)]) - 1
    params = {"since": f"{since:.3f}", "filters": json.dumps({"container": [str(i["Id"]) for i in cands],
                                                               "type": ["container"], "event": ["kill", "stop"]})}
    params.update({"stream": "false", "until": f"{time.time() + 2:.3f}"} if podman
                  else {"until": f"{time.time():.3f}"})
    events: List[Dict[str, Any]] = []
    try:
        api = client.api
        # the SDK's events() takes no stream=false
        res = api._get(api._url("/events"), params=params, stream=True, timeout=30)
        try:
            api._raise_for_status(res)
            events = [json.loads(line) for line in res.iter_lines() if line.strip()]
        finally:
            res.close()
    except Exception as e:  # noqa: BLE001 - an engine keeping no events: torchrun's report only
        log.debug("engine events not read", error=str(e))
    out = engine_stops(events, cands)
    for i in cands:
        if str(i["Id"]) not in out:
            try:
                found = torchrun_stopped(i, output(str(i["Id"])))
            except Exception as e:  # noqa: BLE001 - no output: no evidence
                log.debug("container output not read", container=name_of(i), error=str(e))
                found = None
            if found is not None:
                out[str(i["Id"])] = found
    return out


def is_live(info: Dict[str, Any]) -> bool:
    """Whether the container may still run (or start)."""
    return str((info.get("State") or {}).get("Status") or "").lower() in _LIVE


def _ended_ns(info: Dict[str, Any]) -> Optional[int]:
    return _states.engine_time_ns((info.get("State") or {}).get("FinishedAt"))


def _warned(info: Dict[str, Any], stops: Dict[str, Stop]) -> Optional[float]:
    noted = warned_at(info)
    stop = stops.get(str(info.get("Id")))
    return noted if noted is not None else (stop.when if stop is not None else None)


def first_preempted(infos: List[Dict[str, Any]], stops: Optional[Dict[str, Stop]] = None) -> Optional[Dict[str, Any]]:
    """The preempted container of ``infos`` warned first (its note's time, else the
    engine's stop's); None where none was preempted."""
    stops = stops or {}
    noted = [(w, i) for i in infos if is_preempted(i, stops) for w in [_warned(i, stops)] if w is not None]
    return min(noted, key=lambda x: x[0])[1] if noted else None


def reason(infos: List[Dict[str, Any]], stops: Optional[Dict[str, Stop]] = None) -> str:
    """Why an attempt whose containers are ``infos`` (one at least preempted) ended:
    ``preempted: SIGTERM to train[1] (container X), not sent by tx; saved step 28 in
    0.05 s``: the save named is one completed from the job's note of the warning to the
    last container's end. Without a note, what told the stop follows tx: ``..., not sent
    by tx, before its job noted it (torchrun's SignalException)``."""
    stops = stops or {}
    first = first_preempted(infos, stops)
    if first is None:
        return ""
    lb = labels(first)
    stop = stops.get(str(first.get("Id"))) if warned_at(first) is None else None
    sig = signal.Signals(stop.sig if stop is not None else warning_signal(first)).name
    replica = f"{lb.get(LABEL_ROLE_NAME, 'unknown')}[{lb.get(LABEL_REPLICA_ID, 0)}] (container {_base_name(first)})"
    text = f"preempted: {sig} to {replica}, not sent by tx"
    if stop is not None:
        text += f", before its job noted it ({stop.how})"
    since = _warned(first, stops) or 0.0
    until = max((_ended_ns(i) or 0) for i in infos) / 1e9 + 0.001
    saved = what_saved(env_of(first).get("TX_CHECKPOINT_DIR"), since, until)
    return text + (f"; {saved}" if saved else "")


def _base_name(info: Dict[str, Any]) -> str:
    return RETIRED.sub("", name_of(info))


def warn_the_others(client: Any, infos: List[Dict[str, Any]], stops: Optional[Dict[str, Stop]] = None) -> None:
    """Deliver the warning to the replicas still running beside a preempted one: the
    warning signal at once, SIGKILL once the grace has passed since the first preempted one
    ended (each describe sends what is due; nothing waits here)."""
    first = first_preempted(infos, stops)
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
