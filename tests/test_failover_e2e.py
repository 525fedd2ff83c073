"""Failover on the private Slurm cluster (docs/recovery.md): an app held PENDING on Slurm
(in partition ``down``, whose only node is down: scripts/start-slurm.sh) is cancelled there
after ``--pending_timeout`` and runs on local_cwd, under one run handle. Fault and race: the
watcher SIGKILLed mid-failover (the Slurm hop cancelled, nothing submitted yet), then two tx
processes racing to finish the failover: the run runs once on local_cwd. An app that saved
a checkpoint on Slurm, run again with failover from partition ``down``, resumes in a
container of the private podman engine (local_docker) from the checkpoint the Slurm attempt
wrote."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest



def test_bad_failover_options_are_one_line_errors(tx, one_line_error):
    p = tx("run", "-s", "local_cwd", "--pending_timeout", "10m", "utils.echo")
    one_line_error(p, "--pending_timeout needs schedulers to fail over to")
    p = tx("run", "-s", "local_cwd", "--fallback", "no_such_sched", "utils.echo")
    one_line_error(p, "unknown scheduler 'no_such_sched'")


#: why Slurm keeps a job of partition ``down`` (scripts/start-slurm.sh: its only node is down)
#: PENDING: ReqNodeNotAvail, or on some scheduling passes the same in a sentence
DOWN = (r"(?:ReqNodeNotAvail|Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority "
        r"partitions)")


def _record(state: Path, handle: str) -> dict:
    run_id = handle.rsplit("/", 1)[1]
    return json.loads((state / "runs" / f"{run_id}.json").read_text())


def _until(what, timeout: float = 60.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def test_txconfig_fallback_makes_a_run_shown_once(tx, tmp_path):
    (tmp_path / ".txconfig").write_text("[tx]\nfallback = local_dir\npending_timeout = 5m\n")
    refused = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi")  # local_dir: the image is no directory
    assert refused.returncode == 1 and "fallback scheduler local_dir refuses this app" in refused.stderr
    p = tx("run", "-s", "local_cwd", "utils.echo", "--image", str(tmp_path), "--msg", "hi")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    assert re.fullmatch(r"local_cwd://tx/run-echo-[0-9a-f]{8}", handle), handle
    assert "echo/0 hi" in p.stdout and "tx run: local_cwd: SUCCEEDED" in p.stderr, (p.stdout, p.stderr)
    rows = [r for r in tx("list", "-s", "local_cwd").stdout.splitlines() if "://" in r]
    assert len(rows) == 1 and rows[0].startswith(handle) and "echo [local_cwd]" in rows[0], rows
    gc = tx("gc", "--keep", "0")  # the run's record goes with its app and its archive
    assert gc.returncode == 0 and handle in gc.stdout.splitlines(), (gc.stdout, gc.stderr)
    assert not list((tmp_path / "state" / "runs").glob("run-*.json"))


@pytest.mark.slurm
def test_killed_watcher_and_racing_processes_run_it_once(slurm_cluster, tx, tx_env, tmp_path):
    state = Path(tx_env["TX_STATE_DIR"])
    # the watcher `tx run` starts stops once it has cancelled the Slurm hop
    paused = {**tx_env, "TX_FAILOVER_PAUSE": "after_cancel"}
    p = tx("run", "-s", "slurm", "-cfg", f"partition=down,job_dir={tmp_path}",
           "--fallback", "local_cwd", "--pending_timeout", "2s", "--detach",
           "utils.sh", "--", "sh", "-c", "echo ran on $TX_JOB_ID in $TX_CHECKPOINT_DIR", env=paused)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    assert re.fullmatch(r"slurm://tx/run-sh-[0-9a-f]{8}", handle), handle
    slurm_id = _record(state, handle)["hops"][0]["app_id"]
    _until(lambda: _record(state, handle)["failing_over"], 30)
    _until(lambda: "JobState=CANCELLED" in slurm_cluster.run("scontrol", "show", "job", slurm_id).stdout, 30)
    time.sleep(0.5)
    rec = _record(state, handle)
    assert len(rec["hops"]) == 1 and rec["failing_over"], rec  # cancelled, nothing submitted: kill it there
    watcher = int((state / "runs" / "watcher.lock").read_text())
    os.kill(watcher, signal.SIGKILL)
    # a second watcher finishes the failover and is killed once local_cwd took the app, before
    # the record says so
    w = subprocess.Popen([sys.executable, "-m", "tx.runner._failover_watcher"], cwd=tmp_path,
                         env={**tx_env, "TX_FAILOVER_PAUSE": "after_submit"})
    try:
        _until(lambda: len(_record(state, handle)["hops"]) == 2, 30)
        _until(lambda: list((Path(tx_env["TMPDIR"]) / f"tx-{os.getuid()}" / "tx").glob("sh-*")), 30)
        time.sleep(0.5)
        assert _record(state, handle)["hops"][1]["app_id"] is None
    finally:
        w.kill()
        w.wait(10)
    # two tx processes race to finish the failover
    racers = [subprocess.Popen([str(Path(sys.executable).parent / "tx"), "status", handle], env=tx_env,
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    for r in racers:
        out, err = r.communicate(timeout=60)
        assert r.returncode == 0, err
    done = _until(lambda: tx("status", handle).returncode == 0 and (lambda r: r if r["final"] else None)(
        _record(state, handle)), 60, 0.5)
    assert [h["scheduler"] for h in done["hops"]] == ["slurm", "local_cwd"], done
    assert done["final"] == "SUCCEEDED" and done["hops"][0]["why"].startswith("PENDING"), done
    status = tx("status", handle)
    assert re.search(rf"Chain: slurm: PENDING \d+\.\d s \({DOWN}\) -> local_cwd: SUCCEEDED", status.stdout), status.stdout
    listed = [a for a in tx("list", "-s", "local_cwd").stdout.splitlines() if "://" in a]
    assert len(listed) == 1 and listed[0].startswith(handle), listed  # once, under the run handle
    log = tx("log", handle)
    assert log.stdout.count("ran on ") == 1 and f"ran on {handle} in " in log.stdout, log.stdout


@pytest.mark.slurm
def test_infrastructure_failure_after_infra_retries_fails_over(slurm_cluster, tx, tx_env, tmp_path):
    state = Path(tx_env["TX_STATE_DIR"])
    script = 'echo "on ${SLURM_JOB_ID:-local}"; if [ -n "$SLURM_JOB_ID" ]; then exec sleep 600; fi'
    p = tx("run", "-s", "slurm", "-cfg", f"infra_retries=1,job_dir={tmp_path}", "--fallback", "local_cwd",
           "--detach", "utils.sh", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    slurm_id = _record(state, handle)["hops"][0]["app_id"]
    for restarts in (0, 1):  # two requeues by the administrator: one more than infra_retries
        _until(lambda: re.search(rf"JobState=RUNNING .*Restarts={restarts}\b", " ".join(
            slurm_cluster.run("scontrol", "show", "job", slurm_id).stdout.split())), 90, 0.2)
        _until(lambda: f"on {slurm_id}" in (tmp_path / f"slurm-{slurm_id}-sh-0.out").read_text()
               if (tmp_path / f"slurm-{slurm_id}-sh-0.out").exists() else False, 30, 0.2)
        assert slurm_cluster.run("scontrol", "requeue", slurm_id).returncode == 0
    done = _until(lambda: tx("status", handle).returncode == 0 and (lambda r: r if r["final"] else None)(
        _record(state, handle)), 120, 0.5)
    assert [h["scheduler"] for h in done["hops"]] == ["slurm", "local_cwd"] and done["final"] == "SUCCEEDED", done
    assert done["hops"][0]["why"].startswith("FAILED (infra: infra_retries exhausted"), done
    log = tx("log", handle).stdout
    assert f"on {slurm_id}" in log and "on local" in log, log  # both hops' lines, in order
    assert log.index(f"on {slurm_id}") < log.index("on local"), log


@pytest.mark.slurm
def test_cancel_of_a_run_cancels_its_live_hop_and_submits_no_other(slurm_cluster, tx, tx_env, tmp_path):
    p = tx("run", "-s", "slurm", "-cfg", f"partition=down,job_dir={tmp_path}",
           "--fallback", "local_cwd", "--pending_timeout", "3s", "--detach", "utils.echo")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    c = tx("cancel", handle)
    assert c.returncode == 0 and f"{handle} is CANCELLED" in c.stderr, c.stderr
    # the watcher follows the run until it is final, then exits: wait for the last holder of
    # runs/watcher.lock (its pid inside) to be gone, the proof that it looked and decided
    state = Path(tx_env["TX_STATE_DIR"])
    _until(lambda: _watcher_gone(state), 60)
    rec = _record(state, handle)
    assert rec["final"] == "CANCELLED" and [h["scheduler"] for h in rec["hops"]] == ["slurm"], rec
    # and past the pending timeout, a look (tx status steps the run) fails nothing over either
    _until(lambda: time.time() >= rec["hops"][0]["submitted"] + rec["pending_timeout"], 30)
    assert tx("status", handle).returncode == 0
    assert _record(state, handle) == rec
    assert "JobState=CANCELLED" in slurm_cluster.run("scontrol", "show", "job", rec["hops"][0]["app_id"]).stdout


def _watcher_gone(state: Path) -> bool:
    """A watcher took runs/watcher.lock (its pid is inside) and that process has ended."""
    lock = state / "runs" / "watcher.lock"
    try:
        pid = int(lock.read_text())
    except (OSError, ValueError):  # no watcher wrote its pid yet
        return False
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:  # no such process
        return True
    return fields[0] in ("Z", "X")


@pytest.mark.slurm
def test_fails_over_to_local_docker_and_resumes_from_the_checkpoint_slurm_wrote(
        slurm_cluster, podman_engine, tx, tx_env, tmp_path):
    from tx_scheduler_docker.testing import IMAGE

    # a checkpoint in shell: the step in $TX_CHECKPOINT_DIR/step (the main job's resume with
    # torch.distributed.checkpoint from that location is tests/test_checkpoint_resume.py's)
    script = ('d="$TX_CHECKPOINT_DIR"; if [ -f "$d/step" ]; then echo "resumed from step $(cat "$d/step") '
              'on ${SLURM_JOB_ID:-$HOSTNAME}"; echo 2 > "$d/step"; else mkdir -p "$d"; echo 1 > "$d/step"; '
              'echo "saved step 1 on $SLURM_JOB_ID"; fi')
    app = ("utils.sh", "--image", IMAGE, "--", "sh", "-c", script)
    first = tx("run", "-s", "slurm", "-cfg", f"job_dir={tmp_path}", "--wait", "--log", *app)
    assert first.returncode == 0 and "saved step 1 on " in first.stdout, (first.stdout, first.stderr)
    first_handle = first.stdout.splitlines()[0]
    ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", tx("describe", first_handle).stdout).group(1))
    assert ckpt.parent == Path(tx_env["TX_STATE_DIR"]) / "checkpoints" / "tx"  # the first run's: slurm's root
    assert (ckpt / "step").read_text() == "1\n"
    # a new run continues the first one's checkpoints only when told to (--resume)
    second = tx("run", "-s", "slurm", "--resume", first_handle, "-cfg", f"partition=down,job_dir={tmp_path}",
                "--fallback", "local_docker", "--pending_timeout", "2s", "--wait", "--log", *app)
    assert second.returncode == 0, second.stderr
    handle = second.stdout.splitlines()[0]
    assert re.search(rf"slurm: PENDING \d+\.\d s \({DOWN}\) -> local_docker: SUCCEEDED", second.stderr), second.stderr
    hop = _record(Path(tx_env["TX_STATE_DIR"]), handle)["hops"][1]["app_id"]
    # the container (mounted by local_docker at the same path) read the Slurm attempt's step
    assert f"sh/0 resumed from step 1 on {hop}-sh-0" in second.stdout, second.stdout
    assert (ckpt / "step").read_text() == "2\n"  # and wrote the next one where every hop finds it


def test_a_run_with_failover_gets_its_own_checkpoint_location_or_the_one_it_resumes(tx, tx_env, tmp_path):
    # --image: a directory local_dir can run in (the chain is checked before the first submit)
    say = ("utils.sh", "--image", str(tmp_path), "--", "sh", "-c", 'echo "ckpt=$TX_CHECKPOINT_DIR from=$TX_RESUME_FROM"')
    first = tx("run", "-s", "local_cwd", *say)
    assert first.returncode == 0, first.stderr
    app = first.stdout.splitlines()[0]
    ckpt = re.search(r"ckpt=(\S+) from=\n", first.stdout).group(1)
    fallback = ("-s", "local_cwd", "--fallback", "local_dir", "--pending_timeout", "5m")
    fresh = tx("run", *fallback, *say)
    assert fresh.returncode == 0, fresh.stderr
    own = re.search(r"ckpt=(\S+) from=\n", fresh.stdout).group(1)
    run = fresh.stdout.splitlines()[0]
    assert own != ckpt and _record(Path(tx_env["TX_STATE_DIR"]), run)["appdef"]["roles"][0]["env"][
        "TX_CHECKPOINT_DIR"] == own  # every hop gets it from the run's record
    resumed = tx("run", "--resume", app, *fallback, *say)
    assert resumed.returncode == 0, resumed.stderr
    assert f"ckpt={ckpt} from={app}\n" in resumed.stdout, resumed.stdout


@pytest.mark.lsf
def test_lsf_infrastructure_failure_after_infra_retries_fails_over(lsf_cluster, tx, tx_env, tmp_path):
    """An administrator's ``brequeue`` on LSF with ``infra_retries=0``: the rerun finds the
    infrastructure retries spent and fails the job as infrastructure, which ``--fallback``
    moves to local_cwd under the same run handle, both hops' lines in its log."""
    state = Path(tx_env["TX_STATE_DIR"])
    job_dir = tmp_path / "job"
    script = 'echo "on ${LSB_JOBID:-local}"; if [ -n "$LSB_JOBID" ]; then exec sleep 600; fi'
    p = tx("run", "-s", "lsf", "-cfg", f"infra_retries=0,jobdir={job_dir}", "--fallback", "local_cwd",
           "--detach", "utils.sh", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    app_id = _record(state, handle)["hops"][0]["app_id"]
    out = job_dir / f"{app_id}-sh-0.out"
    _until(lambda: out.exists() and "on " in out.read_text(), 60, 0.2)
    job_id = out.read_text().split()[1]
    lsf_cluster.wait_started(job_id)
    assert lsf_cluster.run("brequeue", job_id).returncode == 0
    done = _until(lambda: tx("status", handle).returncode == 0 and (lambda r: r if r["final"] else None)(
        _record(state, handle)), 120, 0.5)
    assert [h["scheduler"] for h in done["hops"]] == ["lsf", "local_cwd"] and done["final"] == "SUCCEEDED", done
    assert done["hops"][0]["why"].startswith("FAILED (infra: sh[0]: infra_retries exhausted"), done
    log = tx("log", handle).stdout
    assert f"on {job_id}" in log and "on local" in log, log
    assert log.index(f"on {job_id}") < log.index("on local"), log
