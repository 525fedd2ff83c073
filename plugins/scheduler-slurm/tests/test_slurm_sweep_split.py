"""Sweeps on Slurm larger than the cluster's ``MaxArraySize``: the fewest arrays, one sweep.

Offline: every task of every array runs exactly its trial's srun words (bash runs the
scripts' lookups against the table). On a private cluster of this module started with
``MaxArraySize=4`` and ``MaxJobCount=100`` (scripts/start-slurm.sh's ``SLURM_MAX_ARRAY_SIZE``,
``SLURM_MAX_JOB_COUNT``; about 2 s): a 2x3 grid through ``tx sweep`` is 2 arrays (4 and 2
tasks) chained under ``--max_parallel``, every trial prints and writes its own parameters,
``tx status`` and ``tx log`` follow it as one; cancel of one trial, then of the sweep; 101
trials are refused in one line before anything is submitted; an array refused midway
(the queue full) cancels those before it (the module's last test: it fills the queue).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tx.runner import Runner
from tx.runner import sweep as sw
from tx.specs import AppDef, AppState, Resource, Role
from tx.specs.sweep import SweepSpec
from tx_scheduler_slurm._array import SlurmArrayRequest
from tx_scheduler_slurm._cluster import ClusterInfo
from tx_scheduler_slurm.scheduler import create_scheduler
from tx_scheduler_slurm.testing import SlurmCluster, start_cluster, stop_cluster

PY = sys.executable


def _srun_words(script: str, task: int, table: str) -> List[str]:
    """What array task ``task``'s srun line gets, bash running the script's lookup for real
    with ``srun`` printing its words (NUL-separated)."""
    start = script.index("tx_table=")
    block = script[start:script.index("\nfi\n", start) + 3]
    prog = ("srun() { printf '%s\\0' \"$@\"; }\n" + f"SLURM_ARRAY_TASK_ID={task}\n"
            + 'tx_app_id="7_${SLURM_ARRAY_TASK_ID}"\n' + block.replace(block.split("\n")[0], f"tx_table={table}", 1))
    return subprocess.run(["bash", "-c", prog], capture_output=True, text=True, check=True).stdout.split("\0")[:-1]


def _own_words(req: Any, index: int, task: int) -> List[str]:
    words = " ".join(next(iter(req.trials[index].replicas.values())).srun_words())
    prog = f"srun() {{ printf '%s\\0' \"$@\"; }}\nSLURM_JOB_ID=7_{task}\nsrun {words}"
    return subprocess.run(["bash", "-c", prog], capture_output=True, text=True, check=True).stdout.split("\0")[:-1]


def test_each_task_of_each_array_runs_its_own_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    app = AppDef("sw", [Role("r", image="", entrypoint="echo", args=["lr=${lr}", "b=${b}"],
                             resource=Resource(cpu=1, gpu=0, memMB=64))])
    spec = SweepSpec(grid={"lr": [0.1, 1], "b": ["x y", "it's", 3, 4, 5]})
    with Runner(scheduler_factories={"slurm": lambda s, **kw: create_scheduler(s, cluster=ClusterInfo())}) as r:
        info = r.dryrun_sweep(app, spec, "slurm", cfg={"job_dir": str(tmp_path / "j")}, max_parallel=2)
    req = SlurmArrayRequest(info.native.request.trials, 2, 4)
    assert req.arrays == [(0, 4), (4, 4), (8, 2)]
    assert [c for c in req.array_cmd(1, "77") if c.startswith("--")][-2:] == ["--array=0-3%2",
                                                                           "--dependency=afterany:77"]
    assert req.array_cmd(2)[-1] == "--array=0-1%2"
    text = repr(req)
    assert text.startswith("# slurm: 10 trials as 3 job arrays of at most 4 tasks (the cluster's MaxArraySize); "
                           "each starts after the one before has ended, so that at most 2 run at once\n")
    req.write_table()
    for k, (offset, size) in enumerate(req.arrays):
        for task in range(size):
            got = _srun_words(req.materialize(k), task, req.table_path)
            assert got == _own_words(req, offset + task, task), (k, task)
            assert f"TX_TRIAL_INDEX={offset + task}" in " ".join(got)
    one = SlurmArrayRequest(info.native.request.trials, 2, 1001)
    assert len(one.arrays) == 1 and repr(one) == repr(info.native.request)  # unchanged below the limit


@pytest.fixture(scope="module")
def small_arrays(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A private cluster of 2 nodes whose MaxArraySize is 4 and MaxJobCount 100."""
    cluster = start_cluster(tmp_path_factory, "txarrays", 2, SLURM_MAX_ARRAY_SIZE="4", SLURM_MAX_JOB_COUNT="100",
                            SLURM_FIRST_JOB_ID="900000")
    try:
        with cluster.active():
            yield cluster
    finally:
        stop_cluster(cluster)


#: a trial: python reads its parameters, writes them with its TX_TRIAL_INDEX to
#: <--output-dir>/result.json and prints them
TRIAL = ("import json, os, sys; a = dict(zip(sys.argv[1::2], sys.argv[2::2])); "
         "r = dict(trial=int(os.environ['TX_TRIAL_INDEX']), lr=float(a['--lr']), batch=int(a['--batch-size'])); "
         "os.makedirs(a['--output-dir'], exist_ok=True); "
         "json.dump(r, open(os.path.join(a['--output-dir'], 'result.json'), 'w')); "
         "print('trained', json.dumps(r, sort_keys=True))")


def _env(cluster: SlurmCluster, tx_env: Dict[str, str]) -> Dict[str, str]:
    return {**tx_env, "SLURM_CONF": str(cluster.conf)}


@pytest.mark.slurm
def test_a_grid_larger_than_max_array_size_is_two_arrays_under_one_handle(small_arrays, tx, tx_env, tmp_path):
    env = _env(small_arrays, tx_env)
    dry = tx("sweep", "-s", "slurm", "--dryrun", "--grid", "lr=0.05,0.1", "--grid", "batch=16,32,64",
             "--max_parallel", "3", "utils.sh", "--", "echo", "${lr}", "${batch}", env=env)
    assert dry.returncode == 0 and ("# slurm: 6 trials as 2 job arrays of at most 4 tasks (the cluster's MaxArraySize); "
                                    "each starts after the one before has ended") in dry.stdout, dry.stdout + dry.stderr
    assert dry.stdout.count("$SBATCH_SCRIPT_") == 2 and "--dependency=afterany:<array 0>" in dry.stdout
    p = tx("sweep", "-s", "slurm", "--grid", "lr=0.05,0.1", "--grid", "batch=16,32,64", "--max_parallel", "3",
           "--wait", "utils.sh", "--entrypoint", "python", "--", "-c", TRIAL, "--lr", "${lr}",
           "--batch-size", "${batch}", "--output-dir", "out-${lr}-${batch}", env=env, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    handle = p.stdout.splitlines()[0]
    assert "SUCCEEDED (6 succeeded)" in p.stdout
    split = [ln for ln in p.stderr.splitlines() if "job arrays" in ln]
    assert len(split) == 1 and "6 trials as 2 job arrays of at most 4 tasks" in split[0], p.stderr
    status = json.loads(tx("status", handle, "--json", env=env).stdout)
    apps = [re.fullmatch(r"slurm://tx/(\d+)_(\d+)", t["app_handle"]).groups() for t in status["trials"]]
    arrays = sorted({a for a, _ in apps}, key=int)
    assert len(arrays) == 2
    assert apps == [(arrays[i // 4], str(i % 4)) for i in range(6)]  # trial i: task i % 4 of array i // 4
    trials = [(lr, b) for lr in (0.05, 0.1) for b in (16, 32, 64)]
    for k, (lr, b) in enumerate(trials):
        assert json.loads((tmp_path / f"out-{lr}-{b}" / "result.json").read_text()) == {"trial": k, "lr": lr, "batch": b}
        assert status["trials"][k]["params"] == {"lr": lr, "batch": b}
    for k in (3, 4, 5):  # the last task of array 0, both of array 1
        log = tx("log", f"{handle}/{k}/sh/0", env=env)
        lr, b = trials[k]
        assert log.stdout.strip().endswith(f'trained {{"batch": {b}, "lr": {lr}, "trial": {k}}}'), log.stdout + log.stderr


@pytest.mark.slurm
def test_cancel_of_one_trial_then_of_the_split_sweep(small_arrays, tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    app = AppDef("slow", [Role("r", image="", entrypoint="sleep", args=["600"], env={"I": "${i}"},
                               resource=Resource(cpu=1, gpu=0, memMB=64))])
    with Runner() as runner:
        handle = runner.run_sweep(app, SweepSpec(grid={"i": list(range(10))}), "slurm",
                                  cfg={"job_dir": str(tmp_path / "job")})
        rec = sw.load_record(handle)
        assert len({t.attempts[0].split("_")[0] for t in rec.trials}) == 3
        runner.cancel(f"slurm://tx/{rec.trials[5].attempts[0]}")  # task 1 of the second array
        runner.wait(f"slurm://tx/{rec.trials[5].attempts[0]}", wait_interval=0.5, timeout=60)
        st = runner.sweep_status(handle)
        assert st.trials[5].state == AppState.CANCELLED
        assert all(t.state in (AppState.RUNNING, AppState.PENDING) for t in st.trials if t.index != 5), st.format()
        done = runner.cancel_sweep(handle)
        assert sorted(done.stopped) == [i for i in range(10) if i != 5]
        for t in rec.trials:
            runner.wait(f"slurm://tx/{t.attempts[0]}", wait_interval=0.5, timeout=60)
        assert runner.sweep_status(handle).counts() == {"CANCELLED": 10}


@pytest.mark.slurm
def test_a_sweep_beyond_max_job_count_is_refused_before_anything_is_submitted(small_arrays, tx, tx_env, tmp_path):
    env = _env(small_arrays, tx_env)
    p = tx("sweep", "-s", "slurm", "--grid", "i=" + ",".join(map(str, range(101))), "utils.sh", "--", "echo", "${i}",
           env=env)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "101 trials are more than slurm's MaxJobCount" in lines[0] and "of 100" in lines[0], p.stderr
    q = subprocess.run(["squeue", "--noheader", "--format=%i"], env={**os.environ, "SLURM_CONF": str(small_arrays.conf)},
                       capture_output=True, text=True, timeout=30)
    assert q.returncode == 0 and q.stdout.strip() == "", q.stdout + q.stderr
    assert not list((tmp_path / "state").glob("sweeps/slurm/*.json"))


@pytest.mark.slurm
def test_an_array_refused_midway_cancels_the_arrays_before_it(small_arrays, tmp_path, monkeypatch):
    """The queue holds all but 6 of MaxJobCount's jobs: the sweep's first array (4 tasks) is
    accepted, its second is not (sbatch retries "temporarily unable to accept job" for about
    30 s before it refuses: tx's timeout, 4 s here, ends it first); tx cancels the first,
    removes the table and records no sweep: nothing is left behind. The first array's tasks
    are looked for in every state: a cancelled task leaves squeue's default states (pending,
    running, completing) as soon as its processes are gone, which can be before the look."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TX_SLURM_TIMEOUT", "4")
    env = {**os.environ, "SLURM_CONF": str(small_arrays.conf)}

    def run(*argv: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60)

    held = run("squeue", "--noheader", "--array", "--states=all", "--format=%i").stdout.split()
    fill = 100 - 6 - len(held)
    fillers = []  # held arrays of at most MaxArraySize (4) tasks
    for n in [4] * (fill // 4) + ([fill % 4] if fill % 4 else []):
        p = run("sbatch", "--parsable", "--hold", f"--array=0-{n - 1}", "--wrap=true", f"--output={tmp_path}/f-%A_%a")
        assert p.returncode == 0, p.stderr
        fillers.append(p.stdout.strip())
    try:
        app = AppDef("mid", [Role("r", image="", entrypoint="sleep", args=["600"], env={"I": "${i}"},
                                  resource=Resource(cpu=1, gpu=0, memMB=64))])
        job_dir = tmp_path / "job"
        with Runner() as runner:
            with pytest.raises(Exception, match="sbatch") as refused:  # noqa: B017 - SlurmCommandError
                runner.run_sweep(app, SweepSpec(grid={"i": list(range(10))}), "slurm", cfg={"job_dir": str(job_dir)})
        q = run("squeue", "--noheader", "--array", "--states=all", "--format=%i %j %T")
        assert q.returncode == 0, q.stderr
        mine = [ln for ln in q.stdout.splitlines() if " mid@" in ln]
        # the first array, cancelled
        assert mine and all(ln.endswith(("CANCELLED", "COMPLETING")) for ln in mine), (mine, str(refused.value))
        assert not list(job_dir.glob("tx-sweep-*.table"))
        assert not list((tmp_path / "state").glob("sweeps/slurm/*.json"))
    finally:
        if fillers:
            run("scancel", *fillers)
