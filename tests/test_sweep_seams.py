"""Sweeps at their seams with the other verbs (issue 41, items 6-8), through the `tx` CLI on
local_cwd: a sweep handle and a trial's (`SWEEP/TRIAL`) work with status, describe, cancel,
log and completion; `tx sweep` says how to follow it; trial durations are the recorded
ones, however late one looks; Ctrl-C on `tx sweep --wait` cancels the trials; a huge grid
is refused in one line before anything is expanded."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TX = Path(sys.executable).parent / "tx"  # as the tx fixture runs it


def _json(tx, *args):
    p = tx(*args, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _until(what, check, timeout=60.0):
    """Poll ``check()`` until it returns something true; return it."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _trial_state(tx, sweep, i):
    st = _json(tx, "status", f"{sweep}/{i}")
    return st["status"]["state"] if st["status"] is not None else st["trial"]["state"]


def test_every_verb_takes_a_sweep_and_a_trial_handle(tx, tmp_path, request):
    # one trial at a time: trial 0 runs, 1 and 2 wait their turn; a trial runs until the test
    # cancels it (its hour is only a bound: a trial that ended by itself before its cancel,
    # seen with 60 s under load, is not what this test is about)
    p = tx("sweep", "-s", "local_cwd", "--grid", "n=0,1,2", "--max_parallel", "1",
           "utils.sh", "--", "sh", "-c", "echo trial ${n}; exec sleep 3600")
    assert p.returncode == 0, p.stderr
    sweep = p.stdout.strip()
    request.addfinalizer(lambda: tx("cancel", sweep))  # where an assertion below fails: no trial outlives the test
    # 7: not waiting, it says how to follow it, as `tx run --detach` does
    assert p.stderr.splitlines() == [
        f"tx sweep: launched {sweep}; to follow it:", f"  tx status {sweep}",
        f"  tx log -f {sweep}/TRIAL     (TRIAL: a trial's number, 0 first)", f"  tx cancel {sweep}"]

    _until("trial 0 running", lambda: _trial_state(tx, sweep, 0) == "RUNNING")
    st0 = _json(tx, "status", f"{sweep}/0")
    assert st0["trial"]["sweep_handle"] == sweep and st0["trial"]["params"] == {"n": 0}
    app0 = st0["trial"]["app_handle"]
    assert app0.startswith("local_cwd://tx/") and st0["status"]["roles"][0]["role"] == "sh"
    text = tx("status", f"{sweep}/0").stdout
    assert text.startswith(f"Trial: 0 of {sweep}\n  Params: n=0\n  Attempts: 1\n  App: {app0}\nAppStatus:\n"), text
    assert _json(tx, "status", f"{sweep}/2") == {
        "trial": {"sweep_handle": sweep, "trial": 2, "params": {"n": 2}, "attempts": 0, "app_handle": None,
                  "state": "UNSUBMITTED"}, "status": None}

    desc = _json(tx, "describe", sweep)
    assert desc["sweep_handle"] == sweep and desc["component"] == "utils.sh" and desc["parameters"] == ["n"]
    assert [(t["index"], t["params"]) for t in desc["trials"]] == [(0, {"n": 0}), (1, {"n": 1}), (2, {"n": 2})]
    assert desc["trials"][0]["app_handles"] == [app0]
    assert f"sweep_handle: {sweep}\n" in tx("describe", sweep).stdout
    # a trial not submitted yet: the AppDef it will be submitted with
    app2 = _json(tx, "describe", f"{sweep}/2")
    assert app2["roles"][0]["env"]["TX_TRIAL_INDEX"] == "2" and "echo trial 2" in " ".join(app2["roles"][0]["args"])
    assert _json(tx, "describe", f"{sweep}/0")["roles"][0]["env"]["TX_TRIAL_INDEX"] == "0"

    assert _until("trial 0's line", lambda: "sh/0 trial 0" in tx("log", f"{sweep}/0").stdout)

    # cancel a trial not submitted yet: it never will be (until resumed)
    c = tx("cancel", f"{sweep}/2")
    assert c.returncode == 0, c.stderr
    assert c.stderr.strip() == (f"tx cancel: trial 2 of {sweep} was not submitted yet: it will not be "
                                f"(`tx sweep resume {sweep}` submits it)")
    assert _trial_state(tx, sweep, 2) == "CANCELLED"
    # cancel a running trial: its app, as any app's cancel; the next trial then starts
    c = tx("cancel", f"{sweep}/0")
    assert c.returncode == 0, c.stderr
    assert c.stderr.startswith(f"tx cancel: {app0} is CANCELLED"), c.stderr
    _until("trial 1 running", lambda: _trial_state(tx, sweep, 1) == "RUNNING")
    # cancel the sweep: it says what it cancelled
    c = tx("cancel", sweep)
    assert c.returncode == 0, c.stderr
    assert c.stderr.startswith(f"tx cancel: {sweep} is CANCELLED: cancelled 1 running trial(s): 1 (after "), c.stderr
    st = _json(tx, "status", sweep)
    assert [t["state"] for t in st["trials"]] == ["CANCELLED"] * 3 and st["state"] == "CANCELLED"
    again = tx("cancel", sweep)
    assert again.returncode == 0 and again.stderr.strip() == \
        f"tx cancel: {sweep} had already ended: CANCELLED (no trial to cancel)", again.stderr

    bad = tx("status", f"{sweep}/7")
    assert bad.returncode != 0 and f"sweep {sweep} has no trial 7: it has 3 (0-2)" in bad.stderr, bad.stderr

    # completion offers the sweep and a run with failover, besides apps
    # (--image: a directory, which local_dir, the fallback hop, runs in)
    run = tx("run", "-s", "local_cwd", "--fallback", "local_dir", "utils.echo", "--image", str(tmp_path), "--msg", "hi")
    assert run.returncode == 0, run.stderr
    run_handle = run.stdout.splitlines()[0]
    words = tx("completion", "--list", "handles").stdout.splitlines()
    assert sweep in words and run_handle in words and app0 in words, words


def test_trial_durations_are_the_recorded_ones_however_late_one_looks(tx, tmp_path):
    p = tx("sweep", "-s", "local_cwd", "--grid", "n=0,1", "utils.sh", "--", "sh", "-c", "sleep 1; touch done-${n}")
    assert p.returncode == 0, p.stderr
    sweep = p.stdout.strip()
    _until("both trials done", lambda: (tmp_path / "done-0").exists() and (tmp_path / "done-1").exists())
    time.sleep(8)  # the point: nobody looks at the sweep for a while after its trials ended
    st = _json(tx, "status", sweep)
    durations = [t["duration"] for t in st["trials"]]
    assert all(1.0 <= d < 6 for d in durations), durations  # they slept 1 s and ended about 8 s ago
    assert [t["duration"] for t in _json(tx, "status", sweep)["trials"]] == durations  # recorded once


def _pids(where):
    """The pids the two trials wrote, once both have."""
    texts = [(where / f"pid-{n}").read_text().strip() if (where / f"pid-{n}").exists() else "" for n in (0, 1)]
    return [int(t) for t in texts] if all(texts) else None


def test_ctrl_c_on_sweep_wait_cancels_the_trials_in_one_line(tx_env, tmp_path):
    (tmp_path / "trial.sh").write_text("echo $$ > pid-$1.tmp && mv pid-$1.tmp pid-$1; exec sleep 3600\n")  # until Ctrl-C
    proc = subprocess.Popen(
        [str(TX), "sweep", "-s", "local_cwd", "--grid", "n=0,1", "--wait", "utils.sh", "--", "sh", "trial.sh", "${n}"],
        cwd=tmp_path, env=tx_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = _until("both trials running", lambda: _pids(tmp_path))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    sweep = out.splitlines()[0]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 130, (out, err)
    assert len(lines) == 1 and lines[0].startswith(f"tx sweep: cancelled {sweep} (Ctrl-C): 2 running trial(s): 0,1; "), err
    for pid in pids:  # the trials' processes are gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    st = subprocess.run([str(TX), "status", sweep, "--json"], cwd=tmp_path, env=tx_env, text=True,
                        capture_output=True, timeout=60)
    assert [t["state"] for t in json.loads(st.stdout)["trials"]] == ["CANCELLED", "CANCELLED"], st.stdout


def _limit_memory():
    limit = 2 * 1024 ** 3  # 2 GiB of address space: the grid below expanded needs far more
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize("args, needle", [
    (["--grid", "a=" + ",".join(map(str, range(1000))), "--grid", "b=" + ",".join(map(str, range(1000))),
      "--grid", "c=" + ",".join(map(str, range(1000))), "utils.sh", "--", "echo", "${a}", "${b}", "${c}"],
     "1000000000 trials are more than a sweep on local_cwd may have (10000)"),
    (["--random", "x=uniform(0,1)", "--trials", "100000000000", "utils.sh", "--", "echo", "${x}"],
     "100000000000 trials are more than a sweep on local_cwd may have (10000)"),
    (["--file", "huge.json"], "1000000000 trials are more than a sweep on local_cwd may have (10000)"),
])
def test_a_huge_sweep_is_refused_in_one_line_before_it_is_expanded(tx_env, tmp_path, one_line_error, args, needle):
    values = list(range(1000))
    (tmp_path / "huge.json").write_text(json.dumps({
        "component": "utils.sh", "args": ["--", "echo", "${a}", "${b}", "${c}"],
        "grid": {"a": values, "b": values, "c": values}}))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([str(TX), "sweep", "-s", "local_cwd", *args], cwd=tmp_path, env=tx_env, text=True,
                       capture_output=True, timeout=120, preexec_fn=_limit_memory)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    one_line_error(p, needle, code=1)
    # a generous bound that only an expansion of the trials would pass
    assert (used.ru_utime + used.ru_stime) - (before.ru_utime + before.ru_stime) < 20, used
    assert not (tmp_path / "state" / "sweeps").exists()


def test_a_10000_trial_dryrun_finds_the_component_once_and_its_request_does_not_grow(tmp_path, monkeypatch):
    """A 10,000-trial sweep on local_cwd: the component is found (and linted) once and its
    parser built once, not once per trial (counts); the dryrun shows one trial's request,
    of the same size at 6 trials and at 10,000, then the trial table."""
    from tx.components.system import builders, finder
    from tx.runner import Runner
    from tx.specs.sweep import SweepSpec

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    calls = {"find": 0, "parser": 0}
    real_find, real_parser = finder.get_component, builders.create_args_parser

    def find(*a, **kw):
        calls["find"] += 1
        return real_find(*a, **kw)

    def parser(*a, **kw):
        calls["parser"] += 1
        return real_parser(*a, **kw)

    monkeypatch.setattr(finder, "get_component", find)
    monkeypatch.setattr(builders, "create_args_parser", parser)

    def dryrun(a: int, b: int):
        with Runner() as r:
            return r.dryrun_sweep("utils.python", SweepSpec(grid={"a": list(range(a)), "b": list(range(b))}),
                                  "local_cwd", ["-c", "print('${a} ${b}')"])

    small = dryrun(2, 3)
    calls.update(find=0, parser=0)
    big = dryrun(100, 100)
    assert len(big.trials) == 10_000 and calls == {"find": 2, "parser": 1}  # _check_params' look, the maker's
    request = str(big).split("=== TRIALS")[0]
    assert abs(len(request) - len(str(small).split("=== TRIALS")[0])) <= 16  # trial counts, the sweep id
    assert str(big.trials[9_999].request).count("print('99 99')") == 1
