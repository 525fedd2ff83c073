#!/usr/bin/env python3
"""Regenerate every bench/RESULTS* file with one command, and say which are stale.

    python bench/regen.py                    # every topic this machine can run, n=5
    python bench/regen.py --only results,k8s # some topics
    python bench/regen.py --list             # the topics, what each needs, each file's stamp
    hatch run bench:all                      # the same as the first line

Each topic runs its bench script (bench/run.py, bench/k8s_bench.py, ...) in turn with this
interpreter; a topic whose backend is missing here (no Slurm, podman, Ray, chromium, moto
or TorchX venv) is not run, and says why. Every file a topic rewrote gets a ``Stamp:`` line
under its title: the commit (``git rev-parse HEAD``) and whether the tree differed from it
(bench/RESULTS* aside), the UTC date, the 1/5/15-minute load averages before and after the
topic, ``n`` and the command.  At the end it prints (and writes to
bench/.work/regen-report.md) every RESULTS file: REWRITTEN, or STALE with the date of its
stamp (or the first date in it) and why it was not rewritten: not selected, its backend
missing, its script failed, or no command regenerates it (a record made by hand).
It exits 1 when a selected topic failed or left a file unchanged.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import REPO, git_state, load_avg, stamp_text  # noqa: E402

WORK = HERE / ".work"
TORCHX_PY = WORK / "torchx-venv" / "bin" / "python"
STAMP_RE = re.compile(r"^Stamp: .*$", re.M)
DATE_RE = re.compile(r"20\d\d-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d)?(?: UTC)?)?")


def _has(mod: str) -> bool:
    return importlib.util.find_spec(mod) is not None


def _need(*checks: tuple) -> Callable[[], str]:
    """A requirement check: (what, ok) pairs evaluated lazily; returns "" or what is missing."""
    def check() -> str:
        missing = [what for what, ok in checks if not ok()]
        return "missing here: " + ", ".join(missing) if missing else ""
    return check


ROOT = ("root (private clusters)", lambda: os.geteuid() == 0)
SLURM = ("Slurm (slurmctld; scripts/install-slurm.sh)", lambda: bool(shutil.which("slurmctld")))
PODMAN = ("podman (scripts/start-podman.sh)", lambda: bool(shutil.which("podman")))
TORCHX = ("the TorchX venv (python bench/run.py --setup-only)",
          lambda: TORCHX_PY.exists() and (WORK / "torchx-venv" / ".bench-reqs").exists())
RAY = ("ray in this interpreter", lambda: _has("ray"))
MOTO = ("moto_server next to this interpreter",
        lambda: (Path(sys.executable).parent / "moto_server").exists())
K8S = ("tx_scheduler_k8s", lambda: _has("tx_scheduler_k8s"))
GCP = ("tx_scheduler_gcp_batch", lambda: _has("tx_scheduler_gcp_batch"))
CHROME = ("chromium + chromedriver + selenium",
          lambda: bool(shutil.which("chromedriver")) and _has("selenium"))
TX_UI = ("tx_ui", lambda: _has("tx_ui"))
TORCH = ("torch and scikit-learn in this interpreter (examples/train.py)",
         lambda: _has("torch") and _has("sklearn"))


@dataclass
class Topic:
    name: str
    files: List[str]
    #: each step: argv after the interpreter (``{n}`` is replaced), its stdout goes to the
    #: file named by ``stdout_to`` when the script prints instead of writing
    steps: List[List[str]]
    needs: Callable[[], str]
    note: str = ""
    stdout_to: Optional[str] = None
    cheap: bool = True
    n_arg: bool = True
    #: the title a ``stdout_to`` file gets above the script's output (it replaces the file)
    title: str = ""


TOPICS: List[Topic] = [
    Topic("results", ["RESULTS.md", "RESULTS.json"], [["bench/run.py", "-n", "{n}"]],
          _need(TORCHX), "tx and TorchX 0.7.0, every local case (about 10-20 minutes)"),
    Topic("k8s", ["RESULTS-k8s.md"], [["bench/k8s_bench.py", "-n", "{n}"]],
          _need(TORCHX, K8S), "Kubernetes dryruns beside TorchX (no cluster)"),
    Topic("docker", ["RESULTS-docker.md"], [["bench/docker_bench.py", "-n", "{n}"]],
          _need(ROOT, PODMAN, TORCHX), "a private podman engine", cheap=False),
    Topic("ray", ["RESULTS-ray.md"], [["bench/ray_bench.py", "-n", "{n}"]],
          _need(RAY, TORCHX), "a private Ray head", cheap=False),
    Topic("slurm", ["RESULTS-slurm.md"], [["bench/slurm_bench.py"]],
          _need(ROOT, SLURM), "a private Slurm cluster", cheap=False, n_arg=False),
    Topic("sweeps", ["RESULTS-sweeps.md"],
          [["bench/sweep_bench.py", "--repeat", "{n}"],
           ["bench/sweep_cloud_bench.py", "--repeat", "{n}"],
           ["bench/sweep_torchx_bench.py", "--repeat", "{n}"],
           ["bench/list_bench.py", "--repeat", "{n}"]],
          _need(ROOT, SLURM, MOTO, K8S, TORCHX),
          "Slurm (with accounting), moto, the tests' GCP and Kubernetes servers; "
          "sweep_k8s_bench.py prints its section (pasted by hand)", cheap=False),
    Topic("recovery", ["RESULTS-recovery.md"], [["bench/failover_bench.py"]],
          _need(ROOT, SLURM, PODMAN), "Slurm and podman", cheap=False, n_arg=False),
    Topic("ui", ["RESULTS-ui.md"], [["bench/ui_bench.py", "-n", "{n}"]],
          _need(TX_UI, CHROME), "tx ui and headless chromium", stdout_to="RESULTS-ui.md",
          cheap=False, title="Bench: `tx ui` (issue 27), as `bench/ui_bench.py` prints it (the "
          "analysis of the runs of 2026-11-25 is in this file's git history)"),
    Topic("preemption", ["RESULTS-preemption.md", "RESULTS-preemption.json"],
          [["bench/chaos_preemption.py", "-n", "100"]], _need(TORCH),
          "100 preemptions per backend and warning (local_cwd: to a rank, to the supervisor; "
          "slurm where it is installed and this is root; about 1-2 hours)", cheap=False, n_arg=False),
    Topic("scale", ["RESULTS-scale.md"], [["bench/scale_bench.py", "-n", "{n}"], ["bench/watcher_bench.py", "-n", "{n}"],
                                          ["bench/sweep10k_bench.py", "-n", "{n}"]],
          _need(TX_UI, TORCHX, ROOT, SLURM, MOTO, K8S, GCP),
          "tx list and tx ui at 1,000 and 10,000 local apps beside TorchX, the failover watcher following "
          "20 to 2,000 runs on local_cwd, a private Slurm cluster and moto (about 15 minutes), then a 10,000-trial sweep's submit, status and "
          "resume on a private Slurm cluster, and its submit and status on moto and the tests' GCP and "
          "Kubernetes servers (sweep10k_bench.py)", cheap=False),
    Topic("aws_batch", ["RESULTS-aws-batch.md"], [["bench/aws_batch_bench.py", "-n", "{n}"]],
          _need(MOTO), "a private moto_server (simple mode)", stdout_to="RESULTS-aws-batch.md",
          title="aws_batch on a private moto_server: what a user waits for (tx alone; moto "
          "answers locally, so these are tx's and boto3's costs, not AWS's)"),
]
#: RESULTS files that no command regenerates: records of a one-off measurement
BY_HAND = {
    "RESULTS-core-layering.md": "a paired A/B run against the code before issue 23 (by hand)",
    "RESULTS-gpu.md": "bench/gpu_check.sh on a lent GPU machine (by hand)",
    "RESULTS-local-hardening.md": "a partial run.py of 2026-11-24; its cases belong to "
                                  "RESULTS.md (the file links there)",
}


def file_date(path: Path) -> str:
    """The date a RESULTS file was made: its stamp's, else the first date in it."""
    if not path.exists():
        return "missing"
    text = path.read_text(errors="replace")
    m = STAMP_RE.search(text)
    if m:
        d = DATE_RE.search(m.group(0))
        if d:
            return d.group(0)
    d = DATE_RE.search(text)
    return d.group(0) if d else "no date in it"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def put_stamp(path: Path, stamp: str) -> None:
    """Replace the file's Stamp line, or add one under its first heading (Markdown only)."""
    if path.suffix != ".md":
        return
    text = path.read_text()
    if STAMP_RE.search(text):
        text = STAMP_RE.sub(lambda _: stamp, text, count=1)
    else:
        lines = text.split("\n")
        at = next((i + 1 for i, ln in enumerate(lines) if ln.startswith("# ")), 0)
        lines[at:at] = ["", stamp]
        text = "\n".join(lines)
    path.write_text(text)


def run_topic(t: Topic, n: int, env: Dict[str, str]) -> str:
    """Run a topic's steps; returns "" on success, else why it failed."""
    for step in t.steps:
        argv = [sys.executable, *[a.replace("{n}", str(n)) for a in step]]
        print(f"[regen] {t.name}: {' '.join(argv[1:])}", flush=True)
        try:
            p = subprocess.run(argv, cwd=REPO, env=env, timeout=3 * 3600,
                               stdout=subprocess.PIPE if t.stdout_to else None, text=True)
        except subprocess.TimeoutExpired:
            return f"{step[0]} ran past 3 hours"
        if p.returncode != 0:
            return f"{step[0]} exited {p.returncode}"
        if t.stdout_to:  # only a run that succeeded replaces the file
            (HERE / t.stdout_to).write_text(f"# {t.title}\n\n{p.stdout}")
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma list of topics (default: all)")
    ap.add_argument("-n", type=int, default=5, help="counted runs per case (default 5)")
    ap.add_argument("--cheap", action="store_true",
                    help="only the topics that start no backend (results, k8s)")
    ap.add_argument("--list", action="store_true", help="list topics and file dates, run nothing")
    args = ap.parse_args()
    names = {t.name for t in TOPICS}
    only = [x for x in args.only.split(",") if x]
    bad = [x for x in only if x not in names]
    if bad:
        print(f"regen: unknown topic {', '.join(bad)} (topics: {', '.join(sorted(names))})",
              file=sys.stderr)
        return 2
    if args.list:
        for t in TOPICS:
            why = t.needs()
            print(f"{t.name:9s} {', '.join(t.files)}: {t.note}; "
                  f"{'runnable here' if not why else why}")
        for f in sorted(p.name for p in HERE.glob("RESULTS*")):
            print(f"  {f}: {file_date(HERE / f)}")
        return 0

    started = time.monotonic()
    env = dict(os.environ)
    status: Dict[str, str] = {}  # file -> REWRITTEN ... / STALE ...
    failed = False
    for t in TOPICS:
        if only and t.name not in only:
            why = "not selected (--only)"
        elif args.cheap and not t.cheap:
            why = "not selected (--cheap): " + t.note
        else:
            why = t.needs()
        if why:
            for f in t.files:
                status[f] = f"STALE since {file_date(HERE / f)}: {why}"
            continue
        before = {f: digest(HERE / f) for f in t.files}
        git = git_state()
        load_before, date = load_avg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        t0 = time.monotonic()
        err = run_topic(t, args.n, env)
        took = f"{time.monotonic() - t0:.0f} s"
        load_after = load_avg()
        for f in t.files:
            path = HERE / f
            if err:
                failed = True
                status[f] = f"STALE since {file_date(path)}: {err} after {took}" + (
                    " (the file was changed before it failed: check it)"
                    if digest(path) != before[f] else "")
            elif digest(path) == before[f]:
                failed = True
                status[f] = f"STALE since {file_date(path)}: the script ran but left it unchanged"
            else:
                cmd = " && ".join("python " + " ".join(a.replace("{n}", str(args.n)) for a in s)
                                  for s in t.steps)
                put_stamp(path, stamp_text(git, date, load_before, load_after,
                                           args.n if t.n_arg else "see the file", cmd))
                status[f] = f"REWRITTEN {date} in {took} (commit {git['commit'][:12]}, dirty "\
                            f"{git['dirty']}, load {load_before} -> {load_after}, n={args.n})"
    for f, why in BY_HAND.items():
        status[f] = f"STALE since {file_date(HERE / f)}: no command regenerates it: {why}"
    for p in sorted(HERE.glob("RESULTS*")):
        status.setdefault(p.name, f"STALE since {file_date(p)}: no topic of bench/regen.py "
                                  "writes it")
    total = time.monotonic() - started
    report = [f"regen: {total:.0f} s in all, load {load_avg()} at the end", "",
              "| file | state |", "| --- | --- |"]
    report += [f"| {f} | {s} |" for f, s in sorted(status.items())]
    WORK.mkdir(exist_ok=True)
    (WORK / "regen-report.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    print(f"(also in {WORK / 'regen-report.md'})")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `regen.py --list | head`: the reader has gone, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
