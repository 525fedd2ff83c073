"""TorchX 0.7.0's public Python API, called the way TorchX's documentation calls it,
through ``import torchx`` (tx-torchx-compat)."""
from __future__ import annotations

import importlib.util
import dataclasses
import io
import warnings
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import pytest

if importlib.util.find_spec("tx_torchx_compat") is None:  # CI (TX_TEST_REQUIRE_BACKENDS=1) fails instead
    from tx.testing.backends import backends_required

    _why = "tx-torchx-compat is not installed: pip install -e plugins/compat-torchx"
    if backends_required():
        raise RuntimeError(_why)
    pytest.skip(_why, allow_module_level=True)

import torchx  # noqa: E402
import torchx.specs as specs  # noqa: E402
from torchx.runner import Runner, get_runner  # noqa: E402
from torchx.runner import config  # noqa: E402
from torchx.schedulers import SchedulerFactory  # noqa: E402
from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, split_lines  # noqa: E402
from torchx.specs.api import AppStatus, AppStatusError, CfgVal, parse_app_handle, runopts  # noqa: E402
from torchx.workspace.api import WorkspaceMixin  # noqa: E402

import tx.specs  # noqa: E402


@pytest.fixture(autouse=True)
def _private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local apps and config lookups stay under this test's directory."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for var in ("TXCONFIG", "TORCHXCONFIG"):
        monkeypatch.delenv(var, raising=False)


class MemScheduler(Scheduler):
    """A TorchX 0.7-style scheduler kept in memory (no backend): enough to check what the
    Runner and the Scheduler base call on it."""

    apps: Dict[str, specs.AppState] = {}

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("mem", session_name)
        self.kwargs = kwargs
        self.validated: List[str] = []

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", type_=str, default="default", help="queue")
        return opts

    def _validate(self, app: specs.AppDef, scheduler: str) -> None:  # TorchX 0.7 signature
        self.validated.append(scheduler)

    def _submit_dryrun(self, app: specs.AppDef, cfg: Mapping[str, CfgVal]) -> specs.AppDryRunInfo[Dict[str, Any]]:
        return specs.AppDryRunInfo({"app": app, "cfg": dict(cfg)}, repr)

    def schedule(self, dryrun_info: specs.AppDryRunInfo[Dict[str, Any]]) -> str:
        app_id = f"{dryrun_info.request['app'].name}-{len(self.apps)}"
        self.apps[app_id] = specs.AppState.RUNNING
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        state = self.apps.get(app_id)
        return None if state is None else DescribeAppResponse(app_id=app_id, state=state)

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=a, state=s) for a, s in self.apps.items()]

    def _cancel_existing(self, app_id: str) -> None:
        self.apps[app_id] = specs.AppState.CANCELLED


class MemWorkspaceScheduler(MemScheduler, WorkspaceMixin):
    def workspace_opts(self) -> runopts:
        opts = runopts()
        opts.add("image_repo", type_=str, default="repo", help="where images go")
        return opts

    def build_workspace_and_update_role(self, role: specs.Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        role.image = f"{cfg['image_repo']}/{Path(workspace).name}"  # TorchX's contract: mutate the role


def app() -> specs.AppDef:
    return specs.AppDef("demo", [specs.Role("worker", image="img", entrypoint="echo", args=["hi"])])


def test_same_objects_as_tx() -> None:
    assert specs.AppDef is tx.specs.AppDef and specs.Role is tx.specs.Role
    assert torchx.__version__ == "0.7.0"
    assert isinstance(torchx.IMAGE, str) and torchx.IMAGE
    from torchx.schedulers.api import Scheduler as S
    from tx.schedulers.api import Scheduler as T

    assert S is T
    assert split_lines("a\nb") == ["a\n", "b"] and Stream.COMBINED.value == "combined"
    assert isinstance(AppStatus(specs.AppState.RUNNING), AppStatus)


def test_runner_signature_positional_and_keyword() -> None:
    factories: Dict[str, SchedulerFactory] = {"mem": MemScheduler}
    r1 = Runner("sess", factories, {"utils.echo": {"msg": "x"}}, {"flavour": "a"})
    r2 = Runner(name="sess", scheduler_factories=factories, component_defaults={"utils.echo": {"msg": "x"}},
                scheduler_params={"flavour": "a"})
    for r in (r1, r2):
        with r:
            assert r.scheduler_backends() == ["mem"]
            handle = r.run(app(), "mem")
            assert handle.startswith("mem://sess/demo-")
            assert r._scheduler("mem").kwargs == {"flavour": "a"}
            assert r.component_app("utils.echo", []).roles[0].args[-1] == "x"
    with pytest.raises(TypeError, match="scheduler_factories"):
        Runner("sess", {"utils.echo": {"msg": "x"}})  # component defaults where the factories go


def test_runner_stop_is_a_deprecated_cancel() -> None:
    with Runner("sess", {"mem": MemScheduler}) as r:
        handle = r.run(app(), "mem")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r.stop(handle)
        assert [w.category for w in caught] == [PendingDeprecationWarning]
        status = r.status(handle)
        assert status is not None and status.state == specs.AppState.CANCELLED


def test_validate_with_torchx_signature_is_called() -> None:
    sched = MemScheduler("s")
    sched.submit_dryrun(app(), {})  # NULL resources pass: this _validate accepts them
    assert sched.validated == ["mem"]


def test_workspace_mixin_builds_a_copy_of_the_first_role(tmp_path: Path) -> None:
    ws = tmp_path / "proj"
    ws.mkdir()
    original = app()
    with Runner("sess", {"mem": MemWorkspaceScheduler}) as r:
        assert "image_repo" in r.scheduler_run_opts("mem")
        info = r.dryrun(original, "mem", {"image_repo": "reg.io"}, workspace=str(ws))
    assert info.request["app"].roles[0].image == "reg.io/proj"
    assert original.roles[0].image == "img"  # the caller's AppDef is not modified


def test_get_runner_takes_torchx_arguments() -> None:
    with get_runner("sess", component_defaults={"utils.echo": {"msg": "y"}}) as r:
        assert r.name() == "sess"
        assert r.component_app("utils.echo", []).roles[0].args[-1] == "y"


def test_config_signatures(tmp_path: Path) -> None:
    (tmp_path / ".txconfig").write_text("[local_cwd]\nlog_dir = /from/file\nprepend_cwd = true\n")
    cfg: Dict[str, CfgVal] = {"prepend_cwd": False}
    assert config.apply("local_cwd", cfg, [str(tmp_path)]) is cfg  # dirs positional
    assert cfg == {"prepend_cwd": False, "log_dir": "/from/file"}  # values in cfg win
    cfg2: Dict[str, CfgVal] = {}
    config.apply("local_cwd", cfg2, dirs=[str(tmp_path)])
    assert cfg2 == {"log_dir": "/from/file", "prepend_cwd": True}
    cfg3: Dict[str, CfgVal] = {}
    config.load("local_cwd", io.StringIO("[local_cwd]\nlog_dir = /from/load\n"), cfg3)
    assert cfg3 == {"log_dir": "/from/load"}
    buf = io.StringIO()
    config.dump(buf, schedulers=["local_cwd"], required_only=False)
    assert buf.getvalue().startswith("[local_cwd]\n") and "log_dir = " in buf.getvalue()


def test_local_create_scheduler_takes_torchx_kwargs() -> None:
    from torchx.schedulers.local_scheduler import LocalDirectoryImageProvider, create_scheduler

    cwd = create_scheduler("sess", cache_size=10, extra_paths=None)
    d = create_scheduler("sess", image_provider_class=LocalDirectoryImageProvider)
    try:
        assert (cwd.backend, d.backend) == ("local_cwd", "local_dir")
        assert cwd.session_name == "sess"
    finally:
        cwd.close()
        d.close()
    with pytest.raises(ValueError, match="cache_size"):
        create_scheduler("sess", cache_size=0)
    # extra_paths go first on every replica's PATH, as in TorchX
    tools = create_scheduler("sess", extra_paths=["/opt/tools/bin"])
    app = specs.AppDef("p", [specs.Role("r", image="", entrypoint="true")])
    (role,) = tools.submit_dryrun(app, {}).request.roles
    assert role.replicas[0].env["PATH"].split(":")[0] == "/opt/tools/bin"


def test_small_helpers() -> None:
    assert runopts.is_type(["a"], List[str]) and not runopts.is_type(True, int)
    status = AppStatus(specs.AppState.FAILED, msg="boom")
    with pytest.raises(AppStatusError) as ei:
        status.raise_for_status()
    assert ei.value.status is status
    from torchx.components.dist import parse_nnodes

    assert parse_nnodes("2") == (1, 1, 2, "1")
    assert parse_nnodes("3x4") == (3, 3, 4, "3")
    assert parse_nnodes("1:4x8") == (1, 4, 8, "1:4")
    with pytest.raises(ValueError):
        parse_nnodes("4x")


def test_app_handles_as_torchx_07() -> None:
    assert parse_app_handle("local_cwd://sess/app-1") == ("local_cwd", "sess", "app-1")
    with pytest.raises(specs.MalformedAppHandleException, match="session name is empty"):
        parse_app_handle("local_cwd:///app")


def test_attrs_classes_are_not_dataclasses_helpers_instead() -> None:
    a = app()
    with pytest.raises(TypeError):
        dataclasses.asdict(a)  # documented: use attrs.asdict / AppDef.asdict
    assert a.asdict()["roles"][0]["entrypoint"] == "echo"
    role = a.roles[0].replace(image="other")
    assert role.image == "other" and a.roles[0].image == "img"
    with pytest.raises(ValueError):
        a.roles[0].replace(num_replicas=0)  # validators still run
    res = specs.Resource(cpu=1, gpu=0, memMB=64).replace(gpu=2)
    assert res.gpu == 2
    values = specs.macros.Values(img_root="/i", app_id="a", replica_id="0", rank0_env="X")
    assert values.replace(replica_id="1").asdict()["replica_id"] == "1"


def test_cli_main_exits_as_torchx(capsys: pytest.CaptureFixture[str]) -> None:
    from torchx.cli.main import main

    assert main(["runopts", "local_cwd"]) is None
    with pytest.raises(SystemExit) as ei:
        main(["status", "local_cwd://sess/does-not-exist-123"])
    assert ei.value.code == 1
    with pytest.raises(SystemExit) as ei:
        main(["run", "-s", "local_cwd", "utils.echo", "--nope"])
    assert ei.value.code == 2
