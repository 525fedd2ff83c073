"""The attempts of a Kubernetes app and why each ended (:class:`tx.specs.Attempt`): an
infrastructure failure (a pod with the ``DisruptionTarget`` condition, or the controller's
word for one) or the user's (a replica's exit code)."""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional

import attrs

from tx.specs import AppState, Attempt, FailureKind

from tx_scheduler_k8s._preempt import saved_since
from tx_scheduler_k8s._status import DISRUPTION_TARGET, Failed, disruption, terminated, ts

__all__ = ["Saves", "build_attempts"]


@attrs.define
class Saves:
    """What describe knows to name what an evicted attempt saved
    (:mod:`tx_scheduler_k8s._preempt`): the app's checkpoint directory where this host reads
    it (None: say nothing), its pods' grace (s), when the app's object last changed state
    (its end, for a FAILED app) and when the current attempt's first pod was created (the
    end bound of the attempt before it), epoch s, inf where unknown."""

    location: Optional[str] = None
    grace: float = 30.0
    ended: float = math.inf
    restarted: float = math.inf

    def between(self, since: float, until: float) -> str:
        """``; saved step N in S s`` (or ``; no checkpoint saved ...``), "" where unknown."""
        if not until < math.inf:
            return ""
        text = saved_since(self.location, since if since < math.inf else until - self.grace, until)
        return f"; {text}" if text else ""


def _evicted(pod: Dict[str, Any], saves: Saves) -> str:
    """The eviction of ``pod`` and what was saved from its ``DisruptionTarget`` (the
    warning) to the end of its container (or of the app)."""
    since = next((ts(c.get("lastTransitionTime")) for c in (pod.get("status") or {}).get("conditions") or []
                  if c.get("type") == DISRUPTION_TARGET), math.inf)
    end = ts(terminated(pod).get("finishedAt"))
    return f"{DISRUPTION_TARGET} {disruption(pod)}" + saves.between(since, end if end < math.inf else saves.ended)


def build_attempts(kinds: List[FailureKind], infra_end: Callable[[], str], pods: List[Dict[str, Any]],
                   state: AppState, restarts: int, failed: List[Failed], saves: Optional[Saves] = None) -> List[Attempt]:
    """Every attempt with why it ended. The attempts restarted by the controller are
    infrastructure failures where only evictions restart the app (``kinds``, the kinds of
    failure that restart its object, is ``[INFRA]``: the roles have no ``max_retries``), the
    user's where only theirs do; where both may, the controller does not record which one it
    was (kind unknown). The last attempt of a FAILED app is the infrastructure's when a pod
    of it has the ``DisruptionTarget`` condition or the controller says it acted on one
    (``infra_end()``: why, "" if it does not), else the user's (the exit code of the
    replica that is the app's cause: ``failed``'s first, as
    :func:`tx_scheduler_k8s._status.cause_first` orders it). An attempt evicted names what the job saved after the warning where
    ``saves`` can tell: the last one from its pod's condition to its container's end, or
    (the pod gone) in the grace before the app's end; a restarted one, the last only, in
    the grace before the next attempt's first pod."""
    saves = saves or Saves()
    past: Optional[FailureKind] = kinds[0] if len(kinds) == 1 else None
    why = {FailureKind.INFRA: DISRUPTION_TARGET, FailureKind.USER: "a replica failed"}.get(past, "restarted")  # type: ignore[arg-type]
    out = [Attempt(i, AppState.FAILED, past, why + (saves.between(math.inf, saves.restarted)
                                                    if past == FailureKind.INFRA and i == restarts - 1 else ""),
                   retried=True) for i in range(restarts)]
    if state != AppState.FAILED:
        out.append(Attempt(restarts, state))
        return out
    evicted = next((_evicted(p, saves) for p in pods if disruption(p)), "")
    if not evicted:
        evicted = infra_end()
        evicted = evicted and evicted + saves.between(math.inf, saves.ended)
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
