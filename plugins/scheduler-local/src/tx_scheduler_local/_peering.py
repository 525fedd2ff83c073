"""The supervisor's side of one failure of several replicas on the local schedulers:
:class:`PeerMixin`. A DDP rank that raises makes the other ranks fail in their next
collective ("Connection closed by peer"), and the supervisor may reap such a peer first.
Where the replica whose failure ends the app only lost its peer (its root cause matches
:data:`tx.schedulers.why.PEER_LOST`), the other replicas are stopped only after they had up
to :data:`tx.schedulers.why.ONE_FAILURE_S` seconds to end on their own; the app's error is
then the one of the replica :func:`tx.schedulers.why.first_cause` names among those that
failed on their own. tx is imported only when a replica failed."""
from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any, List, Optional

if TYPE_CHECKING:
    from tx_scheduler_local._replica import Replica


class PeerMixin:
    """Part of :class:`tx_scheduler_local._supervisor.Supervisor`, kept here for its size."""

    # what the supervisor provides
    failed: Optional["Replica"]
    replicas: List["Replica"]
    error: str
    msg: str
    dirty: bool
    #: when the replicas still running are stopped (monotonic s): the failure that ends the
    #: app only lost its peer, and the others may end on their own first (None: no such wait)
    stop_others_at: Optional[float] = None

    def _log(self, text: str) -> None: ...
    def _stop(self, r: "Replica", reason: str, grace: Optional[float] = None, sig: int = signal.SIGTERM) -> None: ...

    def _stop_others(self, r: "Replica") -> None:
        """Stop the replicas still running after ``r``'s failure ended the app: now, or where
        ``r`` only lost its peer, at :attr:`stop_others_at` (:meth:`_stop_others_when_due`)."""
        if any(x.pid is not None for x in self.replicas) and self._lost_peer(r):
            from tx.schedulers import ONE_FAILURE_S

            self.stop_others_at = time.monotonic() + ONE_FAILURE_S
            self._log(f"{r.name} only lost its peer: the others may end on their own for {ONE_FAILURE_S:g}s")
            return
        for x in self.replicas:
            if x.pid is not None:
                self._stop(x, "failed")

    def _stop_others_when_due(self) -> None:
        """Stop the replicas still running once :attr:`stop_others_at` has come."""
        if self.stop_others_at is not None and time.monotonic() >= self.stop_others_at:
            self.stop_others_at = None
            for x in self.replicas:
                if x.pid is not None:
                    self._stop(x, "failed")

    def _stop_others_deadline(self) -> List[float]:
        """:attr:`stop_others_at` as a deadline of the supervisor's loop ([] without one)."""
        return [self.stop_others_at] if self.stop_others_at is not None else []

    @staticmethod
    def _lost_peer(r: "Replica") -> bool:
        """Whether ``r``'s root cause (its stderr so far and its error file) only says that
        its rank lost a peer."""
        from tx.schedulers import lost_peer
        from tx_scheduler_local._apps import replica_root_cause

        return lost_peer(replica_root_cause(r.role.name, r.to_json(), r.dir))

    def _name_cause(self) -> None:
        """Once each failed replica's cause is recorded (``r.cause``), make the app's error
        the one of the replica that is its cause (:func:`tx.schedulers.why.first_cause`
        among the replicas that failed on their own, by their last attempt's end)."""
        failed = [r for r in self.replicas if r.state == "FAILED" and r.attempts]
        if self.failed is None or len(failed) < 2:
            return
        from tx.schedulers import first_cause
        from tx_scheduler_local._apps import _cause_of

        def ended(r: "Replica") -> float:
            end: Any = r.attempts[-1].get("end")
            return float(end) if isinstance(end, (int, float)) else float("inf")

        def cause_of(r: "Replica") -> Any:
            return _cause_of({"cause": r.cause}) if isinstance(r.cause, dict) else None

        chosen = first_cause(failed, ended, cause_of)[0]
        if chosen is not self.failed and chosen.error:
            # the app's state message names the same replica as its error
            tail = chosen.logs.tail_text() if chosen.logs is not None else ""
            self.msg = f"replica {chosen.name} {chosen.reason}" + (f"; last lines of stderr:\n{tail}" if tail else "")
            self.failed, self.error, self.dirty = chosen, chosen.error, True
