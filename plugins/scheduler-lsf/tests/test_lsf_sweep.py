"""Sweeps on LSF: single-replica trials as one job array (``bsub -J "name[1-N]%k"``):
offline dryrun, then on the session's private OpenLava cluster a 2x3 grid with
max_parallel, one bsub, each trial's status and logs, list, a resume as one new array; apps of several replicas one app
per trial."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest

from tx.runner import Runner
from tx.runner import sweep as sw
from tx.specs import AppDef, AppState, Resource, Role
from tx.specs.sweep import SweepSpec
from tx_scheduler_lsf import _client
from tx_scheduler_lsf._client import parse_lsid
from tx_scheduler_lsf.scheduler import create_scheduler

PY = sys.executable
GRID = SweepSpec(grid={"lr": [0.1, 1], "b": [1, 2, 3]})


def _app(replicas: int = 1) -> AppDef:
    return AppDef("sw", [Role("r", image="", entrypoint=PY, num_replicas=replicas,
                              args=["-c", "import os,sys; print('lr=${lr} b=${b}', os.environ['TX_TRIAL_INDEX'], "
                                          "os.environ['TX_APP_ID']); sys.exit(1 if '${b}' == '2' else 0)"],
                              resource=Resource(cpu=1, gpu=0, memMB=64))])


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    caps = parse_lsid("OpenLava 4.0dev4, Nov 28 2026")
    with Runner(scheduler_factories={"lsf": lambda s, **kw: create_scheduler(s, caps=caps)}) as r:
        yield r


def test_dryrun_of_single_replica_trials_is_one_array(offline: Any, tmp_path: Path) -> None:
    info = offline.dryrun_sweep(_app(), GRID, "lsf", cfg={"jobdir": str(tmp_path / "j")}, max_parallel=2)
    text = str(info)
    assert "one native array request for 6 trials, at most 2 at once" in text
    assert "-r-0[1-6]%2'" in text and text.count("\ntx_argv=(") == 1 and "# TABLE " in text  # one script, a table


def _element(script: str, element: int, names: List[str]) -> List[str]:
    """What element ``element`` of the array runs: bash runs the script's head (its row
    read from the table) and prints the exported ``names`` and ``tx_argv``, NUL-separated."""
    head = script[script.index("tx_app_id="):]
    head = head[:head.index("\n", head.index("\ntx_argv=(") + 1)]
    prog = (f"LSB_JOBINDEX={element}\n{head}\n"
            + "".join(f'printf "%s\\0" "${{{n}}}"\n' for n in names) + 'printf "%s\\0" "${tx_argv[@]}"\n')
    return subprocess.run(["bash", "-c", prog], capture_output=True, text=True, check=True).stdout.split("\0")[:-1]


def test_each_element_runs_its_own_trial(offline: Any, tmp_path: Path) -> None:
    """The array's one script and its table give element i exactly trial i-1's environment
    and program (its app id as the element's), for values with spaces and quotes, across
    arrays split at MAX_JOB_ARRAY_SIZE: bash runs the script's lookup for real."""
    odd = SweepSpec(grid={"lr": [0.1, 1], "b": ["x y", "it's", '$HOME"', 4, 5]})
    info = offline.dryrun_sweep(_app(), odd, "lsf", cfg={"jobdir": str(tmp_path / "j")})
    req = info.native.request
    req.max_array_size = 4
    assert req.arrays == [(1, 4), (5, 8), (9, 10)] and req.template() is not None
    req.write_table()
    assert os.path.isfile(req.table_path)
    ids = req.trial_ids()
    for k, (first, last) in enumerate(req.arrays):
        script = req.script(k)
        for e in range(first, last + 1):
            r = next(iter(req.trials[e - 1].replicas.values()))
            own = [v.replace(req.trials[e - 1].app_id, ids[e - 1]) for v in [*r.env.values(), *r.argv]]
            assert _element(script, e, list(r.env)) == own, (k, e)
            assert f"lr={odd.grid['lr'][(e - 1) // 5]} b={odd.grid['b'][(e - 1) % 5]}" in own[-1]
    assert len(req.script(0)) < 6000 and req.script(0) == req.script(2)  # one script, whatever the trials


def test_dryrun_of_multi_replica_trials_is_one_app_per_trial(offline: Any, tmp_path: Path) -> None:
    info = offline.dryrun_sweep(_app(replicas=2), GRID, "lsf", cfg={"jobdir": str(tmp_path / "j")})
    assert info.native is None
    assert "several LSF jobs, which one job array cannot hold" in str(info)


@pytest.mark.lsf
def test_grid_runs_as_one_array(lsf_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    calls: List[List[str]] = []
    real = _client.run
    monkeypatch.setattr(_client, "run", lambda argv, *a, **kw: calls.append(list(argv)) or real(argv, *a, **kw))
    with Runner() as runner:
        handle = runner.run_sweep(_app(), GRID, "lsf", cfg={"jobdir": str(tmp_path / "job")}, max_parallel=2)
        bsubs = [c for c in calls if c[0] == "bsub"]
        assert len(bsubs) == 1 and bsubs[0][bsubs[0].index("-J") + 1].endswith("-r-0[1-6]%2"), bsubs
        rec = sw.load_record(handle)
        base = rec.trials[0].attempts[0].rsplit("_", 1)[0]
        assert [t.attempts for t in rec.trials] == [[f"{base}_{i}"] for i in range(1, 7)]
        for t in rec.trials:
            runner.wait(f"lsf://tx/{t.attempts[0]}", wait_interval=0.5, timeout=120)
        st = runner.sweep_status(handle)
        assert [t.state for t in st.trials] == [AppState.SUCCEEDED, AppState.FAILED, AppState.SUCCEEDED] * 2
        out = "".join(runner.log_lines(st.trials[4].app_handle, "r", 0))
        assert out == f"lr=1 b=2 4 {base}_5\n"
        listed = sw.collapse_listed(runner.list("lsf"), [rec])
        row = next(a for a in listed if a.app_handle == handle)
        assert row.state == AppState.FAILED and "4 succeeded, 2 failed" in row.name
        # resume: the two failed trials as one new array of two elements (one bsub)
        calls.clear()
        assert runner.resume_sweep(handle) == [1, 4]
        bsubs = [c for c in calls if c[0] == "bsub"]
        assert len(bsubs) == 1 and bsubs[0][bsubs[0].index("-J") + 1].endswith("-r-0[1-2]%2"), bsubs
        rec = sw.load_record(handle)
        again = rec.trials[1].attempts[1].rsplit("_", 1)[0]
        assert again != base and [rec.trials[i].attempts[1] for i in (1, 4)] == [f"{again}_1", f"{again}_2"]
        for i in (1, 4):
            runner.wait(f"lsf://tx/{rec.trials[i].attempts[1]}", wait_interval=0.5, timeout=120)
        st = runner.sweep_status(handle)
        assert [t.attempts for t in st.trials] == [1, 2, 1, 1, 2, 1]
        # element 2 of the new array ran trial 4 (which fails again: b=2)
        out = "".join(runner.log_lines(st.trials[4].app_handle, "r", 0))
        assert out == f"lr=1 b=2 4 {again}_2\n" and st.trials[4].state == AppState.FAILED, out


def test_a_refused_array_leaves_no_table_behind(offline: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bsub refuses the array (here: no LSF on PATH): the table written for its elements is
    removed, and no trial's AppDef was written: nothing is left in the job directory."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-lsf"))
    job_dir = tmp_path / "j"
    info = offline.dryrun_sweep(_app(), GRID, "lsf", cfg={"jobdir": str(job_dir)})
    assert info.native.request.table_path.startswith(str(job_dir))
    with pytest.raises(_client.LsfNotInstalledError):
        offline.schedule_sweep(info)
    assert not list(job_dir.iterdir())
