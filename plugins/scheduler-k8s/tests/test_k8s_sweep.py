"""Sweeps on Kubernetes: single-replica trials as one Indexed Job (``batch/v1``), validated
against Kubernetes' Job schema; trials of several replicas one app each (said in the dryrun).
On the fake cluster: parallelism, per-index retries, failed indexes, the trial table from
one list, logs per trial, cancel, resume of exactly the failed trials, and a 2x3 grid through
the CLI."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import attrs
import pytest

from k8s_apps import K8S_VERSION, need, shared
from tx.runner import Runner
from tx.specs import AppDef, AppState, Resource, Role
from tx.specs.sweep import Distribution, SweepSpec

REPO = Path(__file__).resolve().parents[3]
SMALL = Resource(cpu=1, gpu=0, memMB=64)
CFG = {"kubernetes": {"queue": "default"}, "kubernetes_jobset": {}}


def sh_app(script: str, replicas: int = 1, **kw: Any) -> AppDef:
    kw.setdefault("resource", SMALL)
    return AppDef("sw", [Role("w", image="busybox:1.36", entrypoint="sh", args=["-c", script],
                              num_replicas=replicas, **kw)])


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    with Runner("tx") as r:
        yield r


@pytest.mark.parametrize("scheduler", sorted(CFG))
def test_single_replica_trials_are_one_indexed_job_valid_against_the_job_schema(runner: Runner,
                                                                                 scheduler: str) -> None:
    kv = need("kubernetes_validate")
    app = sh_app("echo ${lr} $LR ${b} $TX_TRIAL_INDEX", env={"LR": "${lr}"}, max_retries=2)
    info = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [0.1, 10], "b": [1, 2, 3]}), scheduler, cfg=CFG[scheduler],
                               max_parallel=2)
    assert info.native is not None, info.not_native
    job = info.native.request.resource
    kv.validate(job, K8S_VERSION, strict=True)
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimitPerIndex"]) == \
        ("Indexed", 6, 2, 2)
    assert job["metadata"]["labels"]["tx.pytorch.org/sweep"] == info.record.sweep_id
    command = spec["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["/bin/sh", "-c"] and command[2].startswith('i="$$JOB_COMPLETION_INDEX";')  # $$: Kubernetes writes $
    assert len(command) == 3  # the trials' values are the script's grid axes, not one argument each
    assert "set -- 0.1 10; shift $$(( (i / 3) % 2 ));" in command[2], command[2]
    assert "set -- 1 2 3; shift $$(( (i / 1) % 3 ));" in command[2], command[2]
    assert ' TX_TRIAL_INDEX="$$i" ' in command[2], command[2]
    assert info.native.request.table is None  # a grid's values are all axes: no table to mount
    # each pod's script as the container runs it (Kubernetes turns $$ into $)
    env = {e["name"]: e["value"] for e in spec["template"]["spec"]["containers"][0]["env"]}
    for i, (lr, b) in enumerate([(lr, b) for lr in ("0.1", "10") for b in "123"]):
        out = subprocess.run(["sh", "-c", command[2].replace("$$", "$")], capture_output=True, text=True, timeout=30,
                             env={**env, "PATH": os.environ["PATH"], "JOB_COMPLETION_INDEX": str(i)})
        assert out.stdout == f"{lr} {lr} {b} {i}\n", out
    out = subprocess.run(["sh", "-c", command[2].replace("$$", "$")], capture_output=True, text=True, timeout=30,
                         env={**env, "PATH": os.environ["PATH"], "JOB_COMPLETION_INDEX": "6"})
    assert (out.returncode, out.stderr) == (2, "tx: no row 6 in /tmp/tx-sweep/table\n")
    if scheduler == "kubernetes":  # Volcano schedules the pods, in the queue
        assert spec["template"]["spec"]["schedulerName"] == "volcano"
        assert spec["template"]["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "default"
    assert str(info).startswith(f"=== {scheduler}: one native array request for 6 trials, at most 2 at once ===")


def test_a_sweep_of_10000_trials_is_one_job_whose_size_does_not_grow_with_the_trials(runner: Runner) -> None:
    """The issue's fallback: 10,000 trials' commands (4.7 MB) did not fit one Job, so each
    trial became a Volcano Job. Now a grid's Job holds its axes' values once (no ConfigMap),
    and a random search's values are a table of one row a trial, in a ConfigMap under 1 MiB."""
    app = sh_app("python -c 'print(${lr}, ${b})' --out /ckpt/${lr}-${b}")
    sizes: Dict[int, int] = {}
    for k in (10, 100):
        info = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [i / 1000 for i in range(k)], "b": list(range(k))}),
                                   "kubernetes", cfg={"queue": "default"})
        assert info.native is not None, info.not_native
        req = info.native.request
        assert req.resource["spec"]["completions"] == k * k and req.table is None
        sizes[k * k] = len(json.dumps(req.resource))
    assert sizes[10_000] - sizes[100] < 1000, sizes  # the Job: its grid's 200 values, not its 10,000 trials
    random = SweepSpec(random={"lr": Distribution("uniform", 0, 1), "b": Distribution("randint", 1, 512)},
                       trials=10_000)
    req = runner.dryrun_sweep(app, random, "kubernetes", cfg={"queue": "default"}).native.request
    assert len(json.dumps(req.resource)) - sizes[100] < 1000
    rows = req.table["data"]["table"].splitlines()
    assert len(rows) == 10_000 and len(req.table["data"]["table"]) < 300_000  # "0.844422 394 0.844422-394"


def test_trials_alike_but_their_command_and_env_make_the_job_their_pods_compared_make(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Trials whose roles differ in nothing but args and env (a sweep's) make only their
    command and env beside trial 0's pod; the Job is the one made by building and comparing
    every trial's pod, which trials differing elsewhere take (role metadata, not in the pod:
    one Job; an image: refused, one app per trial)."""
    import attrs

    from tx_scheduler_k8s import _names, _sweep

    monkeypatch.setattr(_names, "app_id", lambda name, budget: "sw-fixed")

    def trials(**per: Any) -> list:
        out = []
        for i in range(12):
            role = Role("w", image="busybox:1.36", entrypoint="sh", resource=SMALL,
                        args=["-c", f"echo {i % 3} $HOME", "--lr", str(i / 4)],
                        env={"TX_SWEEP_ID": "tx/sweep-sw-1", "TRIAL": str(i), "HOME_$": "$(x)"})
            out.append(AppDef("sw", [attrs.evolve(role, **{k: v(i) for k, v in per.items()})]))
        return out

    cfg = {"queue": "default", "preempt_grace": 7}
    alike = trials()
    assert _sweep._alike(alike)
    fast = _sweep.indexed_job(alike, cfg, 3, "default")
    compared = trials(metadata=lambda i: {"k": str(i)})
    assert not _sweep._alike(compared)
    slow = _sweep.indexed_job(compared, cfg, 3, "default")
    assert fast[0] is not None and fast[2] == "" and json.dumps(fast[:2], sort_keys=True) == json.dumps(
        slow[:2], sort_keys=True)
    images = trials(image=lambda i: f"busybox:1.{i}")
    assert _sweep.indexed_job(images, cfg, 3, "default") == (
        None, None, "trial 1's pod differs from trial 0's in more than its command and env")


def test_each_trials_appdef_annotation_is_its_own_made_when_its_request_is_read(runner: Runner) -> None:
    """A sweep's trials' AppDef annotations are made on first use (an Indexed Job keeps
    none): each, read when the trial is its own Volcano Job (a gang of 2 replicas), is that
    trial's AppDef with its run options, as a single app's dryrun makes it."""
    from tx_scheduler_k8s import _pod

    info = runner.dryrun_sweep(sh_app("echo ${lr}", replicas=2), SweepSpec(grid={"lr": [0.1, 1, 10]}),
                               "kubernetes", cfg={"queue": "default"})
    assert info.native is None  # gangs: one Volcano Job per trial
    seen = set()
    for t in info.trials:
        annotations = t.request.resource["metadata"]["annotations"]
        assert annotations == _pod.app_annotations(t._app, t._cfg), annotations
        seen.add(annotations[_pod.ANNOTATION_APPDEF])
    assert len(seen) == 3


def test_alike_trials_make_trial_0s_volcano_job_only_and_every_request_as_before(
        runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """An Indexed Job uses none of its trials' own Volcano Jobs: of trials alike but for their
    args and env, trial 0's is made now (what they share is checked there), the others' on
    first use of their request (was: every trial's at once, 10,000 unused for 10,000 trials).
    The Job, and each trial's request once read (its stored AppDef too), are those that making
    every trial's Volcano Job at once makes (trials not alike; the code before)."""
    from tx_scheduler_k8s import _names, _pod, _sweep, kubernetes_scheduler as ks

    monkeypatch.setattr(_names, "app_id", lambda name, budget: "sw-fixed")  # one name: the paths compare
    made, real = [], ks.app_to_job
    monkeypatch.setattr(ks, "app_to_job", lambda app, cfg, *a, **kw: made.append(app) or real(app, cfg, *a, **kw))
    app = sh_app("echo ${lr} $LR ${b} $TX_TRIAL_INDEX", env={"LR": "${lr}"}, max_retries=1)
    cfg = {"queue": "default", "preempt_grace": 7}
    lazy = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [0.1, 10], "b": [1, 2, 3]}), "kubernetes", cfg=cfg,
                               max_parallel=2)
    assert lazy.native is not None and made == [lazy.trials[0]._app]
    sched = runner.scheduler("kubernetes")
    apps, resolved = [t._app for t in lazy.trials], lazy.trials[0]._cfg
    assert _sweep.alike(apps) and not _sweep.alike([apps[0], attrs.evolve(apps[1], name="other")])
    monkeypatch.setattr(_sweep, "alike", lambda apps: False)  # every trial's Volcano Job made at once
    full = sched.submit_dryrun_many(apps, resolved)
    assert len(made) == 1 + 6
    native = sched.submit_sweep_dryrun(full, 2)
    assert json.dumps([lazy.native.request.resource, lazy.native.request.table], sort_keys=True) == json.dumps(
        [native.request.resource, native.request.table], sort_keys=True)
    for t, f in zip(lazy.trials, full):
        assert json.dumps(t.request.resource, sort_keys=True) == json.dumps(f.request.resource, sort_keys=True)
        assert t.request == f.request and str(t) == str(f)
    assert len(made) == 1 + 6 + 5  # the 5 deferred ones, on first use
    for t in lazy.trials:
        alone = real(t._app, t._cfg).resource  # a single app's dryrun: its own AppDef stored
        assert json.dumps(alone, sort_keys=True) == json.dumps(t.request.resource, sort_keys=True)
        assert t.request.resource["metadata"]["annotations"] == _pod.app_annotations(t._app, t._cfg)


def test_alike_trials_make_trial_0s_jobset_only_and_every_request_as_before(
        runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubernetes_jobset as kubernetes above: of trials alike but for their args and env,
    trial 0's JobSet is made at dryrun, the others' on first use of their request, each the
    JobSet that making every trial's at once makes (trials not alike; the code before)."""
    from tx_scheduler_k8s import _names, _sweep, kubernetes_jobset_scheduler as js

    monkeypatch.setattr(_names, "app_id", lambda name, budget: "sw-fixed")  # one name: the paths compare
    made, real = [], js.app_to_jobset
    monkeypatch.setattr(js, "app_to_jobset", lambda app, cfg, *a, **kw: made.append(app) or real(app, cfg, *a, **kw))
    app = sh_app("echo ${lr} $LR ${b} $TX_TRIAL_INDEX", env={"LR": "${lr}"}, max_retries=1)
    lazy = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [0.1, 10], "b": [1, 2, 3]}), "kubernetes_jobset", cfg={},
                               max_parallel=2)
    assert lazy.native is not None and made == [lazy.trials[0]._app]
    sched = runner.scheduler("kubernetes_jobset")
    monkeypatch.setattr(_sweep, "alike", lambda apps: False)  # every trial's JobSet made at once
    full = sched.submit_dryrun_many([t._app for t in lazy.trials], lazy.trials[0]._cfg)
    assert len(made) == 1 + 6
    native = sched.submit_sweep_dryrun(full, 2)
    assert json.dumps([lazy.native.request.resource, lazy.native.request.table], sort_keys=True) == json.dumps(
        [native.request.resource, native.request.table], sort_keys=True)
    for t, f in zip(lazy.trials, full):
        assert t.request == f.request and str(t) == str(f)
    assert len(made) == 1 + 6 + 5  # the 5 deferred ones, on first use
    for t in lazy.trials:
        alone = real(t._app, t._cfg).resource  # a single app's dryrun
        assert json.dumps(alone, sort_keys=True) == json.dumps(t.request.resource, sort_keys=True)


def test_alike_trials_that_are_no_indexed_job_are_each_the_volcano_job_its_app_makes(
        fake_cluster: Dict[str, Any], runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where alike trials cannot be one Indexed Job (a table larger than a ConfigMap holds;
    here forced), each is its own Volcano Job, made when it is submitted: the one its app
    makes alone (its own command, env and stored AppDef), and it runs its own values."""
    from tx_scheduler_k8s import _sweep, kubernetes_scheduler as ks

    monkeypatch.setattr(_sweep, "indexed_job", lambda *a, **kw: (None, None, "forced: no Indexed Job"))
    info = runner.dryrun_sweep(sh_app('echo "${lr} $LR $TX_TRIAL_INDEX"', env={"LR": "${lr}"}),
                               SweepSpec(grid={"lr": [0.1, 1, 10]}), "kubernetes", cfg={"queue": "default"})
    assert info.native is None and "forced: no Indexed Job" in str(info)
    assert [t.request._later is None for t in info.trials] == [True, False, False]  # 1, 2: made on first use
    st = _wait(runner, runner.schedule_sweep(info))
    assert [t.state for t in st.trials] == [AppState.SUCCEEDED] * 3
    sched = runner.scheduler("kubernetes")
    for i, (t, lr) in enumerate(zip(info.trials, ["0.1", "1", "10"])):
        obj = sched.kube.get_object(ks.GROUP, ks.VERSION, ks.PLURAL, t.request.namespace, t.request.app_id)
        alone = ks.app_to_job(t._app, t._cfg, app_id=t.request.app_id).resource
        assert obj["spec"] == alone["spec"] and all(obj["metadata"][k] == alone["metadata"][k]
                                                    for k in ("name", "labels", "annotations")), i
        assert list(runner.log_lines(st.trials[i].app_handle, "w", 0)) == [f"{lr} {lr} {i}\n"]


def test_a_trial_whose_request_fails_where_trial_0s_does_not_fails_the_dryrun() -> None:
    """A trial alike trial 0 but for a value no request can hold (an env value not a string)
    is made at once, and its error is the dryrun's, as before: never a request made later."""
    from tx_scheduler_k8s import _sweep
    from tx_scheduler_k8s.kubernetes_scheduler import create_scheduler

    ok, bad = (AppDef("sw", [Role("w", image="busybox:1.36", entrypoint="sh", args=["-c", "true"], env={"X": x},
                                  resource=SMALL)]) for x in ("$HOME", 2))
    assert _sweep.alike([ok, ok]) and not _sweep.alike([ok, bad])
    with pytest.raises(TypeError):
        create_scheduler("tx").submit_dryrun_many([ok, bad], {"queue": "default"})


def test_a_refused_job_leaves_no_config_map_and_pods_read_their_rows(fake_cluster: Dict[str, Any],
                                                                     runner: Runner) -> None:
    """The ConfigMap is created first; when the API server refuses the Job (here: a Job of
    that name exists), it is deleted again. A created sweep's ConfigMap is its Job's
    dependent, and each pod reads its row from it (one axis of 4 values is no cycle: a table)."""
    app = sh_app('echo "n=${n} $TX_TRIAL_INDEX"')
    info = runner.dryrun_sweep(app, SweepSpec(grid={"n": ["0", "x y", "2", "x;y"]}), "kubernetes",
                               cfg={"queue": "default"})
    req = info.native.request
    assert req.table["data"]["table"] == "0\n'x y'\n2\n'x;y'\n"  # the value (in the args and the JSON)
    sched = runner.scheduler("kubernetes")
    core = sched.kube.core
    blocker = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": req.app_id},
               "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                   {"name": "c", "image": "busybox:1.36", "command": ["true"]}]}}}}
    sched.kube.create_object("batch", "v1", "jobs", req.namespace, blocker)
    with pytest.raises(Exception, match="already exists"):
        sched.schedule_sweep(info.native)
    names = [c.metadata.name for c in core.list_namespaced_config_map(req.namespace).items]
    assert req.table["metadata"]["name"] not in names, names
    sched.kube.delete_object("batch", "v1", "jobs", req.namespace, req.app_id)
    # submitted: the ConfigMap is owned by the Job, each pod prints its own row, and the
    # ConfigMap goes with the Job
    assert len(sched.schedule_sweep(info.native)) == 4
    cm = core.read_namespaced_config_map(req.table["metadata"]["name"], req.namespace)
    job = sched.kube.get_object("batch", "v1", "jobs", req.namespace, req.app_id)
    assert [(o.kind, o.uid) for o in cm.metadata.owner_references] == [("Job", job["metadata"]["uid"])]
    deadline = time.monotonic() + 60
    while (job.get("status") or {}).get("succeeded") != 4:
        assert time.monotonic() < deadline and not (job.get("status") or {}).get("failed"), job.get("status")
        time.sleep(0.2)
        job = sched.kube.get_object("batch", "v1", "jobs", req.namespace, req.app_id)
    logs = {}
    for pod in sched.kube.list_pods(req.namespace, f"app.kubernetes.io/instance={req.app_id}"):
        logs[pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]] = b"".join(
            sched.kube.pod_log(req.namespace, pod["metadata"]["name"])).decode()
    assert logs == {"0": "n=0 0\n", "1": "n=x y 1\n", "2": "n=2 2\n", "3": "n=x;y 3\n"}, logs
    sched.kube.delete_object("batch", "v1", "jobs", req.namespace, req.app_id)
    assert req.table["metadata"]["name"] not in [c.metadata.name for c in core.list_namespaced_config_map(req.namespace).items]


@pytest.mark.parametrize("scheduler, cfg, why", [
    ("kubernetes", {"queue": "default"}, "a trial of several replicas is a gang"),
    ("kubernetes_jobset", {"queue": "user-queue"}, "Kueue admits each trial as a JobSet of its own"),
    ("kubernetes_mcad", {}, "kubernetes_mcad has no native array"),
])
def test_other_trials_are_one_app_each_and_the_dryrun_says_why(runner: Runner, scheduler: str, cfg: Dict[str, Any],
                                                               why: str) -> None:
    app = sh_app("echo ${lr}", replicas=2 if scheduler == "kubernetes" else 1)
    info = runner.dryrun_sweep(app, SweepSpec(grid={"lr": [0.1, 1]}), scheduler, cfg=cfg)
    assert info.native is None and why in info.not_native
    assert str(info).startswith(f"=== {scheduler}: 2 requests, one per trial (")


def _wait(runner: Runner, handle: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        st = runner.sweep_status(handle)
        if all(t.state.name in ("SUCCEEDED", "FAILED", "CANCELLED") for t in st.trials):
            return st
        assert time.monotonic() < deadline, st.format()
        time.sleep(0.3)


def test_indexed_job_runs_the_grid_in_parallel_retries_and_resumes_exactly_the_failed(
        fake_cluster: Dict[str, Any], runner: Runner, tmp_path: Path) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    # 10 trials, 3 at once; b=2 fails for good until the file 'fixed' exists; lr=1 b=1 fails
    # once and succeeds on its retry (backoffLimitPerIndex 1)
    script = (f'cd {d}; echo "$TX_TRIAL_INDEX $(date +%s.%N) start" >> log; sleep 0.5; '
              f'echo "$TX_TRIAL_INDEX $(date +%s.%N) end" >> log; '
              'echo "trial ${lr} ${b} params=$TX_TRIAL_PARAMS"; '
              'if [ "${lr}/${b}" = 1/1 ] && ! [ -e retried ]; then touch retried; exit 4; fi; '
              'test -e fixed || test ${b} != 2')
    app = sh_app(script, mounts=shared(d), max_retries=1)
    spec = SweepSpec(grid={"lr": [0.1, 1], "b": [1, 2, 3, 4, 5]})
    handle = runner.run_sweep(app, spec, "kubernetes", cfg={"queue": "default"}, max_parallel=3)
    log = Path(fake_cluster["log"])
    before = len(log.read_text(errors="replace").splitlines())
    st = _wait(runner, handle)
    assert [t.state for t in st.trials] == [AppState.SUCCEEDED, AppState.FAILED, *[AppState.SUCCEEDED] * 3] * 2
    assert [t.params for t in st.trials][6] == {"lr": 1, "b": 2}
    assert st.trials[1].why.startswith("w/0 (pod ") and "exit code 1" in st.trials[1].why, st.trials[1].why
    # parallelism: never more than 3 trials ran at once
    events = sorted((float(t), kind) for _, t, kind in (ln.split() for ln in (d / "log").read_text().splitlines()))
    running = peak = 0
    for _, kind in events:
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak <= 3 and len([e for e in events if e[1] == "start"]) == 10 + 2 + 1  # b=2 twice each, 1/1 retried
    # the trial table of 10 trials: one label-selected list of Jobs (and one of pods)
    lines = log.read_text(errors="replace").splitlines()[before:]
    t0 = len(lines)
    # one tick from one fresh snapshot (tx.schedulers.plane), however long the tick takes here
    runner.scheduler("kubernetes")._plane("default").invalidate()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TX_STATUS_MAX_AGE", "600")
        runner.sweep_status(handle)
    asked = [ln for ln in log.read_text(errors="replace").splitlines()[before + t0:] if '"GET ' in ln]
    assert sum("/apis/batch/v1/namespaces/default/jobs?" in ln for ln in asked) == 1, asked
    gets = [re.search(r"/jobs/([^/? ]+)", ln).group(1) for ln in asked if "/apis/batch/v1/namespaces/default/jobs/" in ln]
    # the failed trials 1 and 6 are described from the namespace's shared snapshot (the same
    # label-selected lists, tx_scheduler_k8s._plane): no GET of their Job
    assert not gets, asked
    # logs of one trial
    lines = list(runner.log_lines(st.trials[7].app_handle, "w", 0))
    assert lines == ['trial 1 3 params={"b": 3, "lr": 1}\n'], lines
    # resume: exactly trials 1 and 6, as the two indexes of one new Indexed Job
    (d / "fixed").write_text("")
    assert runner.resume_sweep(handle) == [1, 6]
    st2 = _wait(runner, handle)
    assert [t.attempts for t in st2.trials] == [1, 2, 1, 1, 1, 1, 2, 1, 1, 1]
    assert all(t.state == AppState.SUCCEEDED for t in st2.trials)
    job = st2.trials[1].app_handle.rsplit("_", 1)[0]
    assert job != st.trials[1].app_handle.rsplit("_", 1)[0] and st2.trials[0].app_handle == st.trials[0].app_handle
    assert [st2.trials[1].app_handle, st2.trials[6].app_handle] == [f"{job}_0", f"{job}_1"]
    # index 1 of the new Job ran trial 6, with trial 6's parameters
    lines = list(runner.log_lines(st2.trials[6].app_handle, "w", 0))
    assert lines == ['trial 1 2 params={"b": 2, "lr": 1}\n'], lines


def test_cancel_suspends_the_job_and_leaves_finished_trials_alone(fake_cluster: Dict[str, Any],
                                                                  runner: Runner) -> None:
    app = sh_app('test ${n} = 0 || exec sleep 60')
    handle = runner.run_sweep(app, SweepSpec(grid={"n": [0, 1, 2, 3]}), "kubernetes_jobset", cfg={}, max_parallel=2)
    deadline = time.monotonic() + 60
    while [t.state for t in runner.sweep_status(handle).trials][:3] != [AppState.SUCCEEDED, AppState.RUNNING,
                                                                        AppState.RUNNING]:
        assert time.monotonic() < deadline, runner.sweep_status(handle).format()
        time.sleep(0.2)
    runner.cancel_sweep(handle)
    st = _wait(runner, handle)
    assert [t.state for t in st.trials] == [AppState.SUCCEEDED] + [AppState.CANCELLED] * 3
    sched = runner.scheduler("kubernetes_jobset")
    ns, name = st.trials[1].app_handle.rsplit("/", 1)[1].split(":")
    job = sched.kube.get_object("batch", "v1", "jobs", ns, name.rsplit("_", 1)[0])
    assert job["spec"]["suspend"] is True and job["metadata"]["annotations"]["tx.pytorch.org/cancelled"] == "true"
    assert not [p for p in sched.kube.list_pods(ns, f"app.kubernetes.io/instance={job['metadata']['name']}")
                if p["status"]["phase"] == "Running"]


#: a trial's program for the CLI sweeps: python reads its parameters (``--lr`` and
#: ``--batch-size``, as the DDP example would), writes them with its TX_TRIAL_INDEX to
#: ``<--output-dir>/result.json`` and prints them. Cheap on purpose: a trial is an app of
#: the backend whatever it runs; the DDP example as a sweep trains for real in
#: tests/test_sweep_e2e.py, and DDP on this backend in tests/test_portability.py
TRIAL = ("import json, os, sys; a = dict(zip(sys.argv[1::2], sys.argv[2::2])); "
         "r = dict(trial=int(os.environ['TX_TRIAL_INDEX']), lr=float(a['--lr']), batch=int(a['--batch-size'])); "
         "os.makedirs(a['--output-dir'], exist_ok=True); "
         "json.dump(r, open(os.path.join(a['--output-dir'], 'result.json'), 'w')); "
         "print('trained', json.dumps(r, sort_keys=True))")


def test_a_2x3_grid_through_the_cli(fake_cluster: Dict[str, Any], tx: Any, tmp_path: Path) -> None:
    """`tx sweep -s kubernetes ... utils.sh --entrypoint python -- -c TRIAL ...`: one Indexed
    Job of 6 trials, 3 at once (two waves), each trial's output written (to a hostPath
    volume: a pod's /tmp is its own) with its own parameters, and `tx log` of one trial."""
    out = tmp_path / "out"
    p = tx("sweep", "-s", "kubernetes", "-cfg", "queue=default", "--grid", "lr=0.05,0.1", "--grid", "batch=16,32,64",
           "--max_parallel", "3", "--wait", "utils.sh", "--env", f"PATH={os.path.dirname(sys.executable)}:/usr/bin:/bin",
           "--cpu", "1", "--memMB", "1024", "--mounts", f"type=bind,src={out},dst={out}", "--entrypoint", "python",
           "--", "-c", TRIAL, "--lr", "${lr}", "--batch-size", "${batch}", "--output-dir", f"{out}/${{lr}}-${{batch}}",
           timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "SUCCEEDED (6 succeeded)" in p.stdout
    handle = p.stdout.splitlines()[0]
    st = json.loads(tx("status", handle, "--json").stdout)
    ids = [t["app_handle"].rsplit("/", 1)[1] for t in st["trials"]]
    assert [i.rsplit("_", 1)[1] for i in ids] == [str(k) for k in range(6)], ids  # trial k: <ns>:<job>_<k>
    assert len({i.rsplit("_", 1)[0] for i in ids}) == 1, ids  # one Indexed Job
    trials = [(lr, b) for lr in (0.05, 0.1) for b in (16, 32, 64)]
    for k, (lr, b) in enumerate(trials):
        assert json.loads((out / f"{lr}-{b}" / "result.json").read_text()) == {"trial": k, "lr": lr, "batch": b}
    log = tx("log", f"{handle}/4/sh/0")
    assert log.stdout.strip().endswith('trained {"batch": 32, "lr": 0.1, "trial": 4}'), log.stdout + log.stderr
