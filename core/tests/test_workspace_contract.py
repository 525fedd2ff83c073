"""The workspace contract: a scheduler names a kind, the Runner builds it through the
registry, and a kind that is not installed is one line naming the distribution."""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional

import attrs
import pytest

from tx import hookimpl
from tx.plugins import pip_install
from tx.runner import Runner
from tx.schedulers import DescribeAppResponse, ListAppResponse, Scheduler
from tx.specs import AppDef, AppDryRunInfo, Resource, Role, runopts
from tx.testing import isolated_registry, register_plugin
from tx.workspace import Workspace, WorkspaceError, find_workspace, get_workspace
from tx.workspace.dir_workspace import DirWorkspace


class StampWorkspace(Workspace):
    """Kind ``stamp``: the role's image becomes ``<image>+<basename of workspace>@<tag>``."""

    kind = "stamp"
    built: List[str] = []

    def run_opts(self) -> runopts:
        o = runopts()
        o.add("tag", type_=str, default="latest", help="tag of the built image")
        return o

    def build(self, role: Role, workspace: str, cfg: Mapping[str, Any]) -> Role:
        self.built.append(workspace)
        StampWorkspace.cfg = dict(cfg)
        return attrs.evolve(role, image=f"{role.image}+{os.path.basename(workspace)}@{cfg['tag']}")


class KindScheduler(Scheduler[AppDef]):
    workspace_kind = "stamp"

    def __init__(self, session_name: str, kind: Optional[str] = "stamp", **_: Any) -> None:
        super().__init__("kinded", session_name)
        self.workspace_kind = kind  # type: ignore[misc]

    def _run_opts(self) -> runopts:
        o = runopts()
        o.add("queue", type_=str, default="q", help="queue")
        return o

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, Any]) -> None:
        pass

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[AppDef]:
        return AppDryRunInfo(app, lambda a: a.roles[0].image)

    def schedule(self, dryrun_info: AppDryRunInfo[AppDef]) -> str:
        return "x"

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        return None

    def list(self) -> List[ListAppResponse]:
        return []

    def _cancel_existing(self, app_id: str) -> None:
        pass


@pytest.fixture
def tx_registry():
    with isolated_registry() as reg:
        yield reg


class Plugin:
    @hookimpl
    def tx_register_schedulers(self, register):
        register("kinded", KindScheduler)
        register("dockerish", lambda session_name, **kw: KindScheduler(session_name, kind="docker"))

    @hookimpl
    def tx_register_workspaces(self, register):
        register("stamp", StampWorkspace, description="test kind")


def _app() -> AppDef:
    return AppDef("a", [Role("r", image="base", entrypoint="true", resource=Resource(1, 0, 1)),
                        Role("s", image="other", entrypoint="true", resource=Resource(1, 0, 1))])


def test_runner_builds_the_schedulers_kind_and_patches_only_the_first_role(tx_registry, tmp_path):
    StampWorkspace.built = []
    with register_plugin(Plugin(), name="kinds"), Runner() as runner:
        app = _app()
        info = runner.dryrun(app, "kinded", {"tag": "v1"}, workspace=str(tmp_path))
        assert [r.image for r in info.request.roles] == [f"base+{tmp_path.name}@v1", "other"]
        assert app.roles[0].image == "base"  # the caller's app is unchanged
        assert StampWorkspace.built == [str(tmp_path)]
        # replicas of a scheduler that does not run on this host pull the image: push it
        assert StampWorkspace.cfg["image_repo_required"] is True and StampWorkspace.cfg["tag"] == "v1"
        # the kind's options are the scheduler's, after its own
        assert [k for k, _ in runner.scheduler_run_opts("kinded")] == ["queue", "tag"]
        # without a workspace nothing is built
        runner.dryrun(_app(), "kinded", {})
        assert StampWorkspace.built == [str(tmp_path)]


def test_a_kind_that_is_not_installed_names_the_distribution(tx_registry, tmp_path):
    with register_plugin(Plugin(), name="kinds"), Runner() as runner:
        assert "tag" not in dict(runner.scheduler_run_opts("dockerish"))
        hint = re.escape(pip_install("tx-scheduler-docker"))
        with pytest.raises(WorkspaceError, match=rf"^workspace kind 'docker' is not installed: {hint}$"):
            runner.dryrun(_app(), "dockerish", {}, workspace=str(tmp_path))
    with pytest.raises(WorkspaceError, match="'nope' is not installed$"):
        get_workspace("nope")
    assert find_workspace("nope") is None


def test_dir_kind_copies_into_job_dir_and_honours_txignore(tmp_path):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "train.py").write_text("print(1)\n")
    (ws / "sub" / "big.bin").write_text("x")
    (ws / ".txignore").write_text("*.bin\n")
    kind = get_workspace("dir")
    assert isinstance(kind, DirWorkspace) and "job_dir" in dict(kind.run_opts())
    role = Role("r", image="img", entrypoint="python")
    assert kind.build(role, str(ws), {"job_dir": None}) is role  # no job_dir: unchanged
    job = tmp_path / "job"
    new = kind.build(role, str(ws), {"job_dir": str(job)})
    assert new.image == str(job) and role.image == "img"
    assert sorted(p.relative_to(job).as_posix() for p in job.rglob("*") if p.is_file()) == [".txignore", "train.py"]
    with pytest.raises(WorkspaceError, match="already exists"):
        kind.build(role, str(ws), {"job_dir": str(job)})


def test_scheduler_without_a_kind_ignores_the_workspace(tx_registry, tmp_path):
    sched = KindScheduler("s", kind=None)
    assert sched.workspace_opts() is None
    assert sched.build_workspace(Role("r", image="i", entrypoint="e"), str(tmp_path), {}) is None


def test_env_contract_sets_torchx_names():
    from tx.schedulers import env

    got = env.replica_env(app_id="a-1", role_name="trainer", replica_id="3", rank0_host="h0",
                          role_idx=1, num_replicas=4)
    want: Dict[str, str] = {
        "TX_APP_ID": "a-1", "TX_ROLE_NAME": "trainer", "TX_REPLICA_ID": "3", "TX_RANK0_HOST": "h0",
        "TX_ROLE_IDX": "1", "TX_NUM_REPLICAS": "4",
        "TORCHX_APP_ID": "a-1", "TORCHX_ROLE_NAME": "trainer", "TORCHX_REPLICA_IDX": "3",
        "TORCHX_RANK0_HOST": "h0", "TORCHX_ROLE_IDX": "1", "TORCHX_NUM_REPLICAS": "4",
    }
    assert got == want
    assert "TX_RANK0_HOST" not in env.replica_env(app_id="a", role_name="r", replica_id="0")
    # a user's explicit TorchX value is kept; tracker configs are aliased too
    assert env.with_torchx_names({"TX_JOB_ID": "j", "TORCHX_JOB_ID": "mine",
                                  "TX_TRACKER_MLFLOW_CONFIG": "c"}) == {
        "TX_JOB_ID": "j", "TORCHX_JOB_ID": "mine", "TX_TRACKER_MLFLOW_CONFIG": "c",
        "TORCHX_TRACKER_MLFLOW_CONFIG": "c"}
