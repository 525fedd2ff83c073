"""An engine stop before the job noted the warning on local_docker (docs/recovery.md,
"Preemption"; tx_scheduler_docker._preempted, evidence 2 and 3), on the session's podman
engine: no preemption note exists, so what tells the engine's stop from the job's own
failure is the engine's record (a ``kill`` event: podman records none for its stop) or
torchrun's own report (its agent's SignalException for SIGTERM).

* A ``dist.ddp -j 2x1`` job whose ranks are still in their start-up (each writes a file,
  the test's event, then sleeps before importing tx.distributed) gets rank 1's container
  stopped through the engine's API: the attempt is an infrastructure failure naming
  torchrun's report, and the next attempt runs to the end (there being no checkpoint, it
  starts fresh).
* The same job whose ranks kill themselves with SIGTERM in their start-up (torchrun's
  ChildFailedError, ``exitcode: -15``, exit code 1; no engine stop) stays the app's own
  failure: FAILED, no restart.
* A plain ``sh`` container (no torchrun, no note) killed with SIGTERM through the engine's
  API: podman's ``kill`` event is the evidence; the next attempt succeeds.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.specs import AppDef, BindMount, Role
from tx.testing.backends import require_module
from tx.testing.preemption import until

REPO = Path(__file__).resolve().parents[3]
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")

pytestmark = pytest.mark.slow
require_module("torch", "the jobs run under torchrun: pip install torch==2.13.0")

#: rank r writes <dir>/started-<r> (the test's event: it is in its start-up, before
#: tx.distributed is imported); then ("selfterm") it kills itself with SIGTERM (every rank:
#: a rank that ended well would wait in torchrun's exit barrier for 300 s), or ("stop") in
#: the first attempt it stays in start-up; a later attempt imports tx.distributed and ends
JOB = """\
import os, signal, sys, time
d, mode, rank = sys.argv[1], sys.argv[2], os.environ["RANK"]
marker = os.path.join(d, "started-" + rank)
first = not os.path.exists(marker)
open(marker, "a").close()
if mode == "selfterm":
    os.kill(os.getpid(), signal.SIGTERM)
if first and mode == "stop":
    time.sleep(600)
from tx.distributed import preempted
print("rank %s: ran to the end, preempted=%s" % (rank, preempted()), flush=True)
"""


def _status(tx: Any, handle: str, env: Dict[str, str]) -> Dict[str, Any]:
    p = tx("status", "--json", handle, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _run_job(mode: str, tmp_path: Path, env: Dict[str, str], host_python_mounts: List[str], image: str,
             tx: Any) -> str:
    """``tx run --detach -s local_docker dist.ddp -j 2x1`` of :data:`JOB` in ``mode``; its handle."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.py").write_text(JOB)
    bindir = os.path.dirname(sys.executable)
    pp = os.environ.get("PYTHONPATH", "")  # this checkout's sources, mounted below
    mounts = [*host_python_mounts, f"type=bind,src={REPO},dst={REPO},readonly", f"type=bind,src={job},dst={job}"]
    p = tx("run", "--detach", "-s", "local_docker", "-cfg", "preempt_grace=20,infra_retries=1", "dist.ddp",
           "-j", "2x1", "--cpu", "1", "--image", image,
           "--env", f"PATH={bindir}:/usr/bin:/bin,HOME=/tmp,PYTHONPATH={pp}", "--mounts", ",".join(mounts),
           "--script", str(job / "job.py"), "--", str(job), mode, env=env, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.strip().splitlines()[-1]


def test_an_engine_stop_in_the_jobs_start_up_is_a_preemption(
        podman_engine: Dict[str, str], docker_client: Any, host_python_mounts: List[str], image: str,
        scheduler: Any, tx: Any, tx_env: Dict[str, str], tmp_path: Path) -> None:
    env = {**tx_env, **podman_engine}
    handle = _run_job("stop", tmp_path, env, host_python_mounts, image, tx)
    app_id = handle.rsplit("/", 1)[1]
    until(lambda: (tmp_path / "job" / "started-1").exists(), timeout=240, every=0.2)  # rank 1 in its start-up
    docker_client.api.stop(f"{app_id}-job-1")  # from outside, the container's own timeout (20 s)
    until(lambda: scheduler.describe(app_id).state.name in TERMINAL, timeout=150, every=0.5)
    status = _status(tx, handle, env)
    assert status["state"] == "SUCCEEDED" and status["num_restarts"] == 1, status
    first = status["attempts"][0]
    assert first["kind"] == "infra" and first["retried"], first
    # what told the stop: torchrun's report, where the engine recorded no stop (podman's API
    # stop records only the container's end, as a rule), else the engine's stop event, which
    # tx reads first (c6 of 6c76130: podman recorded one, under load; the report was there too)
    assert first["reason"] in [f"preempted: SIGTERM to job[1] (container {app_id}-job-1), not sent by tx, "
                               f"before its job noted it ({how}); no checkpoint saved before the kill; starts fresh"
                               for how in ("torchrun's SignalException", "the engine's stop event")], first
    log = tx("log", handle, env=env).stdout
    assert "rank 0: ran to the end, preempted=False" in log and "rank 1: ran to the end, preempted=False" in log, \
        log[-4000:]
    # the stopped attempt's container, kept, says what the evidence was
    old = docker_client.api.logs(f"{app_id}-job-1.infra0").decode("utf-8", "replace")
    assert re.search(r"SignalException: Process \d+ got signal: 15", old), old[-3000:]


def test_ranks_killing_themselves_with_sigterm_in_start_up_stay_the_apps_failure(
        podman_engine: Dict[str, str], docker_client: Any, host_python_mounts: List[str], image: str,
        scheduler: Any, tx: Any, tx_env: Dict[str, str], tmp_path: Path) -> None:
    env = {**tx_env, **podman_engine}
    handle = _run_job("selfterm", tmp_path, env, host_python_mounts, image, tx)
    app_id = handle.rsplit("/", 1)[1]
    desc = until(lambda: (lambda d: d if d.state.name in TERMINAL else None)(scheduler.describe(app_id)),
                 timeout=150, every=0.5)
    assert desc.state.name == "FAILED" and desc.num_restarts == 0, desc
    out = docker_client.api.logs(f"{app_id}-job-1").decode("utf-8", "replace")
    assert re.search(r"exitcode\s*:\s*-15", out) and "SignalException" not in out, out[-3000:]  # torchrun's report
    status = _status(tx, handle, env)
    assert status["state"] == "FAILED" and status["num_restarts"] == 0, status
    assert not any(a["kind"] == "infra" for a in status.get("attempts") or []), status
    assert "preempted" not in (status.get("structured_error_msg") or "") + desc.msg, status
    assert not [c for c in docker_client.containers.list(all=True) if c.name.startswith(f"{app_id}-")
                and ".infra" in c.name]


def test_a_kill_the_engine_records_is_a_preemption_without_torchrun(
        podman_engine: Dict[str, str], docker_client: Any, image: str, scheduler: Any, tmp_path: Path) -> None:
    # attempt 0 writes /m/started and waits; a later one sees it and ends
    role = Role("w", image=image, entrypoint="sh", mounts=[BindMount(str(tmp_path), "/m")],
                args=["-c", "if [ -e /m/started ]; then echo again; exit 0; fi; touch /m/started; exec sleep 600"])
    app_id = scheduler.submit(AppDef("killed", roles=[role]), {"infra_retries": 1, "preempt_grace": 20})
    until(lambda: (tmp_path / "started").exists(), timeout=120, every=0.2)
    docker_client.api.kill(f"{app_id}-w-0", signal="SIGTERM")  # no stop: podman records this kill
    desc = until(lambda: (lambda d: d if d.state.name in TERMINAL else None)(scheduler.describe(app_id)),
                 timeout=120, every=0.5)
    assert desc.state.name == "SUCCEEDED" and desc.num_restarts == 1, desc
    (first,) = desc.attempts[:1]
    assert first.kind.name == "INFRA" and first.retried, desc.attempts
    assert first.reason.startswith(f"preempted: SIGTERM to w[0] (container {app_id}-w-0), not sent by tx, "
                                   "before its job noted it (the engine's kill event)"), first
    assert docker_client.api.inspect_container(f"{app_id}-w-0.infra0")["State"]["ExitCode"] == 143
