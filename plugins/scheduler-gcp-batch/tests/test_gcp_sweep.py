"""Sweeps on gcp_batch: single-replica trials are the tasks of one Batch job (``task_count``
= trials, ``parallelism`` = max_parallel, task ``BATCH_TASK_INDEX`` = trial), checked
against the library's ``Job`` message; multi-replica trials one job per trial, said in the
dryrun; bad input in one line. End to end on the local Batch server: a 2x3 grid of a cheap
Python trial in one create_job, its status from one list_tasks, a failed trial's why and log,
resume of exactly the failed trials, cancel."""
import os
import sys
import time

import pytest
from google.cloud import batch_v1

from tx.cli.cmd_sweep import collapse_sweeps
from fake_gcp import count_calls
from tx.runner import Runner
from tx.runner import sweep as sw
from tx.specs import AppDef, AppState, Resource, Role
from tx.specs.sweep import Distribution, SweepFormatError, SweepSpec
from tx_scheduler_gcp_batch._sweep import SWEEP_PREAMBLE, trial_env, trial_words

GRID = SweepSpec(grid={"lr": [0.1, 1], "b": [1, 2, 3]})


def _app(replicas: int = 1) -> AppDef:
    return AppDef("sw", [Role("r", image="img", entrypoint="sh", num_replicas=replicas,
                              args=["-c", 'echo "lr=${lr} b=${b} $TX_TRIAL_INDEX $TX_APP_ID"'],
                              resource=Resource(cpu=1, gpu=0, memMB=64))])


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "offline-project")
    with Runner() as r:
        yield r


def test_dryrun_is_one_job_whose_tasks_are_the_trials_and_the_table_travels_once(runner):
    info = runner.dryrun_sweep(_app(), GRID, "gcp_batch", max_parallel=2)
    assert "=== gcp_batch: one native array request for 6 trials, at most 2 at once ===" in str(info)
    req = info.native.request
    job = batch_v1.Job.from_json(batch_v1.Job.to_json(req.job), ignore_unknown_fields=False)  # the API's schema
    group = job.task_groups[0]
    assert (group.task_count, group.parallelism, len(group.task_environments)) == (6, 2, 0)
    commands = list(group.task_spec.runnables[0].container.commands)
    assert commands[0] == "-c" and commands[1].startswith(f'{SWEEP_PREAMBLE}\ni="$BATCH_TASK_INDEX"\n')
    variables = group.task_spec.environment.variables
    # a grid's values are its axes, once in the script: no table
    assert "set -- 0.1 1; shift $(( (i / 3) % 2 ))" in commands[1] and "set -- 1 2 3; shift $(( (i / 1) % 3 ))" in \
        commands[1] and not any(k.startswith("TX_SWEEP_TABLE_") for k in variables), commands[1]
    env4 = trial_env(job, 4)
    assert env4["TX_TRIAL_INDEX"] == "4" and env4["TX_TRIAL_PARAMS"] == '{"b": 2, "lr": 1}'
    assert env4["TX_APP_ID"] == f"{req.app_id}:4" and env4["TX_ROLE_NAME"] == "r"
    assert trial_words(job, 4)[1][-2:] == ["-c", 'echo "lr=1 b=2 $TX_TRIAL_INDEX $TX_APP_ID"']
    # no stored AppDef: every task would show trial 0's (describe says app_not_stored)
    assert "TX_APPDEF" not in env4 and not any(k.startswith("TX_SWEEP_T") for k in env4)


def test_each_task_reads_its_row_by_batch_task_index(runner):
    """The job's script run as Batch runs it (its variables, BATCH_TASK_INDEX): each task
    gets its own env, arguments and app id; an index past the table fails in one line."""
    app = _app()
    app.roles[0].args = ["-c", 'echo "$0 $LR $TX_TRIAL_INDEX $TX_APP_ID"', "${app_id}"]
    app.roles[0].env = {"LR": "${lr}"}
    info = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [1, 2, "x y"]}), "gcp_batch")  # no grid axis: a table
    req = info.native.request
    group = req.job.task_groups[0]
    script = list(group.task_spec.runnables[0].container.commands)[-1]
    import subprocess
    for i, lr in enumerate(["1", "2", "x y"]):
        out = subprocess.run(["sh", "-c", script], env={**group.task_spec.environment.variables,
                                                         "PATH": os.environ["PATH"], "BATCH_TASK_INDEX": str(i)},
                             capture_output=True, text=True, timeout=30)
        assert out.stdout == f"{req.app_id}:{i} {lr} {i} {req.app_id}:{i}\n", out
    out = subprocess.run(["sh", "-c", script], env={**group.task_spec.environment.variables,
                                                     "PATH": os.environ["PATH"], "BATCH_TASK_INDEX": "3"},
                         capture_output=True, text=True, timeout=30)
    assert (out.returncode, out.stderr) == (2, "tx: no row 3 in the sweep table\n")
    # row i: lr, and its word in TX_TRIAL_PARAMS (quoted JSON for "x y", so no column of lr's)
    assert group.task_spec.environment.variables["TX_SWEEP_TABLE_0"] == "1 1\n2 2\n'x y' '\"x y\"'\n"
    assert not group.require_hosts_file  # each trial is its own rank 0


def test_a_sweep_of_10000_trials_is_one_job_under_batchs_1_mb(runner):
    """The issue's refusal: 10,000 trials made a 7.7 MB job. Now a grid's axes travel once,
    and a random search's table once, in job-wide variables of at most 96 KiB each (Linux's
    128 KiB per environment string)."""
    app = _app()
    app.roles[0].args = ["-c", "python -c 'print(${lr}, ${b})' --out /ckpt/${lr}-${b}"]
    grid = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [i / 1000 for i in range(100)], "b": list(range(100))}),
                               "gcp_batch").native.request.job
    assert type(grid).pb(grid).ByteSize() < 10_000  # a grid: its axes' values once, no table
    random = SweepSpec(random={"lr": Distribution("uniform", 0, 1), "b": Distribution("loguniform", 1e-5, 1)},
                       trials=10_000)
    info = runner.dryrun_sweep(app, random, "gcp_batch")
    job = info.native.request.job
    size = type(job).pb(job).ByteSize()
    assert size < 250_000, size
    variables = job.task_groups[0].task_spec.environment.variables
    tables = [v for k, v in variables.items() if k.startswith("TX_SWEEP_TABLE_")]
    assert len(tables) >= 2 and all(len(t) <= 96 * 1024 for t in tables)
    env = trial_env(job, 9999)
    import json
    assert env["TX_TRIAL_INDEX"] == "9999" and sorted(json.loads(env["TX_TRIAL_PARAMS"])) == ["b", "lr"]
    assert trial_words(job, 9999)[1][-1].endswith(f"--out /ckpt/{json.loads(env['TX_TRIAL_PARAMS'])['lr']}-"
                                                  f"{json.loads(env['TX_TRIAL_PARAMS'])['b']}")


def test_multireplica_trials_are_one_job_each_and_bad_input_is_one_line(runner):
    info = runner.dryrun_sweep(_app(replicas=2), GRID, "gcp_batch")
    assert info.native is None and ("6 requests, one per trial (a trial of several replicas is a job of several "
                                    "tasks itself, and Batch runs one task group per job)") in str(info)
    with pytest.raises(ValueError, match=r"^max_parallel 6000 is more than Batch's 5000 parallel tasks per job$"):
        runner.dryrun_sweep(_app(), GRID, "gcp_batch", max_parallel=6000)
    with pytest.raises(SweepFormatError, match=r"^100001 trials are more than gcp_batch's array limit of 100000$"):
        runner.dryrun_sweep(_app(), SweepSpec(grid={"lr": list(range(100001))}), "gcp_batch")


def test_a_trials_stored_appdef_is_made_when_its_own_job_is_used_and_is_its_own(runner):
    """A sweep's trials are dry-run without their stored AppDefs (a sweep's job keeps none):
    a trial that is a job of its own (several replicas) gets its own, the same as a dryrun of
    that app alone would store, on first use of its job."""
    from tx.specs.files import read_stored_appdef_and_options
    from tx_scheduler_gcp_batch.request import ENV_APPDEF

    info = runner.dryrun_sweep(_app(replicas=2), GRID, "gcp_batch")
    assert info.native is None
    req = info.trials[4].request
    assert ENV_APPDEF not in req.built.task_groups[0].task_spec.environment.variables  # not made yet
    stored = req.job.task_groups[0].task_spec.environment.variables[ENV_APPDEF]
    app, why, _opts = read_stored_appdef_and_options(stored, "TX_APPDEF")
    assert why == "" and app is not None and app.roles[0].args == info.trials[4]._app.roles[0].args
    alone = runner.dryrun(info.trials[4]._app, "gcp_batch").request.job
    assert alone.task_groups[0].task_spec.environment.variables[ENV_APPDEF] == stored
    assert "lr=1 b=2" in " ".join(app.roles[0].args) and str(req).count(ENV_APPDEF) == 1



def test_tx_list_shows_a_sweep_once_from_its_jobs_task_counts(fake_gcp, tmp_path, monkeypatch):
    """The sweep's job is listed as its trials, which tx list folds into the sweep's row:
    no extra row for the job, no call per trial (no VMs: the tasks stay PENDING, so the
    job's task counts alone say every trial's state: no task is listed)."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    with fake_gcp.vms(0), Runner() as runner:
        calls = count_calls(runner.scheduler("gcp_batch")._batch_client(), monkeypatch)
        handle = runner.run_sweep(_app(), GRID, "gcp_batch")
        job = sw.load_record(handle).trials[0].attempts[-1].rsplit(":", 1)[0]
        try:
            calls.clear()
            rows = collapse_sweeps(runner, "gcp_batch", runner.list("gcp_batch"))
            assert [r.app_handle for r in rows if r.app_handle == handle or r.app_id.startswith(job)] == [handle], rows
            assert "[sweep of 6: 6 pending]" in next(r.name for r in rows if r.app_handle == handle)
            assert sorted(calls) == ["get_job", "list_jobs"], calls
        finally:
            runner.cancel_sweep(handle)


#: a trial's program: python reads its parameters (``--lr``, ``--batch-size``, as the DDP
#: example would), refuses a negative rate as SGD does, writes them with its TX_TRIAL_INDEX to
#: ``<--output-dir>/result.json`` and prints them. Cheap on purpose: a trial is a task of the
#: job whatever it runs; the DDP example as a sweep trains for real in
#: tests/test_sweep_e2e.py, and DDP on gcp_batch in test_gcp_ddp.py and tests/test_portability.py
TRIAL = """import json, os, sys
a = dict(zip(sys.argv[1::2], sys.argv[2::2]))
if float(a["--lr"]) < 0:
    raise ValueError("Invalid learning rate: " + a["--lr"])
r = dict(trial=int(os.environ["TX_TRIAL_INDEX"]), lr=float(a["--lr"]), batch=int(a["--batch-size"]))
os.makedirs(a["--output-dir"], exist_ok=True)
json.dump(r, open(os.path.join(a["--output-dir"], "result.json"), "w"))
print("trained", json.dumps(r, sort_keys=True))
"""


def test_grid_runs_as_one_job_and_resume_reruns_exactly_the_failed(fake_gcp, tmp_path, monkeypatch):
    """2 x 3 trials of :data:`TRIAL` (``utils.sh --entrypoint python``): lr=-1 fails (the
    trial refuses a negative rate), so trials 3, 4 and 5 fail with that reason."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    created = len(fake_gcp.created)
    with Runner() as runner:
        calls = count_calls(runner.scheduler("gcp_batch")._batch_client(), monkeypatch)
        handle = runner.run_sweep(
            "utils.sh", SweepSpec(grid={"lr": [0.1, -1], "batch": [16, 32, 64]}), "gcp_batch",
            ["--entrypoint", "python", "--", "-c", TRIAL, "--lr", "${lr}", "--batch-size", "${batch}",
             "--output-dir", str(tmp_path / "out-${lr}-${batch}")], max_parallel=3)
        assert calls == ["create_job"] and len(fake_gcp.created) == created + 1
        deadline = time.monotonic() + 120
        while True:
            calls.clear()
            st = runner.sweep_status(handle)
            if all(t.state in (AppState.SUCCEEDED, AppState.FAILED) for t in st.trials) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        # once every trial has ended: the job's task counts, one list of its FAILED tasks (as many
        # as counted: the others SUCCEEDED); each failed trial's describe then reads that job and
        # those tasks, no call more. (The look that saw the last trial end may have read counts
        # from before, listed a state short of its count and then every task: no fixed calls.)
        calls.clear()
        st = runner.sweep_status(handle)
        assert calls == ["get_job", "list_tasks"], calls
        assert [t.state for t in st.trials] == [AppState.SUCCEEDED] * 3 + [AppState.FAILED] * 3, st.format()
        assert "Invalid learning rate: -1" in st.trials[3].why, st.format()
        out = "".join(runner.log_lines(st.trials[1].app_handle, "sh", 0, streams="stdout"))
        assert out == 'trained {"batch": 32, "lr": 0.1, "trial": 1}\n', out
        for k, b in enumerate((16, 32, 64)):
            assert (tmp_path / f"out-0.1-{b}" / "result.json").read_text() == f'{{"trial": {k}, "lr": 0.1, "batch": {b}}}'
        assert runner.resume_sweep(handle) == [3, 4, 5]
        rec = sw.load_record(handle)
        assert [len(t.attempts) for t in rec.trials] == [1, 1, 1, 2, 2, 2]
        # the resumed trials are the three tasks of one new job (one create_job)
        assert len(fake_gcp.created) == created + 2
        job = rec.trials[3].attempts[1].rsplit(":", 1)[0]
        assert job != rec.trials[0].attempts[0].rsplit(":", 1)[0]
        assert [t.attempts[-1] for t in rec.trials[3:]] == [f"{job}:{i}" for i in range(3)]
        runner.cancel_sweep(handle)  # the resumed trials' job
        deadline = time.monotonic() + 120
        while True:
            st = runner.sweep_status(handle)
            if all(t.state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED) for t in st.trials) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert [t.state for t in st.trials[:3]] == [AppState.SUCCEEDED] * 3
        assert {t.state for t in st.trials[3:]} <= {AppState.CANCELLED, AppState.FAILED}, st.format()
