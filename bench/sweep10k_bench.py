#!/usr/bin/env python3
"""Sweeps of 10,000 trials (issue 40): what submitting, following and resuming one costs tx
and the backend, on Slurm, AWS Batch, GCP Batch and Kubernetes; rewrites the section
"## Sweeps of 10,000 trials" of bench/RESULTS-scale.md (the other sections kept byte for byte).

    python bench/sweep10k_bench.py -n 3 --trials 10000
    python bench/sweep10k_bench.py -n 1 --trials 200 --only slurm --no-write   # a quick look

Each of the ``-n`` runs of a backend is a process of its own (its first call of an SDK's
API imports it, as a ``tx`` command's does) with a fresh private backend and tx state
directory, stopped at the end (everything cancelled first); the backends' runs interleave.

* **slurm**: a private cluster (bench/_common.start_slurm: 4 nodes of 2 CPUs, no accounting)
  with ``MaxArraySize`` trials + 1 and ``MaxJobCount`` room for a resume. Trial ``i`` of a
  grid ``i = 0..N-1`` runs ``sh -c 'test $i -lt 100 && exit 1; exec sleep 3600'``. Steps:
  ``Runner.run_sweep`` (one job array) and ``Runner.sweep_status`` with the nodes drained (no
  trial starts: the trials' scripts ask slurmctld too); the nodes resumed, ``sweep_status``
  polled every second until exactly trials 0-99 are FAILED and 8 others run (not measured),
  then until slurmctld serves nothing but the heartbeat for 2 s; ``sweep_status`` measured
  again; ``Runner.resume_sweep`` (what ``tx sweep resume`` calls), checked to have
  resubmitted exactly trials 0-99 (a second attempt each in the record, one for every other
  trial); ``cancel_sweep``.
* **aws_batch** (a private moto_server in simple mode, tx_scheduler_aws_batch.testing's
  start_moto: the children end inside SubmitJob), **gcp_batch** (the GCP plugin's test
  server, tests/fake_gcp.py, in a process of its own, with no VMs: every task stays PENDING)
  and **kubernetes** (the k8s plugin's test API server, tests/fakekube; ``max_parallel=4``,
  as bench/sweep_k8s_bench.py: 4 pods sleep): trials ``sleep 3600``; ``run_sweep``,
  ``sweep_status``, ``cancel_sweep``.

Before each measured look the shared status snapshot (1 s) has aged out. Calls are counted at
tx (Slurm's commands through ``tx_scheduler_slurm._client.run``, as bench/sweep_bench.py
wraps it; HTTP requests through urllib3, under boto3, google-cloud-batch and kubernetes) and
at the backend (``sdiag`` by message type, reset with ``sdiag -r`` before the step, less
the heartbeat's REQUEST_UPDATE_PARTITION, slurmd's and the trials' own RPCs; moto's request
log; the test servers' counters). Times: wall; tx time (wall less the waits inside Slurm's
commands or in the sockets' connect/send/receive); tx CPU (``time.process_time``); imports.
The first run also profiles (cProfile, not counted) the submit's dryrun and a status, and on
Slurm looks once more with the snapshot's largest age at 0.25 s (``TX_STATUS_MAX_AGE``).

Budgets (issue 40): a submit at most 2 backend calls and 2 s of tx time; the status of every
trial at most 1 call and 1 s; a resume of 100 failed trials one call. Calls are judged on
the worst run (Slurm: tx's commands that ask slurmctld; elsewhere the server's count), times
on the median. Needs root, Slurm (scripts/install-slurm.sh), moto_server next to this
interpreter and the plugins' tests (fake_gcp, fakekube).
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402 - the benches' shared helpers
    REPO, calls_text, git_state, load_avg, replace_section, sdiag_rpcs, spread, start_fakekube, start_slurm,
    stop_slurm,
)

SECTION = "## Sweeps of 10,000 trials"
OUT = REPO / "bench" / "RESULTS-scale.md"
FAILING = 100  # trials 0..FAILING-1 fail at once on Slurm, and are resumed
SLOTS = 8  # trials the private cluster runs at once: 4 nodes of 2 CPUs, a CPU each
BACKENDS = ("slurm", "aws_batch", "gcp_batch", "kubernetes")
#: slurmctld's RPCs that no tx command sends: the cluster's heartbeat (start-slurm.sh runs
#: ``scontrol update PartitionName=debug State=UP`` every 2 s), slurmd's and the running
#: trials' own (a batch script or step ending, srun's steps, node registration)
CLUSTER_OWN = frozenset({
    "REQUEST_UPDATE_PARTITION", "REQUEST_COMPLETE_BATCH_SCRIPT", "MESSAGE_EPILOG_COMPLETE",
    "MESSAGE_NODE_REGISTRATION_STATUS", "REQUEST_JOB_STEP_CREATE", "REQUEST_STEP_COMPLETE",
    "REQUEST_COMPLETE_PROLOG", "REQUEST_JOB_ALLOCATION_INFO", "REQUEST_JOB_READY", "REQUEST_UPDATE_JOB_STEP",
    "REQUEST_HET_JOB_ALLOC_INFO", "REQUEST_JOB_SBCAST_CRED", "MESSAGE_COMPOSITE", "REQUEST_STEP_LAYOUT",
})
BUDGETS = {"submit": (2, 2.0), "status": (1, 1.0), "status, 100 failed": (1, 1.0), "resume 100 failed": (1, None)}
#: the GCP plugin's test server in a process of its own (its CPU is not tx's): prints its
#: URL, then for each line "requests" on stdin the requests it served since the last one
GCP_SERVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from fake_gcp import FakeGcp
server = FakeGcp(sys.argv[2], capacity=0).start()
print(server.url, flush=True)
for line in sys.stdin:
    with server.lock:
        print(json.dumps(server.requests), flush=True)
        server.requests.clear()
server.stop()
"""


def trial_app(failing: bool) -> Any:
    from tx.specs import AppDef, Resource, Role

    cmd = f"test ${{i}} -lt {FAILING} && exit 1; exec sleep 3600" if failing else "exec sleep 3600"
    return AppDef("sweep10k", [Role("w", image="" if failing else "busybox", entrypoint="sh", args=["-c", cmd],
                                    env={} if failing else {"TRIAL": "${i}"}, resource=Resource(cpu=1, gpu=0, memMB=64))])


@contextlib.contextmanager
def counted(*targets: Tuple[Any, str, Optional[Callable[..., str]], bool]) -> Iterator[Tuple[Counter, List[float], List[Any]]]:
    """Count the calls of each ``owner.attr`` of ``targets`` ``(owner, attr, name, timed)``
    by ``name(*args)`` (None: not counted), and the seconds spent inside the ``timed`` ones
    (the outermost call only)."""
    calls: Counter = Counter()
    inside, depth, order = [0.0], [0], []  # order: (perf_counter, name) of each counted call
    reals = [(owner, attr, getattr(owner, attr)) for owner, attr, _, _ in targets]

    def wrap(real: Callable[..., Any], name: Optional[Callable[..., str]], timed: bool) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            if name is not None:
                called = name(*a, **kw)
                calls[called] += 1
                order.append((time.perf_counter(), called))
            if not timed:
                return real(*a, **kw)
            depth[0] += 1
            t = time.perf_counter()
            try:
                return real(*a, **kw)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    inside[0] += time.perf_counter() - t
        return wrapper

    for (owner, attr, real), (_, _, name, timed) in zip(reals, targets):
        setattr(owner, attr, wrap(real, name, timed))
    try:
        yield calls, inside, order
    finally:
        for owner, attr, real in reals:
            setattr(owner, attr, real)


def slurm_command(argv: List[str], *a: Any, **kw: Any) -> str:
    """A Slurm command as the tables name it: ``sbatch``, ``scontrol show partition``, ``sinfo --version``."""
    if argv[0] == "scontrol":
        return " ".join(argv[:3])
    return f"{argv[0]} --version" if "--version" in argv else argv[0]


#: Slurm commands of tx that do not ask slurmctld (sdiag counts nothing for them)
LOCAL_COMMANDS = ("sinfo --version", "scontrol show hostnames")


def http_path(url: str) -> str:
    """A request's path as the tables name it: no query, a job's name and GCP's project and
    location as placeholders (``/v1/projects/P/locations/L/jobs/{job}/taskGroups/group0/tasks``)."""
    path = re.sub(r"/jobs/[^/:?]+", "/jobs/{job}", url.split("?")[0])
    return re.sub(r"/projects/[^/]+/locations/[^/]+", "/projects/P/locations/L", path)


def tx_calls(backend: str) -> Any:
    """Where tx's calls of ``backend`` are counted and timed: Slurm's commands; or every HTTP
    request (urllib3's ``urlopen``, under boto3, google-cloud-batch's REST transport and
    kubernetes), timed as the time its sockets wait for the server (connect, send, receive:
    an SDK may read a response's body after the request returned)."""
    if backend == "slurm":
        from tx_scheduler_slurm import _client

        return counted((_client, "run", slurm_command, True))
    import socket

    import urllib3.connectionpool

    return counted((urllib3.connectionpool.HTTPConnectionPool, "urlopen",
                    lambda pool, method, url, *a, **kw: f"{method} {http_path(url)}", False),
                   *[(socket.socket, m, None, True) for m in ("connect", "sendall", "send", "recv", "recv_into")])


class Backend:
    """One fresh backend: ``reset()`` before a step, ``count()`` after it gives (the calls it
    served for tx, its own traffic left out)."""

    name = ""
    cfg: Dict[str, Any] = {}
    max_parallel: Optional[int] = None

    def reset(self) -> None:
        pass

    def count(self) -> Tuple[Counter, Counter]:
        raise NotImplementedError

    def stop(self) -> None:
        pass


class Slurm(Backend):
    name = "slurm"

    def __init__(self, base: Path, n: int) -> None:
        self.env = start_slurm(base, settings={"SLURM_MAX_ARRAY_SIZE": str(n + 1),
                                               "SLURM_MAX_JOB_COUNT": str(max(20000, 2 * n + 1000))})
        self.cfg = {"job_dir": str(base / "jobs")}

    def reset(self) -> None:
        subprocess.run(["sdiag", "-r"], capture_output=True, timeout=60, check=True)

    def nodes(self, state: str) -> None:
        """Drain the nodes (no trial starts) or resume them (``scontrol update``, not counted)."""
        subprocess.run(["scontrol", "update", "NodeName=node[1-4]", f"State={state}"]
                       + (["Reason=sweep10k: no trial starts while tx is counted"] if state == "DRAIN" else []),
                       capture_output=True, timeout=60, check=True)

    def wait_quiet(self, timeout: float = 300.0) -> int:
        """Wait until slurmctld serves nothing but its heartbeat for 2 s (the trials that
        started have made their own calls: ``scontrol show node/config``, srun); returns
        the windows waited."""
        deadline, windows = time.monotonic() + timeout, 0
        while time.monotonic() < deadline:
            self.reset()
            time.sleep(2.0)  # the window looked at
            windows += 1
            if not set(sdiag_rpcs()) - {"REQUEST_UPDATE_PARTITION"}:
                return windows
        raise SystemExit(f"slurmctld not quiet after {timeout:.0f} s: {sdiag_rpcs()}")

    def count(self) -> Tuple[Counter, Counter]:
        got = sdiag_rpcs()
        return (Counter({k: v for k, v in got.items() if k not in CLUSTER_OWN}),
                Counter({k: v for k, v in got.items() if k in CLUSTER_OWN}))

    def stop(self) -> None:
        stop_slurm(self.env)


class Moto(Backend):
    name = "aws_batch"

    def __init__(self, base: Path, n: int) -> None:
        from tx_scheduler_aws_batch.testing import make_queue, start_moto

        self.log = base / "moto.log"
        endpoint, self.svc = start_moto(self.log)
        moto = make_queue(endpoint, self.svc, "bench")
        os.environ.update(moto.env())
        self.cfg = {"queue": moto.queue}
        self.reset()

    def reset(self) -> None:
        self.seen = len(self._requests())

    def _requests(self) -> List[str]:
        # werkzeug's access log: `127.0.0.1 - - [date] "POST /v1/submitjob HTTP/1.1" 200 -`
        lines = self.log.read_text(errors="replace").splitlines()
        return [ln.split('"')[1].rsplit(" ", 1)[0].split("?")[0] for ln in lines if '] "' in ln and '"' in ln]

    def count(self) -> Tuple[Counter, Counter]:
        time.sleep(0.2)  # the server logs a request after answering it
        new = self._requests()[self.seen:]
        return (Counter(r for r in new if "/v1/" in r), Counter(r for r in new if "/v1/" not in r))

    def stop(self) -> None:
        self.svc.stop()


class Gcp(Backend):
    name = "gcp_batch"

    def __init__(self, base: Path, n: int) -> None:
        (base / "gcp").mkdir()
        tests = REPO / "plugins" / "scheduler-gcp-batch" / "tests"
        self.proc = subprocess.Popen([sys.executable, "-c", GCP_SERVER, str(tests), str(base / "gcp")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        url = self.proc.stdout.readline().strip()  # type: ignore[union-attr]
        if not url:
            raise SystemExit("the GCP test server did not start")
        os.environ.update({"CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH": url + "/",
                           "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING": url + "/",
                           "GOOGLE_CLOUD_PROJECT": "bench-project", "CLOUDSDK_BATCH_LOCATION": "us-central1",
                           "CLOUDSDK_CONFIG": str(base / "gcloud"), "NO_GCE_CHECK": "true"})

    def count(self) -> Tuple[Counter, Counter]:
        self.proc.stdin.write("requests\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return Counter(json.loads(self.proc.stdout.readline())), Counter()  # type: ignore[union-attr]

    reset = count  # type: ignore[assignment] - asking also starts the count afresh

    def stop(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(60)


class Kube(Backend):
    name = "kubernetes"
    cfg = {"queue": "default"}
    max_parallel = 4

    def __init__(self, base: Path, n: int) -> None:
        self.server, port = start_fakekube(base)
        self.url = f"http://127.0.0.1:{port}/fakekube/requests"

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.url + "/reset", data=b"", method="POST"), timeout=30).read()

    def count(self) -> Tuple[Counter, Counter]:
        got = json.loads(urllib.request.urlopen(self.url, timeout=30).read())
        return Counter({k: v for k, v in got.items() if v and k != "throttled"}), Counter()

    def stop(self) -> None:
        self.server.terminate()
        self.server.wait(60)


STARTERS = {"slurm": Slurm, "aws_batch": Moto, "gcp_batch": Gcp, "kubernetes": Kube}


def aged(name: str) -> None:
    """Wait until the shared status snapshot of the step before is older than its age
    (:mod:`tx.schedulers.plane`, 1 s by default): the next look asks the backend, as a
    user's look a moment later does."""
    from tx.schedulers.plane import max_age_for

    time.sleep(max_age_for(name) + 0.2)


def say(what: str) -> None:
    print(f"[sweep10k] {time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def step(backend: Backend, fn: Callable[[], Any], loads: List[float]) -> Tuple[Any, Dict[str, Any]]:
    """``fn()``'s result and what it cost: wall, tx time, tx CPU, calls at tx and at the
    backend, and the seconds and modules of the imports it made (a process's first call
    of an SDK's API imports it)."""
    import _frozen_importlib  # what the import statement calls (importlib._bootstrap)

    say(f"{backend.name}: a measured step")
    backend.reset()
    with tx_calls(backend.name) as (calls, inside, order), \
            counted((_frozen_importlib, "_find_and_load", None, True)) as (_, imports, _):
        loads.append(os.getloadavg()[0])
        modules = len(sys.modules)
        cpu0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    at_backend, own = backend.count()
    return out, {"wall": wall, "tx": wall - inside[0], "cpu": cpu, "calls": dict(calls),
                 "backend": dict(at_backend), "own": dict(own), "imports": imports[0],
                 "modules": len(sys.modules) - modules, "timeline": [(round(t - t0, 2), c) for t, c in order[:12]]}


def where_time_went(fn: Callable[[], Any], top: int = 6) -> str:
    """A cProfile of ``fn()``: the files (or built-ins) with the most own time, and the total."""
    prof = cProfile.Profile()
    prof.runcall(fn)
    stats = pstats.Stats(prof)
    by: Counter = Counter()
    for (file, _, func), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if file == "~":
            key = func
        else:
            parts = Path(file).parts
            key = "/".join(parts[parts.index("tx") if "tx" in parts else -2:][-3:])
        by[key] += own
    total = sum(by.values()) or 1.0
    return f"{total:.1f} s under cProfile: " + ", ".join(f"`{k}` {v / total:.0%}" for k, v in by.most_common(top))


def wait_failed(runner: Any, handle: str, timeout: float) -> Tuple[Dict[str, int], int]:
    """Poll the sweep's status every second until exactly trials 0..FAILING-1 are FAILED
    and SLOTS others run (the cluster full: nothing more starts); returns its counts by
    state then and the number of looks."""
    from tx.specs import AppState

    deadline, looks = time.monotonic() + timeout, 0
    while True:
        st = runner.sweep_status(handle)
        looks += 1
        failed = [t.index for t in st.trials if t.state == AppState.FAILED]
        if failed == list(range(FAILING)) and st.counts().get("RUNNING") == SLOTS:
            return dict(st.counts()), looks
        if len(failed) > FAILING or any(i >= FAILING for i in failed):
            raise SystemExit(f"trials failed that should not have: {failed[:20]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(failed)} of trials 0-{FAILING - 1} FAILED after {timeout:.0f} s")
        time.sleep(1.0)  # the poll interval


def run_once(name: str, n: int, profile: bool, loads: List[float], notes: Dict[str, List[str]],
             wait_timeout: float) -> Dict[str, Dict[str, Any]]:
    """One run of ``name``: a fresh backend and state directory; the measured steps."""
    from tx.runner import Runner
    from tx.runner.sweep import load_record
    from tx.specs.sweep import SweepSpec

    base = Path(tempfile.mkdtemp(prefix=f"tx-sweep10k-{name}-"))
    os.environ["TX_STATE_DIR"] = str(base / "tx-state")
    backend = STARTERS[name](base, n)
    out: Dict[str, Dict[str, Any]] = {}
    slurm = name == "slurm"
    app, spec = trial_app(slurm), SweepSpec(grid={"i": list(range(n))})
    try:
        with Runner("bench") as runner:
            runner.scheduler_run_opts(name)  # the plugin loaded before timing, as bench/sweep_bench.py
            if slurm:  # nothing starts while tx submits and looks: the trials' own calls stay out of sdiag's
                backend.nodes("DRAIN")  # type: ignore[attr-defined]
            handle, out["submit"] = step(backend, lambda: runner.run_sweep(
                app, spec, name, cfg=dict(backend.cfg), max_parallel=backend.max_parallel), loads)
            aged(name)
            st, out["status"] = step(backend, lambda: runner.sweep_status(handle), loads)
            assert len(st.trials) == n and all(t.app_handle for t in st.trials), st.format()[:2000]
            notes.setdefault(f"{name} status", []).append(calls_text(st.counts()))
            if slurm:
                backend.nodes("RESUME")  # type: ignore[attr-defined]
                say(f"waiting for trials 0-{FAILING - 1} to fail and {SLOTS} others to run")
                _, looks = wait_failed(runner, handle, wait_timeout)
                windows = backend.wait_quiet()  # type: ignore[attr-defined]
                aged(name)
                st, out["status, 100 failed"] = step(backend, lambda: runner.sweep_status(handle), loads)
                notes.setdefault(f"{name} status, 100 failed", []).append(
                    f"{calls_text(st.counts())} (after {looks} looks and {windows} quiet-check windows of 2 s)")
            if profile and slurm:  # the same look where fetching the snapshot takes longer than its age
                os.environ["TX_STATUS_MAX_AGE"] = "0.25"
                try:
                    aged(name)
                    _, m = step(backend, lambda: runner.sweep_status(handle), loads)
                finally:
                    del os.environ["TX_STATUS_MAX_AGE"]
                notes["slurm status, 100 failed, with the shared snapshot's largest age 0.25 s (TX_STATUS_MAX_AGE; "
                      "the first run)"] = [f"{calls_text(m['calls'])} in {m['wall']:.1f} s (" + ", ".join(
                          f"{c} at {x:.2f} s" for x, c in m["timeline"][:6]) + (", ..." if len(m["timeline"]) > 6 else "")
                      + ")"]
            if profile:  # not counted: after the measured looks, before the resume
                notes[f"{name} submit profile (its dryrun)"] = [where_time_went(lambda: runner.dryrun_sweep(
                    app, spec, name, cfg=dict(backend.cfg), max_parallel=backend.max_parallel))]
                for f in (base / "tx-state" / "plane").glob("*.status"):
                    f.unlink()  # one fetch, and no more while the profiler slows the look down (age 60 s)
                os.environ["TX_STATUS_MAX_AGE"] = "60"
                notes[f"{name} status profile (one fetch)"] = [where_time_went(lambda: runner.sweep_status(handle))]
                del os.environ["TX_STATUS_MAX_AGE"]
            if slurm:
                aged(name)
                todo, out["resume 100 failed"] = step(backend, lambda: runner.resume_sweep(handle), loads)
                rec = load_record(handle)
                again = sorted(t.index for t in rec.trials if len(t.attempts) == 2)
                others = {len(t.attempts) for t in rec.trials if t.index >= FAILING}
                if sorted(todo) != list(range(FAILING)) or again != list(range(FAILING)) or others != {1}:
                    raise SystemExit(f"resume resubmitted {sorted(todo)[:20]}..., second attempts {again[:20]}..., "
                                     f"attempts of the others {others}")
                notes.setdefault("resume checked", []).append(f"{len(todo)} resubmitted: trials 0-{FAILING - 1}")
            _, cancel = step(backend, lambda: runner.cancel_sweep(handle), loads)
            notes.setdefault(f"{name} cancel", []).append(
                f"{calls_text(cancel['calls'])}, {cancel['wall']:.2f} s")
    finally:
        backend.stop()
    return out


def verdict(name: str, what: str, runs: List[Dict[str, Any]], notes: Dict[str, List[str]]) -> Tuple[str, str]:
    """(the budget, PASS, or FAIL with what went over it and where it went) of one step's runs."""
    calls_max, secs = BUDGETS[what]
    if name == "slurm":  # the commands that ask slurmctld; the others: the server's count
        counts = [{k: v for k, v in r["calls"].items() if k not in LOCAL_COMMANDS} for r in runs]
    else:
        counts = [r["backend"] for r in runs]
    worst = max(counts, key=lambda c: sum(c.values()))
    tx, cpu = statistics.median(r["tx"] for r in runs), statistics.median(r["cpu"] for r in runs)
    budget = f"<= {calls_max} call{'s' if calls_max > 1 else ''}" + (f", <= {secs:g} s" if secs else "")
    over = []
    if sum(worst.values()) > calls_max:
        over.append(f"{sum(worst.values())} calls in the worst run ({calls_text(worst)})")
    if secs is not None and tx > secs:
        imp, mods = statistics.median(r["imports"] for r in runs), statistics.median(r["modules"] for r in runs)
        prof = notes.get(f"{name} {'submit profile (its dryrun)' if what == 'submit' else 'status profile (one fetch)'}")
        over.append(f"tx time {tx:.2f} s, CPU {cpu:.2f} s" + (" (the CPU within it: the rest waited for the CPU or "
                    "the disk)" if cpu <= secs else "") + f"; {imp:.2f} s of it importing {mods:.0f} module{'s' * (mods != 1)} (the "
                    "process's first use)" + (f"; where the CPU goes, {prof[0]}" if prof else ""))
    return budget, ("PASS" if not over else "FAIL: " + "; ".join(over))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=3, help="runs of each backend (median and range)")
    ap.add_argument("--trials", type=int, default=10000)
    ap.add_argument("--only", default=",".join(BACKENDS), help="comma list of backends")
    ap.add_argument("--wait-timeout", type=float, default=1800.0,
                    help="seconds to wait for the 100 failing trials to be FAILED on Slurm")
    ap.add_argument("--no-write", action="store_true", help="print the section, do not rewrite the file")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--child", help=argparse.SUPPRESS)  # one run of one backend, in a process of its own
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        loads: List[float] = []
        notes: Dict[str, List[str]] = {}
        out = run_once(args.child, args.trials, args.profile, loads, notes, args.wait_timeout)
        print("RESULT " + json.dumps({"steps": out, "notes": notes, "loads": loads}), flush=True)
        return 0
    names = [b for b in args.only.split(",") if b]
    if any(b not in BACKENDS for b in names):
        ap.error(f"--only takes {', '.join(BACKENDS)}")
    if "slurm" in names and args.trials < 2 * FAILING:
        ap.error(f"--trials must be at least {2 * FAILING} with slurm (trials 0-{FAILING - 1} fail)")
    git, load0 = git_state(), load_avg()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    notes: Dict[str, List[str]] = {}
    loads = []
    for k in range(args.n):  # the backends interleaved: each run of each starts afresh, in a process of its own
        for name in names:
            print(f"[sweep10k] run {k + 1}/{args.n}: {name}, {args.trials} trials", flush=True)
            p = subprocess.run([sys.executable, __file__, "--child", name, "--trials", str(args.trials),
                                "--wait-timeout", str(args.wait_timeout)] + (["--profile"] if k == 0 else []),
                               stdout=subprocess.PIPE, text=True, timeout=args.wait_timeout + 3600)
            got = [json.loads(ln[7:]) for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if p.returncode != 0 or not got:
                print(p.stdout[-3000:], file=sys.stderr)
                raise SystemExit(f"run {k + 1} of {name} failed (exit {p.returncode})")
            loads += got[0]["loads"]
            for key, vals in got[0]["notes"].items():
                notes.setdefault(key, []).extend(vals)
            for what, m in got[0]["steps"].items():
                results.setdefault((name, what), []).append(m)
                print(f"[sweep10k]   {what}: {json.dumps(m)}", flush=True)
    load1 = load_avg()
    cmd = f"python bench/sweep10k_bench.py -n {args.n} --trials {args.trials}" + (
        f" --only {args.only}" if names != list(BACKENDS) else "")
    text = section(results, notes, args, git, date, load0, load1, loads, cmd)
    print(text)
    if not args.no_write:
        replace_section(Path(args.out), SECTION, text)
    return 0


def section(results: Dict[Tuple[str, str], List[Dict[str, Any]]], notes: Dict[str, List[str]], args: Any,
            git: Dict[str, str], date: str, load0: str, load1: str, loads: List[float], cmd: str) -> str:
    servers = {"slurm": "private cluster", "aws_batch": "moto_server, simple mode",
               "gcp_batch": "tx's test server", "kubernetes": "tx's test API server"}
    rows, verdicts, own = [], [], Counter()
    for (name, what), runs in results.items():
        for r in runs if name == "slurm" else []:
            own.update(r["own"])
        if what not in BUDGETS:
            continue
        budget, v = verdict(name, what, runs, notes)
        calls, at_backend = ("; ".join(sorted({calls_text(r[k]) for r in runs})) for k in ("calls", "backend"))
        rows.append(f"| {name} ({servers[name]}) | {what} | {len(runs)} | {spread([r['wall'] for r in runs])} | "
                    f"{spread([r['tx'] for r in runs])} | {spread([r['cpu'] for r in runs])} | {calls} | "
                    f"{at_backend} | {budget} | **{v.split(':')[0]}** |")
        verdicts.append(f"- {name}, {what}: **{v.split(':')[0]}**{v[4:] if v != 'PASS' else ''}")
    t = args.trials
    lines = [
        SECTION, "",
        f"Measured {date} at commit {git['commit'][:12]} (tree dirty: {git['dirty']}) on {os.cpu_count()} CPUs "
        f"shared with other work, load average {load0} before, {load1} after (1-minute load at the measured steps: "
        f"{min(loads):.2f}-{max(loads):.2f}); n={args.n}, `{cmd}`.", "",
        f"A sweep of {t:,} single-replica trials (a grid `i = 0..{t - 1}`): `Runner.run_sweep`, `Runner.sweep_status` "
        "(`tx status SWEEP`) and, on Slurm, `Runner.resume_sweep` (`tx sweep resume SWEEP`). Each run is a process of "
        "its own with a fresh backend and state directory, everything cancelled at its end; the backends' runs "
        f"interleave. Slurm: a private cluster (scripts/start-slurm.sh: 4 nodes of 2 CPUs, no accounting, "
        f"`MaxArraySize={t + 1}`); trials 0-{FAILING - 1} run `exit 1`, the others `sleep 3600`; the nodes are drained "
        "while tx submits and first looks (the trials' scripts ask slurmctld too), then resumed; the second look and "
        f"the resume come once trials 0-{FAILING - 1} are FAILED, 8 others run and slurmctld has served nothing but its "
        "heartbeat for 2 s. aws_batch is moto (a private moto_server in simple mode: the children end inside "
        "SubmitJob, so the status finds them all SUCCEEDED); gcp_batch and kubernetes are tx's own test servers "
        "(plugins/scheduler-gcp-batch/tests/fake_gcp.py, no VMs: every task stays PENDING; "
        "plugins/scheduler-k8s/tests/fakekube, `max_parallel=4`: 4 pods sleep), which validate every request against "
        "the backends' published schemas (Batch's protos, Kubernetes' OpenAPI); their answers are local round trips, "
        "not the clouds' latency. Before each measured look the shared status snapshot (1 s) has aged out.", "",
        "Each cell: median (range) of the n runs. *tx time*: the wall time less the time waiting for the backend "
        "(inside Slurm's commands; in the HTTP sockets' connect, send and receive); *tx CPU*: user+sys seconds of "
        "the tx process (the servers and Slurm's commands are other processes); wall and tx time carry this "
        "shared machine's load (and this process's `nice 19`), the CPU much less. *Calls at tx*: the Slurm "
        "commands tx ran, or its HTTP requests; *at the backend*: slurmctld's RPCs (`sdiag` by message type, reset "
        "before each step; one `squeue` is 2 RPCs), moto's request log, the test servers' request counters. A "
        "budget's calls are tx's commands that ask slurmctld (`sinfo --version` does not) on Slurm and the server's "
        "count elsewhere, judged on the worst run; its time is the median tx time.", "",
        "| backend | step | n | wall | tx time | tx CPU | calls at tx | calls at the backend | budget | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, "", "Verdict (from the rows above):", "", *verdicts, "", "Notes (measured in these runs):", "",
        f"- Left out of slurmctld's counts as the cluster's own (all steps, all runs): {calls_text(own)}.",
        *[f"- {key}: {'; '.join(sorted(set(vals)))}." for key, vals in notes.items()],
    ]
    for (name, what), runs in results.items():  # when the calls over a look's budget came
        for k, r in enumerate(runs):
            if name == "slurm" and what.startswith("status") and sum(r["calls"].values()) > 1:
                lines.append(f"- {name} {what}, run {k + 1}: " + ", ".join(f"{c} at {x:.2f} s" for x, c in r["timeline"])
                             + (", ..." if sum(r["calls"].values()) > len(r["timeline"]) else "") + f" of {r['wall']:.2f} s.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
