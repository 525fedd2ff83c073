"""Which failed node is an AWS Batch job's cause when a DDP rank raises and its peer then fails
in its next collective: the peer's node may stop first, and before this rule the lowest
failed node index was named whatever the times. ``describe_jobs`` records of a
multi-node parallel job and its node jobs, and their logs as lines; no AWS, no moto."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from tx.schedulers import env as env_contract
from tx.specs import AppState
from tx_scheduler_aws_batch._status import failure, replica_statuses
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text(peer="10.0.1.7:41234")
RAISED = raised_text()
JOB = {"jobId": "j1", "jobName": "ddp-abc", "status": "FAILED", "statusReason": "Essential container exited",
       "nodeProperties": {"numNodes": 2, "mainNode": 0, "nodeRangeProperties": [{"targetNodes": "0:1", "container": {
           "image": "img", "command": ["python", "fail.py"],
           "environment": [{"name": env_contract.ROLE_NAME, "value": "trainer"}]}}]}}


def _node(k: int, stopped_ms: int, code: int = 1) -> Dict[str, Any]:
    return {"jobId": f"j1#{k}", "status": "FAILED", "statusReason": "Essential container in task exited",
            "stoppedAt": stopped_ms, "container": {"exitCode": code, "networkInterfaces": [
                {"privateIpv4Address": f"10.0.1.{7 + k}"}]}}


def _describe(nodes: Dict[int, Dict[str, Any]], logs: Dict[int, str]):
    read: List[Optional[int]] = []

    def last_lines(node: Optional[int]) -> List[str]:
        read.append(node)
        return logs[node].splitlines() if node is not None else []
    statuses, _roles, failed = replica_statuses(JOB, nodes, AppState.FAILED, JOB["statusReason"])
    text, cause = failure(JOB, failed, JOB["statusReason"], statuses, last_lines)
    return statuses, text, cause, read


def test_the_rank_that_raised_is_the_cause_though_its_peer_stopped_first() -> None:
    for first, second in ((0, 1), (1, 0)):  # whichever index: rank 0 only lost its peer, 0.4 s before
        nodes = {first: _node(first, 1_800_000_000_000), second: _node(second, 1_800_000_000_400, code=2)}
        logs = {first: PEER.replace("rank0", f"rank{first}"), second: RAISED.replace("rank1", f"rank{second}")}
        statuses, text, cause, read = _describe(nodes, logs)
        assert cause is not None and (cause.replica, cause.rank, cause.exception_type, cause.message) == (
            second, second, "RuntimeError", "rank 1 fails on purpose"), text
        assert text == f"trainer/{second} rank {second}: RuntimeError: rank 1 fails on purpose at fail.py:5 (exit code 2)"
        assert statuses[0].replicas[second].root_cause == cause and statuses[0].replicas[first].root_cause is None
        assert read == [first, second]


def test_a_cause_more_than_2_min_after_the_first_failure_is_another_failure() -> None:
    nodes = {0: _node(0, 1_800_000_000_000), 1: _node(1, 1_800_000_130_001, code=2)}
    _statuses, text, cause, read = _describe(nodes, {0: PEER, 1: RAISED})
    assert cause is not None and cause.replica == 0 and "Connection closed by peer" in cause.message, text
    assert read == [0]


def test_without_a_cause_the_node_that_stopped_first_is_named() -> None:
    """Before, the lowest failed node index was named whenever it stopped."""
    nodes = {0: _node(0, 1_800_000_000_900, code=3), 1: _node(1, 1_800_000_000_000, code=4)}
    _statuses, text, cause, _read = _describe(nodes, {0: "bad shard 0\n", 1: "bad shard 1\n"})
    assert cause is None and text == ("trainer[1] (node 1) failed with exit code 4: Essential container in task "
                                      "exited; last lines: bad shard 1"), text


def test_a_node_killed_for_memory_is_the_cause_though_its_peer_stopped_first() -> None:
    """ECS killed node 1 for memory (its container's ``reason``); node 0 only lost it and
    stopped 0.4 s before. Before ``known``, node 0's lost peer was named."""
    oom = _node(1, 1_800_000_000_400, code=137)
    oom["container"]["reason"] = "OutOfMemoryError: Container killed due to memory usage"
    nodes = {0: _node(0, 1_800_000_000_000), 1: oom}
    statuses, text, cause, read = _describe(nodes, {0: PEER, 1: "step 41\n"})
    line = "trainer[1] (node 1) failed with exit code 137: OutOfMemoryError: Container killed due to memory usage"
    assert cause is None and text == f"{line}; last lines: step 41", text
    assert statuses[0].replicas[1].structured_error_msg == line
    assert statuses[0].replicas[0].root_cause is None and read == [0, 1]  # node 0 is read first, in time order


def test_a_node_whose_host_was_lost_is_the_cause_though_its_peer_stopped_first() -> None:
    """Node 1's instance went away (``statusReason`` ``Host EC2 ...``, as ``_attempts`` reads
    an infrastructure failure); node 0 only lost it and stopped first."""
    lost = _node(1, 1_800_000_000_400, code=137)
    lost["statusReason"] = "Host EC2 (instance i-0a1b2c3d4e5f67890) terminated."
    nodes = {0: _node(0, 1_800_000_000_000), 1: lost}
    statuses, text, cause, read = _describe(nodes, {0: PEER, 1: ""})
    line = ("trainer[1] (node 1) failed with exit code 137: Host EC2 (instance i-0a1b2c3d4e5f67890) "
            "terminated.")
    assert cause is None and text == line and statuses[0].replicas[1].structured_error_msg == line, text
    assert read == [0, 1]


def test_a_node_killed_for_memory_2_min_later_is_not_the_cause() -> None:
    oom = _node(1, 1_800_000_130_001, code=137)
    oom["container"]["reason"] = "OutOfMemoryError: Container killed due to memory usage"
    _statuses, text, cause, read = _describe({0: _node(0, 1_800_000_000_000), 1: oom}, {0: PEER, 1: ""})
    assert cause is not None and cause.replica == 0 and "Connection closed by peer" in cause.message, text
    assert read == [0]
