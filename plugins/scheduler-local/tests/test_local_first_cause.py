"""Which failed replica is a local app's cause when a DDP rank raises and its peer then fails in
its next collective: the supervisor may reap the peer first. Two small shell replicas that
print what such ranks print (no torch, no DDP job): replica 0 only lost its peer and ends at
once, replica 1 raised and ends a moment later."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from tx.specs import AppState, Role
from tx_scheduler_local._store import SUPERVISOR_LOG
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text()
RAISED = raised_text()


def _roles(tmp_path: Path, first: str, second: str, second_after_s: float) -> list:
    (tmp_path / "out0.txt").write_text(first)
    (tmp_path / "out1.txt").write_text(second)
    (tmp_path / "r0.sh").write_text(f"cat {tmp_path}/out0.txt >&2; exit 1\n")
    (tmp_path / "r1.sh").write_text(f"sleep {second_after_s}; cat {tmp_path}/out1.txt >&2; exit 1\n")
    return [Role("trainer", image="", entrypoint="sh", args=[f"{tmp_path}/r${{replica_id}}.sh"], num_replicas=2)]


def test_the_rank_that_raised_is_the_cause_though_its_peer_was_reaped_first(
        sched: Any, cfg: Dict[str, Any], h: Any, tmp_path: Path) -> None:
    _, desc = h.run(sched, _roles(tmp_path, PEER, RAISED, 1.0), cfg)
    assert desc.state == AppState.FAILED
    states = {r.id: (r.state, r.exit_code) for r in desc.roles_statuses[0].replicas}
    assert states == {0: (AppState.FAILED, 1), 1: (AppState.FAILED, 1)}  # replica 1 was not stopped
    cause = desc.root_cause
    assert cause is not None and (cause.replica, cause.rank, cause.exception_type, cause.message) == (
        1, 1, "RuntimeError", "rank 1 fails on purpose"), desc.structured_error_msg
    assert desc.structured_error_msg == "trainer/1 rank 1: RuntimeError: rank 1 fails on purpose at fail.py:5 (exit code 1)"
    assert desc.attempts[-1].reason == desc.structured_error_msg
    assert desc.msg.startswith("replica trainer/1 "), desc.msg  # the state message names it too


def test_a_failure_of_its_own_stops_the_others_at_once(sched: Any, cfg: Dict[str, Any], h: Any, tmp_path: Path) -> None:
    app_id, desc = h.run(sched, _roles(tmp_path, RAISED.replace("rank1", "rank0"), PEER, 30.0), cfg)
    # the supervisor's own record: it stopped replica 1 at once, without the wait for peers
    log = Path(sched.apps_dir, app_id, SUPERVISOR_LOG).read_text()
    assert "only lost its peer" not in log and "trainer/0" in log, log
    states = {r.id: r.state for r in desc.roles_statuses[0].replicas}
    assert states == {0: AppState.FAILED, 1: AppState.CANCELLED}
    assert desc.root_cause is not None and desc.root_cause.replica == 0
