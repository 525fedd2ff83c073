"""The backends of bench/watcher_bench.py: each started privately, ``n`` runs with failover
whose live hop is on it, its calls counted at the backend, and the true state of each run's
app read from the backend itself (not through tx).

* **local_cwd**: one real run (``Runner.run_with_fallback``, chain local_cwd then local_dir,
  ``sleep 3600``), its app copied ``n`` times as running apps of the same supervisor
  (``tx_scheduler_local._clone``); its backend is the scheduler's state files, so its calls
  are counted at the scheduler (``list``, ``describe``, ``list_page``, ``states_of``; a call
  made inside another is its work). True state: the scheduler's state files (RUNNING while
  the supervisor lives).
* **slurm**: a private cluster (bench/_common.start_slurm: 4 nodes of 2 CPUs, no accounting);
  one real run (chain slurm then local_cwd, ``sleep 3600``, 1 CPU) and its first hop's
  dryrun submitted ``n`` more times (``Scheduler.schedule``: one ``sbatch`` each, tx's own
  job script and names): 8 run, the others wait (PENDING, Resources/Priority). Calls at the
  backend: slurmctld's RPCs by type (``sdiag``, reset before the tick, sdiag's own and the
  cluster's own left out: its 2 s heartbeat, slurmd's and the jobs' RPCs). True state:
  ``squeue`` run by the bench.
* **aws_batch**: a private moto_server (moto, not AWS) in Docker mode whose job model's
  state transitions are manual and never taken (``/moto-api/state-manager/set-transition``
  ``batch::job`` ``{"progression": "manual", "times": 10**9}``): every job stays SUBMITTED
  (tx: PENDING) and no container is ever started. One real run (chain aws_batch then
  local_cwd) and ``n`` more jobs, each its first hop dry-run again (a job name of its own)
  and submitted (``RegisterJobDefinition``, ``SubmitJob``). Calls at the backend: moto's
  request log (werkzeug's access log, the ``/v1/`` API requests). True state: ``ListJobs``
  run by the bench with its own boto3 client.

Every copy's record is the real run's record with a new run id and the live hop's app id
replaced (``tx_scheduler_local._clone.clone_run_record``), followed by a watcher
(``watch=True``); the real run is not (``watch=False``). ``pending_timeout`` is an hour:
no run is due to fail over while measured, so a run failed over or marked ended is a
wrong answer.
"""
from __future__ import annotations

import abc
import json
import os
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from _common import sdiag_rpcs, start_slurm, stop_slurm

#: slurmctld's RPCs that no tx command sends (as bench/sweep10k_bench.py): the cluster's
#: heartbeat (``scontrol update PartitionName=debug State=UP`` every 2 s), slurmd's and the
#: running jobs' own
CLUSTER_OWN = frozenset({
    "REQUEST_UPDATE_PARTITION", "REQUEST_COMPLETE_BATCH_SCRIPT", "MESSAGE_EPILOG_COMPLETE",
    "MESSAGE_NODE_REGISTRATION_STATUS", "REQUEST_JOB_STEP_CREATE", "REQUEST_STEP_COMPLETE",
    "REQUEST_COMPLETE_PROLOG", "REQUEST_JOB_ALLOCATION_INFO", "REQUEST_JOB_READY", "REQUEST_UPDATE_JOB_STEP",
    "REQUEST_HET_JOB_ALLOC_INFO", "REQUEST_JOB_SBCAST_CRED", "MESSAGE_COMPOSITE", "REQUEST_STEP_LAYOUT",
})
SLOTS = 8  # jobs the private cluster runs at once: 4 nodes of 2 CPUs, a CPU each
KINDS = ("local_cwd", "slurm", "aws_batch")


def _app(image: str) -> Any:
    from tx.specs import AppDef, Resource, Role

    return AppDef("wb", [Role("w", image=image, entrypoint="sleep", args=["3600"],
                              resource=Resource(cpu=1, gpu=0, memMB=64))])


class Backend(abc.ABC):
    """One backend of a size: ``make_runs`` (the watched run handles and their app ids),
    ``reset``/``count`` around a tick (calls at the backend), ``truth`` (app id -> the
    backend's own state name and tx's state name for it), ``stop``."""

    name = ""

    @abc.abstractmethod
    def make_runs(self, runner: Any, n: int) -> List[str]:
        raise NotImplementedError

    def reset(self) -> None:
        pass

    @abc.abstractmethod
    def count(self) -> Counter:
        raise NotImplementedError

    @abc.abstractmethod
    def truth(self) -> Dict[str, Tuple[str, str]]:
        raise NotImplementedError

    def settle(self) -> None:
        """Wait until the backend's states stop changing (before the first tick)."""

    def stop(self, runner: Any) -> None:
        pass


def _real_run(runner: Any, chain: List[Tuple[str, Dict[str, Any]]], image: str) -> str:
    return runner.run_with_fallback(_app(image), chain, pending_timeout=3600.0, watch=False)


def _clone_records(handle: str, app_ids: List[str]) -> List[str]:
    import importlib.util

    from _common import REPO
    spec = importlib.util.spec_from_file_location(  # this checkout's helper, also with --before's code
        "_wb_clone", REPO / "plugins" / "scheduler-local" / "src" / "tx_scheduler_local" / "_clone.py")
    clone = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(clone)  # type: ignore[union-attr]
    return clone.clone_run_record(handle, app_ids, watch=True)


class LocalCwd(Backend):
    name = "local_cwd"

    def __init__(self, base: Path) -> None:
        self.calls: Counter = Counter()
        self.handle = ""

    def make_runs(self, runner: Any, n: int) -> List[str]:
        from tx.runner import failover
        from tx.specs import AppState
        from tx_scheduler_local._clone import clone_running_app

        self.handle = _real_run(runner, [("local_cwd", {}), ("local_dir", {})], os.getcwd())
        deadline = time.monotonic() + 120
        while (runner.status(self.handle).state != AppState.RUNNING
               or failover.load_record(self.handle).live.state != "RUNNING"):  # copies of a settled record
            if time.monotonic() > deadline:
                raise SystemExit("the local_cwd run did not start within 120 s")
            time.sleep(0.2)
        self.sched = runner.engine.scheduler("local_cwd")
        self.apps = clone_running_app(self.sched.apps_dir, failover.load_record(self.handle).live.app_id, n)
        depth = [0]  # a call made inside a counted one (local list() describes its running apps) is its work
        for s in (self.sched, runner.engine.scheduler("local_dir")):
            for meth in ("list", "describe", "list_page", "states_of"):
                real = getattr(s, meth)

                def counted(*a: Any, _real: Any = real, _key: str = f"{s.backend}.{meth}", **kw: Any) -> Any:
                    if not depth[0]:
                        self.calls[_key] += 1
                    depth[0] += 1
                    try:
                        return _real(*a, **kw)
                    finally:
                        depth[0] -= 1
                setattr(s, meth, counted)
        return _clone_records(self.handle, self.apps)

    def reset(self) -> None:
        self.calls.clear()

    def count(self) -> Counter:
        return Counter(self.calls)

    def truth(self) -> Dict[str, Tuple[str, str]]:
        from tx_scheduler_local import _store  # noqa: F401 - the state files' reader is the scheduler's

        out = {}
        for app_id in self.apps:
            with open(os.path.join(self.sched.apps_dir, app_id, "state.json")) as f:
                raw = json.load(f).get("state", "?")
            out[app_id] = (raw, raw)
        return out

    def stop(self, runner: Any) -> None:
        if self.handle:
            runner.cancel(self.handle)
            runner.wait(self.handle, wait_interval=0.2, timeout=60)


class Slurm(Backend):
    name = "slurm"

    def __init__(self, base: Path) -> None:
        self.base = base
        state = os.environ.get("TX_STATE_DIR")
        self.env = start_slurm(base / "slurm")
        if state:
            os.environ["TX_STATE_DIR"] = state  # start_slurm points it into the cluster's directory

    def make_runs(self, runner: Any, n: int) -> List[str]:
        from tx.runner import failover

        cfg = {"job_dir": str(self.base / "jobs")}
        handle = _real_run(runner, [("slurm", cfg), ("local_cwd", {})], "")
        rec = failover.load_record(handle)
        info = failover._dryrun(runner.engine, rec, "slurm")  # the first hop as the run submitted it
        sched = runner.engine.scheduler("slurm")
        self.apps = [sched.schedule(info) for _ in range(n)]
        return _clone_records(handle, self.apps)

    def settle(self) -> None:
        """Until SLOTS jobs (or all) run, the real run's one of them, and slurmctld has
        served nothing but the cluster's own RPCs for 2 s."""
        deadline = time.monotonic() + 300
        want = min(SLOTS - 1, len(self.apps))
        while time.monotonic() < deadline:
            running = sum(1 for s, _ in self.truth().values() if s == "RUNNING")
            self.reset()
            time.sleep(2.0)
            if running >= want and not set(sdiag_rpcs()) - CLUSTER_OWN:
                return
        raise SystemExit(f"slurm did not settle: {self.truth_counts()}")

    def truth_counts(self) -> Counter:
        return Counter(s for s, _ in self.truth().values())

    def reset(self) -> None:
        subprocess.run(["sdiag", "-r"], capture_output=True, timeout=60, check=True)

    def count(self) -> Counter:
        return Counter({k: v for k, v in sdiag_rpcs().items() if k not in CLUSTER_OWN})

    def truth(self) -> Dict[str, Tuple[str, str]]:
        from tx_scheduler_slurm._states import appstate_from_slurm

        out = subprocess.run(["squeue", "--noheader", "--format=%i %T", "--user", str(os.getuid())],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return {a: (states.get(a, "GONE"), appstate_from_slurm(states[a]).name if a in states else "GONE")
                for a in self.apps}

    def stop(self, runner: Any) -> None:
        stop_slurm(self.env)


class Moto(Backend):
    name = "aws_batch"

    def __init__(self, base: Path) -> None:
        from tx_scheduler_aws_batch.testing import make_queue, start_moto

        self.log = base / "moto.log"
        endpoint, self.svc = start_moto(self.log, use_docker=True)
        req = urllib.request.Request(  # jobs never leave SUBMITTED: no container is started
            f"{endpoint}/moto-api/state-manager/set-transition", method="POST",
            data=json.dumps({"model_name": "batch::job",
                             "transition": {"progression": "manual", "times": 10 ** 9}}).encode(),
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()
        self.moto = make_queue(endpoint, self.svc, "wb")
        os.environ.update(self.moto.env())
        self.reset()

    def make_runs(self, runner: Any, n: int) -> List[str]:
        from tx.runner import failover

        handle = _real_run(runner, [("aws_batch", {"queue": self.moto.queue}), ("local_cwd", {})], "busybox")
        rec = failover.load_record(handle)
        sched = runner.engine.scheduler("aws_batch")
        # each its own dryrun: tx names a job once per dryrun (make_unique), an app id is queue:name
        self.apps = [sched.schedule(failover._dryrun(runner.engine, rec, "aws_batch")) for _ in range(n)]
        return _clone_records(handle, self.apps)

    def _requests(self) -> List[str]:
        # werkzeug's access log: `127.0.0.1 - - [date] "POST /v1/listjobs HTTP/1.1" 200 -`
        lines = self.log.read_text(errors="replace").splitlines()
        return [ln.split('"')[1].rsplit(" ", 1)[0].split("?")[0] for ln in lines if '] "' in ln]

    def reset(self) -> None:
        self.seen = len(self._requests())

    def count(self) -> Counter:
        return Counter(r for r in self._requests()[self.seen:] if "/v1/" in r)

    def truth(self) -> Dict[str, Tuple[str, str]]:
        from tx_scheduler_aws_batch._states import appstate_from_batch

        batch = self.moto.client("batch")
        jobs = [j for page in batch.get_paginator("list_jobs").paginate(
            jobQueue=self.moto.queue, filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}])
            for j in page["jobSummaryList"]]
        by_name = {j["jobName"]: j for j in jobs}
        out = {}
        for a in self.apps:
            j = by_name.get(a.split(":", 1)[1])
            out[a] = (j["status"], appstate_from_batch(j["status"], j.get("statusReason", "")).name) if j else ("GONE",) * 2
        return out

    def stop(self, runner: Any) -> None:
        self.svc.stop()


STARTERS: Dict[str, Callable[[Path], Backend]] = {"local_cwd": LocalCwd, "slurm": Slurm, "aws_batch": Moto}
