#!/usr/bin/env python3
"""The status plane with slurmctld down (issue 40): several processes of one host look at
once at Slurm apps while the controller does not answer; how many Slurm commands they run
and how long each waits, for tx now, tx at an earlier commit and TorchX 0.7.0, side by side;
writes the section "Status plane: slurmctld down" of bench/RESULTS-scale.md.

The cluster is one whose controller's port is closed (a ``slurm.conf`` of its own, pointed
at by ``SLURM_CONF``; Slurm's default ``MessageTimeout`` of 10 s, so each command waits out
Slurm's own connect retries, as against a controller that is down). Each round starts
``--procs`` processes at once, each ``<cli> status slurm://<session>/<10N>`` of an app of
its own, sharing one fresh state directory (tx's status plane lives there); a shim ahead of
Slurm's commands on ``PATH`` counts every ``squeue``, ``sacct``, ``scontrol`` and ``sinfo``
each side runs, then runs Slurm's own. Sides are interleaved, ``-n`` rounds each:

* ``tx``: this checkout (``tx`` of the environment running this script);
* ``tx@REV`` (``--before REV``): a git worktree of REV under bench/.work, run with
  ``PYTHONPATH`` to its sources (its ``python -m tx.cli``);
* ``torchx``: TorchX 0.7.0's ``torchx status`` from its venv (``python bench/run.py
  --setup-only`` makes it), which asks Slurm once per process with no lock.

Per round: the commands run (by name), the slowest process's wall time and the median
process's, and whether every process failed with exit status != 0 and a one-line error
(no traceback: a status that cannot be read is an error, never a state).

    python bench/plane_down_bench.py [-n 3] [--procs 6] [--before REV] [--no-write]
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "bench" / ".work"
OUT = REPO / "bench" / "RESULTS-scale.md"
SECTION = "## Status plane: slurmctld down"
COMMANDS = ("squeue", "sacct", "scontrol", "sinfo")
sys.path.insert(0, str(REPO / "bench"))
from sweep_torchx_bench import replace_section  # noqa: E402 - the sibling bench's section writer


def down_conf(directory: Path) -> Path:
    """A slurm.conf whose controller's port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = directory / "slurm.conf"
    conf.write_text(f"ClusterName=down\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={port}\n"
                    "AuthType=auth/none\nNodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES\n")
    return conf


def shims(directory: Path, counts: Path) -> Path:
    """A directory of Slurm command shims that append their name to ``counts``."""
    bindir = directory / "shim"
    bindir.mkdir()
    for name in COMMANDS:
        real = shutil.which(name)
        if real is None:
            raise SystemExit(f"{name} is not installed: scripts/install-slurm.sh")
        (bindir / name).write_text(f"#!/bin/sh\necho {name} >> {counts}\nexec {real} \"$@\"\n")
        (bindir / name).chmod(0o755)
    return bindir


def worktree(rev: str) -> Path:
    """A worktree of ``rev`` under bench/.work (made once)."""
    path = WORK / f"wt-{rev}"
    if not path.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), rev], check=True,
                       capture_output=True)
    return path


def sides(args: argparse.Namespace) -> Dict[str, Tuple[List[str], Dict[str, str]]]:
    """name -> (the command before its ``status HANDLE`` words, extra env)."""
    tx = str(Path(sys.executable).parent / "tx")
    out: Dict[str, Tuple[List[str], Dict[str, str]]] = {"tx": ([tx], {})}
    if args.before:
        wt = worktree(args.before)
        srcs = [str(wt / "core" / "src"), *sorted(str(p) for p in (wt / "plugins").glob("*/src"))]
        out[f"tx@{args.before}"] = ([sys.executable, "-m", "tx.cli"], {"PYTHONPATH": os.pathsep.join(srcs)})
    venv = Path(args.torchx_venv)
    if (venv / "bin" / "torchx").exists():
        out["torchx 0.7.0"] = ([str(venv / "bin" / "torchx")], {})
    else:
        print(f"no TorchX venv at {venv} (python bench/run.py --setup-only makes it): TorchX left out", flush=True)
    return out


def one_round(prefix: List[str], extra: Dict[str, str], procs: int, session: str) -> Dict[str, object]:
    """``procs`` processes look at once; what they ran and how long each took."""
    with tempfile.TemporaryDirectory(prefix="plane-down-") as tmp:
        d = Path(tmp)
        counts = d / "counts"
        conf = down_conf(d)
        env = {**os.environ, **extra, "SLURM_CONF": str(conf), "TX_STATE_DIR": str(d / "state"),
               "HOME": str(d / "home"), "PATH": f"{shims(d, counts)}{os.pathsep}{os.environ['PATH']}"}
        env.pop("TX_STATUS_MAX_AGE", None)
        env.pop("TXCONFIG", None)
        (d / "home").mkdir()
        started, running = [], []
        for i in range(procs):
            started.append(time.monotonic())
            running.append(subprocess.Popen([*prefix, "status", f"slurm://{session}/{101 + i}"], cwd=str(d), env=env,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        ended: List[Tuple[float, str, str]] = [(0.0, "", "")] * procs

        def reap(i: int) -> None:  # each process's own end, whichever ends first
            out, err = running[i].communicate(timeout=600)
            ended[i] = (time.monotonic() - started[i], out, err)

        reapers = [threading.Thread(target=reap, args=(i,)) for i in range(procs)]
        for t in reapers:
            t.start()
        for t in reapers:
            t.join()
        walls, errors, ok = [], [], True
        for p, (wall, out, err) in zip(running, ended):
            walls.append(wall)
            lines = [ln for ln in err.splitlines() if ln.strip()]
            errors.append(lines[-1] if lines else out.strip()[-200:])
            ok = ok and p.returncode != 0 and len(lines) == 1 and "Traceback" not in err
        ran = counts.read_text().split() if counts.exists() else []
    return {"calls": {c: ran.count(c) for c in COMMANDS if ran.count(c)}, "slowest": max(walls),
            "median": statistics.median(walls), "one_line_errors": ok, "errors": errors}


def spread(values: List[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3, help="rounds per side")
    ap.add_argument("--procs", type=int, default=6, help="processes looking at once")
    ap.add_argument("--before", default="", help="a git revision to compare with (a worktree of it)")
    ap.add_argument("--torchx-venv", default=str(WORK / "torchx-venv"))
    ap.add_argument("--no-write", action="store_true", help="print, do not write RESULTS-scale.md")
    args = ap.parse_args()
    runs: Dict[str, List[Dict[str, object]]] = {}
    which = sides(args)
    for r in range(args.n):
        for name, (prefix, extra) in which.items():
            res = one_round(prefix, extra, args.procs, "torchx" if name.startswith("torchx") else "tx")
            runs.setdefault(name, []).append(res)
            print(f"round {r + 1} {name}: {res['calls']} slowest {res['slowest']:.1f} s, median {res['median']:.1f} s, "
                  f"one-line errors: {res['one_line_errors']}; {res['errors'][0]} | {res['errors'][-1]}", flush=True)
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    load = os.getloadavg()
    text = [SECTION, "",
            f"{args.procs} processes of one host run `status` of an app each, at once, while slurmctld does not "
            "answer (a `slurm.conf` whose controller's port is closed; Slurm's default `MessageTimeout`, so each "
            "command waits out Slurm's connect retries). A shim ahead of Slurm's commands counts each one run. "
            "Sides interleaved, each round with a fresh state directory; cells are the median (range) over the "
            f"rounds. Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {rev} (tree dirty: "
            f"{'yes' if dirty else 'no'}), load average {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} after; "
            f"n={args.n}, `python bench/plane_down_bench.py -n {args.n} --procs {args.procs}"
            f"{' --before ' + args.before if args.before else ''}`.", "",
            "| side | n | Slurm commands a round (each round) | slowest process | median process | every process: exit != 0, one-line error |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, rs in runs.items():
        calls = "; ".join(", ".join(f"{v} {k}" for k, v in r["calls"].items()) or "none" for r in rs)  # type: ignore[union-attr]
        clean = all(r["one_line_errors"] for r in rs)
        text.append(f"| {name} | {len(rs)} | {calls} | {spread([r['slowest'] for r in rs])} | "  # type: ignore[misc]
                    f"{spread([r['median'] for r in rs])} | "  # type: ignore[misc]
                    f"{'yes' if clean else 'NO: a traceback or no error; not compared (it did not do the same work)'} |")
    text += ["", "The errors (first process, last process, of each side's first round):", ""]
    for name, rs in runs.items():
        errs = rs[0]["errors"]
        text.append(f"- {name}: `{errs[0]}`; `{errs[-1]}`")  # type: ignore[index]
    text.append("")
    print("\n".join(text))
    if not args.no_write:
        replace_section(OUT, SECTION, text)
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
