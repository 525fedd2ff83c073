"""tx.tracker's API: building trackers from the registry, configuration from .txconfig and
the environment, AppRun inside a job, rank 0, the Runner passing trackers to replicas, and
what the tracker code costs a run that does not use it."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, Dict, Mapping, Optional

import pytest

from tx import hookimpl
from tx.plugins import PluginError, pip_install
from tx.runner import Runner
from tx.schedulers import Scheduler
from tx.specs import AppDef, AppDryRunInfo, Resource, Role, runopts
from tx.testing import isolated_registry, register_plugin
from tx.config.environ import tracker_config_var
from tx.tracker import (
    AppRun,
    TrackerBase,
    TrackerSource,
    app_run_from_env,
    build_trackers,
    get_configured_trackers,
    is_rank0,
    trackers_from_environ,
)
from tx.tracker.backend.fsspec import FsspecTracker, create

TRACKER_VARS = ("TX_TRACKERS", "TORCHX_TRACKERS", "TX_JOB_ID", "TORCHX_JOB_ID", "TX_PARENT_RUN_ID",
                "TORCHX_PARENT_RUN_ID", "TX_TRACKER_FILE_CONFIG", "TORCHX_TRACKER_FILE_CONFIG", "RANK",
                "TX_REPLICA_ID", "TORCHX_REPLICA_IDX", "TX_ROLE_IDX", "TORCHX_ROLE_IDX", "TXCONFIG")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in TRACKER_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


def write_txconfig(path, text: str) -> None:
    path.write_text(textwrap.dedent(text))


# -- configuration ---------------------------------------------------------------------------
def test_nothing_configured():
    assert get_configured_trackers() == {}
    assert trackers_from_environ() == []


def test_txconfig_names_trackers_and_their_configs(tmp_path):
    write_txconfig(tmp_path / "work" / ".txconfig", """
        [tx:tracker]
        file =
        other =

        [tracker:file]
        config = /shared/runs

        [tracker:unused]
        config = x
        """)
    assert get_configured_trackers() == {"file": "/shared/runs", "other": None}


def test_environment_replaces_names_and_overrides_configs(tmp_path, monkeypatch):
    write_txconfig(tmp_path / "work" / ".txconfig", """
        [tx:tracker]
        file =
        [tracker:file]
        config = /from/file
        [tracker:mlflow]
        config = http://from-file:5000
        """)
    monkeypatch.setenv("TX_TRACKERS", "mlflow, file")
    assert get_configured_trackers() == {"mlflow": "http://from-file:5000", "file": "/from/file"}
    monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", "/from/env")
    assert get_configured_trackers() == {"mlflow": "http://from-file:5000", "file": "/from/env"}
    monkeypatch.setenv("TX_TRACKERS", "")  # set but empty: no tracker
    assert get_configured_trackers() == {}


def test_torchx_names_are_read_where_tx_names_are_unset(monkeypatch):
    monkeypatch.setenv("TORCHX_TRACKERS", "file")
    monkeypatch.setenv("TORCHX_TRACKER_FILE_CONFIG", "/torchx/dir")
    assert get_configured_trackers() == {"file": "/torchx/dir"}
    monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", "/tx/dir")
    assert get_configured_trackers() == {"file": "/tx/dir"}
    assert tracker_config_var("my-tracker") == "TX_TRACKER_MY-TRACKER_CONFIG"


# -- building trackers -----------------------------------------------------------------------
def test_file_tracker_is_built_in(tmp_path):
    with isolated_registry() as reg:
        assert reg.get("trackers", "file").distribution == "tx-core"
        (t,) = build_trackers({"file": str(tmp_path / "r")})
    assert isinstance(t, FsspecTracker) and t.root_dir == str(tmp_path / "r")


def test_a_dotted_factory_path_is_a_tracker_name(tmp_path):
    with isolated_registry():
        (t,) = build_trackers({"tx.tracker.backend.fsspec:create": str(tmp_path)})
    assert isinstance(t, FsspecTracker)


@pytest.fixture
def log_to_capsys(capsys):
    """tx.log binds stderr when it first renders: rebind it to capsys's, and back after."""
    from tx import log

    log.configure()
    yield capsys
    log.configure()


def test_unknown_trackers_are_skipped_with_a_warning(log_to_capsys, tmp_path):
    capsys = log_to_capsys
    with isolated_registry():
        trackers = build_trackers({"mlflow": None, "nosuch": None, "file": str(tmp_path), "no.mod:create": None})
    assert [type(t) for t in trackers] == [FsspecTracker]
    err = capsys.readouterr().err
    assert pip_install("tx-tracker-mlflow") in err
    assert "unknown tracker (installed: file)" in err
    assert "no.mod:create" in err


class Recorder(TrackerBase):
    """An in-memory tracker (one process): for API tests only."""

    def __init__(self, config: Optional[str] = None) -> None:
        self.config = config
        self.calls: list = []

    def add_artifact(self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        self.calls.append(("artifact", run_id, name, path, metadata))

    def artifacts(self, run_id: str) -> Dict[str, Any]:
        return {}

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        self.calls.append(("metadata", run_id, kwargs))

    def metadata(self, run_id: str) -> Dict[str, object]:
        return {}

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        self.calls.append(("source", run_id, source_id, artifact_name))

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> list:
        return [TrackerSource(c[2], c[3]) for c in self.calls if c[0] == "source" and c[1] == run_id]

    def run_ids(self, **kwargs: str) -> list:
        return sorted({c[1] for c in self.calls if c[0] == "source" and c[2] == kwargs.get("parent_run_id")})


class TrackerPlugin:
    @staticmethod
    @hookimpl
    def tx_register_trackers(register):
        register("rec", Recorder)
        register("bad", lambda config: object())
        register("needs-sdk", Recorder, requires=("surely_not_installed_sdk_xyz",), install="pip install tx-tracker-x")


def test_factories_get_their_config_and_must_return_a_tracker():
    with isolated_registry(), register_plugin(TrackerPlugin, name="trackers"):
        (t,) = build_trackers({"rec": "the-config"})
        assert isinstance(t, Recorder) and t.config == "the-config"
        assert build_trackers({"rec": ""})[0].config is None
        with pytest.raises(TypeError, match="'bad': factory returned object, not a TrackerBase"):
            build_trackers({"bad": None})
        with pytest.raises(PluginError, match="surely_not_installed_sdk_xyz.*pip install tx-tracker-x"):
            build_trackers({"needs-sdk": None})


# -- AppRun ----------------------------------------------------------------------------------
def test_app_run_without_trackers_does_nothing(monkeypatch):
    run = AppRun.run_from_env()
    assert run.id == "<UNDEFINED>" and run.backends == []
    run.add_metadata(a=1)
    run.add_artifact("m", "/x")
    run.add_source("p")
    assert run.sources() == [] and run.children() == []
    monkeypatch.setenv("TX_JOB_ID", "local_cwd://tx/a-1")
    assert app_run_from_env().job_id() == "local_cwd://tx/a-1"


def test_app_run_from_env_records_to_every_tracker(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_JOB_ID", "local_cwd://tx/train-1")
    monkeypatch.setenv("TX_TRACKERS", "file,rec")
    monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", str(tmp_path / "runs"))
    monkeypatch.setenv("TX_PARENT_RUN_ID", "local_cwd://tx/prep-0")
    with isolated_registry(), register_plugin(TrackerPlugin, name="trackers"):
        run = AppRun.run_from_env()
        assert AppRun.run_from_env() is run  # made once per process and environment
        file_tracker, rec = run.backends
        run.add_metadata(lr=0.1)
        run.add_artifact("model", "/ckpt/m.pt", {"acc": 0.9})
    assert rec.calls == [
        ("source", "local_cwd://tx/train-1", "local_cwd://tx/prep-0", None),
        ("metadata", "local_cwd://tx/train-1", {"lr": 0.1}),
        ("artifact", "local_cwd://tx/train-1", "model", "/ckpt/m.pt", {"acc": 0.9}),
    ]
    files = create(str(tmp_path / "runs"))
    assert files.metadata("local_cwd://tx/train-1") == {"lr": 0.1}
    assert files.artifacts("local_cwd://tx/train-1")["model"].metadata == {"acc": 0.9}
    assert [s.parent.id for s in run.sources()] == ["local_cwd://tx/prep-0"]
    assert [c.id for c in AppRun("local_cwd://tx/prep-0", [files]).children()] == ["local_cwd://tx/train-1"]


def test_only_rank0_records_the_parent(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_JOB_ID", "job-2")
    monkeypatch.setenv("TORCHX_TRACKERS", "rec")  # TorchX's names work too
    monkeypatch.setenv("TORCHX_PARENT_RUN_ID", "parent")
    monkeypatch.setenv("RANK", "1")
    with isolated_registry(), register_plugin(TrackerPlugin, name="trackers"):
        (rec,) = AppRun.run_from_env().backends
        assert rec.calls == []
        monkeypatch.setenv("RANK", "0")
        (rec,) = AppRun.run_from_env().backends
        assert rec.calls == [("source", "job-2", "parent", None)]


@pytest.mark.parametrize("env, expected", [
    ({}, True),
    ({"RANK": "0"}, True),
    ({"RANK": "3"}, False),
    ({"TX_REPLICA_ID": "0"}, True),
    ({"TX_REPLICA_ID": "1"}, False),
    ({"TORCHX_REPLICA_IDX": "1"}, False),
    ({"TX_REPLICA_ID": "1", "RANK": "0"}, True),   # torchrun's global rank wins over the node
    ({"TX_ROLE_IDX": "1", "RANK": "0"}, False),     # rank 0 of a second role is not the job's
    ({"TX_ROLE_IDX": "0", "TX_REPLICA_ID": "0"}, True),
])
def test_is_rank0(env, expected):
    assert is_rank0(env) is expected


# -- the Runner passes trackers to replicas -------------------------------------------------
class EnvScheduler(Scheduler[Dict[str, Any]]):
    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("envsched", session_name)

    def _run_opts(self) -> runopts:
        return runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Dict[str, Any]]:
        return AppDryRunInfo({"env": dict(app.roles[0].env)}, repr)

    def schedule(self, dryrun_info: AppDryRunInfo[Dict[str, Any]]) -> str:
        raise NotImplementedError

    def describe(self, app_id: str) -> None:
        return None

    def _cancel_existing(self, app_id: str) -> None:
        pass

    def list(self) -> list:
        return []


class EnvPlugin:
    @staticmethod
    @hookimpl
    def tx_register_schedulers(register):
        register("envsched", EnvScheduler)


def dryrun_env(parent: Optional[str] = None) -> Dict[str, str]:
    app = AppDef("a", [Role("r", image="i", entrypoint="true", resource=Resource(1, 0, 64))])
    with isolated_registry(), register_plugin(EnvPlugin, name="envsched"), Runner() as runner:
        return runner.dryrun(app, "envsched", parent_run_id=parent).request["env"]


def test_runner_passes_configured_trackers_to_every_replica(tmp_path, monkeypatch):
    env = dryrun_env()
    assert not [k for k in env if "TRACKER" in k or "PARENT" in k]
    write_txconfig(tmp_path / "work" / ".txconfig", """
        [tx:tracker]
        file =
        mlflow =
        [tracker:file]
        config = /shared/runs
        """)
    monkeypatch.setenv("TX_TRACKER_MLFLOW_CONFIG", "http://127.0.0.1:5050")
    env = dryrun_env(parent="local_cwd://tx/prep-1")
    assert {k: v for k, v in env.items() if "TRACKER" in k or "PARENT" in k} == {
        "TX_TRACKERS": "file,mlflow", "TORCHX_TRACKERS": "file,mlflow",
        "TX_TRACKER_FILE_CONFIG": "/shared/runs", "TORCHX_TRACKER_FILE_CONFIG": "/shared/runs",
        "TX_TRACKER_MLFLOW_CONFIG": "http://127.0.0.1:5050", "TORCHX_TRACKER_MLFLOW_CONFIG": "http://127.0.0.1:5050",
        "TX_PARENT_RUN_ID": "local_cwd://tx/prep-1", "TORCHX_PARENT_RUN_ID": "local_cwd://tx/prep-1",
    }


# -- import cost -------------------------------------------------------------------------------
PROBE = """
from tx.cli.main import main
assert main(["--version"]) == 0
from typing import Any
from tx import hookimpl
from tx.runner import Runner
from tx.config import configured_trackers
from tx.schedulers import Scheduler
from tx.specs import AppDef, AppDryRunInfo, Resource, Role, runopts
from tx.testing import isolated_registry, register_plugin

assert configured_trackers() == {}

class S(Scheduler):
    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("s", session_name)
    def _run_opts(self): return runopts()
    def _submit_dryrun(self, app, cfg): return AppDryRunInfo(app, repr)
    def schedule(self, dryrun_info): raise NotImplementedError
    def describe(self, app_id): return None
    def _cancel_existing(self, app_id): pass
    def list(self): return []

class P:
    @staticmethod
    @hookimpl
    def tx_register_schedulers(register):
        register("s", S)

app = AppDef("a", [Role("r", image="i", entrypoint="true", resource=Resource(1, 0, 64))])
with isolated_registry(), register_plugin(P, name="p"), Runner() as runner:
    env = runner.dryrun(app, "s").request.roles[0].env
assert "TX_JOB_ID" in env and "TX_TRACKERS" not in env, env
"""


def test_a_run_without_trackers_imports_no_tracker_code(tmp_path):
    probe = PROBE + "\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith(('tx.tracker', 'fsspec'))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=str(tmp_path / "work"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    # positive control: with a tracker configured the same dryrun does read the config
    (tmp_path / "work" / ".txconfig").write_text("[tx:tracker]\nfile =\n")
    out = subprocess.run([sys.executable, "-c", PROBE.replace('"TX_TRACKERS" not in env', '"TX_TRACKERS" in env')
                          .replace("assert configured_trackers() == {}", "")],
                         capture_output=True, text=True, cwd=str(tmp_path / "work"))
    assert out.returncode == 0, out.stderr
