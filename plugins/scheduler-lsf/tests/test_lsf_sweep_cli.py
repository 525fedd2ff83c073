"""Sweeps on LSF through the ``tx`` CLI, on a private OpenLava cluster of this module whose
``MAX_JOB_ARRAY_SIZE`` is 4 (start-openlava.sh's ``OL_MAX_JOB_ARRAY_SIZE``): a 2x3 grid is
two job arrays (elements 1-4 and 5-6, the second after the first under ``--max_parallel``),
each trial prints and writes its own parameters, ``tx status`` and ``tx log`` follow the
sweep as one; ``tx cancel SWEEP/TRIAL`` cancels one trial (``bkill "id[i]"``), ``tx cancel
SWEEP`` the rest with one bjobs and one bkill."""
import json
import os
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from tx.runner import Runner
from tx.runner import sweep as sw
from tx.specs import AppState
from tx.testing.backends import environ
from tx_scheduler_lsf import _client
from tx_scheduler_lsf._array import LsfArrayRequest
from tx_scheduler_lsf.testing import LsfCluster, require_openlava, start_cluster, stop_cluster

PY = sys.executable


def test_arrays_split_at_the_limit_keep_each_trials_element() -> None:
    req = LsfArrayRequest("b", [object()] * 10, 2, 4)  # type: ignore[list-item]
    assert req.arrays == [(1, 4), (5, 8), (9, 10)]
    assert req.split_line() == ("lsf: 10 trials as 3 job arrays of at most 4 elements (the cluster's "
                                "MAX_JOB_ARRAY_SIZE); each starts after the one before has ended, so that at most 2 "
                                "run at once")
    assert req.trial_ids() == [f"b_{i}" for i in range(1, 11)]
    assert LsfArrayRequest("b", [object()] * 10, None, 1000).arrays == [(1, 10)]  # type: ignore[list-item]


@pytest.fixture(scope="module")
def small_arrays(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LsfCluster]:
    require_openlava()
    base = tmp_path_factory.mktemp("openlava-arrays")
    cluster = start_cluster(base, OL_MAX_JOB_ARRAY_SIZE="4")
    try:
        values = {k: cluster.env[k] for k in ("LSF_ENVDIR", "LSF_SERVERDIR", "LSF_BINDIR", "LSF_LIBDIR", "PATH")}
        values["TX_STATE_DIR"] = str(base / "tx-state")
        with environ(values, unset=[k for k in os.environ if k.startswith(("LSF_", "LSB_"))
                                    and k not in values]):
            yield cluster
    finally:
        stop_cluster(cluster)


def _env(cluster: LsfCluster, tx_env: Dict[str, str]) -> Dict[str, str]:
    env = {k: v for k, v in tx_env.items() if not k.startswith(("LSF_", "LSB_"))}
    env.update({k: cluster.env[k] for k in ("LSF_ENVDIR", "LSF_SERVERDIR", "LSF_BINDIR", "LSF_LIBDIR")})
    env["PATH"] = f"{Path(PY).parent}:{cluster.env['PATH']}"
    return env


#: a trial: python reads its parameters, writes them with its TX_TRIAL_INDEX to
#: <--output-dir>/result.json and prints them
TRIAL = ("import json, os, sys; a = dict(zip(sys.argv[1::2], sys.argv[2::2])); "
         "r = dict(trial=int(os.environ['TX_TRIAL_INDEX']), lr=float(a['--lr']), batch=int(a['--batch-size'])); "
         "os.makedirs(a['--output-dir'], exist_ok=True); "
         "json.dump(r, open(os.path.join(a['--output-dir'], 'result.json'), 'w')); "
         "print('trained', json.dumps(r, sort_keys=True))")


@pytest.mark.lsf
def test_a_2x3_grid_through_the_cli_is_two_arrays_under_one_handle(small_arrays, tx, tx_env, tmp_path):
    env = _env(small_arrays, tx_env)
    dry = tx("sweep", "-s", "lsf", "--dryrun", "-cfg", f"jobdir={tmp_path / 'job'}", "--grid", "lr=0.05,0.1",
             "--grid", "batch=16,32,64", "--max_parallel", "2", "utils.sh", "--", "echo", "${lr}", "${batch}", env=env)
    assert dry.returncode == 0 and "# lsf: 6 trials as 2 job arrays of at most 4 elements" in dry.stdout, dry.stderr
    assert "-sh-0[1-4]%2'" in dry.stdout and "-sh-0[5-6]%2'" in dry.stdout and "'ended(<array 0>)'" in dry.stdout
    p = tx("sweep", "-s", "lsf", "-cfg", f"jobdir={tmp_path / 'job'}", "--grid", "lr=0.05,0.1",
           "--grid", "batch=16,32,64", "--max_parallel", "2", "--wait", "utils.sh", "--entrypoint", PY, "--",
           "-c", TRIAL, "--lr", "${lr}", "--batch-size", "${batch}", "--output-dir", str(tmp_path / "out-${lr}-${batch}"),
           env=env, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    handle = p.stdout.splitlines()[0]
    assert "SUCCEEDED (6 succeeded)" in p.stdout
    split = [ln for ln in p.stderr.splitlines() if "job arrays" in ln]
    assert len(split) == 1 and "6 trials as 2 job arrays of at most 4 elements" in split[0], p.stderr
    status = json.loads(tx("status", handle, "--json", env=env).stdout)
    apps = [re.fullmatch(r"lsf://tx/(.+)_(\d+)", t["app_handle"]).groups() for t in status["trials"]]
    assert len({b for b, _ in apps}) == 1 and [int(i) for _, i in apps] == list(range(1, 7))
    trials = [(lr, b) for lr in (0.05, 0.1) for b in (16, 32, 64)]
    for k, (lr, b) in enumerate(trials):
        assert json.loads((tmp_path / f"out-{lr}-{b}" / "result.json").read_text()) == {"trial": k, "lr": lr, "batch": b}
        assert status["trials"][k]["params"] == {"lr": lr, "batch": b} and status["trials"][k]["state"] == "SUCCEEDED"
    for k in (3, 4, 5):  # the last element of array 1, both of array 2
        log = tx("log", f"{handle}/{k}/sh/0", env=env)
        lr, b = trials[k]
        assert log.stdout.strip().endswith(f'trained {{"batch": {b}, "lr": {lr}, "trial": {k}}}'), log.stdout + log.stderr


@pytest.mark.lsf
def test_cancel_of_one_trial_then_of_the_sweep(small_arrays, tx, tx_env, tmp_path, monkeypatch):
    env = _env(small_arrays, tx_env)
    p = tx("sweep", "-s", "lsf", "-cfg", f"jobdir={tmp_path / 'job'}", "--grid", "i=0,1,2,3,4,5", "--env", "I=${i}", "utils.sh",
           "--", "sleep", "600", env=env)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    one = tx("cancel", f"{handle}/4", env=env)
    assert one.returncode == 0, one.stderr
    monkeypatch.setenv("TX_STATE_DIR", env["TX_STATE_DIR"])
    calls: List[List[str]] = []
    real = _client.run
    monkeypatch.setattr(_client, "run", lambda argv, *a, **kw: calls.append(list(argv)) or real(argv, *a, **kw))
    with Runner() as runner:
        rec = sw.load_record(handle)
        runner.wait(f"lsf://tx/{rec.trials[4].attempts[0]}", wait_interval=0.5, timeout=60)
        st = runner.sweep_status(handle)
        assert st.trials[4].state == AppState.CANCELLED, st.format()
        assert all(t.state in (AppState.RUNNING, AppState.PENDING) for t in st.trials if t.index != 4), st.format()
        del calls[:]
        done = runner.cancel_sweep(handle)
        assert sorted(done.stopped) == [0, 1, 2, 3, 5]
        assert [c[0] for c in calls].count("bkill") == 1 and [c[0] for c in calls].count("bjobs") <= 2, calls
        for t in rec.trials:
            runner.wait(f"lsf://tx/{t.attempts[0]}", wait_interval=0.5, timeout=60)
        assert runner.sweep_status(handle).counts() == {"CANCELLED": 6}, runner.sweep_status(handle).format()
