"""bench.py's in-process API cases (``python bench.py --api NAME`` runs one in a fresh
interpreter and prints its JSON): dryrun, replicas, first call, status from a fresh
process, log; and what they share with bench.py's CLI cases, the generated line format and
reading a child's JSON. Standard library only (TorchX's venv imports it too). Not a bench:
bench.py imports it (the script's directory is ``sys.path[0]``)."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict

LINE_TEXT = "the quick brown fox jumps over the lazy dog"
LINE_RE = re.compile(r"^line (\d+) " + re.escape(LINE_TEXT) + r"\n?$")


def last_json(out: bytes) -> Dict[str, Any]:
    for line in reversed(out.decode(errors="replace").splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return {}


# --------------------------------------------------------------------------
# in-process API benchmarks (executed in a fresh interpreter via --api NAME)
# --------------------------------------------------------------------------
def _api(pkg: str) -> Any:
    specs = importlib.import_module(f"{pkg}.specs")
    runner_mod = importlib.import_module(f"{pkg}.runner")
    return specs, runner_mod


def api_dryrun(args: argparse.Namespace) -> Dict[str, Any]:
    specs, runner_mod = _api(args.pkg)
    out: Dict[str, Any] = {}
    t = time.perf_counter()
    roles = [
        specs.Role(
            name=f"role{i}",
            image=args.workdir,
            entrypoint="echo",
            args=["hello", specs.macros.replica_id],
            num_replicas=args.replicas,
            resource=specs.Resource(cpu=1, gpu=0, memMB=256),
        )
        for i in range(args.roles)
    ]
    app = specs.AppDef(name="bigapp", roles=roles)
    out["build_s"] = time.perf_counter() - t
    logdir = tempfile.mkdtemp(prefix="bench_dry_")
    try:
        with runner_mod.get_runner() as runner:
            for sched, cfg in (
                ("local_cwd", {"log_dir": logdir}),
                ("kubernetes", {"queue": "default"}),
            ):
                try:
                    t = time.perf_counter()
                    info = runner.dryrun(app, sched, cfg=cfg)
                    out[f"{sched}_dryrun_s"] = time.perf_counter() - t
                    t = time.perf_counter()
                    text = str(info)
                    out[f"{sched}_format_s"] = time.perf_counter() - t
                    out[f"{sched}_format_chars"] = len(text)
                except Exception as e:  # noqa: BLE001
                    out[f"{sched}_error"] = f"{type(e).__name__}: {e}"[:300]
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    return out


def api_replicas(args: argparse.Namespace) -> Dict[str, Any]:
    specs, runner_mod = _api(args.pkg)
    out: Dict[str, Any] = {}
    cmd = args.replica_cmd.split()
    app = specs.AppDef(
        name="many",
        roles=[
            specs.Role(
                name="w",
                image=args.workdir,
                entrypoint=cmd[0],
                args=cmd[1:],
                num_replicas=args.replicas,
                resource=specs.Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )
    logdir = tempfile.mkdtemp(prefix="bench_rep_")
    try:
        with runner_mod.get_runner() as runner:
            t0 = time.perf_counter()
            handle = runner.run(app, "local_cwd", cfg={"log_dir": logdir})
            t1 = time.perf_counter()
            st = runner.wait(handle, wait_interval=args.poll)
            t2 = time.perf_counter()
            out["run_call_s"] = t1 - t0
            out["to_terminal_s"] = t2 - t0
            out["state"] = str(st.state) if st else None
            # status() latency on a finished app
            lat = []
            for _ in range(200):
                a = time.perf_counter()
                runner.status(handle)
                lat.append(time.perf_counter() - a)
            out["status_call_us"] = statistics.median(lat) * 1e6
            session, app_id = handle.split("://", 1)[1].split("/")[:2]
            rdir = os.path.join(logdir, session, app_id, "w")
            out["replica_dirs"] = len(os.listdir(rdir)) if os.path.isdir(rdir) else -1
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    return out


def api_first_call(args: argparse.Namespace) -> Dict[str, Any]:
    """A fresh interpreter's first use of the API: import the runner and specs, make a
    runner and run one echo replica on local_cwd (import cost and first-call cost
    together, since tx defers imports to the first call), then wait for its end."""
    t0 = time.perf_counter()
    specs, runner_mod = _api(args.pkg)
    out: Dict[str, Any] = {"import_s": time.perf_counter() - t0}
    app = specs.AppDef(name="first", roles=[specs.Role(
        name="echo", image=args.workdir, entrypoint="echo", args=["hi"],
        resource=specs.Resource(cpu=1, gpu=0, memMB=64))])
    logdir = tempfile.mkdtemp(prefix="bench_first_")
    try:
        with runner_mod.get_runner() as runner:
            handle = runner.run(app, "local_cwd", cfg={"log_dir": logdir})
            out["first_call_s"] = time.perf_counter() - t0
            st = runner.wait(handle, wait_interval=args.poll)
            out["to_terminal_s"] = time.perf_counter() - t0
            out["state"] = str(st.state) if st else None
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    return out


STATUS_PROBE = (
    "import json, sys, time\n"
    "t0 = time.perf_counter()\n"
    "import importlib\n"
    "runner_mod = importlib.import_module(sys.argv[1] + '.runner')\n"
    "with runner_mod.get_runner() as r:\n"
    "    st = r.status(sys.argv[2])\n"
    "    t1 = time.perf_counter()\n"
    "    lat = []\n"
    "    for _ in range(20):\n"
    "        a = time.perf_counter(); r.status(sys.argv[2]); lat.append(time.perf_counter() - a)\n"
    "lat.sort()\n"
    "print(json.dumps({'first_s': t1 - t0, 'next_us': lat[len(lat) // 2] * 1e6,\n"
    "                  'found': st is not None, 'state': str(st.state) if st else None}))\n"
)


def api_status_fresh(args: argparse.Namespace) -> Dict[str, Any]:
    """status() of a RUNNING app from a fresh process (as `status` from another shell):
    this process runs a sleeping app on local_cwd, then 5 fresh interpreters each make a
    runner and call status() once (import included) and 20 more times."""
    specs, runner_mod = _api(args.pkg)
    out: Dict[str, Any] = {}
    app = specs.AppDef(name="sleeper", roles=[specs.Role(
        name="s", image=args.workdir, entrypoint="sleep", args=["60"],
        resource=specs.Resource(cpu=1, gpu=0, memMB=64))])
    logdir = tempfile.mkdtemp(prefix="bench_status_")
    try:
        with runner_mod.get_runner() as runner:
            handle = runner.run(app, "local_cwd", cfg={"log_dir": logdir})
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    st = runner.status(handle)
                    if st is not None and str(st.state).endswith("RUNNING"):
                        break
                    time.sleep(0.05)
                probes = []
                for _ in range(5):
                    p = subprocess.run([sys.executable, "-c", STATUS_PROBE, args.pkg, handle],
                                       capture_output=True, text=True, timeout=120)
                    probes.append(last_json(p.stdout.encode()) or {"error": p.stderr[-300:]})
            finally:
                runner.cancel(handle)
        ok = [p for p in probes if "first_s" in p]
        out["found"] = sum(1 for p in ok if p.get("found"))
        out["probes"] = len(probes)
        if ok:
            out["fresh_first_status_s"] = statistics.median(p["first_s"] for p in ok)
            out["fresh_next_status_us"] = statistics.median(p["next_us"] for p in ok)
            out["fresh_state"] = ok[0].get("state")
        else:
            out["error"] = probes[0].get("error", "?")
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    return out


def api_log(args: argparse.Namespace) -> Dict[str, Any]:
    specs, runner_mod = _api(args.pkg)
    out: Dict[str, Any] = {}
    gen = os.path.join(args.workdir, "gen_lines.py")
    app = specs.AppDef(
        name="gen",
        roles=[
            specs.Role(
                name="gen",
                image=args.workdir,
                entrypoint=sys.executable,
                args=[gen, str(args.lines)],
                resource=specs.Resource(cpu=1, gpu=0, memMB=256),
            )
        ],
    )
    logdir = tempfile.mkdtemp(prefix="bench_log_")

    def tally(it: Any) -> Dict[str, int]:
        good = bad = 0
        for ln in it:
            if LINE_RE.match(ln):
                good += 1
            else:
                bad += 1
        return {"good": good, "mangled": bad}

    try:
        with runner_mod.get_runner() as runner:
            t0 = time.perf_counter()
            handle = runner.run(app, "local_cwd", cfg={"log_dir": logdir})
            tail = tally(runner.log_lines(handle, "gen", 0, should_tail=True))
            t1 = time.perf_counter()
            runner.wait(handle, wait_interval=0.05)
            out["tail_launch_to_last_line_s"] = t1 - t0
            out["tail_good"], out["tail_mangled"] = tail["good"], tail["mangled"]
            out["tail_lines_per_s"] = tail["good"] / (t1 - t0)
            # re-read the finished app's log
            t = time.perf_counter()
            post = tally(runner.log_lines(handle, "gen", 0))
            dt = time.perf_counter() - t
            out["read_done_s"] = dt
            out["read_good"], out["read_mangled"] = post["good"], post["mangled"]
            out["read_lines_per_s"] = (post["good"] + post["mangled"]) / dt
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    return out


API_FUNCS: Dict[str, Callable[[argparse.Namespace], Dict[str, Any]]] = {
    "dryrun": api_dryrun,
    "first_call": api_first_call,
    "status_fresh": api_status_fresh,
    "replicas": api_replicas,
    "log": api_log,
}
