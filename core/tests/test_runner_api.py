"""Runner logic with an in-memory scheduler registered as a plugin (no install needed).

The Runner's behaviour against real processes is covered by the local scheduler's tests
and the end-to-end CLI tests; here: env injection, copies, errors, events, handles.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

import attrs
import pytest

from tx import hookimpl
from tx.plugins import PluginRegistry, set_registry
from tx.runner import Runner, failover
from tx.components import dist, utils
from tx.runner.handles import AppRef, RunRef, SweepRef, TrialRef, check_not_reserved, new_run_id, new_sweep_id, parse
from tx.schedulers.ids import make_unique
from tx.schedulers import DescribeAppResponse, ListAppResponse, Scheduler
from tx.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    InvalidRunConfigException,
    MalformedAppHandleException,
    Resource,
    Role,
    UnknownAppException,
    UnknownSchedulerException,
    runopts,
)
from tx.specs.status import ReplicaStatus, RoleStatus


class MemScheduler(Scheduler[Dict[str, Any]]):
    """Keeps apps in a dict; an app is SUCCEEDED as soon as it is scheduled."""

    apps: Dict[str, Dict[str, Any]] = {}

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("mem", session_name)
        self.kwargs = kwargs
        self.closed = False

    def _run_opts(self) -> runopts:
        o = runopts()
        o.add("queue", type_=str, help="queue", required=True)
        o.add("retries", type_=int, help="retries", default=0)
        return o

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Dict[str, Any]]:
        return AppDryRunInfo({"app": app, "cfg": dict(cfg)}, lambda r: f"queue={r['cfg']['queue']}")

    def schedule(self, dryrun_info: AppDryRunInfo[Dict[str, Any]]) -> str:
        app_id = f"{dryrun_info.request['app'].name}-{len(self.apps)}"
        self.apps[app_id] = dryrun_info.request
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if app_id not in self.apps:
            return None
        app = self.apps[app_id]["app"]
        return DescribeAppResponse(
            app_id=app_id, state=AppState.SUCCEEDED, num_restarts=0, roles=app.roles,
            roles_statuses=[RoleStatus(r.name, [ReplicaStatus(k, AppState.SUCCEEDED, r.name)
                                                for k in range(r.num_replicas)]) for r in app.roles],
        )

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=a, state=AppState.SUCCEEDED) for a in self.apps]

    def _cancel_existing(self, app_id: str) -> None:
        self.apps[app_id]["cancelled"] = True

    def log_iter(self, app_id: str, role_name: str, k: int = 0, *args: Any, **kwargs: Any):
        return iter([f"{role_name}/{k} line\n"])

    def close(self) -> None:
        self.closed = True


class MemPlugin:
    events: List[Any] = []

    @hookimpl
    def tx_register_schedulers(self, register):
        register("mem", MemScheduler, description="in memory")

    @hookimpl
    def tx_on_event(self, event):
        self.events.append(event)


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))  # log archive, checkpoints
    MemScheduler.apps = {}
    MemPlugin.events = []
    reg = PluginRegistry(entry_points=[])
    reg.add_plugin(MemPlugin(), "mem-plugin", "tx-test-mem", "1.0")
    old = set_registry(reg)
    try:
        with Runner(scheduler_params={"flavour": "x"}) as r:
            yield r
    finally:
        set_registry(old)


def app() -> AppDef:
    return AppDef("demo", [Role("trainer", image="img", entrypoint="python", args=["-c", "1"],
                                num_replicas=2, resource=Resource(1, 0, 64), env={"A": "1"})])


def test_explicit_parent_run_id_wins_over_the_environment(runner, monkeypatch):
    monkeypatch.setenv("TX_PARENT_RUN_ID", "from-env")
    runner.run(app(), "mem", cfg={"queue": "q"}, parent_run_id="explicit")
    assert MemScheduler.apps["demo-0"]["app"].roles[0].env["TX_PARENT_RUN_ID"] == "explicit"
    runner.run(app(), "mem", cfg={"queue": "q"})
    assert MemScheduler.apps["demo-1"]["app"].roles[0].env["TX_PARENT_RUN_ID"] == "from-env"


def test_run_injects_job_id_without_touching_the_users_app(runner, monkeypatch):
    monkeypatch.delenv("TX_PARENT_RUN_ID", raising=False)
    a = app()
    handle = runner.run(a, "mem", cfg={"queue": "q"}, parent_run_id="parent-1")
    assert handle == "mem://tx/demo-0"
    submitted = MemScheduler.apps["demo-0"]
    env = submitted["app"].roles[0].env
    ckpt = env.pop("TX_CHECKPOINT_DIR")
    assert env == {"A": "1", "TX_JOB_ID": "mem://tx/${app_id}", "TX_PARENT_RUN_ID": "parent-1",
                   "TORCHX_JOB_ID": "mem://tx/${app_id}", "TORCHX_PARENT_RUN_ID": "parent-1"}
    assert re.search(r"/checkpoints/tx/demo-[0-9a-f]{8}$", ckpt), ckpt  # this run's own: fresh, not the name's
    assert submitted["cfg"] == {"queue": "q", "retries": 0}
    assert a.roles[0].env == {"A": "1"}  # the caller's AppDef is unchanged


def test_dryrun_has_formatted_request_and_backrefs(runner):
    info = runner.dryrun(app(), "mem", cfg={"queue": "gold"})
    assert str(info) == "queue=gold"
    assert info._scheduler == "mem" and info._app.name == "demo"
    assert MemScheduler.apps == {}


def test_bad_cfg_and_bad_apps(runner):
    with pytest.raises(InvalidRunConfigException, match="required run option 'queue'"):
        runner.dryrun(app(), "mem", cfg={})
    with pytest.raises(InvalidRunConfigException, match="'retries' must be int"):
        runner.dryrun(app(), "mem", cfg={"queue": "q", "retries": "3"})
    with pytest.raises(ValueError, match="has no roles"):
        runner.dryrun(AppDef("empty"), "mem", cfg={"queue": "q"})
    with pytest.raises(ValueError, match="role 'r' has no entrypoint"):
        runner.dryrun(AppDef("x", [Role("r", image="i")]), "mem", cfg={"queue": "q"})


def test_an_unknown_run_option_is_one_clear_error_as_on_the_command_line(runner):
    with pytest.raises(InvalidRunConfigException, match=r"^unknown run option 'queeu' of mem "
                       r"\(did you mean 'queue'\?\); options: queue"):
        runner.dryrun(app(), "mem", cfg={"queue": "q", "queeu": "x"})
    with pytest.raises(InvalidRunConfigException, match="did you mean 'queue'"):
        runner.run_component("utils.echo", ["--msg", "x"], "mem", cfg={"queeu": "q"})


def test_unknown_scheduler_suggests(runner):
    with pytest.raises(UnknownSchedulerException, match="did you mean 'mem'"):
        runner.run(app(), "mme", cfg={})
    with pytest.raises(UnknownSchedulerException, match="installed: mem"):
        runner.status("nope://tx/x")
    with pytest.raises(MalformedAppHandleException):
        runner.status("mem:/tx/x")


def test_status_describe_list_logs_cancel(runner):
    handle = runner.run(app(), "mem", cfg={"queue": "q"})
    st = runner.status(handle)
    assert st.state == AppState.SUCCEEDED and [len(r.replicas) for r in st.roles] == [2]
    assert runner.wait(handle, wait_interval=0.01).state == AppState.SUCCEEDED
    assert runner.describe(handle).roles[0].name == "trainer"
    fresh = Runner()
    try:
        rebuilt = fresh.describe(handle)  # not launched by this runner: rebuilt from the scheduler
        assert rebuilt.name == "demo-0" and rebuilt.roles[0].num_replicas == 2
    finally:
        fresh.close()
    assert [a.app_handle for a in runner.list("mem")] == [handle]
    assert list(runner.log_lines(handle, "trainer", 1)) == ["trainer/1 line\n"]
    assert b"".join(runner.log_blocks(handle, "trainer", 0)) == b"trainer/0 line\n"
    runner.cancel(handle)  # already terminal: no-op
    assert "cancelled" not in MemScheduler.apps["demo-0"]
    assert runner.status("mem://tx/unknown-1") is None
    assert runner.describe("mem://tx/unknown-1") is None
    with pytest.raises(UnknownAppException):
        runner.log_lines("mem://tx/unknown-1", "trainer")


def test_scheduler_params_and_close(runner):
    sched = runner._scheduler("mem")
    assert sched.kwargs == {"flavour": "x"}
    runner.close()
    assert sched.closed


def test_events_reach_plugins(runner):
    handle = runner.run(app(), "mem", cfg={"queue": "q"})
    runner.status(handle)
    apis = [e.api for e in MemPlugin.events]
    assert apis == ["dryrun", "schedule", "status"]
    sched_ev = MemPlugin.events[1]
    assert sched_ev.app_id == "demo-0" and sched_ev.scheduler == "mem" and sched_ev.wall_time_usec >= 0
    with pytest.raises(InvalidRunConfigException):
        runner.dryrun(app(), "mem", cfg={})
    assert MemPlugin.events[-1].exception_type == "InvalidRunConfigException"


def test_each_run_gets_its_own_checkpoint_location_resume_reuses_one_and_a_roles_own_wins(runner, tmp_path):
    def env(app_id: str) -> Dict[str, str]:
        return MemScheduler.apps[app_id]["app"].roles[0].env

    first = runner.run(app(), "mem", cfg={"queue": "q"})
    runner.run(app(), "mem", cfg={"queue": "q"})  # the same app again: a new run, a new location
    assert env("demo-0")["TX_CHECKPOINT_DIR"] != env("demo-1")["TX_CHECKPOINT_DIR"]
    assert env("demo-0")["TX_CHECKPOINT_DIR"].startswith(str(tmp_path / "state" / "checkpoints" / "tx" / "demo-"))
    assert "TX_RESUME_FROM" not in env("demo-0")
    # continuing the first run's work is explicit: its recorded location, and why
    info = runner.dryrun(app(), "mem", cfg={"queue": "q"}, resume=first)
    assert info._app.roles[0].env["TX_CHECKPOINT_DIR"] == env("demo-0")["TX_CHECKPOINT_DIR"]
    runner.run(app(), "mem", cfg={"queue": "q"}, resume=first)
    assert env("demo-2")["TX_CHECKPOINT_DIR"] == env("demo-0")["TX_CHECKPOINT_DIR"]
    assert env("demo-2")["TX_RESUME_FROM"] == first
    own = AppDef("demo", [attrs.evolve(app().roles[0], env={"TX_CHECKPOINT_DIR": "s3://b/mine"})])
    runner.run(own, "mem", cfg={"queue": "q"})
    runner.run(own, "mem", cfg={"queue": "q"}, resume=first)  # the role's own wins over a resume too
    for app_id in ("demo-3", "demo-4"):
        assert env(app_id)["TX_CHECKPOINT_DIR"] == "s3://b/mine" and "TX_RESUME_FROM" not in env(app_id)
    with pytest.raises(ValueError, match="cannot resume mem://tx/nope: no such app or run"):
        runner.dryrun(app(), "mem", cfg={"queue": "q"}, resume="mem://tx/nope")
    # a scheduler that forgot the app (tx gc), or describes roles without their env: the
    # location recorded on this host when it was scheduled
    MemScheduler.apps.pop("demo-0")
    with Runner() as other:
        info = other.dryrun(app(), "mem", cfg={"queue": "q"}, resume=first)
    assert info._app.roles[0].env["TX_CHECKPOINT_DIR"] == env("demo-2")["TX_CHECKPOINT_DIR"]


# -- handles, parsed once by syntax (tx.runner.handles) ------------------------------------


@pytest.mark.parametrize("text, ref", [
    ("local_cwd://tx/echo-bcd123", AppRef("local_cwd", "tx", "echo-bcd123")),
    ("kubernetes://tx/ns:echo-x", AppRef("kubernetes", "tx", "ns:echo-x")),
    ("slurm://a/b/1234", AppRef("slurm", "a/b", "1234")),
    ("local_cwd://tx/run-train-0123abcd", RunRef("local_cwd", "tx", "run-train-0123abcd")),
    ("local_cwd://tx/run-0123abcd", RunRef("local_cwd", "tx", "run-0123abcd")),
    ("local_cwd://tx/sweep-lr-0123abcd", SweepRef("local_cwd", "tx", "sweep-lr-0123abcd")),
    ("local_cwd://tx/sweep-lr-0123abcd/4", TrialRef(SweepRef("local_cwd", "tx", "sweep-lr-0123abcd"), 4)),
    ("local_cwd://tx/run-Train-0123abcd", AppRef("local_cwd", "tx", "run-Train-0123abcd")),
])
def test_the_kind_follows_from_the_text(text, ref):
    assert parse(text) == ref
    assert parse(text).handle == text and parse(parse(text)) == ref


def test_a_malformed_handle_is_refused():
    with pytest.raises(MalformedAppHandleException):
        parse("no-scheme")


def test_new_ids_parse_as_their_kind():
    assert isinstance(parse(f"s://tx/{new_run_id('My Train')}"), RunRef)
    assert isinstance(parse(f"s://tx/{new_sweep_id('lr')}"), SweepRef)
    assert new_run_id("My Train").startswith("run-my-train-")


@pytest.mark.parametrize("name", ["run-x", "RUN_x", "sweep.lr", "Sweep-1", "run", "SWEEP"])
def test_reserved_app_names_are_refused(name):
    with pytest.raises(ValueError, match="keeps for run and sweep handles"):
        check_not_reserved(name)


@pytest.mark.parametrize("name", ["runner", "train", "sweeper-1", "rerun-x"])
def test_other_names_pass(name):
    assert check_not_reserved(name) == name


def test_an_app_named_run_could_take_a_run_ids_form():
    """Why ``run`` alone is reserved: its ids are ``run-<random>``, and one in a few hundred ends
    in 8 characters that are hex digits, the form of a run's id."""
    ids = (make_unique("run", 13) for _ in range(20000))
    assert any(isinstance(parse(f"s://tx/{i}"), RunRef) for i in ids)


@pytest.mark.parametrize("script", ["run.py", "sweep.py", "run_train.py", "dir/Run.py"])
def test_a_name_derived_from_the_program_is_kept_out_of_the_reserved_ones(script):
    for app in (utils.python(script=script), dist.ddp(script=script), dist.ddp(script=script, name="exp/")):
        assert app.name.startswith("app-") and check_not_reserved(app.name) == app.name
    assert dist.ddp(script="train.py").name == utils.python(script="train.py").name == "train"


def test_an_app_named_like_a_run_is_refused_before_anything_is_submitted(runner):
    app = AppDef("run-x", [Role("r", image="img", entrypoint="echo")])
    with pytest.raises(ValueError, match="'run-x' starts with 'run-'"):
        runner.run(app, "mem", cfg={"queue": "q"})
    assert MemScheduler.apps == {}


def test_a_run_handle_without_a_record_is_no_run_not_a_scheduler_question(runner):
    """The handle's form says "run": with no record on this host the answer is that no such
    run is kept here (before, a missing record made it an app id asked of the scheduler)."""
    with pytest.raises(failover.UnknownRunError):
        runner.status("mem://tx/run-x-0123abcd")


# -- run options, merged once per hop (tx.runner.options) ----------------------------------
def _txconfig(tmp_path, monkeypatch, text):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / ".txconfig").write_text(text)
    monkeypatch.delenv("TXCONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "proj"))
    monkeypatch.chdir(tmp_path / "proj")


def test_a_python_api_dryrun_sees_the_options_tx_run_sees(runner, tmp_path, monkeypatch):
    """-cfg/the dict first, then .txconfig, then TX_*: the CLI's order, now the API's too
    (the API read no .txconfig before, so a required option set there was missing)."""
    from tx.runner import options

    _txconfig(tmp_path, monkeypatch, "[mem]\nqueue = from-file\nretries = 2\n")
    monkeypatch.setenv("TX_RETRIES", "7")
    assert runner.dryrun(app(), "mem")._cfg == {"queue": "from-file", "retries": 2}
    assert runner.dryrun(app(), "mem", cfg={"retries": 1})._cfg == {"queue": "from-file", "retries": 1}
    opts = runner.scheduler_run_opts("mem")
    assert options.merge("mem", opts, ["retries=1"]) == runner.dryrun(app(), "mem", cfg={"retries": 1})._cfg
    (tmp_path / "proj" / ".txconfig").write_text("[mem]\nqueue = q\n")
    assert runner.dryrun(app(), "mem")._cfg == {"queue": "q", "retries": 7}


def test_a_fallback_hop_gets_the_options_merged_when_the_run_was_made(runner, tmp_path, monkeypatch):
    """Merged at creation, once, in the launching process (TX_* too: before, only .txconfig
    was, and each hop read TX_* in whichever process took the failover step)."""
    _txconfig(tmp_path, monkeypatch, "[mem]\nqueue = from-file\n")
    monkeypatch.setenv("TX_RETRIES", "5")
    handle = runner.run_with_fallback(app(), ["mem"], watch=False)
    assert failover.load_record(handle).chain == [{"scheduler": "mem", "cfg": {"queue": "from-file", "retries": 5}}]


def test_twice_in_cfg_texts_is_one_error(runner):
    from tx.runner import options

    with pytest.raises(InvalidRunConfigException, match="given twice"):
        options.merge("mem", runner.scheduler_run_opts("mem"), ["queue=a", "queue=b"])
