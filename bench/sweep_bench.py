"""Submitting and following a sweep of N single-replica trials on Slurm: one job array
against the same trials submitted one by one (each ``Runner.run``).

Starts a private Slurm cluster (scripts/start-slurm.sh, own SLURM_BASE and ports, as
bench/slurm_bench.py does), then, through ``tx.runner.Runner``:

* ``run_sweep`` of N trials (a grid over one parameter; each trial ``sleep 600``, so they
  pend or run): wall time, the Slurm commands run, the time spent inside them, and tx's
  own time (wall minus commands);
* ``sweep_status`` of the sweep (``tx status SWEEP``): the same;
* the same N apps submitted one by one with ``Runner.run``: the same.

Writes bench/RESULTS-sweeps.md. Needs root and Slurm's packages (scripts/install-slurm.sh).

    python bench/sweep_bench.py [--trials 1000]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, calls_text, spread, start_slurm, stop_slurm  # noqa: E402 - the benches' shared helpers


def measure(fn: Callable[[], Any]) -> Tuple[Any, float, float, Dict[str, int]]:
    """``fn()``'s result, wall seconds, seconds inside Slurm commands, and the commands run."""
    from tx_scheduler_slurm import _client

    real = _client.run
    calls: Dict[str, int] = {}
    inside = [0.0]

    def run(argv: List[str], *a: Any, **kw: Any) -> Any:
        calls[argv[0]] = calls.get(argv[0], 0) + 1
        t = time.perf_counter()
        try:
            return real(argv, *a, **kw)
        finally:
            inside[0] += time.perf_counter() - t

    _client.run = run
    try:
        t = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t, inside[0], calls
    finally:
        _client.run = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement (median and range)")
    ap.add_argument("--profile", help="write a cProfile of one run_sweep here (pstats format)")
    ap.add_argument("--out", default=str(REPO / "bench" / "RESULTS-sweeps.md"))
    args = ap.parse_args()
    n = args.trials

    base = Path(tempfile.mkdtemp(prefix="tx-sweep-bench-"))
    env = start_slurm(base)
    rows = []
    try:
        from tx.runner import Runner
        from tx.specs import AppDef, Resource, Role
        from tx.specs.sweep import SweepSpec

        def app(env: Dict[str, str]) -> AppDef:
            return AppDef("bench", [Role("w", image="", entrypoint="sleep", args=["600"], env=env,
                                         resource=Resource(cpu=1, gpu=0, memMB=64))])

        cfg = {"job_dir": str(base / "jobs")}
        with Runner("bench") as runner:
            runner.scheduler_run_opts("slurm")  # the plugin loaded before timing
            spec = SweepSpec(grid={"i": list(range(n))})
            if args.profile:
                import cProfile

                prof = cProfile.Profile()
                prof.runcall(runner.run_sweep, app({"TRIAL": "${i}"}), spec, "slurm", cfg=cfg, max_parallel=n)
                prof.dump_stats(args.profile)
                subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=60)
            sweeps, status, one_by_one = [], [], []
            for _ in range(args.repeat):
                # a new Runner each time: its scheduler has no cluster facts yet, as a `tx sweep`
                with Runner("bench") as fresh:
                    fresh.scheduler_run_opts("slurm")
                    handle, *m = measure(
                        lambda: fresh.run_sweep(app({"TRIAL": "${i}"}), spec, "slurm", cfg=cfg, max_parallel=n))
                sweeps.append(m)
                st, *m = measure(lambda: runner.sweep_status(handle))
                assert len(st.trials) == n and all(t.app_handle for t in st.trials)
                status.append(m)
                subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=60)
            for _ in range(args.repeat):
                _, *m = measure(lambda: [runner.run(app({"TRIAL": str(i)}), "slurm", cfg) for i in range(n)])
                one_by_one.append(m)
                subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=60)
            rows.append((f"`run_sweep` of {n} trials (one job array)", sweeps))
            rows.append((f"`sweep_status` of the {n} trials (tx status SWEEP)", status))
            rows.append((f"the same {n} apps one by one (`Runner.run` each)", one_by_one))
    finally:
        stop_slurm(env)

    def row(what: str, runs: List[Any]) -> str:
        walls = [w for w, _, _ in runs]
        insides = [i for _, i, _ in runs]
        own = [w - i for w, i, _ in runs]
        seen = sorted({calls_text(c) for _, _, c in runs})
        return f"| {what} | {spread(walls)} | {spread(insides)} | {spread(own)} | {'; '.join(seen)} |"

    text = [
        "# Sweeps on Slurm: one job array against one job per trial",
        "",
        f"`python bench/sweep_bench.py --trials {n}` on {platform.node()} ({os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: a "
        "private Slurm cluster (scripts/start-slurm.sh, 4 nodes, no accounting, MaxArraySize 1001); "
        f"{n} single-replica trials (`sleep 600`: a few run, the rest pend; all cancelled between runs). "
        f"{args.repeat} runs each: the median, and the range in brackets.",
        "",
        "| what | wall | in Slurm commands | tx's own time | Slurm commands (each run) |",
        "| --- | --- | --- | --- | --- |",
        *[row(w, runs) for w, runs in rows],
        "",
        "tx's own time is the wall time minus the time spent waiting for Slurm's commands: for",
        "the sweep, building and checking every trial's AppDef and request, one array script,",
        "the sweep record and the index entry of each trial. TorchX 0.7.0 has no sweeps: its",
        "user submits the trials one by one, as the last row does (one sbatch each).",
        "The machine is shared with other work: times vary by tens of percent.",
        "",
    ]
    Path(args.out).write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    sys.exit(main())
