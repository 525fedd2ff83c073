"""Sweeps on Slurm: single-replica trials as one ``sbatch --array`` (offline dryrun, then on
the session's private cluster: a 2x3 grid with max_parallel, one sbatch, status, logs,
list, resume of exactly the failed trials); heterogeneous apps one job per trial."""
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest

from tx.runner import Runner
from tx.runner import sweep as sw
from tx.specs import AppDef, AppState, Resource, Role
from tx.specs.sweep import SweepSpec
from tx_scheduler_slurm._cluster import ClusterInfo
from tx_scheduler_slurm.scheduler import create_scheduler

PY = sys.executable


def _app(replicas: int = 1) -> AppDef:
    return AppDef("sw", [Role("r", image="", entrypoint=PY, num_replicas=replicas,
                              args=["-c", "import os,sys; print('lr=${lr} b=${b}', os.environ['TX_TRIAL_INDEX'], "
                                          "os.environ['TX_APP_ID']); sys.exit(1 if '${b}' == '2' and "
                                          "not os.path.exists('fixed') else 0)"],
                              resource=Resource(cpu=1, gpu=0, memMB=64))])


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    with Runner(scheduler_factories={"slurm": lambda s, **kw: create_scheduler(s, cluster=ClusterInfo())}) as r:
        yield r


GRID = SweepSpec(grid={"lr": [0.1, 1], "b": [1, 2, 3]})


def test_dryrun_of_single_replica_trials_is_one_array(offline, tmp_path):
    info = offline.dryrun_sweep(_app(), GRID, "slurm", cfg={"job_dir": str(tmp_path / "j")}, max_parallel=2)
    text = str(info)
    assert "=== slurm: one native array request for 6 trials, at most 2 at once ===" in text
    assert "--array=0-5%2 $SBATCH_SCRIPT" in text
    assert 'tx_app_id="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"' in text
    assert text.count("\n  srun ") == 1 and "tx_words[" in text and "lr=1 b=3" in text  # the table, not 6 lines
    assert "$SLURM_JOB_ID\"" not in text.split("SBATCH_SCRIPT\n#---")[1].replace("echo \"[tx] job $SLURM_JOB_ID", "")


def _lookup_words(script: str, index: int, table: str) -> List[str]:
    """What the array script's srun line gets for task ``index``, bash running it for real
    with ``srun`` printing its words (NUL-separated)."""
    start = script.index("tx_table=")
    block = script[start:script.index("\nfi\n", start) + 3]
    prog = ("srun() { printf '%s\\0' \"$@\"; }\n" + f"SLURM_ARRAY_TASK_ID={index}\n"
            + 'tx_app_id="7_${SLURM_ARRAY_TASK_ID}"\n' + block.replace(block.split("\n")[0], f"tx_table={table}", 1))
    out = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, check=True).stdout
    return out.split("\0")[:-1]


def _own_words(req: Any, index: int) -> List[str]:
    """Trial ``index``'s own srun words (its request alone), as bash reads them."""
    words = " ".join(next(iter(req.trials[index].replicas.values())).srun_words())
    prog = "srun() { printf '%s\\0' \"$@\"; }\nSLURM_JOB_ID=7_" + str(index) + "\nsrun " + words
    return subprocess.run(["bash", "-c", prog], capture_output=True, text=True, check=True).stdout.split("\0")[:-1]


def test_array_script_is_bounded_and_each_task_reads_its_own_row(offline, tmp_path):
    """The script does not grow with the trials (their varying words are in a table file
    beside the job, written at submit), and task i runs exactly trial i's srun words: bash
    runs the script's lookup against the table, for values with spaces and quotes."""
    odd = SweepSpec(grid={"lr": [0.1, 1], "b": ["x y", "it's", '$HOME"']})
    info = offline.dryrun_sweep(_app(), odd, "slurm", cfg={"job_dir": str(tmp_path / "j")})
    req = info.native.request
    req.write_table()
    assert os.path.isfile(req.table_path) and len(req.table.rows) == 6
    for i in range(6):
        assert _lookup_words(req.materialize(), i, req.table_path) == _own_words(req, i)

    def sizes(n: int) -> "tuple[int, int]":
        spec = SweepSpec(grid={"lr": list(range(n // 100)), "b": list(range(100))})
        r = offline.dryrun_sweep(_app(), spec, "slurm", cfg={"job_dir": str(tmp_path / "j")}).native.request
        return len(r.materialize()), len(r.table_text())

    (s200, t200), (s10k, t10k) = sizes(200), sizes(10_000)
    assert s10k - s200 <= 8  # only --array=0-199 vs 0-9999
    assert t10k <= 50 * t200 * 1.2 and t10k / 10_000 < 60  # the table: the values, not the words, per trial


def test_dryrun_of_heterogeneous_trials_is_one_job_per_trial(offline, tmp_path):
    info = offline.dryrun_sweep(_app(replicas=2), GRID, "slurm", cfg={"job_dir": str(tmp_path / "j")})
    assert info.native is None
    assert ("=== slurm: 6 requests, one per trial (an app of several replicas is a heterogeneous job, which "
            "Slurm cannot put in an array); trial 0's: ===") in str(info)
    assert "--array" not in str(info)


@pytest.mark.slurm
def test_grid_runs_as_one_array_and_resume_reruns_exactly_the_failed(slurm_nodes, tmp_path, monkeypatch,
                                                                     sbatch_calls):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    job_dir = tmp_path / "job"
    with Runner() as runner:
        handle = runner.run_sweep(_app(), GRID, "slurm", cfg={"job_dir": str(job_dir)}, max_parallel=2)
        # what slurmctld is asked: the partitions (scontrol show partition, one RPC; the
        # nodes' CPUs and memory from slurm.conf, which agree with slurmctld's totals) and the
        # array (sbatch): no sinfo (two RPCs)
        asked = [c[:2] for c in sbatch_calls if c[:2] != ["sinfo", "--version"]]
        assert asked == [["scontrol", "show"], ["sbatch", "--parsable"]], sbatch_calls
        assert any(a == "--array=0-5%2" for a in next(c for c in sbatch_calls if c[0] == "sbatch"))
        rec = sw.load_record(handle)
        array = rec.trials[0].attempts[0].split("_")[0]
        assert [t.attempts for t in rec.trials] == [[f"{array}_{i}"] for i in range(6)]
        for t in rec.trials:
            runner.wait(f"slurm://tx/{t.attempts[0]}", wait_interval=0.5, timeout=180)
        st = runner.sweep_status(handle)
        assert [t.state for t in st.trials] == [AppState.SUCCEEDED, AppState.FAILED, AppState.SUCCEEDED] * 2
        out = "".join(runner.log_lines(st.trials[4].app_handle, "r", 0))
        assert out == f"lr=1 b=2 4 {array}_4\n"
        listed = sw.collapse_listed(runner.list("slurm"), [rec])
        row = next(a for a in listed if a.app_handle == handle)
        assert row.state == AppState.FAILED and "4 succeeded, 2 failed" in row.name
        assert not any(a.app_id.startswith(f"{array}_") for a in listed)

        (job_dir / "fixed").write_text("")
        sbatch_calls.clear()
        assert runner.resume_sweep(handle) == [1, 4]
        # the two failed trials are one new array of two tasks (one sbatch, still at most 2 at once)
        sbatches = [c for c in sbatch_calls if c[0] == "sbatch"]
        assert len(sbatches) == 1 and "--array=0-1%2" in sbatches[0], sbatch_calls
        st2 = runner.sweep_status(handle)
        again = st2.trials[1].app_handle.rsplit("/", 1)[1].split("_")[0]
        assert again != array
        assert [(t.attempts, t.app_handle.rsplit("/", 1)[1]) for t in st2.trials if t.index in (1, 4)] == \
            [(2, f"{again}_0"), (2, f"{again}_1")]
        for t in st2.trials:
            runner.wait(t.app_handle, wait_interval=0.5, timeout=180)
        st2 = runner.sweep_status(handle)
        assert st2.state == AppState.SUCCEEDED, st2.format()
        # task 1 of the new array ran trial 4, with trial 4's parameters and index
        out = "".join(runner.log_lines(st2.trials[4].app_handle, "r", 0))
        assert out == f"lr=1 b=2 4 {again}_1\n", out


#: a trial's program for the CLI sweep: python reads its parameters (``--lr`` and
#: ``--batch-size``, as the DDP example would), writes them with its TX_TRIAL_INDEX to
#: ``<--output-dir>/result.json`` and prints them. Cheap on purpose: a trial is an array task
#: whatever it runs; the DDP example as a sweep trains for real in tests/test_sweep_e2e.py,
#: and DDP on Slurm in test_slurm_cli.py and tests/test_portability.py
TRIAL = ("import json, os, sys; a = dict(zip(sys.argv[1::2], sys.argv[2::2])); "
         "r = dict(trial=int(os.environ['TX_TRIAL_INDEX']), lr=float(a['--lr']), batch=int(a['--batch-size'])); "
         "os.makedirs(a['--output-dir'], exist_ok=True); "
         "json.dump(r, open(os.path.join(a['--output-dir'], 'result.json'), 'w')); "
         "print('trained', json.dumps(r, sort_keys=True))")


@pytest.mark.slurm
def test_a_2x3_grid_through_the_cli(slurm_nodes, tmp_path):
    """`tx sweep -s slurm ... utils.sh --entrypoint python -- -c TRIAL ...`: one array, every
    trial writes its own parameters, `tx status` shows them all SUCCEEDED, `tx log` reads one."""
    import json
    import os
    import re
    import subprocess

    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", HOME=str(tmp_path), TX_STATE_DIR=str(tmp_path / "state"))

    def tx(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(bin_dir / "tx"), *args], cwd=str(tmp_path), env=env, capture_output=True,
                              text=True, timeout=300)

    p = tx("sweep", "-s", "slurm", "--grid", "lr=0.05,0.1", "--grid", "batch=16,32,64", "--max_parallel", "3",
           "--wait", "utils.sh", "--entrypoint", "python", "--", "-c", TRIAL, "--lr", "${lr}",
           "--batch-size", "${batch}", "--output-dir", "out-${lr}-${batch}")
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    handle = p.stdout.splitlines()[0]
    assert "SUCCEEDED (6 succeeded)" in p.stdout
    apps = re.findall(r"slurm://tx/(\d+_\d)", tx("status", handle, "--json").stdout)
    assert len(apps) == 6 and len({a.split("_")[0] for a in apps}) == 1  # one array
    trials = [(lr, b) for lr in (0.05, 0.1) for b in (16, 32, 64)]
    for k, (lr, b) in enumerate(trials):
        assert json.loads((tmp_path / f"out-{lr}-{b}" / "result.json").read_text()) == {"trial": k, "lr": lr, "batch": b}
    log = tx("log", f"{handle}/5/sh/0")
    assert log.stdout.strip().endswith('trained {"batch": 64, "lr": 0.1, "trial": 5}'), log.stdout + log.stderr


@pytest.mark.slurm
def test_cancel_of_an_array_sweep_is_one_scancel(slurm_nodes, tmp_path, monkeypatch, sbatch_calls):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    app = AppDef("slow", [Role("r", image="", entrypoint="sleep", args=["600"], env={"I": "${i}"},
                               resource=Resource(cpu=1, gpu=0, memMB=64))])
    with Runner() as runner:
        handle = runner.run_sweep(app, SweepSpec(grid={"i": list(range(12))}), "slurm",
                                  cfg={"job_dir": str(tmp_path / "job")}, max_parallel=2)
        del sbatch_calls[:]
        runner.cancel_sweep(handle)
        assert [c[0] for c in sbatch_calls] == ["squeue", "scancel"], sbatch_calls
        assert len(sbatch_calls[1]) == 2 and re.fullmatch(r"\d+_\[0-11\]", sbatch_calls[1][1]), sbatch_calls
        rec = sw.load_record(handle)
        for t in rec.trials:
            runner.wait(f"slurm://tx/{t.attempts[0]}", wait_interval=0.5, timeout=60)
        assert runner.sweep_status(handle).counts() == {"CANCELLED": 12}


def test_a_refused_array_leaves_no_table_behind(offline, tmp_path):
    """sbatch refuses the array (a partition no cluster has; or no Slurm here): the table
    written for its tasks is removed, nothing is left in the job's directory."""
    job_dir = tmp_path / "j"
    info = offline.dryrun_sweep(_app(), GRID, "slurm", cfg={"job_dir": str(job_dir), "partition": "no-such-part"})
    with pytest.raises(Exception):  # noqa: B017 - SlurmCommandError, or SlurmNotInstalledError without Slurm
        offline.schedule_sweep(info)
    assert not list(job_dir.glob("tx-sweep-*.table")) and info.native.request.table_path.startswith(str(job_dir))
