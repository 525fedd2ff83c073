"""The conformance kit's checks catch what they claim to: each deliberately broken
scheduler of kit_schedulers.py (local processes; each breaks one rule) is run through the
kit's test for that rule, which must fail saying what is wrong; the unbroken scheduler
passes the same tests."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent

KIT = '''
import os
import pytest
from tx.testing import SchedulerConformance
import kit_schedulers


class TestKit(SchedulerConformance):
    timeout = float(os.environ["KIT_TIMEOUT"])
    running_seconds = 2.0
    poll_interval = 0.2
    running_not_observable = os.environ.get("KIT_NOT_OBSERVABLE") or None

    def kept_run_option(self, scheduler):
        return ("label", "kit") if os.environ["KIT_VARIANT"] == "forgets_run_options" else None

    @pytest.fixture
    def scheduler(self):
        sched = kit_schedulers.create(os.environ["KIT_VARIANT"])
        yield sched
        for app_id in list(sched.apps):
            sched.cancel(app_id)
'''

CASES = [
    # variant, the kit test that must catch it, what the kit says
    ("back_from_terminal", "test_list_contains_app", "*went back from the terminal state SUCCEEDED to RUNNING*"),
    ("replica_back_from_terminal", "test_failing_replica",
     "*replica worker/0 went back from the terminal state SUCCEEDED to RUNNING (states seen: *SUCCEEDED -> RUNNING)*"),
    ("never_running", "test_states_move_forward", "*ran 2s but was never seen RUNNING: PENDING -> SUCCEEDED*"),
    ("replicas_never_running", "test_states_move_forward",
     "*replica one/0 was never seen RUNNING: PENDING -> SUCCEEDED (the app was: RUNNING -> SUCCEEDED)*"),
    ("never_starts", "test_cancel", "*not RUNNING after 3.0s: PENDING*"),
    ("no_role_idx", "test_replica_environment", "*not set in the replica: ?'TX_ROLE_IDX', 'TORCHX_ROLE_IDX'?*"),
    ("wrong_num_replicas", "test_replica_environment",
     "*wrong contract values: {'TX_NUM_REPLICAS': \"'3', expected '2'\"}*"),
    ("raw_job_id", "test_replica_environment", "*wrong contract values: {'TX_JOB_ID': \"'kitprocs://kit/${app_id}'*"),
    ("succeeded_with_failed_replica", "test_failing_replica", "*SUCCEEDED with replica worker/1 FAILED*"),
    ("fails_silently", "test_failing_replica", "*FAILED without saying why*"),
    ("one_based_replicas", "test_submit_describe_logs", "*replica id 2 is outside the role's 2 replicas*"),
    ("silent_unknown", "test_cancel", "*UNKNOWN state without a message saying what the backend answered*"),
    ("list_lags", "test_list_contains_app", "*list() says RUNNING*describe says SUCCEEDED*"),
    ("forgets_appdef", "test_describe_gives_back_the_appdef", "*describe gave back None (None), not AppDef(*"),
    ("forgets_run_options", "test_describe_gives_back_the_appdef",
     "*describe's metadata?'run_options'? is None; submitted with {'label': 'kit'}*"),
]


def _run_kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variant: str, tests: str,
             timeout: float = 30.0, not_observable: str = "") -> pytest.RunResult:
    pytester.makepyfile(test_kit=textwrap.dedent(KIT))
    monkeypatch.setenv("KIT_VARIANT", variant)
    monkeypatch.setenv("KIT_TIMEOUT", str(timeout))
    monkeypatch.setenv("KIT_NOT_OBSERVABLE", not_observable)
    monkeypatch.syspath_prepend(str(HERE))
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "tx.testing", "-k", tests, "-q", "-rs")


@pytest.mark.parametrize("variant,test,says", CASES, ids=[c[0] for c in CASES])
def test_kit_fails_a_broken_scheduler(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                      variant: str, test: str, says: str) -> None:
    result = _run_kit(pytester, monkeypatch, variant, test, timeout=3.0 if variant == "never_starts" else 30.0)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([says])


def test_kit_passes_the_unbroken_scheduler(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kit test but the fresh-process ones (the scheduler keeps its apps, and no copy of
    their AppDefs, in memory: forgets_appdef above); the scheduler has no run options, so the
    two bad-cfg tests skip saying so."""
    result = _run_kit(pytester, monkeypatch, "good", "not fresh_process and not describe_gives_back")
    result.assert_outcomes(passed=8, skipped=2)
    result.stdout.fnmatch_lines(["*the scheduler has no run options*"])


def test_unknown_with_a_message_is_allowed(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run_kit(pytester, monkeypatch, "explained_unknown", "test_submit_describe_logs or test_failing_replica")
    result.assert_outcomes(passed=2)


def test_declared_unobservable_running_is_a_skip_with_the_reason(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    why = "the backend learns only when a job ends"
    result = _run_kit(pytester, monkeypatch, "never_running", "test_states_move_forward", not_observable=why)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*RUNNING before SUCCEEDED not required: {why}*"])
