#!/usr/bin/env python3
"""tx's ``ray`` scheduler beside TorchX 0.7.0's, on one private local Ray head.

Cases (each side runs the same thing against the same head; ``-n`` counted runs after
``--warmup`` uncounted ones; min / median / max wall seconds):

* ``submit_to_running``: a fresh interpreter imports the tool's runner, submits a
  2-replica app (``sh -c "sleep 60"``, 1 CPU each, the workspace directory as image) and polls
  ``runner.status`` every 0.1 s until it says RUNNING; the time from the submit call to that
  answer. The app is then cancelled. tx says RUNNING once both replicas run; TorchX once
  the Ray job's driver runs (it has no replica states).
* ``ddp_2x1``: the whole CLI process ``<cli> run --wait -s ray dist.ddp -j 2x1 --cpu 1
  --script train.py`` (bench/train.py, gloo, 20 steps), run from a workspace directory
  holding only train.py (TorchX's default workspace is the current directory; tx gets
  ``--workspace``). ``--cpu 1``: the head has 4 CPUs, and TorchX's default of 2 CPUs per
  replica would not leave room for anything else.
* ``status``: one ``<cli> status <handle>`` process for a finished DDP app.

The head: ``ray start --head --block`` from this interpreter's environment (its ``bin``
first on PATH: jobs run this Python, which has ray, torch and tx's driver needs), own
``--temp-dir`` (a short directory under /tmp, removed at the end), free ports on 127.0.0.1, 4 CPUs. It is stopped at
the end through its own process group and the processes that name its temp dir (never
``ray stop``, which kills every Ray process on the host).

TorchX side: ``bench/.work/torchx-venv`` (bench/run.py creates it with TorchX 0.7.0 and
torch); ``ray[default]`` is added to it here when missing, pinned to this side's version.

Usage: python bench/ray_bench.py [-n 3] [--warmup 1] [--sides tx,torchx] [--out bench/RESULTS-ray.md]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from _common import free_port  # the benches' shared helpers (this directory is sys.path[0])

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
TORCHX_VENV = WORK / "torchx-venv"
TX_BIN = Path(sys.executable).parent

API_SRC = r"""
import json, sys, time
pkg, address, image = sys.argv[1], sys.argv[2], sys.argv[3]
specs = __import__(pkg + ".specs", fromlist=["x"])
runner_mod = __import__(pkg + ".runner", fromlist=["x"])
res = specs.Resource(cpu=1, gpu=0, memMB=256)
role = specs.Role("sleeper", image=image, entrypoint="sh", args=["-c", "sleep 60"], num_replicas=2, resource=res)
app = specs.AppDef("benchrun", roles=[role])
runner = runner_mod.get_runner()
t0 = time.perf_counter()
handle = runner.run(app, "ray", {"dashboard_address": address})
t_submit = time.perf_counter() - t0
state = None
while time.perf_counter() - t0 < 240:
    st = runner.status(handle)
    state = str(st.state) if st is not None else None
    if state and state.split(" ")[0] in ("RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"):
        break
    time.sleep(0.1)
t_running = time.perf_counter() - t0
runner.cancel(handle)
print(json.dumps({"handle": handle, "submit": t_submit, "running": t_running, "state": state}))
"""



class Head:
    """A private Ray head started from this interpreter's environment."""

    def __init__(self, temp: Path, cpus: int = 4) -> None:
        self.temp = temp
        ports = {n: free_port() for n in (
            "port", "dashboard-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
            "node-manager-port", "object-manager-port", "metrics-export-port", "runtime-env-agent-port",
            "ray-client-server-port")}
        self.address = f"127.0.0.1:{ports['dashboard-port']}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(PATH=f"{TX_BIN}{os.pathsep}{env.get('PATH', '')}", RAY_USAGE_STATS_ENABLED="0",
                   RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
        argv = [str(TX_BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                f"--num-cpus={cpus}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
                f"--temp-dir={temp}", "--min-worker-port=0", "--max-worker-port=0", "--disable-usage-stats",
                *[f"--{k}={v}" for k, v in ports.items()]]
        temp.mkdir(parents=True, exist_ok=True)
        self.log = open(temp / "ray-start.log", "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        import urllib.request

        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.address}/api/jobs/", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the Ray head did not start; see {temp / 'ray-start.log'}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        marker = str(self.temp).encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes() or marker in Path(f"/proc/{entry}/environ").read_bytes():
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
        self.log.close()


def ensure_torchx_ray() -> None:
    py = TORCHX_VENV / "bin" / "python"
    if not py.exists():
        raise SystemExit(f"{TORCHX_VENV} is missing: run `python bench/run.py --setup-only` first")
    if subprocess.run([str(py), "-c", "import ray"], capture_output=True).returncode != 0:
        import ray

        subprocess.run([str(TORCHX_VENV / "bin" / "pip"), "install", "-q", f"ray[default]=={ray.__version__}"], check=True)


def stats(xs: List[float]) -> str:
    if not xs:
        return "n/a"
    return f"{min(xs):.2f} / **{statistics.median(xs):.2f}** / {max(xs):.2f}"


def run_cli(argv: List[str], cwd: Path, env: Dict[str, str], timeout: float = 300) -> tuple:
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - t0, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--sides", default="tx,torchx")
    ap.add_argument("--out", default=str(HERE / "RESULTS-ray.md"))
    args = ap.parse_args()
    sides = args.sides.split(",")
    if "torchx" in sides:
        ensure_torchx_ray()
    clis = {"tx": str(TX_BIN / "tx"), "torchx": str(TORCHX_VENV / "bin" / "torchx")}
    pys = {"tx": sys.executable, "torchx": str(TORCHX_VENV / "bin" / "python")}
    WORK.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ray-bench-", dir=WORK))
    ws = tmp / "ws"
    ws.mkdir()
    shutil.copy(HERE / "train.py", ws / "train.py")
    # short: Ray's unix socket paths under its temp dir must stay below 108 bytes
    ray_temp = Path(tempfile.mkdtemp(prefix="raybench-", dir="/tmp"))
    try:
        head = Head(ray_temp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ray_temp, ignore_errors=True)
        raise
    results: Dict[str, Dict[str, List[float]]] = {}
    notes: List[str] = []
    handles: Dict[str, str] = {}
    try:
        for side in sides:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TX_", "TORCHX_"))}
            env["PATH"] = f"{Path(pys[side]).parent}{os.pathsep}{env['PATH']}"
            env["HOME"] = str(tmp / f"home-{side}")
            env["RAY_ADDRESS"] = f"http://{head.address}"
            # submit_to_running (API, fresh interpreter)
            r = results.setdefault(f"submit_to_running/{side}", {"wall": []})
            for i in range(args.warmup + args.n):
                p = subprocess.run([pys[side], "-c", API_SRC, side, head.address, str(ws)], cwd=str(ws), env=env,
                                   capture_output=True, text=True, timeout=300)
                if not ws.is_dir():
                    raise SystemExit(f"{side}'s submit removed the workspace directory {ws}")
                if p.returncode != 0:
                    notes.append(f"{side} submit_to_running failed: {p.stderr.strip().splitlines()[-1:]}")
                    break
                out = json.loads(p.stdout.strip().splitlines()[-1])
                if not out["state"] or not out["state"].startswith("RUNNING"):
                    notes.append(f"{side} submit_to_running ended {out['state']}")
                if i >= args.warmup:
                    r["wall"].append(out["running"])
                    r.setdefault("submit", []).append(out["submit"])
                time.sleep(3)  # the cancelled app releases its CPUs
            # ddp_2x1 (whole CLI process)
            r = results.setdefault(f"ddp_2x1/{side}", {"wall": []})
            for i in range(args.warmup + args.n):
                argv = [clis[side], "run", "--wait", "-s", "ray"]
                argv += ["--workspace", str(ws)] if side == "tx" else ["-cfg", f"dashboard_address={head.address}"]
                argv += ["dist.ddp", "-j", "2x1", "--cpu", "1", "--script", "train.py"]
                wall, p = run_cli(argv, ws, env)
                ok = p.returncode == 0
                if not ok:
                    notes.append(f"{side} ddp_2x1 rc={p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1][:300]}")
                    break
                handles[side] = p.stdout.strip().splitlines()[-1]
                if i >= args.warmup:
                    r["wall"].append(wall)
            # status of a finished app
            r = results.setdefault(f"status/{side}", {"wall": []})
            if side in handles:
                for i in range(args.warmup + args.n):
                    wall, p = run_cli([clis[side], "status", handles[side]], ws, env)
                    if p.returncode != 0 or "SUCCEEDED" not in p.stdout:
                        notes.append(f"{side} status rc={p.returncode}: {p.stdout.strip()[-200:]} {p.stderr.strip()[-200:]}")
                        break
                    if i >= args.warmup:
                        r["wall"].append(wall)
    finally:
        head.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(ray_temp, ignore_errors=True)
    import ray

    lines = [
        "# tx `ray` vs TorchX 0.7.0 `ray`: one private local Ray head",
        "",
        f"Written by `bench/ray_bench.py` (n={args.n}, warmup={args.warmup}) on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"Ray {ray.__version__}, head with 4 logical CPUs on a {os.cpu_count()}-core machine. "
        "Wall seconds, min / **median** / max.",
        "",
        "| case | tx | TorchX 0.7.0 | tx/TorchX (median) |",
        "| --- | --- | --- | --- |",
    ]
    for case in ("submit_to_running", "ddp_2x1", "status"):
        a = results.get(f"{case}/tx", {}).get("wall", [])
        b = results.get(f"{case}/torchx", {}).get("wall", [])
        ratio = f"{statistics.median(a) / statistics.median(b):.2f}" if a and b else "n/a"
        lines.append(f"| {case} | {stats(a)} | {stats(b)} | {ratio} |")
    sub = {s: results.get(f"submit_to_running/{s}", {}).get("submit", []) for s in sides}
    lines += [
        "",
        "What the cases measure (see the script's docstring): `submit_to_running` from the submit",
        "call to the first RUNNING answer of `runner.status` (tx: both replicas running; TorchX: the",
        "job's driver running, it knows no replica states); the submit call alone took "
        + ", ".join(f"{s} {stats(v)}" for s, v in sub.items()) + " s.",
        "`ddp_2x1`: the whole `run --wait` process of a 2-replica gloo DDP job (`--cpu 1`).",
        "`status`: one `status` process for a finished app.",
    ]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
