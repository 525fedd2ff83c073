#!/usr/bin/env python3
"""The failover watcher following 2,000 runs (issue 40): its calls to the backend, CPU and
memory per tick, with the runs' live hops on local_cwd, on Slurm (a private cluster) and on
aws_batch (a private moto_server: moto, not AWS), at each size of ``--sizes`` on each backend
and once at ``--mixed`` runs split across the three; writes the section "The watcher
following 2,000 runs" of bench/RESULTS-scale.md (the others are kept as they are).

Each size runs in a process of its own (its peak memory its own) with its own private
backends and state directory, all stopped at its end; how the runs are made and their
calls counted at the backend is bench/_watch_backends.py's doc. A tick is the watcher's
loop body (``tx.runner._failover_watcher``): ``list_records(unfinished=True, watched=True)``
then ``failover.poll``, followed by the watcher's own ``POLL_S`` sleep (so the shared status
snapshot, 1 s, has aged as it has for the real watcher); the backend's counters are reset
before the tick and read after the sleep. CPU is the process's user+system time of the tick
(``time.process_time``), memory its resident set after the ticks and its peak
(``ru_maxrss``); *stepped* counts the runs ``poll`` stepped (``failover.step``: a run whose
listed state differs from its record's). The first two ticks are left out (they read what
the later ones keep, and step the copies whose recorded state is not their app's); ``-n``
ticks follow, reported as median (range). After the ticks every followed run's record is
checked against the backend's own state of its app (``squeue``, moto's ``ListJobs``, the
local state files): a run failed over, marked ended or recorded in another state is wrong.

    python bench/watcher_bench.py [-n 5] [--sizes 20,200,2000] [--backends local_cwd,slurm,aws_batch]
                                  [--mixed 2000] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _common import calls_text, git_state, load_avg, replace_section, spread  # noqa: E402 - the benches' shared helpers
from _watch_backends import KINDS, STARTERS  # noqa: E402

OUT = REPO / "bench" / "RESULTS-scale.md"
SECTION = "## The watcher following 2,000 runs"
WARM = 2  # ticks left out
#: where a backend's calls a tick come from, read in the code (written under a verdict that fails)
WHY = {"aws_batch": (
    "the watcher's `failover.poll` (core/src/tx/runner/failover.py) asks each scheduler with several live hops for "
    "`Engine.list`; aws_batch's `list` (plugins/scheduler-aws-batch/src/tx_scheduler_aws_batch/scheduler.py) is not "
    "the status plane's queue snapshot but `DescribeJobQueues`, then per queue of the region `ListJobs` (every page) "
    "and a `DescribeJobs` per 100 jobs to read their tags: one more call a tick per 100 jobs (21 at 2,001 jobs: the "
    "followed ones and the real run's). Its `states_of` answers only a sweep's trials (None for `queue:name` app "
    "ids), and the plane's fetch (`_plane.fetch_queue`) also describes every unfinished job by 100, so routing the "
    "poll through the plane alone would not make the calls constant: that needs states from `ListJobs`'s summaries "
    "(or unchanged jobs not described again). Not fixed here")}
WHERE = {"local_cwd": "local_cwd (state files; calls at the scheduler)", "slurm": "slurm (private cluster)",
         "aws_batch": "aws_batch (moto_server, not AWS)"}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(spec: Dict[str, int], ticks: int) -> Dict[str, Any]:
    """One size (``spec``: backend -> runs), in this process; returns its measures."""
    from tx.runner import Runner, failover
    from tx.runner._failover_watcher import POLL_S

    base = Path(os.environ["TX_STATE_DIR"]).parent
    backends: Dict[str, Any] = {}
    try:
        for name in spec:
            backends[name] = STARTERS[name](base)
        with Runner("wbench") as runner:
            runner.log_archive = None
            made: Dict[str, List[str]] = {}
            t0 = time.monotonic()
            for name, n in spec.items():
                made[name] = backends[name].make_runs(runner, n)
            setup_s = time.monotonic() - t0
            for b in backends.values():
                b.settle()
            stepped: Counter = Counter()
            real_step = failover.step

            def counting_step(engine: Any, handle: str, *a: Any, **kw: Any) -> Any:
                stepped[handle.split(":", 1)[0]] += 1
                return real_step(engine, handle, *a, **kw)
            failover.step = counting_step  # poll calls the module's step
            rows, cache = [], {}
            for t in range(WARM + ticks):
                for b in backends.values():
                    b.reset()
                stepped.clear()
                cpu0, wall0 = time.process_time(), time.monotonic()
                records = failover.list_records(unfinished=True, watched=True, cache=cache)
                failover.poll(runner.engine, records)
                cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
                time.sleep(POLL_S)  # the watcher's sleep (and the backends' logs catch up)
                calls = {name: dict(b.count()) for name, b in backends.items()}
                if t >= WARM:
                    rows.append({"cpu": cpu, "wall": wall, "calls": calls, "stepped": dict(stepped),
                                 "followed": len(records)})
            failover.step = real_step
            rss, peak = _rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            states, raw, wrong = check(backends, made)
            for b in backends.values():
                b.stop(runner)
            backends = {}
    finally:
        for b in backends.values():
            try:
                b.stop(None)
            except Exception:  # noqa: BLE001 - the first error is the one reported
                pass
    return {"spec": spec, "ticks": rows, "rss_after_mb": rss, "peak_mb": peak, "poll_s": POLL_S,
            "states": states, "raw": raw, "wrong": wrong, "setup_s": setup_s}


def check(backends: Dict[str, Any], made: Dict[str, List[str]]) -> Any:
    """Every followed run against its backend: (recorded states by backend, the backend's
    own states by backend, the wrong ones as text)."""
    from tx.runner import failover

    truth = {(name, a): s for name, b in backends.items() for a, s in b.truth().items()}
    states: Dict[str, Counter] = {name: Counter() for name in backends}
    raw: Dict[str, Counter] = {name: Counter(s[0] for (n, _), s in truth.items() if n == name) for name in backends}
    wrong: List[str] = []
    handles = {h for hs in made.values() for h in hs}
    recs = [r for r in failover.list_records(watched=True) if r.handle in handles]
    if len(recs) != len(handles):
        wrong.append(f"{len(handles) - len(recs)} records missing")
    for rec in recs:
        hop, name = rec.live, rec.chain[0]["scheduler"]
        want = truth.get((name, hop.app_id or ""), ("?", "?"))[1]
        states[name][hop.state] += 1
        if rec.final or rec.failing_over or len(rec.hops) != 1 or hop.scheduler != name or hop.state != want:
            wrong.append(f"{rec.handle}: final {rec.final}, hops {[h.scheduler for h in rec.hops]}, "
                         f"recorded {hop.state}, backend {want}")
    return {k: dict(v) for k, v in states.items()}, {k: dict(v) for k, v in raw.items()}, wrong


def run_size(spec: Dict[str, int], ticks: int) -> Dict[str, Any]:
    arg = ",".join(f"{k}:{v}" for k, v in spec.items())
    print(f"[watcher_bench] {time.strftime('%H:%M:%S')} {arg}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="txwb-", ignore_cleanup_errors=True) as d:
        env = {**os.environ, "TX_STATE_DIR": str(Path(d) / "state")}
        p = subprocess.run([sys.executable, __file__, "--child", arg, "-n", str(ticks)], env=env, cwd=d,
                           capture_output=True, text=True, timeout=7200)
        if p.returncode != 0:
            raise SystemExit(f"{arg} failed:\n{p.stderr[-3000:]}")
        out = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"[watcher_bench]   {json.dumps(out)[:600]}", file=sys.stderr, flush=True)
    return out


def _row(r: Dict[str, Any]) -> str:
    spec, ticks = r["spec"], r["ticks"]
    n = sum(spec.values())
    mixed = len(spec) > 1
    cpus, walls = [t["cpu"] for t in ticks], [t["wall"] for t in ticks]
    calls = "; ".join(f"{name}: " * mixed + " / ".join(sorted({calls_text(t["calls"][name]) for t in ticks}))
                      for name in spec)
    stepped = " / ".join(sorted({str(sum(t["stepped"].values())) for t in ticks}))
    states = "; ".join(f"{name}: " * mixed + calls_text(r["states"][name]) + f" (backend: {calls_text(r['raw'][name])})"
                       for name in spec)
    what = " + ".join(f"{v:,} {k}" for k, v in spec.items()) if mixed else f"{n:,}"
    return (f"| {what} | {'mixed' if mixed else WHERE[next(iter(spec))]} | {calls} | {stepped} | {spread(cpus)} | "
            f"{spread(walls)} | {statistics.median(cpus) / n * 1000:.2f} ms | {r['rss_after_mb']:.1f} MB / "
            f"{r['peak_mb']:.1f} MB | {states} | {len(r['wrong']) or 'none'} |")


def table(results: List[Dict[str, Any]]) -> str:
    return "\n".join(["| runs followed | backend | calls a tick at the backend (every measured tick) | runs stepped a tick "
                      "| watcher CPU a tick | wall a tick | CPU per run | RSS after / peak | states the watcher recorded "
                      "(the backend's own) | wrong |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *map(_row, results)])


def verdict(results: List[Dict[str, Any]]) -> str:
    """Per backend: the calls a tick are the same at every size (the mixed size's share
    too), and the largest size's tick (median wall and CPU) fits the poll interval."""
    lines = ["Verdict (from the rows above):", ""]
    for name in KINDS:
        mine = [r for r in results if name in r["spec"]]
        if not mine:
            continue
        calls = {calls_text(t["calls"][name]) for r in mine for t in r["ticks"]}
        sizes = ", ".join(f"{r['spec'][name]:,}" + (" (mixed)" if len(r["spec"]) > 1 else "") for r in mine)
        lines.append(f"- {WHERE[name]}: calls a tick do not grow with the runs: "
                     f"**{'HOLDS' if len(calls) == 1 else 'FAILS'}** ({' / '.join(sorted(calls))} at {sizes} runs).")
        big = max((r for r in mine if len(r["spec"]) == 1), key=lambda r: r["spec"][name], default=None)
        if big is not None:
            lines.append(_fits(name, big))
        if len(calls) > 1 and name in WHY:
            lines.append(f"  Where: {WHY[name]}.")
    mixed = [r for r in results if len(r["spec"]) > 1]
    for r in mixed:
        lines.append(_fits("mixed", r))
    bad = [w for r in results for w in r["wrong"]]
    lines.append(f"- Every followed run recorded in its app's state on the backend, none failed over or ended: "
                 f"**{'HOLDS' if not bad else 'FAILS'}**" + (f" ({len(bad)} wrong, e.g. {bad[0]})." if bad else "."))
    return "\n".join(lines)


def _fits(name: str, r: Dict[str, Any]) -> str:
    n = sum(r["spec"].values())
    cpu = statistics.median(t["cpu"] for t in r["ticks"])
    wall = statistics.median(t["wall"] for t in r["ticks"])
    ok = wall < r["poll_s"] and cpu < r["poll_s"]
    return (f"- {WHERE.get(name, name)}: the work at {n:,} runs fits the {r['poll_s']:g} s tick: "
            f"**{'HOLDS' if ok else 'FAILS'}** ({wall:.2f} s of wall, {cpu:.2f} s of CPU a tick, median; "
            f"{cpu / n * 1000:.2f} ms of CPU a run).")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5, help="ticks measured per size (after two left out)")
    ap.add_argument("--sizes", default="20,200,2000")
    ap.add_argument("--backends", default=",".join(KINDS))
    ap.add_argument("--mixed", type=int, default=2000, help="runs split across the backends (0: none)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS-scale.md")
    args = ap.parse_args()
    if args.child is not None:
        spec = {k: int(v) for k, v in (part.split(":") for part in args.child.split(","))}
        print(json.dumps(child(spec, args.n)))
        return 0
    names = [b for b in args.backends.split(",") if b]
    if any(b not in KINDS for b in names):
        ap.error(f"--backends takes {', '.join(KINDS)}")
    git, before = git_state(), load_avg()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    specs = [{name: int(s)} for s in args.sizes.split(",") for name in names]  # the backends interleaved
    if args.mixed and len(names) > 1:
        share = [args.mixed // len(names) + (k < args.mixed % len(names)) for k in range(len(names))]
        specs.append(dict(zip(names, share)))
    results = [run_size(spec, args.n) for spec in specs]
    after = load_avg()
    cmd = f"python bench/watcher_bench.py -n {args.n} --sizes {args.sizes}" + (
        f" --backends {args.backends}" if names != list(KINDS) else "") + (
        f" --mixed {args.mixed}" if args.mixed != 2000 else "")
    text = (f"{SECTION}\n\nMeasured {date} at commit {git['commit'][:12]} (tree dirty: {git['dirty']}) on "
            f"{os.cpu_count()} CPUs, this bench at nice {os.nice(0)} (the load average says what else ran), "
            f"load average {before} before, {after} after; n={args.n} ticks per row after {WARM} left out, median "
            f"(range); `{cmd}`.\n\n"
            "Each row is a process of its own with its own private backends and state directory: one real run with "
            "failover (`Runner.run_with_fallback`, `sleep 3600`, pending timeout 1 h) and its first hop submitted again "
            "once per followed run (local_cwd: its app copied as running apps of its supervisor), each followed by a copy "
            "of the run's record (a new run id, the live hop's app id replaced). A tick is the watcher's loop body "
            "(`list_records(unfinished=True, watched=True)`, `failover.poll`), then its 1 s sleep. Calls at the "
            "backend: slurm, slurmctld's RPCs by type (`sdiag`, reset before the tick and read after the sleep; the "
            "cluster's own heartbeat and slurmd's and the jobs' RPCs left out); aws_batch, moto's request log (a private "
            "moto_server, **moto, not AWS**: in Docker mode with its job state transitions made manual and never "
            "taken, so every job stays **SUBMITTED** (tx: PENDING) and no container starts; moto's `ListJobs` has no "
            "pages, AWS's gives at most 100 jobs a page when filtered, as tx filters it: on AWS add a ListJobs per 100 "
            "jobs); local_cwd, whose backend is its state files, "
            "the scheduler's `list`, `describe`, `list_page` and `states_of` (a call made inside another is its work). "
            "Slurm's cluster is 4 nodes of 2 CPUs: 8 jobs run (sleep) and the rest are PENDING. *States*: the hop "
            "states the records have after the ticks, and the backend's own states of their apps (squeue, ListJobs, "
            "the state files) read by the bench; *wrong*: runs failed over, marked ended or recorded in a state that "
            "is not their app's. Wall times carry the machine's load.\n\n"
            + table(results) + "\n\n" + verdict(results) + "\n")
    print(text)
    if not args.no_write:
        replace_section(OUT, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
