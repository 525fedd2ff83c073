"""The supervisor's side of preemption on the local schedulers (docs/recovery.md):
:class:`PreemptMixin`. :mod:`._preempt` has the pure part. Standard library only."""
from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from tx_scheduler_local import _where
from tx.schedulers import what_saved
from tx_scheduler_local._preempt import checkpoint_location, warned_at, warning_signal

if TYPE_CHECKING:
    from tx_scheduler_local._replica import Replica


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
        worker = None if since is not None or code == -sig else self._warned_worker(r, sig)
        if since is None and code != -sig and worker is None:
            return False
        if self.cancelled or self.failed is not None:
            r.state = "CANCELLED"
            return True
        why = f"preempted: {signal.Signals(sig).name} to replica {r.name}{worker or ''}, not sent by tx"
        from tx.schedulers import infra_retries  # deferred: only on a preemption

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

    def _warned_worker(self, r: Replica, sig: int) -> Optional[str]:
        """Where replica ``r`` is torchrun and the first of its workers to fail died of the
        warning signal ``sig`` (its ChildFailedError report, at the end of this attempt's
        stderr: ``exitcode : -15``), that worker, as `` (its rank 1)``: the warning reached a
        rank before its job armed :func:`tx.distributed.preempted` (start-up), torchrun then
        stopped the other workers and exited 1, and the attempt is preempted, not the job's
        failure. None otherwise (tx sent no such signal: a replica tx stops never comes here)."""
        import os  # deferred: only for a replica that failed

        from tx.schedulers import parse_report
        from tx_scheduler_local._apps import _CAUSE_TAIL_BYTES, _read_tail
        from tx_scheduler_local._relay import ERR, FILES

        offsets = r.attempts[-1].get("offsets") if r.attempts else None
        start = offsets[ERR] if isinstance(offsets, list) and len(offsets) > ERR and isinstance(offsets[ERR], int) else 0
        tail = _read_tail(os.path.join(r.dir, FILES[ERR]), start, _CAUSE_TAIL_BYTES)
        report = parse_report(tail.decode("utf-8", "replace").splitlines())
        if report is None or report.exit_code != -sig:
            return None
        return f" (its rank {report.rank})" if report.rank is not None else " (a worker)"

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
