"""Submitting and following a sweep of N single-replica trials on Kubernetes (one Indexed
Job), through the fake API server of plugins/scheduler-k8s/tests/fakekube (its own port and
work directory): wall time and the API requests made, read from the server's request log.

    python bench/sweep_k8s_bench.py [--trials 1000] [--repeat 3]

Prints a Markdown table (append it to bench/RESULTS-sweeps.md). The trials sleep, 4 at a
time; the sweep is cancelled after each run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _common import start_fakekube  # noqa: E402 - the benches' shared helpers


def requests(log: Path, start: int, fn: Callable[[], Any]) -> Tuple[Any, float, List[str], int]:
    """``fn()``'s result, its wall seconds, and the API requests it made (method and path)."""
    t = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t
    time.sleep(0.2)  # the server writes its request line after answering
    lines = log.read_text(errors="replace").splitlines()
    asked = [" ".join(ln.split()[1:3]).split("?")[0] for ln in lines[start:] if ln[:4].isdigit()]
    return out, wall, asked, len(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tx-k8s-sweep-bench-"))
    log = base / "server.log"
    server, _ = start_fakekube(base)
    try:
        os.environ["TX_STATE_DIR"] = str(base / "state")
        from tx.runner import Runner
        from tx.specs import AppDef, Resource, Role
        from tx.specs.sweep import SweepSpec

        app = AppDef("bench", [Role("w", image="busybox", entrypoint="sleep", args=["600"], env={"TRIAL": "${i}"},
                                    resource=Resource(cpu=1, gpu=0, memMB=64))])
        spec = SweepSpec(grid={"i": list(range(args.trials))})
        subs: List[Tuple[float, List[str]]] = []
        stats: List[Tuple[float, List[str]]] = []
        for _ in range(args.repeat):
            with Runner("bench") as runner:
                runner.scheduler_run_opts("kubernetes")
                start = len(log.read_text(errors="replace").splitlines())
                handle, wall, asked, start = requests(log, start, lambda: runner.run_sweep(
                    app, spec, "kubernetes", cfg={"queue": "default"}, max_parallel=4))
                subs.append((wall, asked))
                st, wall, asked, start = requests(log, start, lambda: runner.sweep_status(handle))
                assert len(st.trials) == args.trials
                stats.append((wall, asked))
                runner.cancel_sweep(handle)
    finally:
        server.terminate()
        server.wait(30)

    def row(what: str, runs: List[Tuple[float, List[str]]], budget: int, unit: str) -> str:
        walls = sorted(w for w, _ in runs)
        calls = sorted({", ".join(f"{a.count(x)} {x}" for x in sorted(set(a))) for _, a in runs})
        worst = max(len(a) for _, a in runs)
        verdict = "PASS" if worst <= budget else "FAIL"
        return (f"| {what} | {statistics.median(walls):.2f} s ({walls[0]:.2f}-{walls[-1]:.2f}) | "
                f"{'; '.join(calls)} | <= {budget} {unit} | **{verdict}** ({worst} in the worst run) |")

    print(f"Kubernetes (the fake API server, `python bench/sweep_k8s_bench.py --trials {args.trials}`), "
          f"{args.repeat} runs: the median wall time, the range in brackets, and the API requests.\n")
    print("| what | wall | API requests (each run) | budget | verdict |\n| --- | --- | --- | --- | --- |")
    print(row(f"`run_sweep` of {args.trials} trials (one Indexed Job)", subs, 2, "backend calls"))
    print(row(f"`sweep_status` of the {args.trials} trials", stats, 1, "label-selected list"))


if __name__ == "__main__":
    main()
