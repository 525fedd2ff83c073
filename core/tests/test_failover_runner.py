"""Failover decisions and the run's lock, in one process on the kit's local-process
schedulers (core/tests/kit_schedulers.py: ``never_starts`` queues an app forever, ``good``
runs it): steps racing in four threads after the pending timeout fail the run over once;
the run's chain, TX_JOB_ID and TX_CHECKPOINT_DIR across hops; a run listed once; a look
starts a watcher only when none holds its lock. The real
backends' proof is tests/test_failover_e2e.py (Slurm, a SIGKILLed watcher, racing processes)."""
from __future__ import annotations

import fcntl
import importlib.util
import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest

from tx.runner import Runner
from tx.runner import failover
from tx.specs import AppDef, AppState, Role, parse_app_handle


def _kit():
    spec = importlib.util.spec_from_file_location("kit_schedulers_fo", Path(__file__).with_name("kit_schedulers.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    kit = _kit()
    factories = {"held": lambda s, **kw: kit.create("never_starts", s), "procs": lambda s, **kw: kit.create("good", s)}
    with Runner("t", scheduler_factories=factories) as r:
        r.log_archive = None
        yield r


def test_racing_steps_fail_the_run_over_once(runner, tmp_path, monkeypatch):
    # each failover dwells between the cancel and the next submission: racing steps overlap
    monkeypatch.setattr(failover, "_pause", lambda point: time.sleep(0.3 if point == "after_cancel" else 0))
    out = tmp_path / "ran"
    app = AppDef("race", [Role("w", image="", entrypoint="sh",
                               args=["-c", f'echo "$TX_JOB_ID $TX_CHECKPOINT_DIR" >> {out}'])])
    handle = runner.run_with_fallback(app, [("held", {}), ("procs", {})], pending_timeout=0.2, watch=False)
    assert failover.is_run_handle(handle) and handle.startswith("held://t/run-race-")
    assert runner.status(handle).state == AppState.PENDING
    time.sleep(0.3)
    barrier = threading.Barrier(4)

    def step() -> None:
        barrier.wait()
        failover.step(runner.engine, handle)

    threads = [threading.Thread(target=step) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    rec = failover.load_record(handle)
    assert [h.scheduler for h in rec.hops] == ["held", "procs"], rec.hops
    assert rec.hops[0].app_id in runner.scheduler("held").cancelled  # cancelled before procs ran it
    status = runner.wait(handle, wait_interval=0.1, timeout=30)
    assert status is not None and status.state == AppState.SUCCEEDED, status
    ckpt = rec.appdef["roles"][0]["env"]["TX_CHECKPOINT_DIR"]
    assert out.read_text() == f"{handle} {ckpt}\n"  # once, as the run, with the run's checkpoint location
    assert ckpt.endswith(f"/checkpoints/t/{parse_app_handle(handle).app_id}")  # the run's own: keyed by its id
    run = runner.run_status(handle)
    # how long the held hop pended, as tx status writes durations (tx.durations.format_duration)
    assert run.state == AppState.SUCCEEDED and re.fullmatch(r"held: PENDING \d+\.\d s -> procs: SUCCEEDED", run.chain), \
        run.chain
    listed = failover.collapse_listed(runner.list("procs"), failover.list_records("t"), "procs")
    assert [a.app_handle for a in listed] == [handle]


def test_a_run_that_succeeds_before_its_timeout_never_fails_over(runner, tmp_path):
    app = AppDef("quick", [Role("w", image="", entrypoint="true")])
    handle = runner.run_with_fallback(app, [("procs", {}), ("held", {})], pending_timeout=60,
                                      watch=False)
    assert runner.wait(handle, wait_interval=0.1, timeout=30).state == AppState.SUCCEEDED
    rec = failover.load_record(handle)
    assert rec.final == "SUCCEEDED" and [h.scheduler for h in rec.hops] == ["procs"]
    runner.cancel(handle)  # of an ended run: nothing
    assert failover.load_record(handle).final == "SUCCEEDED"


def test_a_run_resumes_an_earlier_runs_checkpoints_only_when_asked(runner):
    app = AppDef("quick", [Role("w", image="", entrypoint="true")])
    first = runner.run_with_fallback(app, [("procs", {}), ("held", {})], pending_timeout=60, watch=False)
    again = runner.run_with_fallback(app, [("procs", {}), ("held", {})], pending_timeout=60, watch=False)
    resumed = runner.run_with_fallback(app, [("procs", {}), ("held", {})], pending_timeout=60, watch=False,
                                       resume=first)
    env = {h: failover.load_record(h).appdef["roles"][0]["env"] for h in (first, again, resumed)}
    assert env[first]["TX_CHECKPOINT_DIR"] != env[again]["TX_CHECKPOINT_DIR"]  # a new run: its own
    assert env[resumed]["TX_CHECKPOINT_DIR"] == env[first]["TX_CHECKPOINT_DIR"]
    assert env[resumed]["TX_RESUME_FROM"] == first and "TX_RESUME_FROM" not in env[again]
    for h in (first, again, resumed):
        assert runner.wait(h, wait_interval=0.1, timeout=30).state == AppState.SUCCEEDED


def test_gc_prunes_ended_runs_records_never_a_live_one(runner):
    done = runner.run_with_fallback(AppDef("quick", [Role("w", image="", entrypoint="true")]),
                                    [("procs", {}), ("held", {})], pending_timeout=60, watch=False)
    assert runner.wait(done, wait_interval=0.1, timeout=30).state == AppState.SUCCEEDED
    live = runner.run_with_fallback(AppDef("stuck", [Role("w", image="", entrypoint="true")]),
                                    [("held", {}), ("procs", {})], pending_timeout=None, watch=False)
    assert runner.status(live).state == AppState.PENDING
    assert failover.prune(3600) == []  # ended less than an hour ago
    assert failover.prune(0, schedulers=["held"]) == []  # its last hop is on procs
    assert failover.prune(0, dry_run=True) == [done] and failover.is_run_handle(done)
    later = time.time() + 86400 * 365
    assert failover.prune(0, now=later) == [done]  # the live run stays, however old
    assert not failover.is_run_handle(done) and failover.is_run_handle(live)
    assert not Path(failover.record_path(done.rsplit("/", 1)[1]) + ".lock").exists()
    runner.cancel(live)


def test_a_look_starts_a_watcher_only_when_none_holds_the_lock(runner, tmp_path, monkeypatch):
    # the "watcher" is a script that counts its starts and fails: started by a look only while
    # no process holds the lock, for watched runs only, and not again once it has failed
    starts = tmp_path / "starts"
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/bin/sh\necho \"$*\" >> {starts}\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    app = AppDef("held", [Role("w", image="", entrypoint="true")])
    unwatched = runner.run_with_fallback(app, [("held", {}), ("procs", {})], pending_timeout=None, watch=False)
    assert runner.status(unwatched).state == AppState.PENDING and not starts.exists()
    os.makedirs(os.path.dirname(failover.watcher_lock_path()), exist_ok=True)
    with open(failover.watcher_lock_path(), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a watcher lives
        watched = runner.run_with_fallback(app, [("held", {}), ("procs", {})], pending_timeout=None)
        assert runner.status(watched).state == AppState.PENDING and not starts.exists()
    assert runner.status(unwatched).state == AppState.PENDING  # none lives: this look starts one
    assert failover._started[failover.watcher_lock_path()].wait(10) == 3
    assert starts.read_text() == "-m tx.runner._failover_watcher\n"
    for h in (watched, unwatched):
        runner.status(h)
        runner.cancel(h)
    assert starts.read_text() == "-m tx.runner._failover_watcher\n"  # failed: not started again


def test_a_look_at_a_run_is_a_read_the_facade_takes_the_step(runner, monkeypatch):
    """failover.run_status only reads (the record stays as it was); Runner.status takes the
    failover step itself, in plain view (before, run_status stepped the run inside)."""
    monkeypatch.setattr(failover, "ensure_watcher", lambda new_run=False: False)  # no watcher process in this test
    app = AppDef("looked", [Role("w", image="", entrypoint="sh", args=["-c", "sleep 5"])])
    handle = runner.run_with_fallback(app, [("held", {}), ("procs", {})], pending_timeout=0.2, watch=False)
    time.sleep(0.3)  # past the pending timeout: the next step fails the run over
    before = failover.load_record(handle)
    run, _status = failover.run_status(runner.engine, handle)
    assert failover.load_record(handle) == before and [h.scheduler for h in run.hops] == ["held"]
    runner.status(handle)
    assert [h.scheduler for h in failover.load_record(handle).hops] == ["held", "procs"]
    runner.cancel(handle)
