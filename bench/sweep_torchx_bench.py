"""A sweep against the same trials submitted one by one, with tx and with TorchX 0.7.0, on
a private Slurm cluster; and ``tx list`` of N apps there.

Starts a private Slurm cluster (scripts/start-slurm.sh with accounting,
as bench/sweep_bench.py does without) and
puts counting shims of ``sbatch``, ``squeue``, ``sacct``, ``sinfo`` and ``scontrol`` first
on PATH, so that every Slurm command either launcher runs (in-process or in a CLI child) is
counted. Every trial is ``utils.sh --cpu 1 --memMB 64 sleep 600`` (a few run, the rest
pend; all cancelled between runs). Measures, ``--repeat`` times each:

* ``Runner.run_sweep`` of ``--trials`` trials (one job array), in-process;
* ``--one-by-one`` submissions of the same trial with tx's ``Runner.run_component`` in one
  process, and with TorchX 0.7.0's ``get_runner().run_component`` in one process of the
  TorchX venv;
* ``--one-by-one`` ``tx run -s slurm utils.sh ...`` and ``torchx run -s slurm utils.sh ...``
  commands, one after another (what a shell loop does);
* ``tx list -s slurm --all`` (CLI) and ``Runner.list("slurm")`` of ``--list-apps`` apps
  submitted one by one.

Every submission is checked: each TorchX command exits 0 and prints a ``slurm://`` handle,
each API call returns one, and squeue then holds exactly the jobs submitted. Replaces the
section "Against TorchX 0.7.0 one by one" of bench/RESULTS-sweeps.md (and the Slurm row of
the ``tx list`` section, see bench/list_bench.py). Needs root and Slurm's packages.

    python bench/sweep_torchx_bench.py [--trials 1000] [--one-by-one 100] [--repeat 3]
        [--torchx-venv bench/.work/torchx-venv]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, calls_text, spread, start_slurm, stop_slurm  # noqa: E402 - the benches' shared helpers

SECTION = "## Against TorchX 0.7.0 one by one (Slurm)"
LIST_SECTION = "## `tx list` of many apps on each remote backend"
COMMANDS = ("sbatch", "squeue", "sacct", "sinfo", "scontrol")
COMPONENT = ["utils.sh", "--cpu", "1", "--memMB", "64", "sleep", "600"]

TORCHX_API = """
import json, sys, time
from torchx.runner import get_runner
n, cfg = int(sys.argv[1]), json.loads(sys.argv[2])
args = json.loads(sys.argv[3])
with get_runner() as runner:
    runner.dryrun_component(args[0], args[1:], "slurm", cfg=cfg)  # the scheduler made before timing
    t = time.perf_counter()
    handles = [runner.run_component(args[0], args[1:], "slurm", cfg=cfg) for _ in range(n)]
    print(json.dumps({"wall": time.perf_counter() - t, "handles": handles}))
"""


def shims(where: Path, log: Path) -> None:
    """A counting shim of each Slurm command in ``where``: it appends its name to ``log``
    (unless a job runs it: ``$SLURM_JOB_ID`` set) and runs the real command."""
    where.mkdir(parents=True)
    for c in COMMANDS:
        real = shutil.which(c)
        if real is None:
            raise SystemExit(f"{c} is not installed (scripts/install-slurm.sh)")
        p = where / c
        # a job's own commands (its script runs scontrol) are not the launcher's: not counted
        p.write_text(f'#!/bin/sh\n[ -n "$SLURM_JOB_ID" ] || echo {c} >> "{log}"\nexec {real} "$@"\n')
        p.chmod(0o755)


def counts(log: Path, since: int) -> Tuple[Dict[str, int], int]:
    """The commands logged after line ``since``, and the log's length."""
    lines = log.read_text().split() if log.exists() else []
    out: Dict[str, int] = {}
    for c in lines[since:]:
        out[c] = out.get(c, 0) + 1
    return out, len(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--one-by-one", type=int, default=100)
    ap.add_argument("--list-apps", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli-repeat", type=int, default=2, help="runs of the CLI loops (they are slow)")
    ap.add_argument("--torchx-venv", default=str(REPO / "bench" / ".work" / "torchx-venv"))
    ap.add_argument("--list-only", action="store_true", help="only the Slurm row of the tx list section")
    ap.add_argument("--out", default=str(REPO / "bench" / "RESULTS-sweeps.md"))
    args = ap.parse_args()
    n, k, k_cli, m = args.trials, args.repeat, args.cli_repeat, args.one_by_one
    tx_py = Path(args.torchx_venv) / "bin" / "python"
    if not tx_py.exists():
        raise SystemExit(f"no TorchX venv at {args.torchx_venv} (python bench/run.py --setup-only makes one)")

    base = Path(tempfile.mkdtemp(prefix="tx-sweep-torchx-bench-"))
    env = start_slurm(base, accounting=True)
    log = base / "slurm-calls.log"
    shims(base / "shims", log)
    os.environ["PATH"] = f"{base / 'shims'}{os.pathsep}{os.environ['PATH']}"
    work = base / "cwd"  # TorchX writes its jobs' logs to the cwd
    work.mkdir()
    cfg = {"job_dir": str(base / "jobs")}
    results: Dict[str, List[Tuple[float, Dict[str, int]]]] = {}
    listing: List[Tuple[str, float, Dict[str, int]]] = []
    listed = 0
    loads: List[float] = []

    def scancel() -> None:
        subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=60)
        for _ in range(100):  # slurmctld forgets cancelled jobs after MinJobAge; wait until squeue is empty
            q = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=60)
            if not q.stdout.strip():
                return
            time.sleep(0.5)

    def queued() -> int:
        q = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, timeout=60)
        return len(q.stdout.split())

    def measured(what: str, fn: Callable[[], Any], expect_jobs: int) -> None:
        _, before = counts(log, 0)
        t = time.perf_counter()
        fn()
        wall = time.perf_counter() - t
        c, _ = counts(log, before)
        got = queued()
        if got != expect_jobs:
            raise SystemExit(f"{what}: squeue holds {got} jobs, {expect_jobs} were submitted")
        results.setdefault(what, []).append((wall, c))
        loads.append(os.getloadavg()[0])
        scancel()
        print(f"{what}: {wall:.2f} s, {c}", file=sys.stderr, flush=True)

    try:
        from tx.runner import Runner
        from tx.specs import AppDef, Resource, Role
        from tx.specs.sweep import SweepSpec

        sweep_app = AppDef("bench", [Role("w", image="", entrypoint="sleep", args=["600"], env={"TRIAL": "${i}"},
                                          resource=Resource(cpu=1, gpu=0, memMB=64))])
        spec = SweepSpec(grid={"i": list(range(n))})
        tx_bin = shutil.which("tx")
        torchx_bin = str(tx_py.parent / "torchx")
        cfg_text = ",".join(f"{a}={b}" for a, b in cfg.items())
        for r in range(0 if args.list_only else max(k, k_cli)):
            if r < k:
                def sweep() -> None:
                    with Runner("bench") as fresh:  # no cluster facts yet, as a `tx sweep`
                        fresh.run_sweep(sweep_app, spec, "slurm", cfg=cfg, max_parallel=n)
                measured("sweep", sweep, n)

                def tx_api() -> None:
                    with Runner("bench") as runner:
                        runner.scheduler_run_opts("slurm")  # the plugin loaded before timing, as TorchX's
                        t = time.perf_counter()
                        hs = [runner.run_component(COMPONENT[0], COMPONENT[1:], "slurm", cfg=cfg) for _ in range(m)]
                        assert all(h.startswith("slurm://") for h in hs), hs
                        tx_api.inner = time.perf_counter() - t  # type: ignore[attr-defined]
                measured("tx_api", tx_api, m)

                def torchx_api() -> None:
                    out = subprocess.run([str(tx_py), "-c", TORCHX_API, str(m), "{}", json.dumps(COMPONENT)],
                                         cwd=work, capture_output=True, text=True, timeout=1800)
                    if out.returncode != 0:
                        raise SystemExit(f"TorchX's Runner failed: {out.stderr[-2000:]}")
                    got = json.loads(out.stdout.strip().splitlines()[-1])
                    hs = got["handles"]
                    if len(hs) != m or not all(h.startswith("slurm://") for h in hs):
                        raise SystemExit(f"TorchX's Runner gave {hs[:3]}...")
                measured("torchx_api", torchx_api, m)
            if r < k_cli:
                for side, argv in (("tx_cli", [tx_bin, "run", "-s", "slurm", "-cfg", cfg_text, *COMPONENT]),
                                   ("torchx_cli", [torchx_bin, "run", "-s", "slurm", *COMPONENT])):
                    def loop(argv: List[str] = argv, side: str = side) -> None:
                        for _ in range(m):
                            out = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=300)
                            first = (out.stdout.strip().splitlines() or [""])[0]
                            if out.returncode != 0 or not first.startswith("slurm://"):
                                raise SystemExit(f"{side}: rc {out.returncode}: {out.stdout[-500:]} {out.stderr[-1500:]}")
                    measured(side, loop, m)
        # tx list of many apps, each its own job
        with Runner("bench") as runner:
            for _ in range(args.list_apps):
                runner.run_component(COMPONENT[0], COMPONENT[1:], "slurm", cfg=cfg)
            for _ in range(k):
                _, before = counts(log, 0)
                t = time.perf_counter()
                apps = runner.list("slurm")
                wall = time.perf_counter() - t
                assert len(apps) >= args.list_apps, len(apps)  # sacct also keeps the cancelled jobs of the runs above
                listed = len(apps)
                listing.append(("api", wall, counts(log, before)[0]))
                _, before = counts(log, 0)
                t = time.perf_counter()
                out = subprocess.run([tx_bin, "list", "-s", "slurm", "--all"], capture_output=True, text=True, timeout=300)
                wall = time.perf_counter() - t
                rows = [ln for ln in out.stdout.splitlines() if ln.startswith("slurm://")]
                assert out.returncode == 0 and len(rows) == listed, (out.returncode, len(rows), out.stderr[-500:])
                listing.append(("cli", wall, counts(log, before)[0]))
        loads.append(os.getloadavg()[0])
    finally:
        stop_slurm(env)

    def per(what: str) -> float:
        return statistics.median(w for w, _ in results[what]) / (n if what == "sweep" else m)

    if not args.list_only:  # the comparison
        labels = {
            "sweep": f"tx: `Runner.run_sweep` of {n} trials (one job array)",
            "tx_api": f"tx: {m} x `Runner.run_component` in one process",
            "torchx_api": f"TorchX 0.7.0: {m} x `get_runner().run_component` in one process",
            "tx_cli": f"tx: {m} x `tx run -s slurm utils.sh ...` commands",
            "torchx_cli": f"TorchX 0.7.0: {m} x `torchx run -s slurm utils.sh ...` commands",
        }
        sweep_s = statistics.median(w for w, _ in results["sweep"])
        torchx_cli_s = statistics.median(w for w, _ in results["torchx_cli"])
        tx_cli_s = statistics.median(w for w, _ in results["tx_cli"])
        rows = []
        for what, label in labels.items():
            runs = results[what]
            seen = "; ".join(sorted({calls_text(c) for _, c in runs}))
            size = n if what == "sweep" else m
            extra = (f"{per(what) * 1000:.0f} s, extrapolated (x{1000 // size}), about {1000 * sum(runs[0][1].values()) // size}"
                     " Slurm commands") if size != 1000 else "measured"
            rows.append(f"| {label} | {len(runs)} | {spread([w for w, _ in runs])} | {per(what) * 1000:.1f} ms | {seen} | "
                        f"{extra} |")
        text = [
            SECTION,
            "",
            f"`python bench/sweep_torchx_bench.py --trials {n} --one-by-one {m} --repeat {k} --cli-repeat {k_cli}` on "
            f"{platform.node()} ({os.cpu_count()} CPUs, Python {platform.python_version()}), "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: a private Slurm cluster (scripts/start-slurm.sh, "
            "4 nodes, with accounting: slurmdbd, so that TorchX's `torchx run`, which asks `sacct` for the app's "
            "status after submitting, exits 0); every trial `utils.sh --cpu 1 --memMB 64 sleep 600` (a few run, the rest pend; "
            "all cancelled between runs); the Slurm commands counted by shims on PATH, in-process and in CLI children "
            "alike. Every submission was checked: each call or command returned a `slurm://` handle (TorchX's "
            "commands exited 0) and squeue held exactly the jobs submitted.",
            "",
            "| what | n | wall: median (min-max) | per trial | Slurm commands (each run) | for 1,000 trials |",
            "| --- | --- | --- | --- | --- | --- |",
            *rows,
            "",
            f"- Rows of {m} are extrapolated linearly to 1,000 (labelled so): one submission costs the same whatever "
            "ran before it (one `sbatch` each), though slurmctld, holding more pending jobs, may answer slower: lower "
            "bounds. TorchX's Runner asks `sinfo` on every submission (tx once per process); its `torchx run` asks "
            "`sacct` once after submitting.",
            f"- Measured: the sweep of {n} trials took {sweep_s:.2f} s (median of {len(results['sweep'])}); "
            f"{m} `torchx run` commands one after another took {torchx_cli_s:.1f} s (median of "
            f"{len(results['torchx_cli'])}), {m} `tx run` commands {tx_cli_s:.1f} s: the sweep submitted "
            f"{n // m}x the trials in {sweep_s / torchx_cli_s:.3f}x the time of TorchX's {m} commands. "
            f"Extrapolated, not measured (x{1000 // m}, linear, from n={len(results['torchx_cli'])} runs at the load "
            f"below): 1,000 trials one by one in one process {per('tx_api') * 1000:.0f} s with tx, "
            f"{per('torchx_api') * 1000:.0f} s with TorchX; one command each {per('tx_cli') * 1000:.0f} s with tx, "
            f"{per('torchx_cli') * 1000:.0f} s with TorchX.",
            f"- Load average (1 min) while measuring: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs "
            "(a shared machine, heavily loaded by other work during this run: a run's wall varies up to 2x, "
            "see the ranges; compare rows measured in the same rounds, not these with other sections).",
            "",
        ]
        replace_section(Path(args.out), SECTION, text)
        print("\n".join(text))
    api = [(w, c) for s2, w, c in listing if s2 == "api"]
    cli = [w for s2, w, _ in listing if s2 == "cli"]
    slurm_rows = [f"| slurm | {listed} apps (private cluster, with accounting: squeue and sacct) | {len(api)} | "
                  f"{spread([w for w, _ in api])} | {spread(cli)} | {'; '.join(sorted({calls_text(c) for _, c in api}))} |"]
    (REPO / "bench" / ".work").mkdir(parents=True, exist_ok=True)
    (REPO / "bench" / ".work" / "list-slurm-rows.md").write_text("\n".join(slurm_rows) + "\n")
    print("\n".join(slurm_rows))


def replace_section(out: Path, section: str, text: List[str]) -> None:
    """Write ``text`` (starting with ``section``) into ``out`` in place of that section
    (appended where there is none)."""
    old = out.read_text() if out.exists() else ""
    if section in old:
        head, _, rest = old.partition(section)
        nxt = rest.find("\n## ", 1)
        old = head.rstrip("\n") + ("\n\n" + rest[nxt + 1:] if nxt >= 0 else "")
    out.write_text(old.rstrip("\n") + "\n\n" + "\n".join(text))


if __name__ == "__main__":
    sys.exit(main())
