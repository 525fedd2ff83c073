"""Seams of failover on the real local schedulers, through the ``tx`` CLI (issue 41, items
2-5; docs/recovery.md): a chain a fallback hop would refuse is refused before anything is
submitted; a hop submitted by a tx process that died is found by its identity, never by its
name (an unrelated ``tx run --name SAME`` is not adopted); a fallback hop runs in the run's
launch context (environment, working directory) whichever process takes the step; a local
scheduler lists only its own apps; a run shows in ``tx list`` as one row under its handle,
its hops inside."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable, Dict

from tx_scheduler_local.scheduler import create_cwd_scheduler

#: the app of every run here: the first attempt (on local_cwd) waits to be lost, the next
#: (on local_dir, in role.image: the launch directory) says what it was given and ends
JOB = ('if [ -e ran ]; then echo "hop2 mark=${MARK:?MARK is unset} in $(pwd)"; exit 0; fi\n'
       "touch ran\nexec sleep 300\n")


def _record(state: Path, handle: str) -> Dict[str, Any]:
    return json.loads((state / "runs" / f"{handle.rsplit('/', 1)[1]}.json").read_text())


def _until(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return got


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, ProcessLookupError):
        return True


def _kill_watcher(state: Path) -> None:
    """SIGKILL the failover watcher once it holds its lock (its pid written in it)."""
    lock = state / "runs" / "watcher.lock"
    pid = _until(lambda: lock.exists() and lock.read_text().strip().isdigit() and int(lock.read_text()))
    os.kill(pid, signal.SIGKILL)
    _until(lambda: _gone(pid))


def _lose_first_hop(state: Path, handle: str) -> None:
    """SIGKILL the supervisor of the run's local_cwd hop once its job runs (with
    ``infra_retries=0``, an infrastructure failure that fails the run over)."""
    app_id = _record(state, handle)["hops"][0]["app_id"]
    desc = create_cwd_scheduler("tx", state_dir=str(state)).describe(app_id)
    os.kill(desc.metadata["supervisor_pid"], signal.SIGKILL)


def _launch(tx, tx_env, launch: Path, **env: str) -> str:
    launch.mkdir(exist_ok=True)
    (launch / "job.sh").write_text(JOB)
    p = tx("run", "--detach", "-s", "local_cwd", "-cfg", "infra_retries=0", "--fallback", "local_dir",
           "--name", "seam", "utils.sh", "--image", ".", "--", "sh", "job.sh", cwd=launch, env={**tx_env, **env})
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    _until(lambda: (launch / "ran").exists())
    return handle


def _finished(tx, state: Path, handle: str, env: Dict[str, str], cwd: Path) -> Dict[str, Any]:
    def done() -> Any:
        st = tx("status", handle, env=env, cwd=cwd)
        assert st.returncode == 0, st.stderr
        rec = _record(state, handle)
        return rec if rec["final"] else None
    return _until(done, 90)


def test_a_chain_a_fallback_would_refuse_is_refused_before_any_submit(tx, tx_env, tmp_path, one_line_error):
    # the repro: local_dir refuses utils.python's default image (not a directory);
    # before, the run started on local_cwd and failed (or adopted another app) at failover
    (tmp_path / "slow.py").write_text("import time; time.sleep(300)\n")
    p = tx("run", "--detach", "-s", "local_cwd", "-cfg", "infra_retries=0", "--fallback", "local_dir",
           "--name", "adopt", "utils.python", "--script", "slow.py")
    one_line_error(p, "fallback scheduler local_dir refuses this app (nothing was submitted): role 'python': "
                      "image 'ghcr.io/pytorch/torchx:0.7.0' is not an existing directory")
    state = Path(tx_env["TX_STATE_DIR"])
    assert not list((state / "runs").glob("run-*.json")) if (state / "runs").exists() else True
    listed = tx("list", "-s", "local_cwd,local_dir")
    assert "://" not in listed.stdout, listed.stdout  # nothing was submitted
    # each hop dry-runs with its own scheduler's options: local_dir's .txconfig section here
    (tmp_path / ".txconfig").write_text("[local_dir]\ncancel_timeout = -1\n")
    p = tx("run", "--detach", "-s", "local_cwd", "--fallback", "local_dir", "utils.sh", "--image", str(tmp_path),
           "true")
    one_line_error(p, "fallback scheduler local_dir refuses this app (nothing was submitted): run option "
                      "'cancel_timeout' must be >= 0 seconds")
    assert "://" not in tx("list", "-s", "local_cwd,local_dir").stdout


def test_a_hop_adopts_only_the_app_it_submitted_never_one_of_its_name(tx, tx_env, tmp_path):
    state = Path(tx_env["TX_STATE_DIR"])
    launch = tmp_path / "launch"
    # the watcher stops right after it submitted the local_dir hop, before recording its id
    handle = _launch(tx, tx_env, launch, MARK="m", TX_FAILOVER_PAUSE="after_submit")
    _lose_first_hop(state, handle)

    def local_dir_apps() -> Any:
        out = tx("list", "-s", "local_dir", "--json").stdout
        return [r for r in map(json.loads, out.splitlines()) if r["app_handle"].startswith("local_dir://")]
    ours = _until(local_dir_apps)
    assert len(ours) == 1 and [h["app_id"] for h in _record(state, handle)["hops"]][1:] == [None], ours
    _kill_watcher(state)
    # an unrelated app of the same name on the hop's scheduler, submitted after the hop's
    other = tx("run", "-s", "local_dir", "--name", "seam", "utils.sh", "--image", str(tmp_path), "--",
               "echo", "unrelated")
    assert other.returncode == 0 and "unrelated" in other.stdout, other.stderr
    other_handle = other.stdout.splitlines()[0]
    done = _finished(tx, state, handle, tx_env, tmp_path)
    hop_handle = f"local_dir://tx/{done['hops'][1]['app_id']}"
    assert hop_handle == ours[0]["app_handle"] != other_handle, (done, ours, other_handle)
    assert done["final"] == "SUCCEEDED" and [h["scheduler"] for h in done["hops"]] == ["local_cwd", "local_dir"]
    log = tx("log", handle)
    assert f"hop2 mark=m in {launch}" in log.stdout and "unrelated" not in log.stdout, log.stdout


def test_a_fallback_hop_runs_in_the_launch_context_whoever_steps_it(tx, tx_env, tmp_path):
    state = Path(tx_env["TX_STATE_DIR"])
    launch = tmp_path / "launch"
    handle = _launch(tx, tx_env, launch, MARK=str(tmp_path / "m"))
    _kill_watcher(state)  # the step is taken by `tx status` (or the watcher it starts): without MARK
    _lose_first_hop(state, handle)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in tx_env.items() if k != "MARK"}
    done = _finished(tx, state, handle, env, elsewhere)
    assert done["final"] == "SUCCEEDED" and [h["scheduler"] for h in done["hops"]] == ["local_cwd", "local_dir"], done
    log = tx("log", handle, env=env, cwd=elsewhere)
    assert f"hop2 mark={tmp_path / 'm'} in {launch}" in log.stdout, (log.stdout, log.stderr)
    assert os.stat(state / "runs" / f"{handle.rsplit('/', 1)[1]}.json").st_mode & 0o077 == 0  # it holds the env


def test_a_run_lists_as_one_row_under_its_handle_with_its_hops(tx, tx_env, tmp_path):
    state = Path(tx_env["TX_STATE_DIR"])
    handle = _launch(tx, tx_env, tmp_path / "launch", MARK="m")
    _lose_first_hop(state, handle)
    done = _finished(tx, state, handle, {**tx_env, "MARK": "m"}, tmp_path)
    assert done["final"] == "SUCCEEDED", done
    hops = [f"{h['scheduler']}://tx/{h['app_id']}" for h in done["hops"]]
    for schedulers in ("local_cwd", "local_dir", "local_cwd,local_dir"):
        rows = [json.loads(ln) for ln in tx("list", "-s", schedulers, "--json").stdout.splitlines()]
        assert [r["app_handle"] for r in rows] == [handle], (schedulers, rows)
        assert rows[0].get("hops") == hops and rows[0]["name"] == "seam [local_cwd -> local_dir]", rows
        assert rows[0]["state"] == "SUCCEEDED", rows
    table = [ln for ln in tx("list", "-s", "local_cwd,local_dir").stdout.splitlines() if "://" in ln]
    assert len(table) == 1 and table[0].startswith(handle), table


def test_a_local_scheduler_lists_and_collects_only_its_own_apps(tx, tx_env, tmp_path):
    cwd_app = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "a")
    dir_app = tx("run", "-s", "local_dir", "utils.echo", "--image", str(tmp_path), "--msg", "b")
    assert cwd_app.returncode == 0 and dir_app.returncode == 0, (cwd_app.stderr, dir_app.stderr)
    cwd_handle, dir_handle = cwd_app.stdout.splitlines()[0], dir_app.stdout.splitlines()[0]

    def handles(schedulers: str) -> Any:
        return [json.loads(ln)["app_handle"] for ln in tx("list", "-s", schedulers, "--json").stdout.splitlines()]
    assert handles("local_dir") == [dir_handle]
    assert handles("local_cwd") == [cwd_handle]
    assert sorted(handles("local_cwd,local_dir")) == sorted([cwd_handle, dir_handle])  # each once
    gc = tx("gc", "-s", "local_dir", "--keep", "0")
    assert gc.returncode == 0 and gc.stdout.split() == [dir_handle], (gc.stdout, gc.stderr)
    assert handles("local_cwd") == [cwd_handle]  # local_dir's gc left local_cwd's app


def test_a_hop_refused_after_launch_ends_the_run_failed_with_why(tx, tx_env, tmp_path):
    # the directory the run was launched in is gone when it fails over: the local_dir hop
    # cannot be dry-run in the launch context; the run ends FAILED saying why, at once
    # (before: every look and the watcher's every poll failed with the hop's error)
    import shutil

    state = Path(tx_env["TX_STATE_DIR"])
    launch = tmp_path / "launch"
    handle = _launch(tx, tx_env, launch, MARK="m")
    shutil.rmtree(launch)
    _lose_first_hop(state, handle)
    done = _finished(tx, state, handle, tx_env, tmp_path)
    assert done["final"] == "FAILED" and [h["scheduler"] for h in done["hops"]] == ["local_cwd", "local_dir"], done
    assert done["hops"][1]["app_id"] is None and done["hops"][1]["why"].startswith(
        f"refused: the directory {handle} was launched in, {launch}, cannot be entered"), done
    st = tx("status", handle)
    assert st.returncode == 0 and "-> local_dir: refused: the directory" in st.stdout, (st.stdout, st.stderr)
    c = tx("cancel", handle)
    assert c.returncode == 0, c.stderr
