"""Which failed container is a local_docker app's cause when a DDP rank raises and its peer
then fails in its next collective: the peer's container may finish first. Inspect records
as the engine gives them and the containers' output as text; no engine."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from tx.specs import AppState, ReplicaStatus
from tx_scheduler_docker._status import failure
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text(peer="10.88.0.3:41234")
RAISED = raised_text()


def _info(k: int, finished: str, oom: bool = False, code: int = 1) -> Dict[str, Any]:
    return {"Id": f"c{k}", "Name": f"/ddp-abc-trainer-{k}",
            "State": {"Status": "exited", "ExitCode": code, "OOMKilled": oom, "Error": "",
                      "StartedAt": "2026-11-26T04:15:50.1Z", "FinishedAt": finished},
            "Config": {"Labels": {"tx.mem-mb": "1024"}}}


def _app(finished: Tuple[str, str], outputs: Tuple[str, str], oom: Tuple[bool, bool] = (False, False)):
    replicas = [ReplicaStatus(id=k, state=AppState.FAILED, role="trainer", exit_code=1) for k in (0, 1)]
    infos = {("trainer", k): _info(k, finished[k], oom[k], 137 if oom[k] else 1) for k in (0, 1)}
    read: List[str] = []

    def output(cid: str) -> bytes:
        read.append(cid)
        return outputs[int(cid[1:])].encode()
    return replicas, infos, output, read


def test_the_rank_that_raised_is_the_cause_though_its_peer_finished_first() -> None:
    # rank 0 only lost its peer and its container finished 0.4 s before rank 1's
    replicas, infos, output, read = _app(("2026-11-26T04:16:00.1Z", "2026-11-26T04:16:00.512345678Z"),
                                         (PEER, RAISED))
    text, cause = failure(replicas, infos, output, lambda: True)
    assert cause is not None and (cause.replica, cause.rank, cause.exception_type, cause.message) == (
        1, 1, "RuntimeError", "rank 1 fails on purpose")
    assert text == "trainer/1 rank 1: RuntimeError: rank 1 fails on purpose at fail.py:5 (exit code 1)"
    assert replicas[1].root_cause == cause and replicas[1].structured_error_msg == text
    assert replicas[0].root_cause is None
    assert read == ["c0", "c1"]


def test_a_cause_more_than_2_min_after_the_first_failure_is_another_failure() -> None:
    replicas, infos, output, read = _app(("2026-11-26T04:16:00.1Z", "2026-11-26T04:18:10.2Z"), (PEER, RAISED))
    text, cause = failure(replicas, infos, output, lambda: True)
    assert cause is not None and cause.replica == 0 and "Connection closed by peer" in cause.message, text
    assert read == ["c0"]  # the later one's output is not read


def test_an_out_of_memory_kill_comes_before_a_peer_that_finished_first() -> None:
    replicas, infos, output, _read = _app(("2026-11-26T04:16:00.1Z", "2026-11-26T04:16:01Z"), (PEER, ""),
                                          oom=(False, True))
    text, cause = failure(replicas, infos, output, lambda: True)
    assert cause is None and text.startswith("trainer[1] (container ddp-abc-trainer-1) failed first: killed: out of "
                                             "memory (memory limit 1024 MB, exit code 137)"), text


def test_output_the_engine_did_not_give_is_said_not_taken_for_silence() -> None:
    """A failed replica whose output read raised (the engine busy, a dropped connection) is not
    reported as one that wrote nothing: the answer says its output could not be read."""
    replicas, infos, _output, _read = _app(("2026-11-26T04:16:00.1Z", "2026-11-26T04:16:01Z"), ("", ""))

    def output(cid: str) -> bytes:
        raise ConnectionError("Connection aborted.\nRemoteDisconnected")

    text, cause = failure(replicas, infos, output, lambda: True)
    assert cause is None and text == ("trainer[0] (container ddp-abc-trainer-0) failed first: exit code 1; "
                                      "its output could not be read: Connection aborted. (2 replicas failed)"), text
    replicas, infos, output, _read = _app(("2026-11-26T04:16:00.1Z", "2026-11-26T04:16:01Z"), ("", ""))
    assert "could not be read" not in failure(replicas, infos, output, lambda: True)[0]  # it wrote nothing
