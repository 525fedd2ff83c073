"""Every verb tells an app's handle from a run's, a sweep's and a trial's by its syntax alone
(``tx.runner.handles``, issue 41), through the ``tx`` CLI on local_cwd: a run or sweep handle
with no record on this host is a one-line error about that run or sweep, never looked up as an
app of that id; a real app and a real run answer every verb. Sweeps and trials with a record
are covered by test_sweep_seams.py."""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import pytest

RUN = "local_cwd://tx/run-gone-0123abcd"
SWEEP = "local_cwd://tx/sweep-gone-0123abcd"

VERBS = (("status",), ("describe",), ("cancel",), ("log",))


def _until(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return got


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v[0])
@pytest.mark.parametrize("handle, needle", [
    (RUN, f"no run {RUN} on this host"),
    (SWEEP + "/3", f"no sweep {SWEEP} on this host"),
    (SWEEP + "/x", f"a sweep's trial is {SWEEP}/TRIAL, TRIAL a number"),
    (RUN + "/x", f"'x' follows {RUN}, which names a run"),
], ids=["run", "trial", "bad-trial", "run-slash"])
def test_a_run_or_sweep_with_no_record_is_one_line_never_an_app(tx, one_line_error, verb, handle, needle):
    if verb == ("log",) and handle == RUN + "/x":  # the log grammar: RUN/ROLE, the run's role x
        needle = f"no run {RUN} on this host"
    p = tx(*verb, handle)
    one_line_error(p, needle, 1)
    assert "does not exist" not in p.stderr  # before, a sweep's id was asked of local_cwd as an app's


@pytest.mark.parametrize("verb", (("status",), ("describe",), ("cancel",)), ids=lambda v: v[0])
def test_a_sweep_with_no_record_is_one_line_never_an_app(tx, one_line_error, verb):
    one_line_error(tx(*verb, SWEEP), f"no sweep {SWEEP} on this host", 1)


def test_log_of_a_sweep_asks_for_a_trial_and_sweep_verbs_refuse_other_handles(tx, one_line_error):
    one_line_error(tx("log", SWEEP), f"log of a sweep: name a trial, {SWEEP}/TRIAL", 2)
    one_line_error(tx("sweep", "resume", RUN), f"'{RUN}' is not a sweep's handle", 2)
    one_line_error(tx("sweep", "best", "local_cwd://tx/app-1", "--metric", "acc"),
                   "'local_cwd://tx/app-1' is not a sweep's handle", 2)


def test_an_app_and_a_run_answer_every_verb(tx, tmp_path):
    # a plain app and a run with failover (its first hop runs), both waiting to be cancelled
    app = tx("run", "--detach", "-s", "local_cwd", "utils.sh", "--", "sh", "-c", "echo app-up; exec sleep 60")
    assert app.returncode == 0, app.stderr
    app = app.stdout.splitlines()[0]
    run = tx("run", "--detach", "-s", "local_cwd", "--fallback", "local_dir", "utils.sh", "--image", str(tmp_path),
             "--", "sh", "-c", "echo run-up; exec sleep 60")
    assert run.returncode == 0, run.stderr
    run = run.stdout.splitlines()[0]
    assert "/run-" in run and "/run-" not in app

    for handle, line in ((app, "app-up"), (run, "run-up")):
        _until(lambda h=handle: json.loads(tx("status", h, "--json").stdout or "null"))
        _until(lambda h=handle, w=line: w in tx("log", h).stdout)
        desc = tx("describe", handle, "--json")
        assert desc.returncode == 0, desc.stderr
        assert json.loads(desc.stdout)["roles"][0]["name"] == "sh"
    st = tx("status", run, "--json")
    assert json.loads(st.stdout)["run"]["handle"] == run
    assert tx("status", run).stdout.startswith(f"Run: {run}\n")
    for handle in (app, run):
        c = tx("cancel", handle, "--timeout", "60")
        assert c.returncode == 0, c.stderr
        assert "CANCELLED" in c.stderr, c.stderr
