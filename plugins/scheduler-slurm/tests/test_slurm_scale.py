"""Counts, not timings (issue 40): the controller calls a tick of status looks costs, as
slurmctld itself counts them (``sdiag``'s RPC statistics by message type), do not grow with
the number of apps followed. 1,000 apps are the 1,000 tasks of one held job array
(``MaxArraySize`` is Slurm's default 1001 on the private cluster), pending, costing no node."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.specs import AppState
from tx.testing.backends import environ
from tx_scheduler_slurm import _client, _plane

slurm = pytest.mark.slurm

#: the message types of status queries (squeue, scontrol show, sinfo); daemons' traffic
#: (registrations, step completions) is not among them
_QUERY = re.compile(r"^\s*(REQUEST_\w*INFO\w*)\s+\(\s*\d+\)\s+count:(\d+)", re.MULTILINE)


def _query_rpcs() -> Dict[str, int]:
    """slurmctld's count of each query message type so far (``sdiag``), sdiag's own left out."""
    out = _client.run(["sdiag"]).stdout
    part = out.split("Remote Procedure Call statistics by message type", 1)[1]
    part = part.split("Remote Procedure Call statistics by user", 1)[0]
    return {k: int(v) for k, v in _QUERY.findall(part) if k != "REQUEST_STATS_INFO"}


def _tick(sched: Any, ids: List[str]) -> int:
    """One tick of a follower of ``ids``: the status of each; the controller calls it cost."""
    _plane.plane().invalidate()  # the tick starts with no shared answer: it must ask
    before = _query_rpcs()
    states = {sched.describe(i).state for i in ids}
    after = _query_rpcs()
    assert states == {AppState.PENDING}, states
    return sum(after.get(k, 0) - before.get(k, 0) for k in after)


@slurm
def test_status_calls_per_tick_do_not_grow_with_apps(sched: Any, tmp_path: Any) -> None:
    job = _client.run(["sbatch", "--parsable", "--hold", "--array=0-999", f"--output={tmp_path}/%A_%a.out",
                       "--job-name=scale", "--wrap", "true"]).stdout.strip()
    try:
        ids = [f"{job}_{i}" for i in range(1000)]
        with environ({"TX_STATUS_MAX_AGE": "60"}):
            ten, thousand = _tick(sched, ids[:10]), _tick(sched, ids)
        print(f"controller query calls per tick: 10 apps {ten}, 1000 apps {thousand}")
        assert 1 <= thousand <= ten <= 3, (ten, thousand)  # one squeue (and its federation look)
        # a sweep's status asks for the states of all its trials at once (Scheduler.states_of)
        _plane.plane().invalidate()
        before = _query_rpcs()
        states = sched.states_of(ids)
        assert set(states) == set(ids) and set(states.values()) == {AppState.PENDING}
        assert sum(v - before.get(k, 0) for k, v in _query_rpcs().items()) <= ten
        # without the shared snapshot each look asks on its own: the count grows with the apps
        with environ({"TX_STATUS_MAX_AGE": "0"}):
            unshared = _tick(sched, ids[:10])
        print(f"without sharing, 10 apps: {unshared}")
        assert unshared >= 10, unshared
    finally:
        _client.run(["scancel", job], check=False)


@slurm
def test_processes_on_one_host_share_one_answer(sched: Any, tmp_path: Any) -> None:
    """``tx status`` in another process reads the answer the first one fetched (no RPC), says
    how old it is, and ``--fresh`` asks slurmctld."""
    tx = str(Path(sys.executable).parent / "tx")
    job = _client.run(["sbatch", "--parsable", "--hold", "--array=0-2", f"--output={tmp_path}/%A_%a.out",
                       "--job-name=share", "--wrap", "true"]).stdout.strip()
    env = {**os.environ, "TX_STATUS_MAX_AGE": "60"}

    def status(*args: str) -> Any:
        before = _query_rpcs()
        p = subprocess.run([tx, "status", *args, f"slurm://tx/{job}_1"], env=env, capture_output=True, text=True,
                           timeout=120, cwd=str(tmp_path))
        assert p.returncode == 0, p.stderr
        return p.stdout, sum(v - before.get(k, 0) for k, v in _query_rpcs().items())

    try:
        out, calls = status("--fresh")
        assert "PENDING" in out and re.search(r"Status as of: \d+\.\d s ago", out) and calls >= 1, (out, calls)
        out, calls = status()  # another process, within the age: the shared answer
        assert "PENDING" in out and "Status as of:" in out and calls == 0, (out, calls)
        t0 = time.time()
        out, calls = status("--json")  # the same shared answer, its age in the JSON
        got = json.loads(out)
        assert got["state"] == "PENDING" and calls == 0, (out, calls)
        assert got["status_as_of"] <= t0 and 0 < got["status_age_s"] <= 60, got
        before = _query_rpcs()
        with environ({"TX_STATUS_MAX_AGE": "60"}):  # and this process too
            assert {sched.describe(f"{job}_{i}").state for i in range(3)} == {AppState.PENDING}
        assert sum(v - before.get(k, 0) for k, v in _query_rpcs().items()) == 0
    finally:
        _client.run(["scancel", job], check=False)


@slurm
def test_a_sites_bucket_holds_for_1000_apps(sched: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """A site's bucket (snakemake-executor-plugin-slurm#467: 40 tokens refilled 4 per minute)
    set in .txconfig: five ticks following 1,000 apps stay within it, with no throttling
    error and no false state."""
    from tx.schedulers import budget as budget_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TXCONFIG", raising=False)
    (tmp_path / ".txconfig").write_text("[slurm]\nmax_calls_per_minute = 4\nmax_call_burst = 40\n")
    # a tick is what invalidate() ends: the snapshot never ages out within one, however long
    # describing 1,000 apps takes on a loaded machine (seen: 13 calls at load 18)
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "3600")
    budget_mod._reset_for_tests()
    job = _client.run(["sbatch", "--parsable", "--hold", "--array=0-999", f"--output={tmp_path}/%A_%a.out",
                       "--job-name=bucket", "--wrap", "true"]).stdout.strip()
    try:
        budget = _plane.budget()
        assert (budget.per_minute, budget.burst) == (4, 40)
        ids = [f"{job}_{i}" for i in range(1000)]
        for _ in range(5):
            _plane.plane().invalidate()
            assert {sched.describe(i).state for i in ids} == {AppState.PENDING}
        counts = budget.counts()
        # sbatch, one squeue a tick (and at most one scontrol show config): not one call per app
        assert counts["calls"] <= 1 + 5 + 1 and counts.get("throttled", 0) == 0, counts
    finally:
        _client.run(["scancel", job], check=False)
        budget_mod._reset_for_tests()


@slurm
def test_a_controller_down_is_asked_once_and_its_error_shared(tx: Any, tx_env: Dict[str, str], tmp_path: Path,
                                                              one_line_error: Any) -> None:
    """slurmctld does not answer (a cluster whose controller's port is closed): the first
    ``tx status`` asks, fails in one line, and keeps the error as the shared answer; a
    ``tx status`` of another app in another process within the age gets that error without
    a ``squeue`` (each waited out Slurm's own connect retries, 9 s with its default
    MessageTimeout); ``--fresh`` asks again."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "down" / "slurm.conf"
    conf.parent.mkdir()
    conf.write_text(f"ClusterName=down\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={port}\n"
                    "AuthType=auth/none\nMessageTimeout=1\nNodeName=n1 CPUs=1 State=UNKNOWN\n"
                    "PartitionName=p Nodes=n1 Default=YES\n")
    shim = tmp_path / "shim"  # counts the squeue calls, then runs Slurm's own
    shim.mkdir()
    calls = tmp_path / "squeue-calls"
    (shim / "squeue").write_text(f"#!/bin/sh\necho x >> {calls}\nexec {shutil.which('squeue')} \"$@\"\n")
    (shim / "squeue").chmod(0o755)
    env = {**tx_env, "SLURM_CONF": str(conf), "TX_STATUS_MAX_AGE": "60", "PATH": f"{shim}:{tx_env['PATH']}"}

    def asked() -> int:
        return len(calls.read_text().split()) if calls.exists() else 0

    p = tx("status", "slurm://tx/101", env=env)
    one_line_error(p, "Unable to contact slurm controller")
    assert "shared status plane" not in p.stderr and asked() == 1, (p.stderr, asked())
    p = tx("status", "slurm://tx/102", env=env)  # another app, another process
    one_line_error(p, "Unable to contact slurm controller")
    assert re.search(r"\(the shared status plane's look \d+\.\d s ago; --fresh asks again\)", p.stderr), p.stderr
    assert asked() == 1
    p = tx("status", "--fresh", "slurm://tx/102", env=env)
    one_line_error(p, "Unable to contact slurm controller")
    assert asked() == 2, p.stderr
