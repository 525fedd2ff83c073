#!/usr/bin/env python3
"""The status plane on Slurm (issue 40): the controller calls a minute that several
followers of one app set cost together, with the plane and without it, and whether a site's
call budget holds; writes the section "Status plane: backend calls" of
bench/RESULTS-scale.md (the others are kept as they are).

Starts a private Slurm cluster (scripts/start-slurm.sh, as the plugin's tests do) and
builds one app set, all in one private state directory:

* two held 1,000-task job arrays (``sbatch --hold --array=0-999``: 2,000 pending apps that
  cost no node; Slurm's default ``MaxArraySize`` is 1001);
* 2,000 runs with failover (slurm, then local_cwd; ``pending_timeout`` ten hours), each
  following one of those tasks: one real ``Runner.run_with_fallback`` whose record is copied
  with ``tx_scheduler_local._clone.clone_run_record`` (the record tx wrote, a new run id, the
  live hop's app id replaced);
* one sweep of 4 trials of 2 replicas each (``sleep``; not one array: several replicas),
  ``--max_parallel 2``: 2 trials run, 2 wait for the supervisor.

The followers, all started afresh for each window with the window's settings: ``--status``
threads each running ``tx status slurm://plane/<task>`` in a loop (each on a task of its
own), the failover watcher (``python -m tx.runner._failover_watcher``, following the 2,000
runs) and the sweep's supervisor (``python -m tx.runner._sweep_supervisor``, which looks at
its running trials every second). After ``--warmup`` seconds, the calls of ``--window``
seconds are counted twice:

* at the controller: ``sdiag``'s RPC counts by message type (the query types
  ``REQUEST_*INFO*``, sdiag's own left out), as plugins/scheduler-slurm/tests/test_slurm_scale.py
  counts them;
* at tx: the Slurm commands tx ran, every tx process of the host together (the call
  budget's shared counter: the window's ``.txconfig`` sets ``[slurm] max_calls_per_minute``
  so high that it never waits, so that the counter is shared, not per process).

Modes, interleaved, ``-n`` windows each: ``plane`` (the default ``status_max_age_s`` of 1 s),
``no plane`` (``TX_STATUS_MAX_AGE=0``: every look asks the backend, as before the plane); and
``--budget-windows`` windows of ``budget`` (a site's bucket: ``max_calls_per_minute = 4``,
``max_call_burst = 40``, ``status_max_age_s = 15``), where the bucket must hold: tx's calls
at most 40 + 4 a minute, no throttling answer, every ``tx status`` exiting 0 with the
right state, no run failed over and the supervisor submitting nothing.

    python bench/plane_bench.py [-n 3] [--window 40] [--status 3] [--budget-windows 1] [--no-write]

Needs root and Slurm's packages (scripts/install-slurm.sh).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _common import git_state, load_avg, replace_section, sdiag_rpcs, start_slurm, stop_slurm  # noqa: E402 - the benches' shared helpers

OUT = REPO / "bench" / "RESULTS-scale.md"
SECTION = "## Status plane: backend calls"
BIN = Path(sys.executable).parent
#: the query message types (squeue, scontrol show, sinfo); daemons' traffic is not among them
_QUERY = re.compile(r"^\s*(REQUEST_\w*INFO\w*)\s+\(\s*\d+\)\s+count:(\d+)", re.MULTILINE)


def rpcs() -> Dict[str, int]:
    """slurmctld's count of each client request type so far (``sdiag``), sdiag's own left out."""
    return {k: v for k, v in sdiag_rpcs().items() if k.startswith("REQUEST_")}


def _diff(a: Dict[str, int], b: Dict[str, int]) -> Dict[str, int]:
    return {k: v - a.get(k, 0) for k, v in b.items() if v - a.get(k, 0) > 0}


def budget_file(state: Path) -> Optional[Path]:
    files = list((state / "plane").glob("slurm-*.budget"))
    return files[0] if files else None


def budget_counts(state: Path) -> Dict[str, float]:
    f = budget_file(state)
    if f is None:
        return {}
    try:
        return json.loads(f.read_text() or "{}")
    except ValueError:
        return {}


CONFIGS = {
    # so high that nothing waits: the counter in the budget's file is shared by every process
    "plane": ("[slurm]\nmax_calls_per_minute = 1000000\n", None),
    "no plane": ("[slurm]\nmax_calls_per_minute = 1000000\n", "0"),
    "budget": ("[slurm]\nmax_calls_per_minute = 4\nmax_call_burst = 40\n", None),
    "budget, age 15 s": ("[slurm]\nmax_calls_per_minute = 4\nmax_call_burst = 40\nstatus_max_age_s = 15\n", None),
}


#: a follower of many apps (a dashboard's page, a script polling ``Runner.status``): the
#: status of each app of argv[1] (comma-separated ids), then a second's sleep, printing a
#: line a round: its number, how many answers were not PENDING, its seconds
PAGE = """
import sys, time
from tx.runner import Runner
from tx.specs import AppState
ids = sys.argv[1].split(",")
with Runner("plane") as r:
    n = 0
    while True:
        t = time.perf_counter()
        bad = sum(1 for i in ids if r.status(f"slurm://plane/{i}").state != AppState.PENDING)
        n += 1
        print(n, bad, round(time.perf_counter() - t, 3), flush=True)
        time.sleep(1.0)
"""


class Followers:
    """The followers of one window (see the module's doc)."""

    def __init__(self, env: Dict[str, str], work: Path, status_ids: List[str], sweep: str,
                 page_ids: List[str]) -> None:
        self.env, self.work, self.stop = env, work, threading.Event()
        self.results: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in status_ids]
        log = open(work / "followers.log", "ab")
        self.procs = [
            subprocess.Popen([sys.executable, "-m", "tx.runner._failover_watcher"], env=env, cwd=work,
                             stdout=log, stderr=log, start_new_session=True),
            subprocess.Popen([sys.executable, "-m", "tx.runner._sweep_supervisor", sweep], env=env, cwd=work,
                             stdout=log, stderr=log, start_new_session=True),
        ]
        log.close()
        self.page_out = open(work / "page.out", "w+")
        if page_ids:
            self.procs.append(subprocess.Popen([sys.executable, "-c", PAGE, ",".join(page_ids)], env=env, cwd=work,
                                               stdout=self.page_out, stderr=subprocess.STDOUT, start_new_session=True))
        for t in self.threads:
            t.start()

    def _loop(self, app_id: str) -> None:
        while not self.stop.is_set():
            t = time.perf_counter()
            p = subprocess.run([str(BIN / "tx"), "status", f"slurm://plane/{app_id}"], env=self.env, cwd=self.work,
                               capture_output=True, text=True, timeout=600)
            with self.lock:
                self.results.append({"rc": p.returncode, "s": time.perf_counter() - t,
                                     "pending": "PENDING" in p.stdout, "err": p.stderr.strip()[-300:]})

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=900)
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def page_rounds(self) -> List[List[float]]:
        """The page follower's rounds so far: ``[number, not PENDING, seconds]`` each."""
        self.page_out.flush()
        out = []
        for line in Path(self.page_out.name).read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0].isdigit():
                out.append([float(x) for x in parts])
        return out


def stop_watcher() -> None:
    """End the failover watcher of this state directory, whoever of this bench's processes
    started it (a ``tx status`` may have: ``ensure_watcher``); its pid is in its lock file."""
    from tx.runner.failover import watcher_lock_path

    try:
        pid = int(Path(watcher_lock_path()).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, 15)
    except OSError:
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.2)


def watcher_pid() -> Optional[int]:
    from tx.runner.failover import watcher_lock_path

    try:
        return int(Path(watcher_lock_path()).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_s(pid: Optional[int]) -> float:
    """User + system CPU seconds of process ``pid`` so far (nan where it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def rss_mb(pid: Optional[int]) -> float:
    try:
        m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
        return int(m.group(1)) / 1024 if m else float("nan")
    except OSError:
        return float("nan")


def setup(state: Path, work: Path) -> Dict[str, Any]:
    """The app set (see the module's doc): the held arrays' task ids, the runs, the sweep."""
    from tx.runner import Runner
    from tx.runner import sweep as sw
    from tx.specs import AppDef, Resource, Role
    from tx.specs.sweep import SweepSpec
    from tx_scheduler_local._clone import clone_run_record

    tasks: List[str] = []
    arrays = []
    for _ in range(2):
        job = subprocess.run(["sbatch", "--parsable", "--hold", "--array=0-999", f"--output={work}/%A_%a.out",
                              "--job-name=plane", "--wrap", "true"], capture_output=True, text=True,
                             check=True, timeout=60).stdout.strip()
        arrays.append(job)
        tasks += [f"{job}_{i}" for i in range(1000)]
    cfg = {"job_dir": str(work / "jobs")}
    res = Resource(cpu=1, gpu=0, memMB=64)
    with Runner("plane") as runner:
        one = AppDef("pl", [Role("w", image="", entrypoint="sleep", args=["36000"], resource=res)])
        handle = runner.run_with_fallback(one, [("slurm", cfg), ("local_cwd", {})], pending_timeout=36000.0,
                                          watch=False)
        runs = clone_run_record(handle, tasks, watch=True)
        two = AppDef("sw", [Role("w", image="", entrypoint="bash", args=["-c", "sleep 36000 # ${x}"], num_replicas=2,
                                 resource=res)])
        info = runner.dryrun_sweep(two, SweepSpec(grid={"x": [1, 2, 3, 4]}), "slurm", cfg=cfg, max_parallel=2)
        assert info.native is None, "the sweep must be trials under a supervisor"
        sweep = sw.run_sweep(runner._engine, info, supervise=False)
    return {"tasks": tasks, "arrays": arrays, "runs": runs, "sweep": sweep}


def check_runs(runs: List[str], tasks: List[str]) -> Dict[str, int]:
    """How many runs still follow their task on Slurm (no failover), and their hop states."""
    from tx.runner import load_run

    out: Dict[str, int] = {}
    for h, t in zip(runs, tasks):
        live = load_run(h).live
        key = f"{live.scheduler}:{live.state}" if live is not None and live.app_id == t else "moved"
        out[key] = out.get(key, 0) + 1
    return out


def sweep_submitted(sweep: str) -> int:
    from tx.runner.sweep import load_record

    return sum(1 for t in load_record(sweep).trials if not t.pending)


def window(mode: str, base_env: Dict[str, str], work: Path, state: Path, app: Dict[str, Any], n_status: int,
           warmup: float, length: float, page: int) -> Dict[str, Any]:
    text, max_age = CONFIGS[mode]
    (work / "txconfig").write_text(text)
    f = budget_file(state)
    if f is not None:
        f.unlink()  # a full bucket, counts from 0
    reset = time.monotonic()
    env = dict(base_env, TXCONFIG=str(work / "txconfig"))
    env.pop("TX_STATUS_MAX_AGE", None)
    if max_age is not None:
        env["TX_STATUS_MAX_AGE"] = max_age
    step = len(app["tasks"]) // max(1, n_status)
    ids = [app["tasks"][i * step + 7] for i in range(n_status)]
    submitted0 = sweep_submitted(app["sweep"])
    stop_watcher()
    fol = Followers(env, work, ids, app["sweep"], app["tasks"][1000:1000 + page])
    try:
        time.sleep(warmup)
        with fol.lock:
            done0 = len(fol.results)
        p0 = len(fol.page_rounds())
        wpid, spid = watcher_pid(), fol.procs[1].pid
        c0 = (cpu_s(wpid), cpu_s(spid))
        r0, b0, t0 = rpcs(), budget_counts(state), time.monotonic()
        time.sleep(length)
        r1, b1, t1 = rpcs(), budget_counts(state), time.monotonic()
        c1 = (cpu_s(wpid), cpu_s(spid))
        rounds = fol.page_rounds()
        wrss = rss_mb(wpid)
        with fol.lock:
            looks = fol.results[done0:]
    finally:
        fol.close()
        stop_watcher()
    minutes = (t1 - t0) / 60
    d = _diff(r0, r1)
    query = sum(v for k, v in d.items() if _QUERY.match(f"{k} (0) count:{v}"))
    calls = b1.get("calls", 0) - b0.get("calls", 0)
    every = fol.results
    return {
        "mode": mode, "minutes": minutes, "rpc": d, "query_per_min": query / minutes,
        "tx_calls": calls, "tx_per_min": calls / minutes, "throttled": b1.get("throttled", 0),
        "budget_total": b1.get("calls", 0), "status_looks": len(looks),
        "status_s": statistics.median([x["s"] for x in looks]) if looks else float("nan"),
        "status_bad": [x for x in every if x["rc"] != 0 or not x["pending"]],
        "status_all": len(every), "submitted": sweep_submitted(app["sweep"]) - submitted0,
        "window_s": t1 - t0, "since_full_min": (t1 - reset) / 60,
        "watcher_cpu": (c1[0] - c0[0]) / (t1 - t0), "supervisor_cpu": (c1[1] - c0[1]) / (t1 - t0),
        "watcher_rss": wrss, "page_rounds": len(rounds) - p0,
        "page_bad": sum(int(r[1]) for r in rounds),
        "page_s": statistics.median([r[2] for r in rounds[p0:]]) if rounds[p0:] else float("nan"),
    }


def spread(xs: List[float], fmt: str = "{:.0f}") -> str:
    if len(xs) == 1:
        return fmt.format(xs[0]) + " (n=1)"
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def section(res: List[Dict[str, Any]], args: Any, stamp: str, runs_after: Dict[str, int]) -> str:
    by: Dict[str, List[Dict[str, Any]]] = {}
    for r in res:
        by.setdefault(r["mode"], []).append(r)
    rows = []
    for mode in CONFIGS:
        rs = by.get(mode, [])
        if not rs:
            continue
        kinds: Dict[str, List[float]] = {}
        for r in rs:
            for k, v in r["rpc"].items():
                if k == "REQUEST_UPDATE_PARTITION":  # not tx's: the private cluster's own traffic
                    continue
                kinds.setdefault(k, []).append(v / r["minutes"])
        top = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in sorted(kinds.items(), key=lambda kv: -max(kv[1]))[:3])
        rows.append(
            f"| {mode} | {len(rs)} x {statistics.median([r['window_s'] for r in rs]):.0f} s "
            f"| {spread([r['tx_per_min'] for r in rs])} | {spread([r['query_per_min'] for r in rs])} | {top} "
            f"| {spread([r['status_looks'] / r['minutes'] for r in rs])} "
            f"| {spread([r['status_s'] for r in rs], '{:.1f}')} s "
            f"| {sum(int(r['throttled']) for r in rs)} | {sum(len(r['status_bad']) for r in rs)} of "
            f"{sum(r['status_all'] for r in rs)} | {sum(r['submitted'] for r in rs)} "
            f"| {spread([r['watcher_cpu'] for r in rs], '{:.2f}')} / {statistics.median([r['watcher_rss'] for r in rs]):.0f} MB "
            f"| {spread([r['supervisor_cpu'] for r in rs], '{:.2f}')} "
            + (f"| {spread([r['page_rounds'] / r['minutes'] for r in rs])}, "
               f"{spread([r['page_s'] for r in rs if r['page_rounds']], '{:.2f}')} s, "
               if all(r["page_rounds"] for r in rs) else
               f"| {sum(1 for r in rs if not r['page_rounds'])} of {len(rs)} windows without one whole round "
               f"(a round over {args.window + args.warmup:.0f} s), ")
            + f"{sum(r['page_bad'] for r in rs)} wrong |")
    med = {m: statistics.median([r["tx_per_min"] for r in by[m]]) for m in by}
    verdict = ["Verdict (from the rows above):", ""]
    if "plane" in med and "no plane" in med:
        verdict.append(
            f"- With the plane the followers together cost {med['plane']:.0f} Slurm commands a minute "
            f"(at most one shared `squeue` a second, whoever asks: 60 a minute), without it "
            f"{med['no plane']:.0f} ({med['no plane'] / max(med['plane'], 1e-9):.1f}x).")
    for r in by.get("budget", []) + by.get("budget, age 15 s", []):
        allowed = 40 + 4 * r["since_full_min"]
        ok = (r["budget_total"] <= allowed and not r["throttled"] and not r["status_bad"] and not r["submitted"])
        verdict.append(
            f"- {r['mode']} (4 a minute, burst 40): {r['budget_total']:.0f} Slurm commands in the "
            f"{r['since_full_min'] * 60:.0f} s since the bucket was full (allowed at most {allowed:.0f}; "
            f"{r['tx_calls']:.0f} in the {r['window_s']:.0f} s window), {int(r['throttled'])} throttling answers, "
            f"{len(r['status_bad'])} of {r['status_all']} `tx status` wrong or failed, a `tx status` "
            f"{r['status_s']:.1f} s (median): " + ("**HOLDS**." if ok else "**DOES NOT HOLD**."))
    verdict.append(f"- The 2,000 runs after every window: {', '.join(f'{v} {k}' for k, v in sorted(runs_after.items()))} "
                   "(none failed over, none marked failed).")
    return "\n".join([
        SECTION, "",
        stamp, "",
        f"A private Slurm cluster (4 nodes, no accounting) and one app set: 2,000 pending apps (two held "
        f"1,000-task arrays), 2,000 runs with failover following them, and a sweep of 4 two-replica trials "
        f"(`--max_parallel 2`: 2 running, 2 waiting). Followers, all at once, started afresh for each window: "
        f"{args.status} loops of `tx status` (each on an app of its own), the failover watcher (all 2,000 runs), "
        f"the sweep's supervisor, and a page follower (one process: `Runner.status` of each of {args.page} apps, "
        f"then a second's sleep, as a dashboard's page or a polling script). Calls counted at tx (every Slurm command of every tx process: the call "
        f"budget's shared counter) and at slurmctld (`sdiag`'s request counts; \"query RPCs\" are the "
        f"`REQUEST_*INFO*` types). Each window is {args.window:.0f} s after {args.warmup:.0f} s of warm-up; modes "
        f"interleaved; median (range) over the windows.",
        "",
        "| mode | windows | tx's Slurm commands a minute | slurmctld query RPCs a minute | top RPC types a minute "
        "| `tx status` looks a minute | one `tx status` | throttled | `tx status` wrong or failed | trials submitted "
        f"| watcher (2,000 runs): CPU s a s / RSS | supervisor: CPU s a s | page of {args.page} apps: rounds a minute, a round, wrong |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows, "",
        "Modes: **plane**: the default (a snapshot shared for 1 s); **no plane**: `TX_STATUS_MAX_AGE=0` (every "
        "look asks slurmctld, as before the plane); **budget**: `.txconfig` `[slurm] max_calls_per_minute = 4`, "
        "`max_call_burst = 40` (snakemake-executor-plugin-slurm#467's bucket), the snapshot's default age (1 s): "
        "the followers ask for more than the bucket gives, and wait for its tokens; **budget, age 15 s**: the same "
        "and `status_max_age_s = 15` (one token's refill), what a site with that bucket would set. A budget "
        "window starts with a full bucket; the REQUEST_UPDATE_PARTITION requests (about 30 a minute) are the "
        "private cluster's own, not tx's (tx's count has none). The watcher at 2,000 Slurm runs is measured here as one "
        "follower among others: its CPU seconds a second of the window (CPU over wall) and RSS; its CPU a tick "
        "is measured on local_cwd below.",
        "",
        *verdict, "",
    ])


def write(text: str, out: Path) -> None:
    replace_section(out, SECTION, text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=3, help="windows of each of plane and no plane")
    ap.add_argument("--window", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--status", type=int, default=3, help="tx status loops")
    ap.add_argument("--page", type=int, default=100, help="apps of the page follower (0: none)")
    ap.add_argument("--budget-windows", type=int, default=1)
    ap.add_argument("--budget-window", type=float, default=120.0)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    git, load0 = git_state(), load_avg()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    base = Path(tempfile.mkdtemp(prefix="txpl-"))
    senv = start_slurm(base)
    state = Path(os.environ["TX_STATE_DIR"])
    work = base / "work"
    work.mkdir()
    results: List[Dict[str, Any]] = []
    try:
        os.environ["TXCONFIG"] = str(work / "txconfig")
        (work / "txconfig").write_text(CONFIGS["plane"][0])
        app = setup(state, work)
        base_env = dict(os.environ, NO_COLOR="1", PYTHONPATH=os.environ.get("PYTHONPATH", ""))
        plan = ([m for _ in range(args.n) for m in ("plane", "no plane")]
                + [m for _ in range(args.budget_windows) for m in ("budget", "budget, age 15 s")])
        for mode in plan:
            length = args.budget_window if mode.startswith("budget") else args.window
            r = window(mode, base_env, work, state, app, args.status, args.warmup, length, args.page)
            print(json.dumps({k: v for k, v in r.items() if k != "status_bad"}), "bad:", r["status_bad"][:2],
                  flush=True)
            results.append(r)
        runs_after = check_runs(app["runs"], app["tasks"])
    finally:
        stop_watcher()
        if (work / "followers.log").exists():
            shutil.copy(work / "followers.log", base.parent / f"{base.name}-followers.log")
        stop_slurm(senv)
    load1 = load_avg()
    stamp = (f"Measured {date} at commit {git['commit'][:12]} (tree dirty: {git['dirty']}) on {os.cpu_count()} CPUs "
             f"shared with other work, load average {load0} before, {load1} after; `python bench/plane_bench.py "
             f"-n {args.n} --window {args.window:g} --status {args.status} --page {args.page} "
             f"--budget-windows {args.budget_windows}`.")
    text = section(results, args, stamp, runs_after)
    print(text)
    if not args.no_write:
        write(text, Path(args.out))


if __name__ == "__main__":
    main()
