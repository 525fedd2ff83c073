"""Which failed pod is a Kubernetes app's cause when a DDP rank raises and its peer then fails
in its next collective: the peer's container may finish first (``finishedAt`` has whole
seconds, and a tie goes to the lower index). Pod objects in the API's JSON shape and a fake
log reader; no cluster."""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

from tx.specs import AppState, FailureKind, Role
from tx_scheduler_k8s import _pod
from tx_scheduler_k8s._attempts import build_attempts
from tx_scheduler_k8s._status import cause_first, failure, replica_statuses
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text(peer="10.244.0.7:41234")
RAISED = raised_text()


class Logs:
    """``Kube.pod_log`` over fixed texts; records which pods' logs were read."""

    def __init__(self, texts: Dict[str, str]) -> None:
        self.texts, self.read = texts, []  # type: Dict[str, str], List[str]

    def pod_log(self, ns: str, pod: str, tail_lines: Optional[int] = None, **_: Any) -> Iterator[bytes]:
        self.read.append(pod)
        yield self.texts[pod].encode()


def _pod_of(k: int, finished: str, reason: str = "Error", code: int = 1) -> Dict[str, Any]:
    return {"metadata": {"name": f"ddp-abc-trainer-0-{k}", "uid": f"u{k}", "resourceVersion": "7",
                         "creationTimestamp": "2026-11-26T04:15:00Z",
                         "labels": {_pod.LABEL_ROLE_INDEX: "0", _pod.LABEL_REPLICA_ID: str(k)}},
            "spec": {"hostname": f"trainer-0-{k}"},
            "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
                "exitCode": code, "reason": reason, "startedAt": "2026-11-26T04:15:10Z", "finishedAt": finished}}}]}}


def _describe(pods: List[Dict[str, Any]], logs: Logs):
    roles = [Role("trainer", image="img", num_replicas=2)]
    statuses, failed = replica_statuses(roles, pods, AppState.FAILED, _pod.LABEL_REPLICA_ID)
    text, cause = failure(logs, "default", failed, "", statuses)  # type: ignore[arg-type]
    attempts = build_attempts([FailureKind.USER], lambda: "", pods, AppState.FAILED, 0, cause_first(failed, cause))
    return statuses, text, cause, attempts


def test_the_rank_that_raised_is_the_cause_though_its_peer_finished_first() -> None:
    # rank 0 only lost its peer; its container finished a second before rank 1's
    pods = [_pod_of(0, "2026-11-26T04:16:00Z"), _pod_of(1, "2026-11-26T04:16:01Z", code=2)]
    logs = Logs({"ddp-abc-trainer-0-0": PEER, "ddp-abc-trainer-0-1": RAISED})
    statuses, text, cause, attempts = _describe(pods, logs)
    assert cause is not None and (cause.replica, cause.rank, cause.exception_type, cause.message) == (
        1, 1, "RuntimeError", "rank 1 fails on purpose")
    assert text == "trainer/1 rank 1: RuntimeError: rank 1 fails on purpose at fail.py:5 (exit code 2)"
    assert statuses[0].replicas[1].root_cause == cause and statuses[0].replicas[0].root_cause is None
    assert attempts[-1].reason == "exit code 2"  # the cause's replica's, not the peer's
    # the same second (a tie goes to the lower index): the same answer
    pods = [_pod_of(0, "2026-11-26T04:16:00Z"), _pod_of(1, "2026-11-26T04:16:00Z", code=2)]
    assert _describe(pods, logs)[2] == cause


def test_a_cause_more_than_2_min_after_the_first_failure_is_another_failure() -> None:
    pods = [_pod_of(0, "2026-11-26T04:16:00Z"), _pod_of(1, "2026-11-26T04:18:11Z", code=2)]
    logs = Logs({"ddp-abc-trainer-0-0": PEER, "ddp-abc-trainer-0-1": RAISED})
    _statuses, _text, cause, attempts = _describe(pods, logs)
    assert cause is not None and cause.replica == 0 and "Connection closed by peer" in cause.message
    assert logs.read == ["ddp-abc-trainer-0-0"] and attempts[-1].reason == "exit code 1"


def test_an_oom_killed_pod_comes_before_a_peer_that_finished_first() -> None:
    pods = [_pod_of(0, "2026-11-26T04:16:00Z"), _pod_of(1, "2026-11-26T04:16:02Z", reason="OOMKilled", code=137)]
    logs = Logs({"ddp-abc-trainer-0-0": PEER, "ddp-abc-trainer-0-1": "allocating\n"})
    _statuses, text, cause, attempts = _describe(pods, logs)
    assert cause is None and text == (
        "trainer/1 (pod ddp-abc-trainer-0-1) failed first: exit code 137, OOMKilled; last lines: allocating"), text
    assert attempts[-1].reason == "OOMKilled"


def test_a_pod_that_fails_after_a_look_is_weighed_again() -> None:
    """The answer is kept per failed pods (their uids and resourceVersions): one that fails
    after a look, within 10 s of the first, may be the cause."""
    from tx_scheduler_k8s.kubernetes_scheduler import KubernetesScheduler

    sched = KubernetesScheduler.__new__(KubernetesScheduler)  # no cluster: only its cache and log reader
    sched.kube = Logs({"ddp-abc-trainer-0-0": PEER, "ddp-abc-trainer-0-1": RAISED})  # type: ignore[assignment]
    roles = [Role("trainer", image="img", num_replicas=2)]
    first = [_pod_of(0, "2026-11-26T04:16:00Z"), dict(_pod_of(1, ""), status={"phase": "Running"})]
    statuses, failed = replica_statuses(roles, first, AppState.FAILED, _pod.LABEL_REPLICA_ID)
    assert sched._failure("default", failed, "", statuses)[1].replica == 0  # only the peer has failed yet
    assert sched._failure("default", failed, "", statuses)[1].replica == 0 and len(sched.kube.read) == 1  # kept
    both = [_pod_of(0, "2026-11-26T04:16:00Z"), _pod_of(1, "2026-11-26T04:16:03Z")]
    statuses, failed = replica_statuses(roles, both, AppState.FAILED, _pod.LABEL_REPLICA_ID)
    assert sched._failure("default", failed, "", statuses)[1].replica == 1
