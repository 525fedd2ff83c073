"""Sweeps on aws_batch: single-replica trials as one array job (``arrayProperties.size``),
checked against botocore's Batch API model and run by moto in simple mode (2 calls to
submit, one ``list_jobs`` and one ``describe_jobs`` per 100 children for status, cancel, describe of a child);
the array child's command run here with ``AWS_BATCH_JOB_ARRAY_INDEX`` set; multi-node trials
and ``--max_parallel`` one job per trial, said in the dryrun; bad input in one line."""
from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Dict, List

import pytest

from tx.cli.cmd_sweep import collapse_sweeps
from tx.runner import Runner
from tx.runner import sweep as sw
from tx.specs import AppDef, AppState, Resource, Role
from tx.specs.sweep import SweepFormatError, SweepSpec
from tx_scheduler_aws_batch.testing import Moto

GRID = SweepSpec(grid={"lr": [0.1, 1], "b": [1, 2, 3]})


def _app(replicas: int = 1) -> AppDef:
    return AppDef("sw", [Role("r", image="repo/img:1", entrypoint="sh", num_replicas=replicas,
                              args=["-c", 'echo "lr=${lr} b=${b} $TX_TRIAL_INDEX $TX_TRIAL_PARAMS $TX_APP_ID"'],
                              resource=Resource(cpu=1, gpu=0, memMB=64))])


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with Runner() as r:
        yield r


def _validate(operation: str, params: Dict[str, Any]) -> None:
    """botocore's check of ``params`` against the Batch API model's input shape (the
    published schema every boto3 call is checked against before it is sent)."""
    import botocore.session
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("batch")
    validate_parameters(params, model.operation_model(operation).input_shape)


def _child(req: Any, index: int, via: str = "AWS_BATCH_JOB_ARRAY_INDEX") -> str:
    """Run array child ``index``'s container command here, as Batch would (its env, its index)."""
    c = req.job_def["containerProperties"]
    env = {e["name"]: e["value"] for e in c["environment"]}
    env[via] = str(index) if via == "AWS_BATCH_JOB_ARRAY_INDEX" else f"0123-abcd:{index}"
    p = subprocess.run(c["command"], env={**env, "PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_dryrun_is_one_array_job_valid_for_the_batch_api_and_each_child_runs_its_trial(runner):
    info = runner.dryrun_sweep(_app(), GRID, "aws_batch", cfg={"queue": "q"})
    text = str(info)
    assert "=== aws_batch: one native array request for 6 trials ===" in text
    req = info.native.request
    assert req.job_def["type"] == "container" and "nodeProperties" not in req.job_def
    assert req.submit["arrayProperties"] == {"size": 6}
    # no stored AppDef: every child would show trial 0's (describe says app_not_stored)
    assert "tx_appdef" not in (req.submit.get("parameters") or {})
    _validate("RegisterJobDefinition", req.job_def)
    _validate("SubmitJob", {**req.submit, "jobDefinition": "arn:aws:batch:us-east-1:1:job-definition/x:1"})
    assert [a.rsplit(":", 1)[1] for a in req.app_ids] == [str(i) for i in range(6)]
    assert _child(req, 4) == f'lr=1 b=2 4 {{"b": 2, "lr": 1}} {req.app_ids[4]}\n'
    # moto sets only AWS_BATCH_JOB_ID (<array job id>:<index>, as AWS does for a child)
    assert _child(req, 0, via="AWS_BATCH_JOB_ID") == f'lr=0.1 b=1 0 {{"b": 1, "lr": 0.1}} {req.app_ids[0]}\n'
    # the grid's axes once (not a case per trial): the children pick their values by index
    assert "set -- 0.1 1; shift $(( (i / 3) % 2 ))" in text and ") export TX_" not in text


def test_a_sweep_of_10000_trials_is_one_array_job_under_24_kib(runner):
    """At 10,000 trials each trial's words in a case made a 74 KiB job definition (refused);
    now a grid's axes are written once, and a word made of them (``/ckpt/<lr>-<b>``) too."""
    app = _app()
    app.roles[0].args = ["-c", 'echo "lr=${lr} b=${b} /ckpt/${lr}-${b} $TX_TRIAL_INDEX"']
    grid = SweepSpec(grid={"lr": [i / 1000 for i in range(100)], "b": list(range(100))})
    req = runner.dryrun_sweep(app, grid, "aws_batch", cfg={"queue": "q"}).native.request
    assert req.submit["arrayProperties"] == {"size": 10_000}
    import json
    assert len(json.dumps(req.job_def)) < 24 * 1024
    assert "tx_rows=" not in req.trials_script()
    assert _child(req, 9999) == "lr=0.099 b=99 /ckpt/0.099-99 9999\n"
    assert _child(req, 4321) == "lr=0.043 b=21 /ckpt/0.043-21 4321\n"


def test_values_of_no_grid_axis_are_rows_of_a_table_each_child_reads_its_own(runner):
    app = _app()
    app.roles[0].args = ["-c", 'echo "lr=${lr} $TX_TRIAL_INDEX"']
    req = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [1, 2, "x y"]}), "aws_batch", cfg={"queue": "q"}).native.request
    assert "tx_rows='1 1\n2 2\n" in req.trials_script()
    assert [_child(req, i) for i in range(3)] == ["lr=1 0\n", "lr=2 1\n", "lr=x y 2\n"]


def test_multinode_trials_and_max_parallel_are_one_job_per_trial_said_in_the_dryrun(runner):
    info = runner.dryrun_sweep(_app(replicas=2), GRID, "aws_batch", cfg={"queue": "q"})
    assert info.native is None
    assert ("6 requests, one per trial (a trial of several replicas is a multi-node parallel job, which AWS Batch "
            "cannot run as an array job)") in str(info)
    info = runner.dryrun_sweep(_app(), GRID, "aws_batch", cfg={"queue": "q"}, max_parallel=2)
    assert info.native is None and "AWS Batch array jobs have no bound on running children" in str(info)


def test_bad_input_is_one_line_before_anything_is_submitted(runner):
    with pytest.raises(SweepFormatError, match=r"^10001 trials are more than aws_batch's array limit of 10000$"):
        runner.dryrun_sweep(_app(), SweepSpec(grid={"lr": list(range(10001))}), "aws_batch", cfg={"queue": "q"})
    # issue 41, item 8: the 101x101 grid (10,201 trials) was refused only after every
    # trial was expanded and dry-run (39 s of CPU); now the count is checked first
    cpu = time.process_time()
    with pytest.raises(SweepFormatError, match=r"^10201 trials are more than aws_batch's array limit of 10000$"):
        runner.dryrun_sweep(_app(), SweepSpec(grid={"lr": list(range(101)), "b": list(range(101))}), "aws_batch",
                            cfg={"queue": "q"})
    assert time.process_time() - cpu < 1.0  # measured: 0.09 s checked first, 3.7 s checked after the dryruns
    long = _app()
    long.roles[0].args.append("x" * 200 + "${lr}")
    import hashlib  # values of no pattern: a table of 4,000 rows of 16 hex digits (64 KB) does not fit
    with pytest.raises(ValueError, match=r"^the array's job definition would be \d+ KiB with 4000 trials' commands, "
                                         r"more than AWS Batch's 24 KiB"):
        runner.dryrun_sweep(long, SweepSpec(grid={"lr": [hashlib.sha1(b"%d" % i).hexdigest()[:16] for i in range(4000)]}),
                            "aws_batch", cfg={"queue": "q"})


@pytest.fixture
def calls(runner) -> List[str]:
    """The Batch API operations the runner's aws_batch scheduler sends (botocore's events)."""
    seen: List[str] = []
    runner.scheduler("aws_batch")._aws.batch.meta.events.register(
        "before-call.batch.*", lambda model, **_: seen.append(model.name))
    return seen


def test_array_on_moto_submit_status_cancel_describe_in_few_calls(aws_simple: Moto, runner, calls):
    handle = runner.run_sweep(_app(), GRID, "aws_batch", cfg={"queue": aws_simple.queue})
    assert calls == ["RegisterJobDefinition", "SubmitJob"]
    calls.clear()
    st = runner.sweep_status(handle)
    assert [t.state for t in st.trials] == [AppState.SUCCEEDED] * 6, st.format()
    assert calls == ["ListJobs", "DescribeJobs"]  # the array job by name, then its 6 children (100 a call)
    rec = sw.load_record(handle)
    desc = runner.scheduler("aws_batch").describe(rec.trials[5].attempts[-1])
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert [(rs.role, [r.id for r in rs.replicas]) for rs in desc.roles_statuses] == [("r", [0])]
    calls.clear()
    runner.cancel_sweep(handle)  # every trial has ended: nothing to terminate
    assert "TerminateJob" not in calls
    assert runner.scheduler("aws_batch").describe(f"{aws_simple.queue}:never-submitted-1:3") is None
    # tx list: the array job is its trials, which fold into the sweep's one row; one
    # describe_jobs per 100 children, not one call per trial
    calls.clear()
    rows = collapse_sweeps(runner, "aws_batch", runner.list("aws_batch"))
    mine = [r for r in rows if r.name.startswith("sw")]
    assert [(r.app_handle, r.state) for r in mine] == [(handle, AppState.SUCCEEDED)], rows
    assert "[sweep of 6: 6 succeeded]" in mine[0].name
    assert calls.count("DescribeJobs") <= 2 + len(rows) // 100 and "ListJobs" in calls, calls


def test_a_finished_array_of_250_is_two_calls_not_one_describe_per_100_children(aws_simple: Moto, runner, calls):
    """Every child ended (moto's simple mode ends them at SubmitJob): the parent's child
    counts say so, and no child is described (ListJobs by name, DescribeJobs of the parent:
    it was 1 + 3 DescribeJobs of 100 children)."""
    handle = runner.run_sweep(_app(), SweepSpec(grid={"lr": list(range(125)), "b": [1, 2]}), "aws_batch",
                              cfg={"queue": aws_simple.queue})
    calls.clear()
    st = runner.sweep_status(handle)
    assert [t.state for t in st.trials] == [AppState.SUCCEEDED] * 250, st.format()[:2000]
    assert calls == ["ListJobs", "DescribeJobs"], calls


def test_each_trials_stored_appdef_is_its_own_made_when_its_request_is_read(runner):
    """A sweep's trials' stored AppDefs are made on first use (an array job keeps none):
    trial 0's at dryrun, each other's when its request is read (printed, submitted as a job
    of its own), and each is that trial's AppDef with its run options, after the tags."""
    from tx.specs import appdef_to_stored
    from tx_scheduler_aws_batch.request import APPDEF_LIMIT, PARAM_APPDEF

    info = runner.dryrun_sweep(_app(), GRID, "aws_batch", cfg={"queue": "q"}, max_parallel=2)
    assert info.native is None  # max_parallel: one job per trial, each submitted with its request
    for t in info.trials:
        submit = t.request.submit
        assert list(submit)[:4] == ["jobName", "jobQueue", "tags", "parameters"], list(submit)
        assert submit["parameters"][PARAM_APPDEF] == appdef_to_stored(t._app, APPDEF_LIMIT, cfg=t._cfg)
    assert len({t.request.submit["parameters"][PARAM_APPDEF] for t in info.trials}) == 6
