"""Status and list of many Slurm apps: what they cost in Slurm calls and time.

Starts a private Slurm cluster (scripts/start-slurm.sh, own SLURM_BASE and ports, as the
plugin's tests do), submits N apps (default 200) of 2 replicas each through the slurm
scheduler (every app pends or runs ``sleep``), then measures, from the scheduler API:

* ``list()`` of all of them: wall time and the Slurm commands run (one squeue; one sacct
  where accounting is configured, none here);
* ``describe()`` of one app among them: wall time and commands (one squeue);
* ``describe()`` of each app in turn (what ``tx status`` of every app costs).

Writes bench/RESULTS-slurm.md. Needs root and Slurm's packages (scripts/install-slurm.sh).

    python bench/slurm_bench.py [--apps 200]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from _common import REPO, SCRIPTS, free_ports, start_slurm, stop_slurm  # noqa: F401 - free_ports: failover_bench imports it from here


def counted(calls: List[str]) -> Callable[..., Any]:
    from tx_scheduler_slurm import _client

    real = _client.run

    def run(argv: List[str], *a: Any, **kw: Any) -> Any:
        calls.append(argv[0])
        return real(argv, *a, **kw)

    return run


def timed(fn: Callable[[], Any], calls: List[str], repeat: int = 5) -> Tuple[float, float, Dict[str, int]]:
    """median and min wall seconds of ``fn`` over ``repeat`` runs, and the commands of one run."""
    times = []
    for i in range(repeat):
        del calls[:]
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    per_run: Dict[str, int] = {}
    for c in calls:
        per_run[c] = per_run.get(c, 0) + 1
    return statistics.median(times), min(times), per_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--apps", type=int, default=200)
    ap.add_argument("--out", default=str(REPO / "bench" / "RESULTS-slurm.md"))
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="tx-slurm-bench-"))
    env = start_slurm(base)
    try:
        from tx.specs import AppDef, Resource, Role
        from tx_scheduler_slurm import _client
        from tx_scheduler_slurm.scheduler import create_scheduler

        sched = create_scheduler("bench")
        role = Role("w", image="", entrypoint="sleep", args=["600"], num_replicas=2,
                    resource=Resource(cpu=1, gpu=0, memMB=64))
        cfg = {"job_dir": str(base / "jobs")}
        t = time.perf_counter()
        ids = [sched.submit(AppDef(f"bench-{i}", roles=[role]), cfg) for i in range(args.apps)]
        submit_s = time.perf_counter() - t

        calls: List[str] = []
        _client.run = counted(calls)  # count every Slurm command the scheduler runs
        listed: List[Any] = []
        list_med, list_min, list_calls = timed(lambda: listed.extend(sched.list()), calls)
        n_listed = len({a.app_id for a in listed} & set(ids))
        one_med, one_min, one_calls = timed(lambda: sched.describe(ids[len(ids) // 2]), calls, repeat=20)
        del calls[:]
        t = time.perf_counter()
        for app_id in ids:
            sched.describe(app_id)
        each_s = time.perf_counter() - t
        each_calls = len(calls)
    finally:
        stop_slurm(env)

    rows = [
        ("submit N apps (sbatch each)", f"{submit_s:.2f} s", "-", f"{args.apps} sbatch"),
        ("`list()` of all (tx list -s slurm)", f"{list_med * 1000:.0f} ms", f"{list_min * 1000:.0f} ms",
         ", ".join(f"{v} {k}" for k, v in sorted(list_calls.items()))),
        ("`describe()` of one app among N (tx status)", f"{one_med * 1000:.1f} ms", f"{one_min * 1000:.1f} ms",
         ", ".join(f"{v} {k}" for k, v in sorted(one_calls.items()))),
        ("`describe()` of each of the N apps", f"{each_s:.2f} s", "-", f"{each_calls} squeue"),
    ]
    text = [
        "# Slurm scheduler: status and list of many apps",
        "",
        f"`python bench/slurm_bench.py --apps {args.apps}` on {platform.node()} "
        f"({os.cpu_count()} CPUs, Python {platform.python_version()}), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: a private Slurm cluster "
        "(scripts/start-slurm.sh, 4 nodes, no accounting) with "
        f"{args.apps} apps of 2 replicas each (`sleep 600`: 2 run, the rest pend); "
        f"list found {n_listed} of them.",
        "",
        "| what | median | min | Slurm commands per call |",
        "| --- | --- | --- | --- |",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "`list()` costs one `squeue` for any number of apps (and one `sacct` where accounting is",
        "configured: none here, where slurm.conf says `accounting_storage/none`). `describe()`",
        "asks squeue about one job (`--jobs ID`), so the status of one app does not grow with the",
        "number of apps; the status of every app one by one costs one squeue each, which is what",
        "`tx list` avoids. The machine is shared with other work: times vary by tens of percent.",
        "",
    ]
    Path(args.out).write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    sys.exit(main())
