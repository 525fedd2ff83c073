"""``tx run --name`` / ``Runner.dryrun(..., name=)``: a job name of the user's choosing that
replaces the component's, and reaches each backend where it shows a job's name."""
from __future__ import annotations

import re

import pytest

from tx.runner import get_runner
from tx.specs import AppDef, Role, check_app_name
from tx.testing.backends import backend_unavailable

NAME = "My_Job.v2"

#: where each scheduler shows the app name, in its dryrun request (``str(info)``): its id
#: (in the backend's own rules: lowercase DNS labels for Kubernetes, ...) and a label,
#: annotation or metadata entry that keeps the name as given
SHOWN = {
    "local_cwd": ["local request for app My_Job.v2-", "(My_Job.v2)"],
    "local_docker": ["name: my-job-v2-", "-echo-0", "tx.app-name: My_Job.v2"],
    "slurm": ["#SBATCH --job-name=My_Job.v2@echo-0 ", "--comment=tx-app:My_Job.v2 "],
    "kubernetes": ["name: my-job-v2-", "tx.pytorch.org/app-name: My_Job.v2"],
    "kubernetes_jobset": ["name: my-job-v2-", "tx.pytorch.org/app-name: My_Job.v2"],
    "kubernetes_mcad": ["name: my-job-v2-", "tx.pytorch.org/app-name: My_Job.v2"],
    "ray": ["-my-job-v2-", '"tx_app": "My_Job.v2"'],
    "aws_batch": ["My_Job-v2-", "tx/app-name: My_Job.v2"],
    "gcp_batch": ["job_id=my-job-v2-", '"tx_app_name": "my_job-v2"'],
}
CFG = {"kubernetes": {"queue": "default"}, "aws_batch": {"queue": "q"}}


@pytest.mark.parametrize("scheduler", sorted(SHOWN))
def test_name_reaches_each_scheduler(scheduler, request, tmp_path, monkeypatch):
    if scheduler == "gcp_batch":
        request.getfixturevalue("fake_gcp")  # credentials and a project for the dryrun
    if scheduler == "aws_batch":
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path))
    with get_runner() as runner:
        if scheduler not in runner.scheduler_backends():
            backend_unavailable(scheduler, "its plugin is not installed: pip install -e plugins/<its plugin>")
        info = runner.dryrun_component("utils.echo", ["--msg", "hi"], scheduler, CFG.get(scheduler), name=NAME)
    text = str(info)
    assert info._app.name == NAME
    for want in SHOWN[scheduler]:
        assert want in text, f"{want!r} not in {scheduler}'s request:\n{text}"


@pytest.mark.parametrize("scheduler", sorted(SHOWN))
@pytest.mark.parametrize("name, length", [("c" * 256, 256), ("d/" * 64, 64 * 4)])
def test_a_name_no_checkpoint_directory_can_hold_is_refused_at_dryrun(scheduler, name, length, request, tmp_path,
                                                                        monkeypatch):
    """The run's TX_CHECKPOINT_DIR ends in the app name (percent-encoded): on every
    scheduler a name that cannot be a directory name is refused in one line by the dryrun."""
    if scheduler == "gcp_batch":
        request.getfixturevalue("fake_gcp")
    if scheduler == "aws_batch":
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path))
    app = AppDef(name, roles=[Role("r", image="img", entrypoint="echo")])
    with get_runner() as runner:
        if scheduler not in runner.scheduler_backends():
            backend_unavailable(scheduler, "its plugin is not installed: pip install -e plugins/<its plugin>")
        with pytest.raises(ValueError, match=f"is {length} characters long as the last part of the run's "
                                             r"checkpoint directory \(.*at most 255 fit in a directory name\)") as e:
            runner.dryrun(app, scheduler, CFG.get(scheduler))
    assert "\n" not in str(e.value)


def test_name_replaces_the_components_and_keeps_ddp_tracking_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path))
    with get_runner() as runner:
        info = runner.dryrun_component("dist.ddp", ["--script", "train.py", "--name", "exp/run1"], "local_cwd",
                                       name="mine")
        plain = runner.dryrun_component("dist.ddp", ["--script", "train.py", "--name", "exp/run1"], "local_cwd")
    assert plain._app.name == "run1"  # the component's --name, as TorchX
    assert info._app.name == "mine"
    env = info._app.roles[0].env
    assert env["TX_TRACKING_EXPERIMENT_NAME"] == "exp" and env["TX_TRACKING_RUN_NAME"] == "run1"
    assert re.search(r"/mine-[0-9a-f]{8}$", env["TX_CHECKPOINT_DIR"]), env["TX_CHECKPOINT_DIR"]


@pytest.mark.parametrize("bad, why", [
    ("", "is empty"), ("my job", "has ' '"), ("a/b", "has '/'"), ("-x", "must start with a letter or digit"),
    ("x" * 41, "is 41 characters long; at most 40"), ("Über", "has 'Ü'"),
])
def test_bad_names_are_one_line(bad, why, tx, one_line_error):
    with pytest.raises(ValueError, match=why):
        check_app_name(bad)
    one_line_error(tx("run", "-s", "local_cwd", f"--name={bad}", "utils.echo"), why, 2)


def test_api_rejects_a_bad_name_before_submitting(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path))
    with get_runner() as runner, pytest.raises(ValueError, match="has ' '"):
        runner.run_component("utils.echo", ["--msg", "x"], "local_cwd", name="my job")


def test_run_name_in_tx_list_and_component_name_unchanged(tx):
    """A real run on local_cwd: ``tx list``'s NAME is the chosen name; a component's own
    ``--name`` after the component (TorchX's) still names the app when no run-level one is given."""
    named = tx("run", "-s", "local_cwd", "--name", "myjob", "utils.echo", "--msg", "hi")
    assert named.returncode == 0, named.stderr
    handle = named.stdout.splitlines()[0]
    assert handle.startswith("local_cwd://tx/myjob-") and "hi" in named.stdout
    ddp_named = tx("run", "-s", "local_cwd", "--dryrun", "dist.ddp", "--script", "t.py", "--name", "exp/run7")
    assert "\nname: run7\n" in "\n" + ddp_named.stdout
    rows = [ln.split() for ln in tx("list", "-s", "local_cwd").stdout.splitlines()]
    assert [r[-1] for r in rows if r and r[0] == handle] == ["myjob"]


def test_sweep_name_names_its_trials(tx, one_line_error, tmp_path, monkeypatch):
    from tx.specs.sweep import SweepSpec

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path))
    with get_runner() as runner:
        info = runner.dryrun_sweep("utils.echo", SweepSpec(grid={"msg": ["a", "b"]}), "local_cwd", name="lr_scan")
        plain = runner.dryrun_sweep("utils.echo", SweepSpec(grid={"msg": ["a", "b"]}), "local_cwd")
    assert [t._app.name for t in info.trials] == ["lr_scan", "lr_scan"]
    assert info.record.sweep_id.startswith("sweep-lr-scan-")
    assert [t._app.name for t in plain.trials] == ["echo", "echo"]  # the component's, as before
    out = tx("sweep", "-s", "local_cwd", "--name", "lr_scan", "--grid", "msg=a,b", "--dryrun", "utils.echo")
    assert "local request for app lr_scan-" in out.stdout, out.stderr
    one_line_error(tx("sweep", "-s", "local_cwd", "--name", "a b", "--grid", "msg=a", "utils.echo"), "has ' '", 2)
