#!/usr/bin/env python3
"""The failover watcher following 2,000 runs (issue 40): its calls to the backend, CPU and
memory per tick, on local_cwd; writes the section "The watcher following 2,000 runs" of
bench/RESULTS-scale.md (the others are kept as they are).

Each size runs in a process of its own (so that its peak memory is its own), in a private
state directory: one real run with failover (``Runner.run_with_fallback``, chain local_cwd
then local_dir, ``sleep 3600``), then its app copied ``N`` times as running apps of the same
supervisor and its record ``N`` times as runs a watcher follows
(``tx_scheduler_local._clone``: the files tx wrote, with new ids). A tick is the watcher's
loop body (``tx.runner._failover_watcher``): ``list_records(unfinished=True, watched=True)``
then ``failover.poll``. Calls are counted at the scheduler (every ``list`` and ``describe``
of local_cwd and local_dir, the local schedulers' backend being their state files); CPU is
the process's user+system time of the tick (``time.process_time``), memory its resident set
after the ticks and its peak (``ru_maxrss``). The first tick is left out (it reads what the
later ones keep); ``-n`` ticks follow, reported as median (range).

    python bench/watcher_bench.py [-n 5] [--sizes 20,200,2000] [--before COMMIT] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _common import calls_text, git_state, load_avg, spread  # noqa: E402 - the benches' shared helpers

OUT = REPO / "bench" / "RESULTS-scale.md"
SECTION = "## The watcher following 2,000 runs"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(n: int, ticks: int) -> Dict[str, Any]:
    """One size, in this process (see the module's doc); returns its measures."""
    from tx.runner import Runner, failover
    from tx.runner._failover_watcher import POLL_S
    from tx.specs import AppDef, AppState, Role
    import importlib.util
    spec = importlib.util.spec_from_file_location(  # this checkout's helpers, also with --before's code
        "_wb_clone", REPO / "plugins" / "scheduler-local" / "src" / "tx_scheduler_local" / "_clone.py")
    clone = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(clone)  # type: ignore[union-attr]
    clone_run_record, clone_running_app = clone.clone_run_record, clone.clone_running_app

    with Runner("wbench") as runner:
        runner.log_archive = None
        app = AppDef("wb", [Role("w", image=os.getcwd(), entrypoint="sleep", args=["3600"])])
        handle = runner.run_with_fallback(app, [("local_cwd", {}), ("local_dir", {})], pending_timeout=3600.0,
                                          watch=False)
        live = failover.load_record(handle).live
        assert live is not None and live.app_id
        deadline = time.monotonic() + 120
        while (runner.status(handle).state != AppState.RUNNING
               or failover.load_record(handle).live.state != "RUNNING"):  # copies of a settled record
            if time.monotonic() > deadline:
                raise SystemExit("the run did not start within 120 s")
            time.sleep(0.2)
        sched = runner.engine.scheduler("local_cwd")
        apps = clone_running_app(sched.apps_dir, live.app_id, n)
        clone_run_record(handle, apps, watch=True)
        calls: Counter = Counter()
        depth = [0]  # a call made inside a counted one (local list() describes its running apps) is its work
        for name in ("local_cwd", "local_dir"):
            s = runner.engine.scheduler(name)
            for meth in ("list", "describe", "list_page"):
                real = getattr(s, meth)

                def counted(*a: Any, _real: Any = real, _key: str = f"{name}.{meth}", **kw: Any) -> Any:
                    if not depth[0]:
                        calls[_key] += 1
                    depth[0] += 1
                    try:
                        return _real(*a, **kw)
                    finally:
                        depth[0] -= 1
                setattr(s, meth, counted)
        rss_before = _rss_mb()
        rows = []
        cache: Dict[str, Any] = {}
        prof = None
        if os.environ.get("TX_WB_PROFILE"):
            import cProfile
            prof = cProfile.Profile()
        for t in range(ticks + 1):
            if prof is not None and t == 1:
                prof.enable()
            calls.clear()
            cpu0, wall0 = time.process_time(), time.monotonic()
            try:
                records = failover.list_records(unfinished=True, watched=True, cache=cache)
            except TypeError:  # --before: a watcher that reads every record every tick
                records = failover.list_records(unfinished=True, watched=True)
            failover.poll(runner.engine, records)
            cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
            if t:
                rows.append({"cpu": cpu, "wall": wall, "calls": dict(calls), "followed": len(records)})
        if prof is not None:
            prof.disable()
            prof.dump_stats(os.environ["TX_WB_PROFILE"])
        states = Counter(failover.load_record(h).final or "live" for h in
                         [r.handle for r in failover.list_records(watched=True)])
        out = {"n": n, "ticks": rows, "rss_before_mb": rss_before, "rss_after_mb": _rss_mb(),
               "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "poll_s": POLL_S,
               "states": dict(states)}
        runner.cancel(handle)
        runner.wait(handle, wait_interval=0.2, timeout=60)
    return out


def _sources(commit: str, work: Path) -> str:
    """The PYTHONPATH of ``commit``'s sources (``git archive`` into ``work``)."""
    root = work / f"src-{commit[:12]}"
    if not root.exists():
        tar = work / "src.tar"
        subprocess.run(["git", "archive", "-o", str(tar), commit, "core/src", "plugins"], cwd=REPO, check=True)
        with tarfile.open(tar) as t:
            t.extractall(root)
        tar.unlink()
    return os.pathsep.join([str(root / "core" / "src"), *sorted(str(p) for p in (root / "plugins").glob("*/src"))])


def run_size(n: int, ticks: int, pythonpath: str = "") -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="txwb-", ignore_cleanup_errors=True) as d:
        env = {**os.environ, "TX_STATE_DIR": str(Path(d) / "state")}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        p = subprocess.run([sys.executable, __file__, "--child", str(n), "-n", str(ticks)], env=env, cwd=d,
                           capture_output=True, text=True, timeout=3600)
        if p.returncode != 0:
            raise SystemExit(f"size {n} failed:\n{p.stderr[-3000:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])


def table(results: List[Dict[str, Any]]) -> str:
    lines = ["| runs followed | backend calls a tick (every tick) | watcher CPU a tick | wall a tick | "
             "CPU per run | RSS after / peak | states after the ticks |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        cpus = [t["cpu"] for t in r["ticks"]]
        walls = [t["wall"] for t in r["ticks"]]
        calls = {calls_text(t["calls"]) for t in r["ticks"]}
        lines.append(f"| {r['n']:,} | {' / '.join(sorted(calls))} | {spread(cpus)} | {spread(walls)} | "
                     f"{statistics.median(cpus) / r['n'] * 1000:.2f} ms | {r['rss_after_mb']:.1f} MB / "
                     f"{r['peak_mb']:.1f} MB | {calls_text(r['states'])} |")
    return "\n".join(lines)


def verdict(results: List[Dict[str, Any]], olds: List[Dict[str, Any]]) -> str:
    """The section's verdict: the calls a tick do not grow with the runs (the same at every
    size), and the largest size's tick takes less CPU than the watcher's poll interval."""
    calls = {calls_text(t["calls"]) for r in results for t in r["ticks"]}
    big = max(results, key=lambda r: r["n"])
    sizes = ", ".join(f"{r['n']:,}" for r in results)
    cpu = statistics.median(t["cpu"] for t in big["ticks"])
    lines = ["Verdict (from the rows above):", "",
             f"- Backend calls a tick do not grow with the runs: **{'HOLDS' if len(calls) == 1 else 'FAILS'}** "
             f"({' / '.join(sorted(calls))} at {sizes} runs).",
             f"- The watcher's work at {big['n']:,} runs fits its {big['poll_s']:g} s tick: "
             f"**{'HOLDS' if cpu < big['poll_s'] else 'FAILS'}** ({cpu:.2f} s of CPU a tick, "
             f"{cpu / big['n'] * 1000:.2f} ms a run)."]
    old = [r for r in olds if r["n"] == big["n"]]
    if old:
        ocpu = statistics.median(t["cpu"] for t in old[0]["ticks"])
        lines.append(f"- Before: {ocpu:.2f} s of CPU a tick at {big['n']:,} runs ({ocpu / cpu:.1f}x), "
                     f"RSS {old[0]['rss_after_mb']:.1f} MB (now {big['rss_after_mb']:.1f} MB).")
    lines.append("- Not measured here: the watcher over Slurm and moto hops (issue 40 asks for them too).")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5, help="ticks measured per size (after a first one)")
    ap.add_argument("--sizes", default="20,200,2000")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help="print the table, leave RESULTS-scale.md")
    ap.add_argument("--before", default=None, help="also measure this commit's code (a before/after)")
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.n)))
        return 0
    git, before = git_state(), load_avg()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    sizes = [int(s) for s in args.sizes.split(",")]
    results, olds = [], []
    old_path = ""
    if args.before:
        (REPO / "bench" / ".work").mkdir(parents=True, exist_ok=True)
        old_path = _sources(args.before, REPO / "bench" / ".work")
    for n in sizes:  # before and after interleaved, size by size
        results.append(run_size(n, args.n))
        if old_path:
            olds.append(run_size(n, args.n, old_path))
    after = load_avg()
    text = (f"{SECTION}\n\nMeasured {date} at commit {git['commit'][:12]} (tree dirty: {git['dirty']}) on 2 CPUs "
            f"shared with other work (load average {before} before, {after} after), `python bench/watcher_bench.py "
            f"-n {args.n} --sizes {args.sizes}`. local_cwd: one real run with failover (local_cwd, then local_dir) "
            "copied as running runs of its supervisor; a tick is the watcher's loop body (the records listed, "
            f"`failover.poll`); n={args.n} ticks after a first, median (range); calls counted at the schedulers "
            "(`list`, `describe`, `list_page`; a call made inside another is its work).\n\n" + table(results) + "\n")
    if olds:
        text += f"\nThe same at commit {args.before} (before this bench's fixes), interleaved:\n\n" + table(olds) + "\n"
    text += "\n" + verdict(results, olds) + "\n"
    print(text)
    if not args.no_write:
        doc = OUT.read_text()
        start = doc.index(SECTION)
        nxt = re.search(r"^## ", doc[start + len(SECTION):], re.MULTILINE)
        end = start + len(SECTION) + nxt.start() if nxt else len(doc)
        OUT.write_text(doc[:start] + text + ("\n" if nxt else "") + doc[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
