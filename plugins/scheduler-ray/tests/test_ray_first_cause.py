"""Which failed replica is a Ray app's cause when a DDP rank raises and its peer then fails in
its next collective: the driver may see the peer's end first. The driver's side (it waits for
the others' own ends where the first only lost its peer) against a fake ``ray`` module, and
the client's (it names the cause among them) from a ``state.json`` as the driver writes it;
no Ray."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, List, Optional

from tx.schedulers import PEER_LOST
from tx.specs import AppState
from tx_scheduler_ray._describe import describe_job
from tx_scheduler_ray.tx_ray_driver._peers import ended_on_their_own, failure_record
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text(peer="10.0.0.7:41234")
RAISED = raised_text()
SPEC = {"peer_lost": PEER_LOST.pattern, "one_failure_s": 10.0, "roles": [{"name": "trainer", "num_replicas": 2}]}


class FakeRay:
    """``ray.wait``/``ray.get`` over wait refs that are done from the start (``results``) or never."""

    def __init__(self, results: Dict[str, Dict[str, Any]]) -> None:
        self.results, self.waited = results, 0

    def wait(self, refs: List[str], num_returns: int = 1, timeout: Optional[float] = None) -> Any:
        self.waited += 1
        done = [r for r in refs if r in self.results][:num_returns]
        return done, [r for r in refs if r not in done]

    def get(self, ref: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        return self.results[ref]


def _replica(k: int, cause: str = "") -> Any:
    return SimpleNamespace(role={"name": "trainer"}, id=k, exit_code=1, info={"hostname": f"node{k}"}, msg="",
                           tail=cause[-200:], cause=cause, attempt=0, infra="", ended=100.0 + k, wait_ref=f"w{k}")


def test_the_driver_waits_for_the_others_own_ends_where_the_first_only_lost_its_peer() -> None:
    first, other = _replica(0, PEER), _replica(1)
    ray = FakeRay({"w1": {"exit_code": 1, "ended": 100.4, "cause_tail": RAISED}})
    app = SimpleNamespace(spec=SPEC, ray=ray, check_cancel=lambda: None)
    assert ended_on_their_own(app, first, [other]) == [(other, ray.results["w1"])] and other.wait_ref is None
    # a first failure of its own: no wait
    ray = FakeRay({"w1": {"exit_code": 1}})
    assert ended_on_their_own(SimpleNamespace(spec=SPEC, ray=ray, check_cancel=lambda: None),
                              _replica(0, RAISED), [_replica(1)]) == [] and ray.waited == 0
    # the others still run after the window: nothing
    app = SimpleNamespace(spec={**SPEC, "one_failure_s": 0.05}, ray=FakeRay({}), check_cancel=lambda: None)
    assert ended_on_their_own(app, _replica(0, PEER), [_replica(1)]) == []


def _state(failure: Dict[str, Any]) -> Dict[str, Any]:
    reps = [{"id": k, "state": "FAILED", "exit_code": 1, "stderr_tail": "", "hostname": f"node{k}"} for k in (0, 1)]
    return {"state": "FAILED", "msg": "trainer/0 failed: exited with code 1", "failure": failure,
            "roles": [{"name": "trainer", "replicas": reps}]}


def _describe(failure: Dict[str, Any]) -> Any:
    info = SimpleNamespace(status="FAILED", message="", runtime_env={"env_vars": {}})
    return describe_job("127.0.0.1:8265-sid", "http://127.0.0.1:8265", "sid", info, _state(failure))


def test_the_rank_that_raised_is_the_cause_though_the_driver_saw_its_peer_first() -> None:
    first, other = _replica(0, PEER), _replica(1, RAISED)
    other.ended = 100.4
    desc = _describe(failure_record(first, [other]))
    cause = desc.root_cause
    assert desc.state == AppState.FAILED and cause is not None
    assert (cause.replica, cause.rank, cause.exception_type, cause.message) == (
        1, 1, "RuntimeError", "rank 1 fails on purpose"), desc.structured_error_msg
    assert desc.structured_error_msg == "trainer/1 rank 1: RuntimeError: rank 1 fails on purpose at fail.py:5 (exit code 1)"
    assert desc.msg == "trainer/1 failed: exited with code 1"  # not the driver's "trainer/0 failed"
    reps = desc.roles_statuses[0].replicas
    assert reps[1].root_cause == cause and reps[0].root_cause is None
    # one that ended more than 2 min after the first is another failure; without others, the first
    other.ended = 230.5
    assert _describe(failure_record(first, [other])).root_cause.replica == 0
    assert _describe(failure_record(first)).root_cause.replica == 0


def test_the_drivers_failure_record_names_the_replicas_that_failed_on_their_own() -> None:
    """App.on_failure with a fake ``ray``: replica 1 ends on its own (exit 1) while the driver
    waits, replica 2 never does and is stopped; the failure record has replica 1 beside 0."""
    from tx_scheduler_ray.tx_ray_driver import _app

    role = {"name": "trainer", "num_replicas": 3, "max_retries": 0, "retry_policy": "APPLICATION", "env": {}}
    app = _app.App.__new__(_app.App)  # no Ray: only what on_failure reads
    reps = [_app.Replica(0, role, k, True) for k in range(3)]
    for k, r in enumerate(reps):
        r.state, r.wait_ref, r.ended = _app.RUNNING, f"w{k}", 100.0 + k
        r.actor = SimpleNamespace(stop=SimpleNamespace(remote=lambda grace, k=k: f"s{k}"))
    reps[0].state, reps[0].wait_ref, reps[0].exit_code, reps[0].cause = _app.FAILED, None, 1, PEER
    ray = FakeRay({"w1": {"exit_code": 1, "ended": 100.4, "cause_tail": RAISED, "stderr_tail": "x"},
                   "s2": {"exit_code": -15, "ended": 101.0}})
    app.spec, app.ray, app.replicas, app.grace, app.cancelled = {**SPEC, "one_failure_s": 0.3}, ray, reps, 1.0, False
    app.restarts_by_role, app.infra_used, app.infra_retries, app.num_restarts, app.attempts = [0], 0, 3, 0, []
    assert app.on_failure(reps[0]) is True
    assert [r.state for r in reps] == [_app.FAILED, _app.FAILED, _app.CANCELLED]
    assert app.failure["replica"] == 0 and [o["replica"] for o in app.failure["others"]] == [1]
    assert app.failure["others"][0]["cause_tail"] == RAISED and app.failure["others"][0]["ended"] == 100.4
    assert _describe(app.failure).root_cause.replica == 1
