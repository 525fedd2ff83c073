"""The conformance kit catches what it claims to: run against deliberately broken variants
of local_cwd (lost log lines, wrong states, a cancel that does nothing, state kept only in
memory, a dryrun that submits, a missing replica environment), each variant must fail the
kit's test for that defect, while the unbroken scheduler passes the same tests."""
from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

BROKEN = '''
import itertools
from tx.specs import AppState
from tx_scheduler_local.scheduler import LocalScheduler, create_cwd_scheduler


class LostLogs(LocalScheduler):
    def log_iter(self, *args, **kwargs):
        return list(super().log_iter(*args, **kwargs))[::2]


class WrongStates(LocalScheduler):
    def describe(self, app_id):
        desc = super().describe(app_id)
        if desc is not None and desc.state == AppState.FAILED:
            desc.state = AppState.SUCCEEDED
        return desc


class NoopCancel(LocalScheduler):
    def _cancel_existing(self, app_id):
        pass


class MemoryOnly(LocalScheduler):
    """Knows only the apps this instance scheduled (what a fresh process cannot see)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mine = set()

    def schedule(self, info):
        app_id = super().schedule(info)
        self.mine.add(app_id)
        return app_id

    def describe(self, app_id):
        return super().describe(app_id) if app_id in self.mine else None

    def list(self):
        return [a for a in super().list() if a.app_id in self.mine]


class SubmittingDryrun(LocalScheduler):
    """Its dryrun starts the app (and its request has no app id the kit could look up)."""

    def _submit_dryrun(self, app, cfg):
        info = super()._submit_dryrun(app, cfg)
        self.schedule(info)
        info.request.app_id = ""
        return info


class NoEnv(LocalScheduler):
    def _submit_dryrun(self, app, cfg):
        info = super()._submit_dryrun(app, cfg)
        for role in info.request.roles:
            for r in role.replicas:
                for key in [k for k in r.env if k.startswith(("TX_", "TORCHX_"))]:
                    del r.env[key]
        return info


def make(cls):
    def factory(session_name, **kwargs):
        return cls(session_name, "local_cwd", **kwargs)
    return factory


create_good = create_cwd_scheduler
create_lost_logs = make(LostLogs)
create_wrong_states = make(WrongStates)
create_noop_cancel = make(NoopCancel)
create_memory_only = make(MemoryOnly)
create_submitting_dryrun = make(SubmittingDryrun)
create_no_env = make(NoEnv)
'''

KIT = '''
import os
import pytest
from tx.testing import SchedulerConformance
import broken_scheds


class TestKit(SchedulerConformance):
    timeout = float(os.environ["KIT_TIMEOUT"])
    fresh_factory = "broken_scheds:create_" + os.environ["KIT_VARIANT"]

    @pytest.fixture
    def scheduler(self, tmp_path):
        return getattr(broken_scheds, "create_" + os.environ["KIT_VARIANT"])("tx")

    @pytest.fixture
    def cfg(self, tmp_path):
        return {"log_dir": str(tmp_path / "logs"), "cancel_timeout": 2.0}

    def fresh_env(self):
        env = super().fresh_env()
        env["PYTHONPATH"] = os.getcwd() + os.pathsep + env.get("PYTHONPATH", "")
        return env
'''

CASES = [
    # variant, the kit test that must catch it, its timeout (s), what the kit says
    ("lost_logs", "test_submit_describe_logs", 60, "*lines missing or out of order*"),
    ("wrong_states", "test_failing_replica", 60, "*SUCCEEDED*"),
    ("noop_cancel", "test_cancel", 8, "*not terminal after 8.0s*"),
    ("memory_only", "test_fresh_process_sees_the_app", 60, "*a fresh process does not know*"),
    ("submitting_dryrun", "test_dryrun_is_deterministic_and_submits_nothing", 60, "*dryrun submitted something*"),
    ("no_env", "test_replica_environment", 60, "*not set in the replica*"),
]


def _run_kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variant: str, test: str, timeout: float):
    from tx_scheduler_local.scheduler import create_cwd_scheduler

    pytester.makepyfile(broken_scheds=textwrap.dedent(BROKEN), test_kit=textwrap.dedent(KIT))
    state = pytester.path / "state"
    monkeypatch.setenv("TX_STATE_DIR", str(state))
    monkeypatch.setenv("KIT_VARIANT", variant)
    monkeypatch.setenv("KIT_TIMEOUT", str(timeout))
    monkeypatch.syspath_prepend(str(pytester.path))
    try:
        return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "tx.testing", "-k", test, "-q")
    finally:  # what a broken variant left running (its cancel did nothing) is stopped here
        good = create_cwd_scheduler("tx", state_dir=str(state))
        for app in good.list():
            good.cancel(app.app_id)
        for app in good.list():
            good.wait(app.app_id, timeout=30)


@pytest.mark.parametrize("variant,test,timeout,says", CASES, ids=[c[0] for c in CASES])
def test_kit_fails_a_broken_scheduler(pytester, monkeypatch, variant, test, timeout, says):
    result = _run_kit(pytester, monkeypatch, variant, test, timeout)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([says])


def test_kit_passes_the_same_tests_on_the_unbroken_scheduler(pytester, monkeypatch):
    tests = sorted({c[1] for c in CASES})
    result = _run_kit(pytester, monkeypatch, "good", " or ".join(tests), 60)
    result.assert_outcomes(passed=len(tests))
