"""``tx status``'s text (tx.cli.cmd_status.render) against AppStatus.format: the replica
lines come from one place, and the attempts block shows in both (it once showed only in
``AppStatus.format``, so ``tx status`` hid every infrastructure retry)."""

from tx.cli.cmd_status import render
from tx.specs.api import AppState
from tx.specs.status import AppStatus, Attempt, FailureKind, ReplicaStatus, RoleStatus


def _status(attempts=()):
    replicas = [ReplicaStatus(1, AppState.FAILED, "trainer", hostname="node1", exit_code=3,
                              structured_error_msg="trainer/1: ValueError: bad\nsecond line"),
                ReplicaStatus(0, AppState.SUCCEEDED, "trainer", exit_code=0)]
    return AppStatus(AppState.FAILED, num_restarts=2, roles=[RoleStatus("trainer", replicas)],
                     attempts=list(attempts))


def test_tx_status_shows_the_attempts_when_one_failed():
    status = _status([Attempt(0, AppState.FAILED, FailureKind.INFRA, "NODE_FAIL: a node of the job failed",
                              retried=True), Attempt(1, AppState.FAILED)])
    text = render(status)
    assert text.endswith("  Attempts:\n"
                         "    #0 FAILED (infra: NODE_FAIL: a node of the job failed), retried\n"
                         "    #1 FAILED\n"), text
    assert "Attempts" not in render(_status([Attempt(0, AppState.FAILED)]))


def test_tx_status_replica_lines_are_the_models_own():
    status = _status()
    plain = [ln for ln in render(status).splitlines() if ln.startswith(("  *", "   ", "      "))]
    model = [ln for ln in status.format().splitlines() if ln.startswith(("  *", "   ", "      "))]
    assert plain == model == [
        "  *trainer[0]:SUCCEEDED",
        "   trainer[1]:FAILED (exit code 3) on node1",
        "      trainer/1: ValueError: bad",
        "      second line",
    ]
    coloured = render(status, color=True)
    assert "\x1b[" in coloured and "trainer[1]:" in coloured
