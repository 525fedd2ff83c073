"""The replicas of one failure: a DDP rank that raises makes the other ranks fail in their
next collective ("Connection closed by peer"), and the driver may see such a peer's end
first. Where the replica that ended the app only lost its peer (its stderr matches the
spec's ``peer_lost``, the client's ``tx.schedulers.why.PEER_LOST``), the driver waits up to
the spec's ``one_failure_s`` for the other replicas to end on their own before it stops
them, and records those that failed beside it in ``state.json``'s ``failure`` (``others``):
the client names the cause among them (``tx.schedulers.why.first_cause``).

Standard library only, like the rest of the driver (tx is not installed on the cluster).
"""
from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Mapping, Sequence, Tuple


def lost_peer(spec: Mapping[str, Any], text: str) -> bool:
    """Whether ``text`` (a replica's stderr tail) says that a rank lost its peer, by the
    spec's ``peer_lost`` pattern (False without one, or for a pattern Python cannot read)."""
    pattern = spec.get("peer_lost")
    if not pattern or not text:
        return False
    try:
        return re.search(str(pattern), text) is not None
    except re.error:
        return False


def ended_on_their_own(app: Any, failed: Any, others: Sequence[Any]) -> List[Tuple[Any, Dict[str, Any]]]:
    """Where ``failed`` (the replica whose failure ends the app) only lost its peer, wait up
    to ``app.spec["one_failure_s"]`` seconds for ``others`` (running replicas with a wait
    ref) to end on their own; ``(replica, what its actor's wait returned)`` for each that
    did, in the order they ended (its wait ref cleared); ``[]`` at once otherwise. A replica
    whose actor died meanwhile is left to the stop that follows.

    Raises:
        what ``app.check_cancel()`` raises (the app was cancelled meanwhile).
    """
    if not others or not lost_peer(app.spec, failed.cause or failed.tail):
        return []
    deadline = time.monotonic() + float(app.spec.get("one_failure_s") or 0.0)
    waits = {x.wait_ref: x for x in others if x.wait_ref is not None}
    out: List[Tuple[Any, Dict[str, Any]]] = []
    while waits and time.monotonic() < deadline:
        done, _ = app.ray.wait(list(waits), num_returns=1, timeout=min(0.5, max(0.0, deadline - time.monotonic())))
        app.check_cancel()
        for ref in done:
            x = waits.pop(ref)
            try:
                res = app.ray.get(ref)
            except Exception:  # noqa: BLE001 - its actor died: the stop records it
                continue
            x.wait_ref = None
            out.append((x, res))
    return out


def failure_record(r: Any, others: Sequence[Any] = ()) -> Dict[str, Any]:
    """``state.json``'s ``failure``: the replica ``r`` whose failure ended the app (role,
    replica, exit code, host, message, stderr tails, attempt, its end in epoch s, why the
    infrastructure lost it), and in ``others`` the replicas that failed on their own while
    the driver waited (:func:`ended_on_their_own`), each alike."""
    rec: Dict[str, Any] = {
        "role": r.role["name"], "replica": r.id, "exit_code": r.exit_code, "hostname": r.info.get("hostname", ""),
        "node_ip": r.info.get("node_ip", ""), "msg": r.msg, "stderr_tail": r.tail, "attempt": r.attempt,
        "cause_tail": r.cause, "infra": r.infra, "ended": r.ended,
    }
    if others:
        rec["others"] = [failure_record(x) for x in others]
    return rec
