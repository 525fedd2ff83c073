"""Runner sweeps (tx.runner.sweep) against an in-memory scheduler whose app states a test
sets: trial expansion into apps, the replica env, validation before submitting, the native
array contract, max_parallel, cancel and resume. Real processes: tests/test_sweep_e2e.py."""
from __future__ import annotations

import itertools
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

import pytest

from tx.runner import Runner
from tx.runner import sweep as sw
from tx.schedulers import DescribeAppResponse, ListAppResponse, Scheduler
from tx.specs import AppDef, AppDryRunInfo, AppState, Resource, Role
from tx.specs.sweep import SweepFormatError, SweepSpec


class StateScheduler(Scheduler[Dict[str, Any]]):
    """Apps live in a dict; each is RUNNING until a test sets its state."""

    apps: Dict[str, Dict[str, Any]] = {}
    array_calls: List[int] = []

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("mem", session_name)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[Dict[str, Any]]:
        return AppDryRunInfo({"app": app}, lambda r: f"app {r['app'].name}")

    def schedule(self, dryrun_info: AppDryRunInfo[Dict[str, Any]]) -> str:
        app_id = f"app{len(self.apps)}"
        self.apps[app_id] = {"app": dryrun_info.request["app"], "state": AppState.RUNNING}
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        a = self.apps.get(app_id)
        if a is None:
            return None
        return DescribeAppResponse(app_id=app_id, state=a["state"], msg="boom" if a["state"] == AppState.FAILED else "")

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=k, state=v["state"]) for k, v in self.apps.items()]

    def _cancel_existing(self, app_id: str) -> None:
        self.apps[app_id]["state"] = AppState.CANCELLED


class ArrayScheduler(StateScheduler):
    """Submits a sweep as one array request (array ``n``'s ids ``arr<n>_<i>``), at most 4
    trials; like AWS Batch, no array of a single trial."""

    sweep_array_limit = 4
    bounds: List[Optional[int]] = []

    def submit_sweep_dryrun(self, trials: Sequence[AppDryRunInfo[Any]], max_parallel: Optional[int]) -> Any:
        if len(trials) < 2:
            return None
        return AppDryRunInfo({"trials": [t.request for t in trials], "max_parallel": max_parallel},
                             lambda r: f"array of {len(r['trials'])} %{r['max_parallel']}")

    def schedule_sweep(self, dryrun_info: AppDryRunInfo[Any]) -> List[str]:
        n = len(self.array_calls)
        self.array_calls.append(len(dryrun_info.request["trials"]))
        self.bounds.append(dryrun_info.request["max_parallel"])
        ids = [f"arr{n}_{i}" for i in range(len(dryrun_info.request["trials"]))]
        for i, t in zip(ids, dryrun_info.request["trials"]):
            self.apps[i] = {"app": t["app"], "state": AppState.RUNNING}
        return ids


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    StateScheduler.apps = {}
    StateScheduler.array_calls = []
    ArrayScheduler.bounds = []
    with Runner(scheduler_factories={"mem": StateScheduler, "arr": ArrayScheduler}) as r:
        yield r


@pytest.fixture
def component(tmp_path):
    path = tmp_path / "comp.py"
    path.write_text(
        "import tx.specs as specs\n\n"
        "def train(lr: float, batch: int = 32, *script_args: str) -> specs.AppDef:\n"
        '    """Train.\n\n    Args:\n        lr: learning rate\n        batch: batch size\n'
        '        script_args: more\n    """\n'
        "    return specs.AppDef('train', [specs.Role('trainer', image='img', entrypoint='python',\n"
        "        args=['train.py', f'--lr={lr}', f'--batch={batch}', *script_args], num_replicas=2,\n"
        "        resource=specs.Resource(1, 0, 64))])\n")
    return f"{path}:train"


def grid(**values: List[Any]) -> SweepSpec:
    return SweepSpec(grid=values)


def submitted_apps() -> List[AppDef]:
    return [a["app"] for a in StateScheduler.apps.values()]


def test_each_trial_gets_its_values_and_the_sweep_env_in_every_replica(runner, component):
    handle = runner.run_sweep(component, grid(lr=[0.1, 1.0], batch=[8, 16, 32]), "mem",
                              ["--", "--opt=${batch}"], env={"LR": "${lr}"})
    assert handle.startswith("mem://tx/sweep-train-")
    apps = submitted_apps()
    assert len(apps) == 6
    for i, (lr, batch) in enumerate(itertools.product([0.1, 1.0], [8, 16, 32])):
        role = apps[i].roles[0]
        assert role.args == ["train.py", f"--lr={lr}", f"--batch={batch}", f"--opt={batch}"]
        assert role.env["LR"] == str(lr)
        assert role.env["TX_SWEEP_ID"] == handle and role.env["TX_TRIAL_INDEX"] == str(i)
        assert json.loads(role.env["TX_TRIAL_PARAMS"]) == {"lr": lr, "batch": batch}
    # each trial resumes only its own checkpoints, although the trials' apps share one name
    ckpts = [a.roles[0].env["TX_CHECKPOINT_DIR"] for a in apps]
    assert len(set(ckpts)) == 6 and all(c.endswith(f"trial-{i}") for i, c in enumerate(ckpts))
    status = runner.sweep_status(handle)
    assert [t.state for t in status.trials] == [AppState.RUNNING] * 6
    assert status.counts() == {"RUNNING": 6}


@pytest.mark.parametrize("spec, args, message", [
    (grid(momentum=[0.9]), [], "parameter 'momentum' is not an argument of component"),
    (grid(lr=["fast"]), [], "trial 0 (lr=fast): .*lr"),
    (grid(lr=[0.1], batch=[1, "big"]), [], "trial 1 (lr=0.1 batch=big)"),
    (SweepSpec(), [], "no parameters"),
    (grid(lr=[]), [], "'lr' has no values"),
])
def test_bad_sweeps_fail_in_one_line_before_anything_is_submitted(runner, component, spec, args, message):
    with pytest.raises(SweepFormatError) as e:
        runner.run_sweep(component, spec, "mem", args)
    assert "\n" not in str(e.value)
    import re
    assert re.search(re.escape(message).replace(r"\.\*", ".*"), str(e.value)), str(e.value)
    assert StateScheduler.apps == {}


def test_an_appdef_parameter_must_be_used(runner):
    app = AppDef("a", [Role("r", image="i", entrypoint="echo", args=["${x}"], resource=Resource(1, 0, 1))])
    with pytest.raises(SweepFormatError, match=r"parameter 'y' is not used: put \$\{y\}"):
        runner.dryrun_sweep(app, grid(x=[1], y=[2]), "mem")
    info = runner.dryrun_sweep(app, grid(x=[1, 2]), "mem")
    assert [t._app.roles[0].args for t in info.trials] == [["1"], ["2"]]
    assert "2 requests, one per trial (mem has no native array)" in str(info) and "x=2" in str(info)


def test_native_array_is_one_call_and_its_limit_is_checked_first(runner, component):
    info = runner.dryrun_sweep(component, grid(lr=[1, 2, 3]), "arr", max_parallel=2)
    assert "one native array request for 3 trials, at most 2 at once" in str(info)
    assert "array of 3 %2" in str(info)
    handle = runner.schedule_sweep(info)
    assert ArrayScheduler.array_calls == [3]
    assert [t.app_handle for t in runner.sweep_status(handle).trials] == [f"arr://tx/arr0_{i}" for i in range(3)]
    with pytest.raises(SweepFormatError, match="5 trials are more than arr's array limit of 4"):
        runner.dryrun_sweep(component, grid(lr=[1, 2, 3, 4, 5]), "arr")


def test_max_parallel_submits_the_rest_as_trials_finish(runner, component):
    info = runner.dryrun_sweep(component, grid(lr=[1, 2, 3, 4, 5]), "mem", max_parallel=2)
    handle = sw.run_sweep(runner.engine, info, supervise=False)
    assert len(StateScheduler.apps) == 2
    assert [t.state for t in runner.sweep_status(handle).trials][2:] == [AppState.UNSUBMITTED] * 3
    assert sw.submit_pending(runner.engine, handle) == 3  # nothing finished: no room
    StateScheduler.apps["app0"]["state"] = AppState.SUCCEEDED
    assert sw.submit_pending(runner.engine, handle) == 2
    assert submitted_apps()[2].roles[0].env["TX_TRIAL_INDEX"] == "2"
    runner.cancel_sweep(handle)
    assert sw.submit_pending(runner.engine, handle) == 0
    states = [t.state for t in runner.sweep_status(handle).trials]
    assert states == [AppState.SUCCEEDED, AppState.CANCELLED, AppState.CANCELLED, AppState.CANCELLED,
                      AppState.CANCELLED]
    assert len(StateScheduler.apps) == 3  # trials 3 and 4 were never submitted


S, F, C, R = AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED, AppState.RUNNING
RESUME_TABLE = [
    [S, S, S],
    [F, S, C],
    [F, F, F, F],
    [R, F, S, C, F, R],
    [C],
    [S, R, R, F, S, S, C, C, F, S],
]


@pytest.mark.parametrize("states", RESUME_TABLE)
def test_resume_submits_exactly_the_failed_and_cancelled_trials(runner, component, states):
    handle = runner.run_sweep(component, grid(lr=list(range(len(states)))), "mem")
    for i, s in enumerate(states):
        StateScheduler.apps[f"app{i}"]["state"] = s
    before = {t.index: t.app_handle for t in runner.sweep_status(handle).trials}
    resumed = runner.resume_sweep(handle)
    expected = [i for i, s in enumerate(states) if s in (F, C)]
    assert resumed == expected
    after = runner.sweep_status(handle).trials
    for t in after:
        if t.index in expected:
            assert t.attempts == 2 and t.app_handle != before[t.index] and t.state == R
            app = StateScheduler.apps[t.app_handle.rsplit("/", 1)[1]]["app"]
            assert app.roles[0].env["TX_TRIAL_INDEX"] == str(t.index)
            assert app.roles[0].env["TX_SWEEP_ID"] == handle
        else:
            assert t.attempts == 1 and t.app_handle == before[t.index] and t.state == states[t.index]
    assert len(StateScheduler.apps) == len(states) + len(expected)
    assert runner.resume_sweep(handle) == []  # the new attempts run: nothing to resume


def test_a_native_sweep_resumes_as_one_array_of_exactly_its_failed_and_cancelled(runner, component):
    handle = runner.run_sweep(component, grid(lr=[0, 1, 2, 3]), "arr", max_parallel=3)
    for app_id, state in (("arr0_0", S), ("arr0_1", F), ("arr0_2", R), ("arr0_3", C)):
        StateScheduler.apps[app_id]["state"] = state
    assert runner.resume_sweep(handle) == [1, 3]
    # one request for both, bounded by the room trial 2 leaves under max_parallel
    assert ArrayScheduler.array_calls == [4, 2] and ArrayScheduler.bounds == [3, 2]
    trials = runner.sweep_status(handle).trials
    assert [(t.attempts, t.app_handle) for t in trials] == [
        (1, "arr://tx/arr0_0"), (2, "arr://tx/arr1_0"), (1, "arr://tx/arr0_2"), (2, "arr://tx/arr1_1")]
    for app_id, index in (("arr1_0", 1), ("arr1_1", 3)):  # each task is its own trial
        env = StateScheduler.apps[app_id]["app"].roles[0].env
        assert env["TX_TRIAL_INDEX"] == str(index) and json.loads(env["TX_TRIAL_PARAMS"]) == {"lr": index}
    # one trial to resume: no array of one here, so a request of its own
    StateScheduler.apps["arr1_1"]["state"] = F
    assert runner.resume_sweep(handle) == [3]
    assert ArrayScheduler.array_calls == [4, 2] and runner.sweep_status(handle).trials[3].app_handle == "arr://tx/app6"


def test_resume_after_cancel_with_pending_trials_resubmits_them_too(runner, component):
    info = runner.dryrun_sweep(component, grid(lr=[1, 2, 3]), "mem", max_parallel=1)
    handle = sw.run_sweep(runner.engine, info, supervise=False)
    runner.cancel_sweep(handle)
    assert runner.sweep_status(handle).counts() == {"CANCELLED": 3}
    assert sw.resume_sweep(runner.engine, handle, supervise=False) == [0, 1, 2]
    assert runner.sweep_status(handle).counts() == {"RUNNING": 1, "UNSUBMITTED": 2}


def test_status_cancel_and_resume_of_a_sweep_are_each_one_look(runner, component, monkeypatch):
    """Each verb's listing and describes share one status-plane look
    (tx.schedulers.plane.one_look): the scheduler is asked inside one, the same one."""
    from tx.schedulers import plane

    handle = runner.run_sweep(component, grid(lr=list(range(12))), "mem")
    for i in (3, 5):
        StateScheduler.apps[f"app{i}"]["state"] = AppState.FAILED
    seen: List[Any] = []
    real = StateScheduler.describe
    monkeypatch.setattr(StateScheduler, "describe",
                        lambda self, app_id: seen.append(getattr(plane._LOOK, "since", None)) or real(self, app_id))
    for verb in (runner.sweep_status, runner.resume_sweep, runner.cancel_sweep):
        seen.clear()
        verb(handle)
        assert seen and None not in seen and len(set(seen)) == 1, (verb, seen)
    assert getattr(plane._LOOK, "since", None) is None  # the look ends with the verb


def test_unknown_sweep_is_one_line(runner):
    with pytest.raises(sw.UnknownSweepError, match="no sweep mem://tx/sweep-x-0000abcd on this host"):
        runner.sweep_status("mem://tx/sweep-x-0000abcd")
    assert not sw.is_sweep_handle("mem://tx/sweep-x-0000abcd")


def test_status_of_many_trials_lists_once_and_describes_only_the_failed(runner, component, monkeypatch):
    handle = runner.run_sweep(component, grid(lr=list(range(20))), "mem")
    StateScheduler.apps["app3"]["state"] = AppState.FAILED
    StateScheduler.apps["app5"]["state"] = AppState.SUCCEEDED
    calls = {"describe": 0, "list": 0}
    for name in calls:
        real = getattr(StateScheduler, name)

        def counted(self, *a, _real=real, _name=name):
            calls[_name] += 1
            return _real(self, *a)
        monkeypatch.setattr(StateScheduler, name, counted)
    st = runner.sweep_status(handle)
    assert calls == {"describe": 1, "list": 1}
    assert st.counts() == {"RUNNING": 18, "FAILED": 1, "SUCCEEDED": 1} and st.trials[3].why == "boom"


def test_trackers_get_the_sweep_as_the_trials_parent_and_best_reads_their_metric(runner, component, tmp_path,
                                                                                monkeypatch):
    from tx.tracker import build_trackers

    monkeypatch.setenv("TX_TRACKERS", "file")
    monkeypatch.setenv("TX_TRACKER_FILE_CONFIG", str(tmp_path / "runs"))
    handle = runner.run_sweep(component, grid(lr=[0.1, 0.2, 0.3]), "mem")
    tracker = build_trackers({"file": str(tmp_path / "runs")})[0]
    trials = runner.sweep_status(handle).trials
    assert sorted(c.run_id for c in tracker.lineage(handle).children) == sorted(t.app_handle for t in trials)
    assert [p.run_id for p in tracker.lineage(trials[1].app_handle).parents] == [handle]
    assert tracker.metadata(trials[1].app_handle) == {"lr": 0.2, "sweep": handle, "trial_index": 1}
    assert tracker.metadata(handle)["trials"] == 3
    env = StateScheduler.apps[trials[0].app_handle.rsplit("/", 1)[1]]["app"].roles[0].env
    assert env["TX_PARENT_RUN_ID"] == handle and env["TX_TRACKERS"] == "file"
    with pytest.raises(SweepFormatError, match="no trial of .* recorded metric 'loss'"):
        sw.best_trials(runner.engine, handle, "loss")
    for t, loss in zip(trials, [0.5, 0.2, 0.9]):  # what each trial's rank 0 records
        tracker.add_metadata(t.app_handle, loss=loss)
    assert [m.index for m in sw.best_trials(runner.engine, handle, "loss")] == [1, 0, 2]
    assert [m.index for m in sw.best_trials(runner.engine, handle, "loss", maximize=True)] == [2, 0, 1]
    monkeypatch.setenv("TX_TRACKERS", "")
    with pytest.raises(SweepFormatError, match="no tracker is configured"):
        sw.best_trials(runner.engine, handle, "loss")
