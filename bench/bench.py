#!/usr/bin/env python3
"""User-facing speed benchmark for a TorchX-compatible job launcher.

Copied from the project's reference benchmark (shared/bench/bench.py) and extended
for tx's bench/run.py: the case list is built by ``build_cases()`` so that run.py
can interleave two implementations; ``count_prefixed_lines`` also checks that each
replica's lines arrive complete and in order; ``dryrun_local_512x8`` is added;
``importtime_argv()`` lists the modules a whole command imports.  The in-process API cases
(``--api NAME``) are in bench/_bench_api.py, beside this file.  Run standalone
it behaves as the original.

Point it at any implementation that offers the same CLI (``<cli> run -s local_cwd
...``, ``<cli> runopts``, ...) and the same Python API (``<pkg>.specs``,
``<pkg>.runner.get_runner``):

    python bench.py --cli torchx --pkg torchx -n 5 --json results.json
    python bench.py --cli mytorchx --pkg mytorchx --only cli_,import_

Run it with the interpreter of the environment under test (the CLI and
``torchrun`` are looked up next to ``sys.executable`` first, then on PATH).

Every case is a whole process started by this harness (API cases re-invoke this
file with ``--api NAME`` in a fresh interpreter).  Each case gets ``--warmup``
uncounted runs and ``-n`` counted runs; the table shows min / MEDIAN / max wall
seconds and the median peak RSS (largest single process among those waited for,
from wait4()).  API cases also report their own in-process timings (medians).

Needs: train.py (tiny gloo DDP script) next to this file; the kubernetes client
(`pip install kubernetes`) for the kubernetes dryrun cases.
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
import time
from typing import Any, Dict, List, Optional

from _bench_api import API_FUNCS, LINE_RE, LINE_TEXT, last_json  # noqa: F401  (the API cases: bench/_bench_api.py)

HERE = os.path.dirname(os.path.abspath(__file__))
GEN_SRC = (
    "import sys\n"
    "n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000\n"
    "w = sys.stdout.write\n"
    "for i in range(n):\n"
    f"    w(f'line {{i}} {LINE_TEXT}\\n')\n"
)


# --------------------------------------------------------------------------
# process runner
# --------------------------------------------------------------------------
# Commands are started by a small helper process (spawned before this harness
# grows), so that a child's peak RSS as reported by wait4() is not inflated by
# the harness's own memory (the kernel carries the spawning mm's high-water
# mark into the child at exec).  Output goes to files that the harness reads.
SPAWNER_SRC = r"""
import ctypes, json, os, signal, sys, threading, time
# A child subreaper: processes a command detaches (a daemonized supervisor) are reparented
# here, so that the whole tree is measured (peak RSS summed over it) and reaped.
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
PAGE = os.sysconf("SC_PAGE_SIZE")
ME = os.getpid()
def on_alarm(signum, frame):
    for p in [CUR[0], *descendants()]:
        try:
            os.killpg(p, signal.SIGKILL) if p == CUR[0] else os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    TIMED_OUT[0] = True
CUR, TIMED_OUT = [0], [False]
signal.signal(signal.SIGALRM, on_alarm)
def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out
def descendants():
    todo, seen = children(ME), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children(p))
    return seen
def tree_rss():
    total = 0
    for p in descendants():
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            pass
    return total
def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
for req in sys.stdin:
    q = json.loads(req)
    TIMED_OUT[0] = False
    fa = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, q["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
          (os.POSIX_SPAWN_OPEN, 2, q["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
    os.chdir(q["cwd"])
    try:
        t0 = time.perf_counter()
        pid = os.posix_spawnp(q["argv"][0], q["argv"], q["env"], file_actions=fa, setsid=True)
    except OSError as e:
        print(json.dumps({"error": repr(e)}), flush=True)
        continue
    CUR[0] = pid
    signal.setitimer(signal.ITIMER_REAL, q["timeout"])
    PEAK, done = [0], threading.Event()
    def sample():  # the tree's RSS every 50 ms, beside the blocking wait4
        while not done.wait(0.05):
            PEAK[0] = max(PEAK[0], tree_rss())
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    while True:
        try:
            _, status, ru = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    peak = PEAK[0]
    left = False
    try:
        os.killpg(pid, 0)
        left = True
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    # what it detached (a supervisor): give it 3 s to end, then it is a leftover
    deadline = time.monotonic() + 3.0
    while descendants() and time.monotonic() < deadline:
        peak = max(peak, tree_rss())
        reap()
        time.sleep(0.05)
    stray = descendants()
    for p in stray:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.05)
    reap()
    signal.setitimer(signal.ITIMER_REAL, 0)
    print(json.dumps({"wall": wall, "rc": os.waitstatus_to_exitcode(status),
                      "timed_out": TIMED_OUT[0], "leftovers": left or bool(stray),
                      "user": ru.ru_utime, "sys": ru.ru_stime,
                      "maxrss_mb": ru.ru_maxrss / 1024.0,
                      "tree_rss_mb": peak / 1048576.0}), flush=True)
"""


class Spawner:
    def __init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="bench_io_")
        self.p = subprocess.Popen(
            [sys.executable, "-S", "-c", SPAWNER_SRC],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        )

    def run(self, cmd: List[str], cwd: str, env: Dict[str, str],
            timeout: float = 300.0) -> Dict[str, Any]:
        out, err = os.path.join(self.tmp, "out"), os.path.join(self.tmp, "err")
        if os.sep not in cmd[0]:
            cmd = [shutil.which(cmd[0], path=env.get("PATH")) or cmd[0], *cmd[1:]]
        req = {"argv": cmd, "cwd": cwd, "env": env, "timeout": timeout,
               "out": out, "err": err}
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        res = json.loads(self.p.stdout.readline())
        if "error" in res:
            raise RuntimeError(f"cannot start {cmd}: {res['error']}")
        with open(out, "rb") as f:
            res["stdout"] = f.read()
        with open(err, "rb") as f:
            res["stderr"] = f.read()
        os.unlink(out)
        os.unlink(err)
        return res

    def close(self) -> None:
        if self.p.stdin:
            self.p.stdin.close()
        self.p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


SPAWNER: Optional[Spawner] = None


def run_proc(
    cmd: List[str], cwd: str, env: Dict[str, str], timeout: float = 300.0
) -> Dict[str, Any]:
    """Run cmd in its own session/process group; wall/cpu/peak-RSS/rc/output."""
    global SPAWNER
    if SPAWNER is None:
        SPAWNER = Spawner()
    return SPAWNER.run(cmd, cwd, env, timeout)




# --------------------------------------------------------------------------
# output parsers for CLI cases
# --------------------------------------------------------------------------
def count_plain_lines(res: Dict[str, Any]) -> Dict[str, Any]:
    good = bad = 0
    for ln in res["stdout"].decode(errors="replace").splitlines():
        if LINE_RE.match(ln):
            good += 1
        else:
            bad += 1
    return {"good_lines": good, "other_lines": bad}


PREFIX_RE = re.compile(r"^(?:\x1b\[[0-9;]*m)?(\S+/\d+)(?:\x1b\[[0-9;]*m)? (.*)$")


def count_prefixed_lines(res: Dict[str, Any]) -> Dict[str, Any]:
    """Lines the launcher relays as '<role>/<replica> <line>' (either stream).

    good_lines: well-formed generator lines; mangled_lines: prefixed lines that are not
    (split, joined or interleaved mid-line); out_of_order_lines: good lines whose
    number is not above the previous one of the same replica (reordered or duplicated).
    """
    good = mangled = disorder = 0
    last: Dict[str, int] = {}
    text = (res["stdout"] + b"\n" + res["stderr"]).decode(errors="replace")
    for ln in text.splitlines():
        m = PREFIX_RE.match(ln)
        if not m:
            continue
        g = LINE_RE.match(m.group(2))
        if g:
            good += 1
            i, who = int(g.group(1)), m.group(1)
            if i <= last.get(who, -1):
                disorder += 1
            else:
                last[who] = i
        else:
            mangled += 1
    return {"good_lines": good, "mangled_lines": mangled, "out_of_order_lines": disorder}


def ddp_check(res: Dict[str, Any]) -> Dict[str, Any]:
    text = (res["stdout"] + res["stderr"]).decode(errors="replace")
    ranks = sorted(set(re.findall(r"rank=(\d+) world_size=(\d+)", text)))
    loss = re.findall(r"mean_final_loss=([0-9.]+)", text)
    return {"ranks_seen": len(ranks), "final_loss": loss[0] if loss else None}


def dryrun_check(res: Dict[str, Any]) -> Dict[str, Any]:
    return {"out_bytes": len(res["stdout"]) + len(res["stderr"])}




# --------------------------------------------------------------------------
# import-time breakdown
# --------------------------------------------------------------------------
IT_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def importtime_argv(argv: List[str], env: Dict[str, str], cwd: str = HERE) -> Dict[str, Any]:
    """Modules imported by one whole command (``argv[0]`` is a python run with
    ``-X importtime`` inserted): names in import order and the summed self time."""
    r = run_proc([argv[0], "-X", "importtime", *argv[1:]], cwd, env)
    names: List[str] = []
    total = 0
    for ln in r["stderr"].decode(errors="replace").splitlines():
        m = IT_RE.match(ln)
        if m:
            names.append(m.group(4))
            total += int(m.group(1))
    return {"rc": r["rc"], "modules": names, "total_self_ms": total / 1000}


def importtime(py: str, module: str, env: Dict[str, str], n: int) -> Dict[str, Any]:
    selfs: Dict[str, List[int]] = {}
    cums: Dict[str, List[int]] = {}
    depth: Dict[str, int] = {}
    for _ in range(n):
        r = run_proc([py, "-X", "importtime", "-c", f"import {module}"], HERE, env)
        for ln in r["stderr"].decode().splitlines():
            m = IT_RE.match(ln)
            if not m:
                continue
            name = m.group(4)
            selfs.setdefault(name, []).append(int(m.group(1)))
            cums.setdefault(name, []).append(int(m.group(2)))
            depth[name] = (len(m.group(3)) - 1) // 2
    med_self = {k: statistics.median(v) for k, v in selfs.items()}
    med_cum = {k: statistics.median(v) for k, v in cums.items()}
    total = sum(med_self.values())
    return {
        "modules": len(med_self),
        "total_self_ms": total / 1000,
        "top_self_ms": [
            (k, round(v / 1000, 2))
            for k, v in sorted(med_self.items(), key=lambda kv: -kv[1])[:15]
        ],
        "top_cumulative_ms": [
            (k, round(v / 1000, 2), depth[k])
            for k, v in sorted(med_cum.items(), key=lambda kv: -kv[1])[:15]
        ],
    }


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------
def summarize(runs: List[Dict[str, Any]], extra_keys: List[str]) -> Dict[str, Any]:
    walls = [r["wall"] for r in runs]
    s: Dict[str, Any] = {
        "n": len(runs),
        "wall_min": min(walls),
        "wall_med": statistics.median(walls),
        "wall_max": max(walls),
        "cpu_med": statistics.median(r["user"] + r["sys"] for r in runs),
        "rss_med_mb": statistics.median(r["maxrss_mb"] for r in runs),
        "tree_rss_med_mb": statistics.median(r.get("tree_rss_mb", 0.0) for r in runs),
        "rcs": sorted(set(r["rc"] for r in runs)),
        "leftovers": any(r["leftovers"] for r in runs),
        "timed_out": any(r["timed_out"] for r in runs),
    }
    for k in extra_keys:
        vals = [r["extra"].get(k) for r in runs if k in r.get("extra", {})]
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if nums and len(nums) == len(vals):
            s[k] = statistics.median(nums)
        elif vals:
            s[k] = vals[-1]
    return s


def make_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default="torchx", help="CLI executable name/path")
    ap.add_argument("--pkg", default="torchx", help="Python package (for imports/API)")
    ap.add_argument("-n", type=int, default=5, help="counted runs per case")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--only", default="", help="comma list of case-name prefixes")
    ap.add_argument("--skip", default="", help="comma list of case-name prefixes")
    ap.add_argument("--json", default="", help="write full results here")
    ap.add_argument("--workdir", default=HERE, help="dir holding train.py")
    ap.add_argument("--lines", type=int, default=200000)
    ap.add_argument("--replicas", type=int, default=64)
    ap.add_argument("--replica-cmd", default="true")
    ap.add_argument("--roles", type=int, default=1000)
    ap.add_argument("--dry-replicas", type=int, default=4)
    ap.add_argument("--poll", type=float, default=0.05, help="API wait() interval")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--api", default="", help=argparse.SUPPRESS)
    return ap


def side_env(py: str) -> Dict[str, str]:
    """The environment of the implementation whose interpreter is ``py``: its bin
    directory first on PATH (its CLI and its ``torchrun``)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(py) + os.pathsep + env.get("PATH", "")
    env.setdefault("PYTHONUNBUFFERED", "0")
    return env


def build_cases(args: argparse.Namespace, py: str, env: Dict[str, str]) -> List[Any]:
    """[(name, argv, parser)] for the implementation run by interpreter ``py``
    (``args.cli`` and ``torchrun`` are looked up on ``env["PATH"]``).  Writes
    gen_lines.py into ``args.workdir``."""

    def tool(name: str) -> str:
        return shutil.which(name, path=env["PATH"]) or name

    cli, torchrun = tool(args.cli), tool("torchrun")
    wd = args.workdir
    with open(os.path.join(wd, "gen_lines.py"), "w") as f:
        f.write(GEN_SRC)
    k8s = ["-s", "kubernetes", "-cfg", "queue=default", "--workspace", ""]
    N = str(args.lines)
    api = [py, os.path.abspath(__file__), "--pkg", args.pkg, "--workdir", wd,
           "--lines", N, "--replicas", str(args.replicas),
           "--replica-cmd", args.replica_cmd, "--roles", str(args.roles),
           "--dry-replicas", str(args.dry_replicas), "--poll", str(args.poll)]

    # (name, argv, parser)
    return [
        ("floor_echo", ["echo", "hi"], None),
        ("floor_python", [py, "-c", "pass"], None),
        ("cli_version", [cli, "--version"], None),
        ("cli_help", [cli, "--help"], None),
        ("cli_builtins", [cli, "builtins"], None),
        ("cli_runopts", [cli, "runopts"], None),
        ("cli_runopts_local", [cli, "runopts", "local_cwd"], None),
        ("import_specs", [py, "-c", f"import {args.pkg}.specs"], None),
        ("import_runner", [py, "-c", f"import {args.pkg}.runner"], None),
        ("run_echo", [cli, "run", "-s", "local_cwd", "utils.echo", "--msg", "hi"], None),
        # the same with every cache of the launcher empty (a fresh XDG_CACHE_HOME each run)
        ("run_echo_cold", ["sh", "-c", 'XDG_CACHE_HOME=$(mktemp -d) exec "$0" "$@"', cli, "run",
                           "-s", "local_cwd", "utils.echo", "--msg", "hi"], None),
        ("api_first_call", api + ["--api", "first_call"], "api"),
        ("api_status_fresh", api + ["--api", "status_fresh"], "api"),
        ("ddp_torchx_1x2", [cli, "run", "-s", "local_cwd", "dist.ddp", "-j", "1x2",
                            "--script", "train.py"], ddp_check),
        ("ddp_torchrun", [torchrun, "--nproc_per_node", "2", "train.py"], ddp_check),
        ("ddp_torchrun_c10d", [torchrun, "--rdzv_backend", "c10d", "--rdzv_endpoint",
                               "localhost:0", "--nnodes", "1", "--nproc_per_node", "2",
                               "--tee", "3", "train.py"], ddp_check),
        ("dryrun_k8s_64x8", [cli, "run", "--dryrun", *k8s, "dist.ddp", "-j", "64x8",
                             "--script", "train.py"], dryrun_check),
        ("dryrun_k8s_512x8", [cli, "run", "--dryrun", *k8s, "dist.ddp", "-j", "512x8",
                              "--script", "train.py"], dryrun_check),
        ("dryrun_local_64x8", [cli, "run", "--dryrun", "-s", "local_cwd", "dist.ddp",
                               "-j", "64x8", "--script", "train.py"], dryrun_check),
        ("dryrun_local_512x8", [cli, "run", "--dryrun", "-s", "local_cwd", "dist.ddp",
                                "-j", "512x8", "--script", "train.py"], dryrun_check),
        ("api_dryrun_1000x4", api + ["--api", "dryrun"], "api"),
        ("log_direct", [py, "gen_lines.py", N], count_plain_lines),
        ("log_cli", [cli, "run", "-s", "local_cwd", "--log", "utils.python",
                     "--script", "gen_lines.py", "--", N], count_prefixed_lines),
        ("log_api", api + ["--api", "log"], "api"),
        ("replicas_api", api + ["--api", "replicas"], "api"),
        ("replicas_cli", [cli, "run", "-s", "local_cwd", "utils.sh", "--num_replicas",
                          str(args.replicas), *args.replica_cmd.split()], None),
        ("status_cli", [cli, "status", "local_cwd://torchx/nonexistent-0000"], None),
        ("list_cli", [cli, "list", "-s", "local_cwd"], None),
    ]


def main() -> None:
    args = make_parser().parse_args()

    if args.api:  # child mode: one in-process measurement, JSON on stdout
        if args.api == "dryrun":
            args.replicas = args.dry_replicas
        res = API_FUNCS[args.api](args)
        print(json.dumps(res), flush=True)
        return

    run_proc(["true"], HERE, dict(os.environ))  # start the spawner while small
    py = sys.executable
    env = side_env(py)
    cli = shutil.which(args.cli, path=env["PATH"]) or args.cli
    wd = args.workdir
    cases = build_cases(args, py, env)
    only = [p for p in args.only.split(",") if p]
    skip = [p for p in args.skip.split(",") if p]
    def sel(name: str) -> bool:
        return (not only or any(name.startswith(p) for p in only)) and not any(
            name.startswith(p) for p in skip)

    results: Dict[str, Any] = {
        "cli": cli, "pkg": args.pkg, "python": py, "n": args.n,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "cases": {},
    }
    for name, argv, parser in cases:
        if not sel(name):
            continue
        runs = []
        for i in range(args.warmup + args.n):
            r = run_proc(argv, wd, env, args.timeout)
            extra: Dict[str, Any] = {}
            if parser == "api":
                extra = last_json(r["stdout"])
            elif parser is not None:
                extra = parser(r)
            r["extra"] = extra
            if i >= args.warmup:
                runs.append(r)
        keys = sorted({k for r in runs for k in r["extra"]})
        s = summarize(runs, keys)
        s["argv"] = argv
        first_bad = next((r for r in runs if r["rc"] != 0), None)
        if first_bad is not None:
            s["stderr_tail"] = first_bad["stderr"].decode(errors="replace")[-600:]
        results["cases"][name] = s
        ex = " ".join(
            f"{k}={s[k]:.4g}" if isinstance(s[k], float) else f"{k}={s[k]}"
            for k in keys
        )
        print(
            f"{name:20s} wall s min/med/max {s['wall_min']:7.3f} {s['wall_med']:7.3f} "
            f"{s['wall_max']:7.3f}  cpu {s['cpu_med']:6.2f}  rss {s['rss_med_mb']:6.1f}MB "
            f"tree {s['tree_rss_med_mb']:6.1f}MB "
            f"rc={s['rcs']}{' LEFTOVERS' if s['leftovers'] else ''}"
            f"{' TIMEOUT' if s['timed_out'] else ''} {ex}",
            flush=True,
        )

    if sel("importtime"):
        it = importtime(py, f"{args.pkg}.runner", env, max(args.n, 3))
        results["importtime_runner"] = it
        print(f"\nimporttime {args.pkg}.runner: {it['modules']} modules, "
              f"sum(self)={it['total_self_ms']:.1f} ms (medians)")
        print("  top self ms:  " + ", ".join(f"{k} {v}" for k, v in it["top_self_ms"]))
        print("  top cumul ms: " + ", ".join(f"{k} {v}" for k, v, _ in it["top_cumulative_ms"]))

    c = results["cases"]
    ratios = {}
    for a, b in (("ddp_torchx_1x2", "ddp_torchrun"), ("ddp_torchx_1x2", "ddp_torchrun_c10d"),
                 ("log_cli", "log_direct"), ("run_echo", "floor_python")):
        if a in c and b in c:
            ratios[f"{a}/{b}"] = c[a]["wall_med"] / c[b]["wall_med"]
    if ratios:
        results["ratios"] = ratios
        print("\nratios of medians: " + ", ".join(f"{k}={v:.2f}" for k, v in ratios.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    if SPAWNER is not None:
        SPAWNER.close()


if __name__ == "__main__":
    main()
