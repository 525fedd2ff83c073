#!/usr/bin/env python3
"""tx's benchmark: tx and TorchX 0.7.0 side by side, in one run, interleaved.

    python bench/run.py                 # full run: -n 5, writes bench/RESULTS.md + RESULTS.json
    python bench/run.py -n 1 --only cli_,import_    # smoke run (writes under bench/.work/)
    hatch run bench:run -n 3

The tx side is the interpreter running this file (the dev venv or hatch's bench env: tx-core
and tx-scheduler-local installed).  The TorchX side is a venv of its own,
bench/.work/torchx-venv (``pip install torchx==0.7.0 torch==2.13.0 kubernetes``), made on
the first run and reused while its recorded requirements match.

The cases are those of bench.py (a copy of the project's reference benchmark,
shared/bench/bench.py).  For every case, each round runs tx and TorchX back to back
(alternating which goes first), so both see the same machine load; ``--warmup`` rounds are
not counted.  Then it measures what a few extra ``python -X importtime`` runs import, checks
the budgets of the issue "Local runs beyond TorchX" and renders the results.
See bench/README.md.
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
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (bench/bench.py, stdlib only)
from _common import git_state, load_avg  # noqa: E402
from _run_report import FORBIDDEN, NEAR, budgets, render  # noqa: E402  (the verdicts and RESULTS.md)

WORK = os.path.join(HERE, ".work")
TORCHX_REQS = ["torchx==0.7.0", "torch==2.13.0", "kubernetes"]
# cases that a budget compares with each other run round by round together (interleaved)
GROUPS = [
    ["floor_echo", "floor_python", "cli_version", "cli_help"],
    ["ddp_torchx_1x2", "ddp_torchrun", "ddp_torchrun_c10d"],
    ["log_direct", "log_cli", "log_cli_default"],
]


# --------------------------------------------------------------------------
# setup
# --------------------------------------------------------------------------
def sh(cmd: List[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, text=True, capture_output=True, **kw)


def venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def ensure_torchx_venv(venv: str, rebuild: bool) -> str:
    """Create (or reuse) the TorchX venv; returns its python."""
    marker = os.path.join(venv, ".bench-reqs")
    py = venv_python(venv)
    want = " ".join(TORCHX_REQS)
    if not rebuild and os.path.exists(marker) and open(marker).read().strip() == want:
        if sh([py, "-c", "import torchx.runner, torch"]).returncode == 0:
            return py
    print(f"setup: creating {venv} ({want}); takes about a minute", flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    r = sh([sys.executable, "-m", "venv", venv])
    if r.returncode != 0:
        sys.exit(f"setup: python -m venv failed:\n{r.stderr}")
    # pip, not uv: pip finds the local torch 2.13.0 CPU wheel (uv would download CUDA torch)
    r = sh([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *TORCHX_REQS])
    if r.returncode != 0:
        sys.exit(f"setup: pip install {want} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    with open(marker, "w") as f:
        f.write(want + "\n")
    return py


PROBE_TX = r"""
import json, importlib.metadata as md, sys
out = {"python": sys.version.split()[0]}
out["dists"] = {d.metadata["Name"]: d.version for d in md.distributions()
                if (d.metadata["Name"] or "").lower().startswith(("tx-", "tx_", "torch"))}
try:
    from tx.schedulers import get_scheduler_factories
    out["schedulers"] = sorted(get_scheduler_factories())
except Exception as e:
    out["schedulers_error"] = repr(e)
print(json.dumps(out))
"""
PROBE_TORCHX = r"""
import json, importlib.metadata as md, sys
out = {"python": sys.version.split()[0]}
out["dists"] = {n: md.version(n) for n in ("torchx", "torch", "kubernetes")
                if md.distribution(n)}
from torchx.schedulers import get_scheduler_factories
out["schedulers"] = sorted(get_scheduler_factories())
print(json.dumps(out))
"""


def probe(py: str, src: str) -> Dict[str, Any]:
    r = sh([py, "-c", src])
    if r.returncode != 0:
        return {"error": r.stderr[-800:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


PRECOMPILE = r"""
import compileall, importlib.util, pkgutil
for m in pkgutil.iter_modules():
    if m.name == "tx" or m.name.startswith("tx_"):
        spec = importlib.util.find_spec(m.name)
        for d in (spec.submodule_search_locations or []):
            compileall.compile_dir(d, quiet=1)
"""


def precompile(py: str) -> None:
    """Write the bytecode caches of tx and its plugins (editable installs have none)."""
    r = sh([py, "-c", PRECOMPILE])
    if r.returncode != 0:
        print(f"warning: precompiling tx failed: {r.stderr[-500:]}", flush=True)


# --------------------------------------------------------------------------
# measurement
# --------------------------------------------------------------------------
class Side:
    def __init__(self, name: str, py: str, pkg: str, cli: str, args: argparse.Namespace):
        self.name, self.py, self.pkg = name, py, pkg
        self.env = bench.side_env(py)
        self.cli = shutil.which(cli, path=self.env["PATH"]) or cli
        bargs = argparse.Namespace(**vars(args))
        bargs.cli, bargs.pkg = self.cli, pkg
        self.cases = {name: (argv, parser) for name, argv, parser in
                      bench.build_cases(bargs, py, self.env)}
        if name == "tx":  # tx-only extra: the relay `tx run` does on local without --log
            argv, parser = self.cases["log_cli"]
            self.cases["log_cli_default"] = ([a for a in argv if a != "--log"], parser)
        self.order = list(self.cases)
        self.runs: Dict[str, List[Dict[str, Any]]] = {}


def run_cases(sides: List[Side], args: argparse.Namespace,
              exact: Optional[List[str]] = None) -> None:
    """Run the selected cases (``exact``: these names only) round by round into side.runs."""
    only = [p for p in args.only.split(",") if p]
    skip = [p for p in args.skip.split(",") if p]

    def sel(name: str) -> bool:
        if exact is not None:
            return name in exact
        return (not only or any(name.startswith(p) for p in only)) and not any(
            name.startswith(p) for p in skip)

    names = [n for n in sides[0].order if sel(n)]
    # cases compared by a budget run in the same rounds: [case, case, ...] per group
    groups: List[List[str]] = []
    for name in names:
        g = next((g for g in GROUPS if name in g), None)
        if g is None:
            groups.append([name])
        elif not any(name in done for done in groups):
            groups.append([n for n in g if n in names])
    for group in groups:
        for i in range(args.warmup + args.n):
            order = sides if i % 2 == 0 else sides[::-1]
            k = i % len(group)  # rotate the cases too: no case always runs first
            for name in group[k:] + group[:k]:
                for side in order:
                    if name not in side.cases:
                        continue
                    argv, parser = side.cases[name]
                    r = bench.run_proc(argv, args.workdir, side.env, args.timeout)
                    if parser == "api":
                        r["extra"] = bench.last_json(r["stdout"])
                    elif parser is not None:
                        r["extra"] = parser(r)
                    else:
                        r["extra"] = {}
                    if i >= args.warmup:
                        side.runs.setdefault(name, []).append(r)
        for name in group:
            line = [f"{name:20s}"]
            for side in sides:
                if name not in side.runs:
                    continue
                walls = [r["wall"] for r in side.runs[name]]
                rcs = sorted({r["rc"] for r in side.runs[name]})
                line.append(f"{side.name} med {statistics.median(walls):7.3f}s rc={rcs}")
            print("  ".join(line), flush=True)




def confirm_near_limit(res: Dict[str, Any], sides: List[Side], bargs: argparse.Namespace,
                       lines: int) -> None:
    """Measure the cases of every ratio budget within NEAR of its limit, or whose per-round
    ratios lie on both sides of it, once more (another ``n`` rounds) and write both ratios;
    a verdict that differs between them becomes ``FLIPPED``.  The tables keep the first
    measurement."""
    near = [b for b in res["budgets"] if "ratio" in b and b["verdict"] in ("PASS", "FAIL")
            and (abs(b["ratio"] / b["limit_x"] - 1) <= NEAR or b.get("straddles"))]
    if not near:
        return
    cases = sorted({c for b in near for c in b["cases"]})
    print(f"near their limits: {', '.join(b['budget'] for b in near)}; measuring "
          f"{', '.join(cases)} again", flush=True)
    first = {side.name: side.runs for side in sides}
    for side in sides:
        side.runs = {}
    run_cases(sides, bargs, exact=cases)
    again = {"sides": {s.name: {"cases": summarize_side(s)} for s in sides}}
    for side in sides:
        side.runs = first[side.name]
    by_name = {b["budget"]: b for b in budgets(again, lines)}
    res["rerun"] = []
    for b in near:
        b2 = by_name.get(b["budget"], {})
        if "ratio" not in b2:
            b["verdict"] = f"UNCONFIRMED ({b['verdict']} at {b['ratio']:.2f}x; the rerun failed)"
            continue
        res["rerun"].append({"budget": b["budget"], "first": b["ratio"], "second": b2["ratio"],
                             "verdicts": [b["verdict"], b2["verdict"]]})
        if b2["verdict"] != b["verdict"]:
            b["verdict"] = (f"FLIPPED ({b['verdict']} at {b['ratio']:.2f}x, {b2['verdict']} at "
                            f"{b2['ratio']:.2f}x in the rerun)")
        else:
            b["measured"] += f"; rerun: **{b2['ratio']:.2f}x** ({b2['verdict']} again)"


def summarize_side(side: Side) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, runs in side.runs.items():
        keys = sorted({k for r in runs for k in r["extra"]})
        s = bench.summarize(runs, keys)
        s["argv"] = side.cases[name][0]
        s["walls"] = [round(r["wall"], 6) for r in runs]
        s["rss_max_mb"] = max(r["maxrss_mb"] for r in runs)
        s["extras"] = [r["extra"] for r in runs]
        bad = next((r for r in runs if r["rc"] != 0), None)
        if bad is not None:
            s["stderr_tail"] = bad["stderr"].decode(errors="replace")[-600:]
        out[name] = s
    return out


def phase_breakdown(side: Side, wd: str, n: int, cold: bool = False) -> Dict[str, Any]:
    """Where tx's `run ... utils.echo` spends its time: bench/_phases.py in ``n`` fresh
    interpreters of the tx side (``cold``: each with an empty XDG_CACHE_HOME, as
    ``run_echo_cold``); medians (and min / max) per phase of CPU and wall ms, and the
    load-independent counts (modules imported, attrs classes built)."""
    runs: List[Dict[str, Any]] = []
    out = os.path.join(WORK, "phases.json")
    for _ in range(n):
        env = dict(side.env)
        if cold:
            env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="xdg-", dir=WORK)
        r = sh([side.py, os.path.join(HERE, "_phases.py"), out], cwd=wd, env=env)
        if cold:
            shutil.rmtree(env["XDG_CACHE_HOME"], ignore_errors=True)
        if r.returncode != 0 or not os.path.exists(out):
            return {"error": (r.stderr or "no output")[-400:]}
        with open(out) as f:
            runs.append(json.load(f))
        os.unlink(out)
    names = [p[0] for p in runs[0]["phases"]]
    rows = []
    for name in names:
        cpu = [p[1] * 1000 for r in runs for p in r["phases"] if p[0] == name]
        wall = [p[2] * 1000 for r in runs for p in r["phases"] if p[0] == name]
        mods = [p[3] for r in runs for p in r["phases"] if p[0] == name]
        rows.append({"phase": name, "cpu_ms_med": statistics.median(cpu), "cpu_ms_min": min(cpu),
                     "cpu_ms_max": max(cpu), "wall_ms_med": statistics.median(wall),
                     "modules": statistics.median(mods)})
    def m(k: str) -> float:
        return statistics.median(r[k] for r in runs)
    return {"n": n, "rows": rows, "rcs": sorted({r["rc"] for r in runs}),
            "interpreter_cpu_ms": m("interpreter_cpu_s") * 1000, "cpu_ms": m("cpu_s") * 1000,
            "wall_ms": m("wall_s") * 1000, "modules": m("modules"),
            "attrs_classes": m("attrs_classes"), "load": load_avg()}


def forbidden_hits(mods: List[str]) -> List[str]:
    hits = []
    for m in mods:
        for f in FORBIDDEN:
            if f.endswith("*"):
                if m.startswith(f[:-1]):
                    hits.append(m)
            elif m == f or m.startswith(f + "."):
                hits.append(m)
    return sorted(set(hits))


def top_cumulative(py: str, argv: List[str], env: Dict[str, str], wd: str,
                   k: int = 12) -> List[Tuple[str, float]]:
    r = bench.run_proc([py, "-X", "importtime", *argv], wd, env)
    cum: Dict[str, float] = {}
    for ln in r["stderr"].decode(errors="replace").splitlines():
        m = bench.IT_RE.match(ln)
        if m:
            cum[m.group(4)] = int(m.group(2)) / 1000
    return sorted(cum.items(), key=lambda kv: -kv[1])[:k]


def importtime_checks(side: Side, wd: str, reps: int) -> Dict[str, Any]:
    """What whole commands import (python -X importtime), median self-time sums."""
    cmds = {
        "python -c pass": ["-c", "pass"],
        "--version": [side.cli, "--version"],
        "--help": [side.cli, "--help"],
        f"import {side.pkg}.runner": ["-c", f"import {side.pkg}.runner"],
        "run utils.echo": [side.cli, "run", "-s", "local_cwd", "utils.echo", "--msg", "hi"],
    }
    out: Dict[str, Any] = {}
    base: Optional[set] = None
    for label, argv in cmds.items():
        res = [bench.importtime_argv([side.py, *argv], side.env, wd) for _ in range(reps)]
        mods = res[-1]["modules"]
        entry = {
            "rc": res[-1]["rc"],
            "modules": len(mods),
            "self_ms_med": statistics.median(x["total_self_ms"] for x in res),
            "forbidden": forbidden_hits(mods),
            "top_cumulative_ms": top_cumulative(side.py, argv, side.env, wd),
        }
        if base is None:
            base = set(mods)
        else:
            entry["beyond_python"] = len(set(mods) - base)
            entry["forbidden_beyond_python"] = sorted(set(entry["forbidden"]) - base)
        out[label] = entry
    return out


# --------------------------------------------------------------------------
# budgets
# --------------------------------------------------------------------------
def machine() -> str:
    try:
        load = "load avg %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = ""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, {load}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5, help="counted runs per case and side")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted rounds per case")
    ap.add_argument("--only", default="", help="comma list of case-name prefixes")
    ap.add_argument("--skip", default="", help="comma list of case-name prefixes")
    ap.add_argument("--sides", default="tx,torchx", help="tx, torchx or both")
    ap.add_argument("--torchx-venv", default=os.path.join(WORK, "torchx-venv"))
    ap.add_argument("--rebuild-venv", action="store_true", help="recreate the TorchX venv")
    ap.add_argument("--setup-only", action="store_true", help="make the TorchX venv, stop")
    ap.add_argument("--no-importtime", action="store_true", help="skip the importtime checks")
    ap.add_argument("--out", default="", help="markdown output (default: bench/RESULTS.md "
                    "for a full run, bench/.work/results-partial.md with --only/--skip/--sides)")
    ap.add_argument("--lines", type=int, default=200000)
    ap.add_argument("--replicas", type=int, default=64)
    ap.add_argument("--roles", type=int, default=1000)
    ap.add_argument("--dry-replicas", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--no-confirm", action="store_true",
                    help=f"do not measure again the budgets within {NEAR:.0%} of their limit")
    ap.add_argument("--render", metavar="JSON", help="only re-render JSON's markdown beside it")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            res = json.load(f)
        with open(os.path.splitext(args.render)[0] + ".md", "w") as f:
            f.write(render(res))
        return

    t_start = time.perf_counter()
    load_before, git = load_avg(), git_state()  # the code measured: as it was at the start
    # Users have bytecode caches: without them every tx run would compile its sources
    # (pip compiled TorchX's at install; tx-core is installed editable).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # Both launchers run their replicas with PYTHONUNBUFFERED set (tx's local scheduler and
    # TorchX's local_cwd), so the generator writes line by line under them: run it (and
    # everything else) the same way directly.  bench.py's setdefault("PYTHONUNBUFFERED", "0")
    # would otherwise make log_direct depend on the caller's environment ("0" = buffered,
    # 5x faster).
    os.environ["PYTHONUNBUFFERED"] = "1"
    # tx caches its entry-point scan in $XDG_CACHE_HOME/tx/: a cache of our own, so that
    # other jobs on the machine (test venvs) do not overwrite it in the middle of a run.
    os.environ["XDG_CACHE_HOME"] = os.path.join(WORK, "xdg-cache")
    bench.run_proc(["true"], HERE, dict(os.environ))  # start bench's spawner while small
    os.makedirs(WORK, exist_ok=True)
    want = [s.strip() for s in args.sides.split(",") if s.strip()]
    pys: Dict[str, str] = {}
    if "torchx" in want:
        pys["torchx"] = ensure_torchx_venv(args.torchx_venv, args.rebuild_venv)
    if args.setup_only:
        print(f"TorchX venv ready: {pys.get('torchx')}")
        return
    if "tx" in want:
        if sh([sys.executable, "-c", "import tx.runner"]).returncode != 0:
            sys.exit(f"{sys.executable} cannot import tx: run from the dev venv "
                     "(pip install -e core -e plugins/scheduler-local) or `hatch run bench:run`")
        pys = {"tx": sys.executable, **pys}
        precompile(sys.executable)

    wd = os.path.join(WORK, "wd")
    os.makedirs(wd, exist_ok=True)
    shutil.copy(os.path.join(HERE, "train.py"), os.path.join(wd, "train.py"))
    bargs = bench.make_parser().parse_args([])
    for k in ("n", "warmup", "only", "skip", "lines", "replicas", "roles", "dry_replicas",
              "timeout"):
        setattr(bargs, k, getattr(args, k))
    bargs.workdir = wd
    sides = [Side(name, py, name, name, bargs) for name, py in pys.items()]
    full = not (args.only or args.skip) and len(sides) == 2
    out_md = args.out or (os.path.join(HERE, "RESULTS.md") if full
                          else os.path.join(WORK, "results-partial.md"))
    out_json = os.path.splitext(out_md)[0] + ".json"

    print(f"sides: {', '.join(f'{s.name}={s.py}' for s in sides)}; n={args.n} "
          f"warmup={args.warmup}", flush=True)
    run_cases(sides, bargs)

    res: Dict[str, Any] = {
        "meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "n": args.n,
                 "warmup": args.warmup, "machine": machine(), "lines": args.lines,
                 "command": " ".join(["python bench/run.py", *sys.argv[1:]])},
        "sides": {},
    }
    for side in sides:
        entry: Dict[str, Any] = {"python": side.py, "cli": side.cli,
                                 "probe": probe(side.py, PROBE_TX if side.name == "tx"
                                                else PROBE_TORCHX),
                                 "cases": summarize_side(side)}
        if not args.no_importtime and (not args.only or "importtime" in args.only):
            print(f"importtime checks: {side.name}", flush=True)
            entry["importtime"] = importtime_checks(side, wd, reps=max(3, min(args.n, 5)))
        if side.name == "tx" and (not args.only or "phases" in args.only.split(",")):
            print("phases: tx run ... utils.echo, in-process", flush=True)
            entry["phases"] = phase_breakdown(side, wd, max(args.n, 5))
            entry["phases_cold"] = phase_breakdown(side, wd, max(args.n, 5), cold=True)
        res["sides"][side.name] = entry
    res["budgets"] = budgets(res, args.lines)
    if not args.no_confirm:
        confirm_near_limit(res, sides, bargs, args.lines)
    res["meta"].update(git, load_before=load_before, load_after=load_avg())
    res["meta"]["elapsed_s"] = time.perf_counter() - t_start
    with open(out_json, "w") as f:
        json.dump(res, f, indent=1, default=str)
    with open(out_md, "w") as f:
        f.write(render(res))
    print()
    for b in res["budgets"]:
        print(f"{b['verdict']:6s} {b['budget']}: {b['measured']} (limit {b['limit']})")
    print(f"\nwrote {out_md} and {out_json}")
    if bench.SPAWNER is not None:
        bench.SPAWNER.close()


if __name__ == "__main__":
    main()
