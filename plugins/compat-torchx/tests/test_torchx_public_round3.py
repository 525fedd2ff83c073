"""TorchX 0.7.0 public names added so that TorchX's own unit tests import: the CLI's
argparse actions and ``get_logs``, ``torchx.schedulers.devices``, the schedulers' option
types, the fsspec and MLflow tracker factories, ``DockerWorkspaceMixin``."""
import argparse
import io
import signal
import tarfile
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest


@pytest.fixture
def fresh_actions() -> Iterator[None]:
    from torchx.cli.argparse_util import ArgOnceAction, torchxconfig

    torchxconfig._subcmd_configs.clear()
    yield
    ArgOnceAction.called_args = set()
    torchxconfig.called_args = set()
    torchxconfig._subcmd_configs.clear()


def test_torchxconfig_run_defaults_from_the_cli_run_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            fresh_actions: None) -> None:
    from torchx.cli.argparse_util import torchxconfig_run
    from torchx.runner import config

    (tmp_path / ".torchxconfig").write_text("[cli:run]\nworkspace = from-file\n")
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", [str(tmp_path)])
    p = argparse.ArgumentParser()
    p.add_argument("--workspace", default="dflt", action=torchxconfig_run)
    p.add_argument("--scheduler", required=True, action=torchxconfig_run)  # not in the file: stays required
    assert p.parse_args(["--scheduler", "x"]).workspace == "from-file"
    with pytest.raises(SystemExit) as e:  # the same option twice: exit 1
        p.parse_args(["--scheduler", "x", "--workspace", "a", "--workspace", "b"])
    assert e.value.code == 1


def test_get_logs_prefixes_each_replica_and_waits_for_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchx.cli import cmd_log
    from torchx.specs import AppDef, AppState, AppStatus, Role

    class FakeRunner:
        polls = 0

        def status(self, handle: str) -> Any:
            self.polls += 1
            return AppStatus(AppState.PENDING if self.polls < 2 else AppState.RUNNING)

        def describe(self, handle: str) -> AppDef:
            return AppDef("a", roles=[Role("w", image="i", entrypoint="e", num_replicas=2)])

        def log_lines(self, handle: str, role: str, k: int, regex: Any, **kw: Any) -> List[str]:
            assert handle == "local_cwd://default/a-1"
            return [f"line of {k}\n"]

    monkeypatch.setattr(cmd_log.time, "sleep", lambda s: None)
    out = io.StringIO()
    runner = FakeRunner()
    cmd_log.get_logs(out, "local_cwd:///a-1/w", None, runner=runner)  # type: ignore[arg-type]
    assert runner.polls == 2
    assert sorted(out.getvalue().splitlines()) == [f"{cmd_log.GREEN}w/{k}{cmd_log.ENDC} line of {k}" for k in (0, 1)]
    with pytest.raises(SystemExit):  # a role the app lacks: exit 1
        cmd_log.get_logs(out, "local_cwd:///a-1/nope", None, runner=runner)  # type: ignore[arg-type]


def test_device_mounts() -> None:
    from torchx.schedulers.devices import get_device_mounts
    from torchx.specs import DeviceMount

    assert get_device_mounts({"vpc.amazonaws.com/efa": 2, "aws.amazon.com/neurondevice": 1}) == [
        DeviceMount("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"),
        DeviceMount("/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1"),
        DeviceMount("/dev/neuron0", "/dev/neuron0"),
    ]
    with pytest.warns(UserWarning, match="nope"):
        assert get_device_mounts({"nope": 1}) == []


def test_fsspec_tracker_from_torchx_config_file(tmp_path: Path) -> None:
    from torchx.tracker.backend.fsspec import _read_config, create

    conf = tmp_path / "tracker.conf"
    conf.write_text(f"protocol=file\nroot_path={tmp_path / 'runs'}\n# a=b\nclient.opts.x=1\n")
    assert _read_config(str(conf))["client"] == {"opts": {"x": "1"}}
    conf.write_text(f"protocol=file\nroot_path={tmp_path / 'runs'}\n")
    tracker = create(f"file://{conf}")
    tracker.add_metadata("local_cwd://s/app-1", k="v")
    assert create(str(conf)).metadata("local_cwd://s/app-1") == {"k": "v"}
    conf.write_text("protocol=file\n")
    with pytest.raises(ValueError, match="root_path"):
        create(str(conf))


def test_mlflow_create_tracker_reads_the_tracker_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         mlflow_server: Any) -> None:
    from torchx.tracker.mlflow import create_tracker

    uri = mlflow_server.uri  # the session's server (a sqlite store here costs 6 s of migrations)
    (tmp_path / ".torchxconfig").write_text(
        f"[tracker:mlflow]\nconfig = {tmp_path}\ntracking_uri = {uri}\nexperiment_name = foobar\n")
    monkeypatch.delenv("TORCHX_TRACKING_EXPERIMENT_NAME", raising=False)
    t = create_tracker(str(tmp_path))
    assert (t.tracking_uri, t.experiment_name) == (uri, "foobar")
    monkeypatch.setenv("TORCHX_TRACKING_EXPERIMENT_NAME", "from-env")
    assert create_tracker(str(tmp_path)).experiment_name == "from-env"


def test_scheduler_option_types_and_mcad_resource() -> None:
    from torchx.schedulers import kubernetes_mcad_scheduler as mcad
    from torchx.schedulers.gcp_batch_scheduler import GCPBatchOpts
    from torchx.schedulers.kubernetes_scheduler import KubernetesOpts
    from torchx.specs import AppDef, Role

    assert set(KubernetesOpts.__annotations__) == {"namespace", "queue", "image_repo", "service_account",
                                                  "priority_class"}
    assert set(GCPBatchOpts.__annotations__) == {"project", "location"}
    app = AppDef("a", roles=[Role("w", image="img", entrypoint="echo", args=["hi"], num_replicas=2)])
    res = mcad.app_to_resource(app, "ns1", None, None, None, None, None, priority=3)
    assert res["kind"] == "AppWrapper" and res["metadata"]["namespace"] == "ns1"


def test_docker_workspace_mixin_push_plan_events_and_context(tmp_path: Path) -> None:
    from torchx.specs import AppDef, Role
    from torchx.workspace.docker_workspace import DockerWorkspaceMixin, _build_context, print_push_events

    class Mixed(DockerWorkspaceMixin):
        pass

    app = AppDef("a", roles=[Role("w", image="sha256:abc"), Role("v", image="busybox")])
    m = Mixed(docker_client="client")
    assert m._docker_client == "client"
    assert m.dryrun_push_images(app, {"image_repo": "reg/x"}) == {"sha256:abc": ("reg/x", "abc")}
    assert [r.image for r in app.roles] == ["reg/x:abc", "busybox"]
    with pytest.raises(KeyError):
        m.dryrun_push_images(AppDef("a", roles=[Role("w", image="sha256:abc")]), {})
    out = io.StringIO()
    print_push_events([{"status": "Preparing", "id": "l1"}, {"status": "Pushed", "id": "l1"}, {"status": "done"}], out)
    assert out.getvalue().count("\n") == 2 and "l1: Pushed" in out.getvalue()
    with pytest.raises(RuntimeError, match="denied"):
        print_push_events([{"error": "denied"}], out)
    (tmp_path / "keep.py").write_text("x")
    (tmp_path / "skip.log").write_text("x")
    (tmp_path / ".dockerignore").write_text("*.log\n")
    with _build_context("img", str(tmp_path)) as f:
        names = tarfile.open(fileobj=f).getnames()
    assert sorted(names) == [".dockerignore", "Dockerfile.torchx", "keep.py"]


def test_torchx_version_exits_and_sub_cmds_come_from_load_group(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture) -> None:
    from torchx.cli import main as cli_main
    from torchx.cli.cmd_base import SubCommand

    with pytest.raises(SystemExit) as e:
        cli_main.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == "torchx-0.7.0\n"

    class Mine(SubCommand):
        def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
            pass

        def run(self, args: argparse.Namespace) -> None:
            pass

    monkeypatch.setattr(cli_main, "load_group", lambda group, default=None: {"run": Mine})
    cmds = cli_main.get_sub_cmds()
    assert isinstance(cmds["run"], Mine) and "status" in cmds


def test_mlflow_tracker_torchx_members(mlflow_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses
    import uuid

    from torchx.tracker.mlflow import MLflowTracker

    @dataclasses.dataclass
    class Inner:
        url: str = "s3://d"

    @dataclasses.dataclass
    class Cfg:
        lr: float = 0.1
        locales: List[str] = dataclasses.field(default_factory=lambda: ["us", "eu"])
        empty: Dict[str, int] = dataclasses.field(default_factory=dict)
        data: List[Inner] = dataclasses.field(default_factory=lambda: [Inner(), Inner("s3://e")])

    for var in ("TX_TRACKING_EXPERIMENT_NAME", "TORCHX_TRACKING_EXPERIMENT_NAME"):
        monkeypatch.delenv(var, raising=False)
    assert MLflowTracker(tracking_uri=mlflow_server.uri).experiment_name == MLflowTracker.default_experiment_name()
    t = MLflowTracker(experiment_name=f"e-{uuid.uuid4().hex[:8]}", tracking_uri=mlflow_server.uri)
    assert t.experiment.experiment_id == t.experiment_id
    run_name = f"local_cwd://s/r-{uuid.uuid4().hex[:8]}"
    run = t.get_run(run_name)
    assert run.info.run_name == run_name and t.get_run_id(run_name) == run.info.run_id
    t.log_params_flat(run_name, Cfg())
    t.close()
    assert t.get_run(run_name).data.params == {
        "lr": "0.1", "locales": "['us', 'eu']", "empty": "{}", "data._0.url": "s3://d", "data._1.url": "s3://e"}
    t.client.create_run(t.experiment_id, run_name="twice")
    t.client.create_run(t.experiment_id, run_name="twice")
    with pytest.raises(RuntimeError, match="More than 1 run found for run_name `twice`"):
        t.get_run("twice")


@pytest.mark.parametrize("module", ["aws_sagemaker_scheduler"])
def test_schedulers_tx_lacks_say_so_in_one_line(module: str) -> None:
    import importlib

    import tx_torchx_compat  # noqa: F401 - the torchx alias

    with pytest.raises(ModuleNotFoundError) as e:
        importlib.import_module(f"torchx.schedulers.{module}")
    assert e.value.name == f"torchx.schedulers.{module}"
    assert "tx has no" in str(e.value) and "\n" not in str(e.value)


def test_lsf_scheduler_is_tx_lsf() -> None:
    """``torchx.schedulers.lsf_scheduler`` is tx-scheduler-lsf's scheduler under TorchX's names."""
    import tx_torchx_compat  # noqa: F401 - the torchx alias
    from torchx.schedulers.lsf_scheduler import LsfScheduler, create_scheduler
    from tx_scheduler_lsf.scheduler import LsfScheduler as TxLsf

    assert LsfScheduler is TxLsf
    sched = create_scheduler("tx")
    assert isinstance(sched, TxLsf) and sched.backend == "lsf"


def test_distributed_test_case_runs_fn_on_each_rank() -> None:
    import os

    from torchx.test.fixtures import DistributedTestCase

    class T(DistributedTestCase):
        def runTest(self) -> None:  # noqa: N802 - unittest's name
            pass

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    before = {s: signal.getsignal(s) for s in signals}
    t = T()
    t.setUp()
    try:
        pids = t.run_ddp(world_size=2, fn=os.getpid)()
    finally:
        t.tearDown()
    assert sorted(pids) == [0, 1] and len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    # torch's elastic agent sets its own handlers in the launching process: they are put back
    assert {s: signal.getsignal(s) for s in signals} == before


def test_config_load_takes_back_what_dump_wrote_none_included() -> None:
    from torchx.runner.config import dump, load
    from torchx.specs import runopts

    opts = runopts()
    opts.add("queue", type_=str, required=True, help="q")
    opts.add("account", type_=str, help="no default")
    opts.add("nodes", type_=int, default=2, help="n")
    f = io.StringIO()
    dump(f, {"s": opts})
    f.seek(0)
    cfg: Dict[str, Any] = {"queue": "given"}
    load("s", f, cfg, opts=opts)
    assert cfg == {"queue": "given", "account": None, "nodes": 2}  # `account = None` is None, as TorchX


def test_get_type_name_is_torchx_naming() -> None:
    from typing import Union

    import torchx.specs
    from torchx.specs.api import get_type_name

    assert torchx.specs.get_type_name is get_type_name
    assert [get_type_name(t) for t in (int, list, List[List[int]], Union[str, int])] == [
        "int", "list", "typing.List[typing.List[int]]", "typing.Union[str, int]"]


def test_local_log_iter_of_a_running_app_returns_all_its_lines(tmp_path: Path) -> None:
    from torchx.schedulers.local_scheduler import LocalDirectoryImageProvider, LocalScheduler
    from torchx.specs import AppDef, Role

    s = LocalScheduler("sess", LocalDirectoryImageProvider)
    try:
        app = AppDef("a", [Role("r", image=str(tmp_path), entrypoint="sh",
                                args=["-c", "for i in 1 2 3; do echo $i; sleep 0.2; done"])])
        h = s.submit(app, cfg={})  # no log_dir: a temporary one, as TorchX
        assert list(s.log_iter(h, "r", 0)) == ["1\n", "2\n", "3\n"]  # followed to the end, as TorchX
    finally:
        s.close()


def test_torchx_argument_help_formatter_marks_required_and_defaults() -> None:
    from torchx.specs.file_linter import TorchXArgumentHelpFormatter

    p = argparse.ArgumentParser(prog="c", formatter_class=TorchXArgumentHelpFormatter)
    p.add_argument("--foo", type=int, required=True, help="the foo")
    p.add_argument("--bar", type=str, default="x", help="the bar")
    text = " ".join(p.format_help().split())
    assert "--foo int the foo (required)" in text and "--bar str the bar (default: x)" in text
