"""Retries: max_retries with each retry_policy, num_restarts, logs of every attempt."""
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.specs import AppState, RetryPolicy


def _roles(h: Any, marks: Path, policy: RetryPolicy) -> List[Any]:
    # a/1 fails on its first attempt only; a/0 and b/0 never fail
    a = (
        'echo "start a ${replica_id}"; '
        f'if [ "${{replica_id}}" = 1 ] && [ ! -e {marks}/a1 ]; then touch {marks}/a1; echo "first attempt fails" >&2; exit 4; fi; '
        "echo done"
    )
    return [h.sh("a", a, 2, max_retries=1, retry_policy=policy), h.sh("b", 'echo "start b"; echo done')]


def _attempts(desc: Any) -> Dict[str, int]:
    return {name: len(atts) for name, atts in desc.metadata["attempts"].items()}


@pytest.mark.parametrize(
    "policy,expected",
    [
        (RetryPolicy.REPLICA, {"a/0": 1, "a/1": 2, "b/0": 1}),
        (RetryPolicy.ROLE, {"a/0": 2, "a/1": 2, "b/0": 1}),
        (RetryPolicy.APPLICATION, {"a/0": 2, "a/1": 2, "b/0": 2}),
    ],
)
def test_retry_policies(sched: Any, cfg: Dict[str, Any], tmp_path: Path, h: Any, policy: RetryPolicy, expected: Dict[str, int]) -> None:
    app_id, desc = h.run(sched, _roles(h, tmp_path, policy), {**cfg, "cancel_timeout": 5.0})
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    assert _attempts(desc) == expected
    assert all(r.state == AppState.SUCCEEDED for rs in desc.roles_statuses for r in rs.replicas)
    # both attempts of the failed replica are in its logs, in order
    assert h.text(sched, app_id, "a", 1, "stdout") == "start a 1\nstart a 1\ndone\n"
    assert h.text(sched, app_id, "a", 1, "stderr") == "first attempt fails\n"
    assert [a["exit_code"] for a in desc.metadata["attempts"]["a/1"]] == [4, 0]


def test_retries_exhausted(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    role = h.sh("w", 'echo "try"; echo "failure" >&2; exit 2', max_retries=2, retry_policy=RetryPolicy.REPLICA)
    app_id, desc = h.run(sched, [role], cfg)
    assert desc.state == AppState.FAILED
    assert desc.num_restarts == 2
    assert [a["exit_code"] for a in desc.metadata["attempts"]["w/0"]] == [2, 2, 2]
    assert list(sched.log_iter(app_id, "w", 0)) == ["try\n", "failure\n"] * 3
    assert h.replica(desc, "w", 0).exit_code == 2


def test_attempt_ending_mid_line_is_separated(sched: Any, cfg: Dict[str, Any], tmp_path: Path, h: Any) -> None:
    script = f"if [ ! -e {tmp_path}/m ]; then touch {tmp_path}/m; printf 'no newline'; exit 1; fi; echo second"
    app_id, desc = h.run(sched, [h.sh("w", script, max_retries=1)], cfg)
    assert desc.state == AppState.SUCCEEDED
    assert list(sched.log_iter(app_id, "w", 0, streams="stdout")) == ["no newline\n", "second\n"]
    offsets = [a["offsets"][0] for a in desc.metadata["attempts"]["w/0"]]
    assert offsets == [0, len("no newline\n")]


def test_no_retries_by_default(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    _, desc = h.run(sched, [h.sh("w", "exit 1")], cfg)
    assert desc.state == AppState.FAILED and desc.num_restarts == 0
    assert len(desc.metadata["attempts"]["w/0"]) == 1
