"""A sweep's trials alike but for their command words and env (each trial's app trial 0's
but its entrypoint, args and env) are not each built and read back: their job messages
are made on first use, and the sweep's job takes their env and words as their messages
would give them (``tx_scheduler_gcp_batch._sweep.TrialJobs``, ``fast_trials``). Checked
here against the slow path on the same trials (every trial's message made and its script
parsed back): the same sweep job byte for byte, the same reason where there is none, and
each trial's own job (stored AppDef included) the one a dryrun of its app alone makes."""
from typing import Any, Dict, List, Optional

import pytest

from tx.runner import Runner
from tx.specs import AppDef, Resource, Role, VolumeMount
from tx.specs.sweep import Distribution, SweepSpec
from tx_scheduler_gcp_batch import request
from tx_scheduler_gcp_batch._sweep import build_sweep_job, fast_trials, sweep_unsupported, trial_env, trial_words
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler

SPOT = {"provisioning_model": "spot", "machine_type": "n2-standard-4", "service_account": "sa@p.iam"}


@pytest.fixture
def sched(monkeypatch: pytest.MonkeyPatch) -> GcpBatchScheduler:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "offline-project")
    monkeypatch.delenv("CLOUDSDK_BATCH_LOCATION", raising=False)
    return create_scheduler("tx")


def _bytes(job: Any) -> bytes:
    return type(job).pb(job).SerializeToString(deterministic=True)


def _app(i: int, args: List[str], env: Optional[Dict[str, str]] = None, image: str = "img", mem: int = 64,
         entrypoint: str = "python") -> AppDef:
    return AppDef("sw", [Role("trainer", image=image, entrypoint=entrypoint, args=args,
                              env={"TX_TRIAL_INDEX": str(i), **(env or {})},
                              resource=Resource(cpu=2, gpu=0, memMB=mem), max_retries=1)])


def _both(sched: GcpBatchScheduler, monkeypatch: pytest.MonkeyPatch, apps: List[AppDef], cfg: Dict[str, Any],
          max_parallel: Optional[int] = None, touch: Optional[int] = None) -> Any:
    """``(fast, why, job)`` of the trials' sweep on the fast path, checked equal to the slow
    path's on the same trials; ``touch``: a trial whose message is used before the sweep."""
    infos = sched.submit_dryrun_many(apps, cfg)
    reqs = [i.request for i in infos]
    if touch is not None:
        _ = reqs[touch].built  # noqa: F841 - made now: its own message is read
    fast = fast_trials(reqs)
    why = sweep_unsupported(reqs, fast)
    job = build_sweep_job(reqs, max_parallel, fast) if why is None else None
    slow = [False] * len(reqs)  # every trial's message made, its script parsed back
    assert sweep_unsupported(reqs, slow) == why
    if job is not None:
        again = build_sweep_job(reqs, max_parallel, slow)
        assert (again.job_id, _bytes(again.job)) == (job.job_id, _bytes(job.job))
        for i in (0, len(reqs) - 1):  # each task's env and words are its trial's
            new, own = f"{job.app_id}:{i}", reqs[i].built.task_groups[0]
            env = {k: v.replace(reqs[i].app_id, new) for k, v in own.task_environments[0].variables.items()}
            assert {k: v for k, v in trial_env(job.job, i).items() if k in env} == env
            if "TX_SWEEP_TEMPLATE" in job.job.task_groups[0].task_spec.environment.variables:
                exports, words = trial_words(job.job, i)
                ep, args = request.parse_role_script(own.task_spec.runnables[0].container.commands[-1]
                                                     .replace(reqs[i].app_id, new))
                assert words[exports:] == [a.replace("${replica_id}", "0") for a in (ep, *args)]
    for info in infos:  # each trial's own job: a dryrun of its app alone, with its job id
        monkeypatch.setattr(request, "make_job_id", lambda name, job_id=info.request.job_id: job_id)
        assert _bytes(info.request.job) == _bytes(sched.submit_dryrun(info._app, cfg).request.job)
    return fast, why, job


ODD = ["it's", 'a "test"', "back\\slash", "$HOME", "${TX_REPLICA_ID}", "", "é 日本", "--at=${app_id}/${replica_id}",
       "TXREPLICAIDPLACEHOLDER", "'\"${replica_id}\"'", "a  b\t c", "#not a comment", "*"]


@pytest.mark.parametrize("cfg", [{}, SPOT], ids=["standard", "spot"])
@pytest.mark.parametrize("case", ["grid", "odd words", "odd entrypoints", "newline", "lengths", "env"])
def test_trials_alike_but_their_words_and_env_make_the_slow_paths_job(sched, monkeypatch, case, cfg) -> None:
    n = 12
    if case == "grid":  # a grid's axes: cycles in the script, no table
        apps = [_app(i, ["train.py", "--lr", str(i % 3), "--b", str(i // 3), "--out", "/ck/${app_id}"]) for i in range(n)]
    elif case == "odd words":  # a table of quoted words, macros and what looks like them
        apps = [_app(i, ["-c", ODD[i % len(ODD)], ODD[(i * 5) % len(ODD)], f"x{i}"]) for i in range(n)]
    elif case == "odd entrypoints":
        apps = [_app(i, ["-c", "run"], entrypoint=ODD[i % len(ODD)] or "sh") for i in range(n)]
    elif case == "newline":  # a value no row holds: every task's env holds its script
        apps = [_app(i, ["-c", f"echo {i}\necho done"]) for i in range(n)]
    elif case == "lengths":  # no table: the trials' words differ in number
        apps = [_app(i, ["-c"] + ["x"] * (i % 3)) for i in range(n)]
    else:  # env of each trial's own, one key only some have, macros in values
        apps = [_app(i, ["-c", "run"], env={"LR": f"{i / 7}", "ID": "${app_id}", "R": "${replica_id}",
                                           **({"ODD": ODD[i % len(ODD)]} if i % 2 else {})}) for i in range(n)]
    fast, why, job = _both(sched, monkeypatch, apps, cfg, max_parallel=4)
    assert why is None and job is not None and fast == [False] + [True] * (n - 1)  # the fast path is taken


def test_a_trial_already_read_is_read_from_its_message(sched, monkeypatch) -> None:
    apps = [_app(i, ["-c", f"echo {i}"]) for i in range(6)]
    fast, why, _ = _both(sched, monkeypatch, apps, {}, touch=3)
    assert why is None and fast == [False, True, True, False, True, True]


@pytest.mark.parametrize("change", ["image", "resources", "entrypoint and image", "replicas", "role name"])
@pytest.mark.parametrize("which", [0, 3])
def test_trials_that_differ_in_more_take_the_slow_path(sched, monkeypatch, change, which) -> None:
    """A trial whose app differs in anything but its words and env is built as it is: the
    sweep is refused for the same reason, or, where its job would not differ, the same job."""
    apps = [_app(i, ["-c", f"echo {i}"]) for i in range(6)]
    role = apps[which].roles[0]
    if change == "image":
        role.image = "other"
    elif change == "resources":
        role.resource = Resource(cpu=2, gpu=0, memMB=128)
    elif change == "entrypoint and image":
        role.entrypoint, role.image = "sh", "other"
    elif change == "replicas":
        role.num_replicas = 2
    else:
        role.name = "reader"
    fast, why, _ = _both(sched, monkeypatch, apps, {})
    assert why is not None and not fast[which]
    if which == 0:  # nothing is alike trial 0
        assert not any(fast)


def test_trial_0_changed_after_its_dryrun_turns_the_fast_path_off(sched, monkeypatch) -> None:
    """The sweep's job is trial 0's: where its message is not the one its app makes, no
    trial is taken as alike it (the slow path compares each trial's message with it)."""
    infos = sched.submit_dryrun_many([_app(i, ["-c", f"echo {i}"]) for i in range(4)], {})
    reqs = [i.request for i in infos]
    reqs[0].built.allocation_policy.instances[0].policy.machine_type = "n2-standard-8"
    assert fast_trials(reqs) == [False] * 4
    assert sweep_unsupported(reqs) == "the trials differ in more than arguments and env (resources, run options)"


@pytest.mark.parametrize("change", ["mounts", "gpus"])
def test_a_trial_batch_refuses_fails_in_the_dryrun_as_alone(sched, change) -> None:
    apps = [_app(i, ["-c", f"echo {i}"]) for i in range(4)]
    if change == "mounts":
        apps[2].roles[0].mounts = [VolumeMount(src="vol", dst_path="/data")]
    else:
        apps[2].roles[0].resource = Resource(cpu=2, gpu=3, memMB=64)
    with pytest.raises(ValueError) as alone:
        sched.submit_dryrun(apps[2], {})
    with pytest.raises(ValueError) as many:
        sched.submit_dryrun_many(apps, {})
    assert str(many.value) == str(alone.value)


def test_a_trial_whose_env_the_runtime_refuses_fails_in_the_dryrun(sched) -> None:
    apps = [_app(i, ["-c", "run"], env={"BAD": "\ud800"} if i == 2 else {}) for i in range(4)]
    with pytest.raises(UnicodeEncodeError):
        sched.submit_dryrun_many(apps, {})


def test_a_random_search_of_the_runner_takes_the_fast_path_and_makes_the_slow_paths_job(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "offline-project")
    app = AppDef("sw", [Role("r", image="img", entrypoint="sh", env={"LR": "${lr}"},
                             args=["-c", "python train.py --lr ${lr} --b ${b} --out /ck/${app_id}"],
                             resource=Resource(cpu=1, gpu=0, memMB=64))])
    spec = SweepSpec(random={"lr": Distribution("uniform", 0, 1), "b": Distribution("loguniform", 1e-5, 1)},
                     trials=300)
    with Runner() as runner:
        info = runner.dryrun_sweep(app, spec, "gcp_batch", max_parallel=7)
    reqs = [t.request for t in info.trials]
    assert fast_trials(reqs) == [False] + [True] * 299 and all(r.pending for r in reqs[1:])  # none made
    slow = build_sweep_job(reqs, 7, [False] * 300)
    assert (slow.job_id, _bytes(slow.job)) == (info.native.request.job_id, _bytes(info.native.request.job))


@pytest.mark.parametrize("other", ["", "image", "project"])
def test_trials_of_two_dryruns_are_alike_trial_0_only_where_their_apps_are(sched, monkeypatch, other) -> None:
    """A sweep of trials dry-run apart (a resume's): those alike another dryrun's first
    trial are taken as alike the sweep's trial 0 only where they are alike it too."""
    first = sched.submit_dryrun_many([_app(i, ["-c", f"echo {i}"]) for i in range(2)], {})
    if other == "project":
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "another-project")
    rest = sched.submit_dryrun_many([_app(i, ["-c", f"echo {i}"], image="other" if other == "image" else "img")
                                     for i in range(2, 5)], {})
    reqs = [i.request for i in first + rest]
    fast = fast_trials(reqs)
    alike = not other
    assert fast == [False, True, False, alike, alike]  # trial 2 is the first of its dryrun: built
    why = sweep_unsupported(reqs, fast)
    assert why == sweep_unsupported(reqs, [False] * 5) and (why is None) == alike
    if why is None:
        assert _bytes(build_sweep_job(reqs, None, fast).job) == _bytes(build_sweep_job(reqs, None, [False] * 5).job)
