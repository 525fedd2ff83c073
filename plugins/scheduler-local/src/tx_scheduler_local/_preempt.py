"""Preemption on the local schedulers (docs/recovery.md). Standard library only.

A signal tx did not send is the warning: SIGTERM to the supervisor (a host shutting down),
or the warning signal (``TX_PREEMPT_SIGNAL``, SIGTERM by default) to a replica. A replica
learns that it was warned through ``tx.distributed.preempted`` (whose handler appends a
line to the replica's ``TX_PREEMPT_NOTE`` file) or dies of the signal; the supervisor then
delivers the warning to every replica, kills what is left after ``preempt_grace`` seconds,
and records the attempt as an infrastructure failure naming what the job saved: the newest
complete checkpoint in ``TX_CHECKPOINT_DIR`` (its completion marker holds the step, the
save's duration and when it completed).
"""
from __future__ import annotations

import json
import os
import re
import signal
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from tx_scheduler_local import _where

if TYPE_CHECKING:
    from tx_scheduler_local._replica import Replica

#: the file, in each replica's directory, that the job's warning handler appends to
NOTE = "preempt.note"
#: the environment the replicas get
GRACE_ENV, SIGNAL_ENV, NOTE_ENV = "TX_PREEMPT_GRACE", "TX_PREEMPT_SIGNAL", "TX_PREEMPT_NOTE"
_CHECKPOINT_ENV = "TX_CHECKPOINT_DIR"
_COMPLETE = ".tx-complete"
_STEP = re.compile(r"^step-(\d+)$")


def env(replica_dir: str, grace: float) -> Dict[str, str]:
    """The preemption environment of a replica whose directory is ``replica_dir``."""
    return {GRACE_ENV: f"{grace:g}", NOTE_ENV: os.path.join(replica_dir, NOTE)}


def warning_signal(replica_env: Dict[str, str]) -> int:
    """The signal that warns this replica: its ``TX_PREEMPT_SIGNAL``, else SIGTERM (a value
    that names no signal: SIGTERM; the job's ``preempted()`` reports the bad value)."""
    raw = (replica_env.get(SIGNAL_ENV) or "").strip().upper()
    if not raw:
        return int(signal.SIGTERM)
    try:
        return int(signal.Signals(int(raw)) if raw.isdigit() else signal.Signals[raw if raw.startswith("SIG")
                                                                                     else "SIG" + raw])
    except (KeyError, ValueError):
        return int(signal.SIGTERM)


def clear_note(replica_dir: str) -> None:
    """Forget an earlier attempt's warning (before the replica starts again)."""
    try:
        os.unlink(os.path.join(replica_dir, NOTE))
    except OSError:
        pass


def warned_at(replica_dir: str) -> Optional[float]:
    """When the replica's job recorded the warning (seconds since the epoch), or None."""
    try:
        with open(os.path.join(replica_dir, NOTE), encoding="utf-8") as f:
            first = f.readline().split()
        return float(first[0]) if first else None
    except (OSError, ValueError, IndexError):
        return None


def _local(location: Optional[str]) -> Optional[str]:
    if not location:
        return None
    if location.startswith("file://"):
        return location[len("file://"):]
    return None if "://" in location else location


def newest_save(location: Optional[str]) -> Optional[Tuple[int, Optional[float], Optional[float]]]:
    """The newest complete checkpoint under a local ``location`` as ``(step, seconds the
    save took, when it completed)`` (None where the marker predates them), or None."""
    root = _local(location)
    if root is None:
        return None
    try:
        names = os.listdir(root)
    except OSError:
        return None
    for step in sorted((int(m.group(1)) for m in map(_STEP.match, names) if m), reverse=True):
        try:
            with open(os.path.join(root, f"step-{step:09d}", _COMPLETE), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            return step, None, None
        if isinstance(data, dict):
            secs, done = data.get("seconds"), data.get("completed")
            return step, float(secs) if isinstance(secs, (int, float)) else None, \
                float(done) if isinstance(done, (int, float)) else None
        return step, None, None
    return None


def what_saved(location: Optional[str], since: float) -> str:
    """What the job saved after the warning of ``since`` (seconds since the epoch), for the
    attempt's reason: ``saved step 412 in 3.1 s``, ``no checkpoint saved before the kill;
    resumed from step 400`` (or ``...; starts fresh``); "" where the location is not a
    local path (tx cannot read it from here) or is unset."""
    if _local(location) is None:
        return ""
    found = newest_save(location)
    if found is None:
        return "no checkpoint saved before the kill; starts fresh"
    step, secs, done = found
    if done is not None and done >= since - 0.001:  # one host's clock; the marker rounds to ms
        return f"saved step {step}" + (f" in {secs:.{1 if secs >= 1 else 2}f} s" if secs is not None else "")
    return f"no checkpoint saved before the kill; resumed from step {step}"


def checkpoint_location(replica_env: Dict[str, str], base_env: Dict[str, str]) -> Optional[str]:
    """The replica's ``TX_CHECKPOINT_DIR`` (its own env first, then the app's)."""
    return replica_env.get(_CHECKPOINT_ENV) or base_env.get(_CHECKPOINT_ENV) or None


class PreemptMixin:
    """The supervisor's handling of preemption warnings (part of
    :class:`tx_scheduler_local._supervisor.Supervisor`, kept here for its size)."""

    # what the supervisor provides
    cancelled: bool
    failed: Optional["Replica"]
    replicas: List["Replica"]
    request: Dict[str, Any]
    history: List[Dict[str, str]]
    base_env: Dict[str, str]
    preempt_grace: float
    preempt: Optional[Dict[str, Any]]
    preempted_host: str
    infra_msg: str
    infra_used: int
    num_restarts: int
    msg: str
    dirty: bool
    pid: int
    scope: Optional[str]

    def _log(self, text: str) -> None: ...
    def _stop(self, r: "Replica", reason: str, grace: Optional[float] = None, sig: int = signal.SIGTERM) -> None: ...
    def _drop_restarts(self) -> None: ...
    def _restart(self, group: List["Replica"]) -> None: ...
    def _close_pipe(self, fd: int, r: "Replica") -> None: ...
    def write_state(self) -> None: ...

    def _warned(self) -> None:
        """SIGTERM that tx did not send (tx cancels with SIGINT): the host is shutting down.
        Deliver the warning to every replica, SIGKILL after ``preempt_grace``; once they are
        gone the supervisor exits and the app is started again (an infra attempt)."""
        if self.cancelled or self.preempted_host:
            return
        self.preempted_host = f"preempted: SIGTERM to its supervisor (pid {self.pid}), not sent by tx"
        self.preempt = {"since": time.time(), "entry": None}
        self.msg = self.preempted_host  # what a look reports if this process is killed meanwhile
        self._log(f"{self.preempted_host}: warning every replica, SIGKILL after {self.preempt_grace:g}s")
        self._drop_restarts()
        for r in self.replicas:
            if r.pid is not None:
                self._stop(r, "preempt", self.preempt_grace, warning_signal(r.env))
        self.dirty = True

    def _preempted(self, r: Replica, code: int) -> bool:
        """Whether replica ``r``, ended with exit status ``code`` without tx stopping it, was
        preempted from outside (its job noted the warning, or it died of the warning
        signal). If so every replica is warned and started again once all are gone (an infra
        attempt within ``infra_retries``; FAILED with an infra reason beyond)."""
        sig = warning_signal(r.env)
        since = warned_at(r.dir)
        if since is None and code != -sig:
            return False
        if self.cancelled or self.failed is not None:
            r.state = "CANCELLED"
            return True
        why = f"preempted: {signal.Signals(sig).name} to replica {r.name}, not sent by tx"
        from tx.schedulers.api import infra_retries  # deferred: only on a preemption

        limit = infra_retries(self.request.get("run_options") or {})
        if self.infra_used >= limit:
            self.failed = r
            r.state, r.reason = "FAILED", why
            saved = what_saved(checkpoint_location(r.env, self.base_env), since or time.time())
            self.msg = self.infra_msg = why + (f"; {saved}" if saved else "") + (
                f"; infra_retries={limit} exhausted" if limit else "; infra_retries=0: not restarted")
            self._log(self.msg)
            for x in self.replicas:
                if x.pid is not None:
                    self._stop(x, "failed", self.preempt_grace, warning_signal(x.env))
            self._drop_restarts()
            return True
        self.infra_used += 1
        self.num_restarts += 1
        entry = {"kind": "infra", "reason": why}
        self.history.append(entry)
        self.preempt = {"since": since or time.time(), "entry": entry}
        self._log(f"{why}: warning every replica, SIGKILL after {self.preempt_grace:g}s; restart "
                  f"{self.infra_used}/{limit} (infra)")
        for x in self.replicas:
            if x.pid is not None:
                self._stop(x, "restart", self.preempt_grace, warning_signal(x.env))
        self._restart(list(self.replicas))
        r.state = "PENDING"
        return True

    def _record_saved(self) -> str:
        """Name what the job saved in the preemption's history entry, once every replica is
        gone (``saved step 412 in 3.1 s``); returns it."""
        if self.preempt is None:
            return ""
        since, entry, self.preempt = self.preempt["since"], self.preempt["entry"], None
        env = self.replicas[0].env if self.replicas else {}
        saved = what_saved(checkpoint_location(env, self.base_env), since)
        if saved and entry is not None:
            entry["reason"] += f"; {saved}"
            self.dirty = True
        return saved

    def _leave_preempted(self) -> None:
        """End after a warning to the supervisor: logs closed, the state left non-terminal
        with ``preempted`` (the reason, with what the job saved), which
        :func:`tx_scheduler_local._apps.why_lost` reports, so the next look starts the app
        again as an infra attempt."""
        for r in self.replicas:
            for fd in list(r.pipes):
                self._close_pipe(fd, r)
            if r.logs is not None:
                r.logs.close()
            if r.state not in ("SUCCEEDED", "FAILED"):
                r.state = "PENDING"  # the next supervisor starts every replica again
        saved = self._record_saved()
        self.msg = self.preempted_host + (f"; {saved}" if saved else "")
        if self.scope:
            _where.kill_scope(self.scope, spare=self.pid)
            _where.leave_scope(self.scope)
        self.write_state()
