"""`tx sweep` end to end on local_cwd, in subprocesses: a 2x3 grid with max_parallel under
the supervisor, the trial table, logs of a trial, one row in `tx list`, cancel, resume of
exactly the failed and cancelled trials (some are killed), bad input in one line, and
(slow) the DDP example as a 2x2 grid."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from tx.testing.backends import require_module

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "examples" / "train.py"


def _status(tx, handle):
    p = tx("status", handle, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _wait_all(tx, handle, timeout=90.0, done=("SUCCEEDED", "FAILED", "CANCELLED")):
    deadline = time.monotonic() + timeout
    while True:
        st = _status(tx, handle)
        if all(t["state"] in done for t in st["trials"]):
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.3)


def test_grid_sweep_status_log_list_and_resume_of_exactly_the_failed(tx, tmp_path):
    # trials with b=2 fail; the others write the env they got
    script = ('echo "lr=${lr} b=${b} idx=$TX_TRIAL_INDEX sweep=$TX_SWEEP_ID params=$TX_TRIAL_PARAMS"; '
              'test -e fixed || test ${b} != 2')
    p = tx("sweep", "-s", "local_cwd", "--grid", "lr=0.1,1", "--grid", "b=1,2,3", "--max_parallel", "2",
           "utils.sh", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    assert re.fullmatch(r"local_cwd://tx/sweep-sh-[0-9a-f]{8}", handle), handle
    st = _wait_all(tx, handle)
    assert [t["params"] for t in st["trials"]] == [{"lr": lr, "b": b} for lr in (0.1, 1) for b in (1, 2, 3)]
    assert [t["state"] for t in st["trials"]] == ["SUCCEEDED", "FAILED", "SUCCEEDED"] * 2
    assert st["state"] == "FAILED" and st["counts"] == {"SUCCEEDED": 4, "FAILED": 2}
    assert "exited with code 1" in st["trials"][1]["why"]
    table = tx("status", handle).stdout
    assert re.search(r"^4\s+lr=1 b=2\s+FAILED\s+1\s+\d+\.\d s\s+replica sh/0 exited with code 1$", table, re.M), table

    log = tx("log", f"{handle}/4/sh/0")
    assert log.returncode == 0, log.stderr
    line = log.stdout.strip()
    assert line.startswith(f"sh/0 lr=1 b=2 idx=4 sweep={handle} params=")
    assert json.loads(line.split("params=", 1)[1]) == {"b": 2, "lr": 1}

    rows = [r for r in tx("list", "-s", "local_cwd").stdout.splitlines() if "://" in r]
    assert len(rows) == 1 and rows[0].startswith(handle), rows
    assert "FAILED" in rows[0] and "[sweep of 6: 4 succeeded, 2 failed]" in rows[0]

    (tmp_path / "fixed").write_text("")
    r = tx("sweep", "resume", handle)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{handle}: resumed 2 trial(s): 1,4"
    st2 = _wait_all(tx, handle)
    assert [t["attempts"] for t in st2["trials"]] == [1, 2, 1, 1, 2, 1]
    assert st2["state"] == "SUCCEEDED"
    assert [t["app_handle"] for i, t in enumerate(st2["trials"]) if i not in (1, 4)] == \
        [t["app_handle"] for i, t in enumerate(st["trials"]) if i not in (1, 4)]
    assert tx("sweep", "resume", handle).stdout.strip() == f"{handle}: resumed 0 trial(s)"


def test_a_killed_trial_and_a_cancelled_one_are_exactly_what_resume_reruns(tx, tmp_path):
    # n=1,2 succeed; n=3,4 wait for a file; n=3 is then killed from outside tx
    (tmp_path / "trial.sh").write_text('if [ $1 -le 2 ]; then exit 0; fi; echo $$ > pid-$1; test -e go || exec sleep 60\n')
    p = tx("sweep", "-s", "local_cwd", "--grid", "n=1,2,3,4", "utils.sh", "--", "sh", "trial.sh", "${n}")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    deadline = time.monotonic() + 60
    while not ((tmp_path / "pid-3").exists() and (tmp_path / "pid-4").exists()):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(int((tmp_path / "pid-3").read_text()), signal.SIGKILL)
    deadline = time.monotonic() + 60
    while _status(tx, handle)["trials"][2]["state"] != "FAILED":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert tx("cancel", handle).returncode == 0
    st = _wait_all(tx, handle)
    assert [t["state"] for t in st["trials"]] == ["SUCCEEDED", "SUCCEEDED", "FAILED", "CANCELLED"]
    (tmp_path / "go").write_text("")
    r = tx("sweep", "resume", "--wait", handle)
    assert r.stdout.splitlines()[0] == f"{handle}: resumed 2 trial(s): 2,3", r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    st = _status(tx, handle)
    assert [t["attempts"] for t in st["trials"]] == [1, 1, 2, 2] and st["state"] == "SUCCEEDED"


@pytest.mark.parametrize("args, needle", [
    (["--grid", "lr=", "utils.echo"], "parameter 'lr' has no values"),
    (["--grid", "lr=1", "utils.echo"], "parameter 'lr' is not an argument of component utils.echo"),
    (["--grid", "num_replicas=1,two", "utils.sh", "echo"], "trial 1 (num_replicas=two): "),
    (["--random", "lr=loguniform(1e-4,1e-1)", "utils.sh", "echo", "${lr}"], "random parameters need --trials"),
    (["--file", "missing.yaml", "utils.echo"], "cannot read sweep file missing.yaml"),
    (["resume", "local_cwd://tx/sweep-x-0123abcd"], "no sweep local_cwd://tx/sweep-x-0123abcd on this host"),
])
def test_bad_input_is_one_line_and_nothing_runs(tx, one_line_error, args, needle):
    one_line_error(tx("sweep", "-s", "local_cwd", *args), needle)
    assert [r for r in tx("list", "-s", "local_cwd").stdout.splitlines() if "://" in r] == []


def test_sweep_file_and_dryrun_print_the_requests_and_the_trials(tx, tmp_path):
    (tmp_path / "s.yaml").write_text(
        "component: utils.sh\nargs: [sh, -c, 'echo ${opt} $LR']\nenv: {LR: '${lr}'}\n"
        "grid: {opt: [adam, sgd]}\n"
        "random: {lr: {distribution: loguniform, low: 0.0001, high: 0.1}}\ntrials: 2\nseed: 3\n")
    p = tx("sweep", "-s", "local_cwd", "--file", "s.yaml", "--dryrun")
    assert p.returncode == 0, p.stderr
    assert "=== local_cwd: 4 requests, one per trial (local_cwd has no native array); trial 0's: ===" in p.stdout
    trials = p.stdout.split("=== TRIALS (4) ===\n")[1].splitlines()
    assert trials[0].split() == ["TRIAL", "PARAMS"]
    assert [t.split()[1] for t in trials[1:]] == ["opt=adam", "opt=adam", "opt=sgd", "opt=sgd"]
    again = tx("sweep", "-s", "local_cwd", "--file", "s.yaml", "--dryrun").stdout
    assert again.split("=== TRIALS")[1] == p.stdout.split("=== TRIALS")[1]  # the same seed, the same draws
    assert not (tmp_path / "state" / "sweeps").exists()


@pytest.mark.slow
def test_ddp_example_as_a_2x2_grid(tx, tmp_path):
    """The sweep test that trains for real: every trial of a 2x2 grid is the DDP example
    (examples/train.py, ``dist.ddp -j 1x2``: torchrun, two gloo ranks), 3 at once (three DDP
    trials side by side on one host, the fourth waits for a slot), each with its parameters
    and its checkpoint. The other backends' sweep tests run a cheap Python trial: their
    trials are apps of that backend whatever they run, and each backend's DDP runs in
    tests/test_portability.py; a sixth DDP trial here proved nothing a fourth does not."""
    require_module("torch", "the DDP example trains with torch: pip install torch==2.13.0")
    require_module("sklearn", "the DDP example's data set: pip install scikit-learn")
    # lean: one epoch, no per-epoch torch.distributed.checkpoint (each trial's own
    # TX_CHECKPOINT_DIR is test_sweep_runner's), 3 trials at once (two waves)
    p = tx("sweep", "-s", "local_cwd", "--grid", "lr=0.05,0.1", "--grid", "batch=16,64", "--max_parallel", "3",
           "--wait", "dist.ddp", "-j", "1x2", "--script", str(TRAIN), "--", "--epochs", "1", "--checkpoint-dir", "",
           "--lr", "${lr}", "--batch-size", "${batch}", "--output-dir", str(tmp_path / "out-${lr}-${batch}"),
           timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "SUCCEEDED (4 succeeded)" in p.stdout
    for lr in ("0.05", "0.1"):
        for b in ("16", "64"):
            assert (tmp_path / f"out-{lr}-{b}" / "checkpoint.pt").exists()
    handle = p.stdout.splitlines()[0]
    log = tx("log", f"{handle}/3/train/0")
    assert re.search(r"world_size=2 test_accuracy=0\.\d+", log.stdout), log.stdout + log.stderr


def test_trials_record_a_metric_and_best_and_lineage_read_it(tx, tx_env, tmp_path):
    env = {**tx_env, "TX_TRACKERS": "file", "TX_TRACKER_FILE_CONFIG": str(tmp_path / "runs")}
    code = "from tx.tracker import app_run_from_env; app_run_from_env().add_metadata(loss=abs(${x} - 2.5))"
    p = tx("sweep", "-s", "local_cwd", "--grid", "x=1,2,3,4", "--wait", "utils.python", "-c", code, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    handle = p.stdout.splitlines()[0]
    best = tx("sweep", "best", handle, "--metric", "loss", "-n", "2", env=env)
    assert best.returncode == 0, best.stderr
    assert [ln.split()[:3] for ln in best.stdout.splitlines()] == [["1", "x=2", "loss=0.5"], ["2", "x=3", "loss=0.5"]]
    worst = tx("sweep", "best", handle, "--metric", "loss", "--max", "--json", env=env)
    assert json.loads(worst.stdout)["params"] in ({"x": 1}, {"x": 4})
    lineage = tx("tracker", "lineage", handle, "--json", env=env)
    assert lineage.returncode == 0, lineage.stderr
    st = _status(tx, handle)
    assert sorted(c["run_id"] for c in json.loads(lineage.stdout)["children"]) == \
        sorted(t["app_handle"] for t in st["trials"])


def test_a_sweeps_row_and_its_trials_are_named_after_the_script(tx, tmp_path):
    (tmp_path / "train.py").write_text("import sys; print('x', sys.argv[1])\n")
    p = tx("sweep", "-s", "local_cwd", "--grid", "x=1,2", "--wait", "utils.python", "--script", "train.py",
           "--", "${x}")
    assert p.returncode == 0, p.stdout + p.stderr
    handle = p.stdout.splitlines()[0]
    rows = [json.loads(ln) for ln in tx("list", "-s", "local_cwd", "--json").stdout.splitlines()]
    assert [r["name"] for r in rows if r["app_handle"] == handle] == ["train [sweep of 2: 2 succeeded]"]
    trials = _status(tx, handle)["trials"]
    names = {json.loads(tx("describe", t["app_handle"], "--json").stdout)["name"] for t in trials}
    assert names == {"train"}


def test_resume_from_another_directory_and_shell_submits_with_the_launchs_options_and_context(tx, tx_env, tmp_path):
    """`tx sweep resume` (and the supervisor it starts) submit the trials with the run
    options, component defaults, environment and directory the sweep was launched with,
    not the resuming process's: its `.txconfig` sets log_dir and no component default, its
    shell lacks MARK, and it runs elsewhere."""
    launch, other = tmp_path / "launch", tmp_path / "other"
    launch.mkdir()
    other.mkdir()
    (launch / ".txconfig").write_text("[component:utils.sh]\nnum_replicas = 2\n")  # a component default
    (other / ".txconfig").write_text(f"[local_cwd]\nlog_dir = {other / 'logs'}\n")
    p = tx("sweep", "-s", "local_cwd", "--grid", "n=1,2", "--max_parallel", "1", "utils.sh", "--", "sh", "-c",
           'echo "n=${n} cwd=$PWD mark=$MARK path0=${PATH%%:*}"; test -e fixed', cwd=launch, env={**tx_env, "MARK": "launch"})
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    st = _wait_all(tx, handle)
    assert [t["state"] for t in st["trials"]] == ["FAILED", "FAILED"], st
    (launch / "fixed").write_text("")
    env = {k: v for k, v in tx_env.items() if k != "MARK"}
    env["TX_PREPEND_CWD"] = "true"  # an option of the resuming shell: not the sweep's
    r = tx("sweep", "resume", "--wait", handle, cwd=other, env=env)
    assert r.stdout.splitlines()[0] == f"{handle}: resumed 2 trial(s): 0,1", r.stdout + r.stderr
    assert r.returncode == 0, r.stdout + r.stderr  # trial 1 was submitted by the supervisor
    st = _status(tx, handle)
    assert [t["attempts"] for t in st["trials"]] == [2, 2] and st["state"] == "SUCCEEDED", st
    for i in (0, 1):
        out = tx("log", f"{handle}/{i}/sh/0", cwd=other, env=env)
        line = out.stdout.strip()
        assert line.startswith(f"sh/0 n={i + 1} cwd={launch} mark=launch path0="), out.stdout + out.stderr
        assert line.split("path0=", 1)[1] != str(launch), line  # prepend_cwd stayed False
        second = tx("log", f"{handle}/{i}/sh/1", cwd=other, env=env).stdout  # the launch's component default
        assert second.startswith(f"sh/1 n={i + 1} cwd={launch} mark=launch"), second
    assert not (other / "logs").exists()  # the resumer's .txconfig log_dir was not used
