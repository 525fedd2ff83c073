"""The attempts of a Kubernetes app and why each ended (:class:`tx.specs.Attempt`): an
infrastructure failure (a pod with the ``DisruptionTarget`` condition, or the controller's
word for one) or the user's (a replica's exit code)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from tx.specs import AppState
from tx.specs.status import Attempt, FailureKind

from tx_scheduler_k8s._status import DISRUPTION_TARGET, Failed, disruption, terminated

__all__ = ["build_attempts"]


def build_attempts(kinds: List[FailureKind], infra_end: Callable[[], str], pods: List[Dict[str, Any]],
                   state: AppState, restarts: int, failed: List[Failed]) -> List[Attempt]:
    """Every attempt with why it ended. The attempts restarted by the controller are
    infrastructure failures where only evictions restart the app (``kinds``, the kinds of
    failure that restart its object, is ``[INFRA]``: the roles have no ``max_retries``), the
    user's where only theirs do; where both may, the controller does not record which one it
    was (kind unknown). The last attempt of a FAILED app is the infrastructure's when a pod
    of it has the ``DisruptionTarget`` condition or the controller says it acted on one
    (``infra_end()``: why, "" if it does not), else the user's (the first failed replica's
    exit code)."""
    past: Optional[FailureKind] = kinds[0] if len(kinds) == 1 else None
    why = {FailureKind.INFRA: DISRUPTION_TARGET, FailureKind.USER: "a replica failed"}.get(past, "restarted")  # type: ignore[arg-type]
    out = [Attempt(i, AppState.FAILED, past, why, retried=True) for i in range(restarts)]
    if state != AppState.FAILED:
        out.append(Attempt(restarts, state))
        return out
    evicted = next((f"{DISRUPTION_TARGET} {disruption(p)}" for p in pods if disruption(p)), "")
    evicted = evicted or infra_end()
    if evicted:
        out.append(Attempt(restarts, AppState.FAILED, FailureKind.INFRA, evicted))
        return out
    reason = ""
    if failed:
        term = terminated(failed[0][3])
        if term.get("reason") == "OOMKilled":
            reason = "OOMKilled"
        elif term.get("exitCode") is not None:
            reason = f"exit code {term['exitCode']}"
    out.append(Attempt(restarts, AppState.FAILED, FailureKind.USER, reason))
    return out
