#!/usr/bin/env python3
"""local_docker beside TorchX 0.7.0's, on a private podman engine: writes bench/RESULTS-docker.md.

    python bench/docker_bench.py            # -n 5 rounds, both sides interleaved
    python bench/docker_bench.py -n 1 --sides tx

The tx side is the interpreter running this file (tx-core and tx-scheduler-docker installed;
its ``tx`` is found next to it). The TorchX side is bench/.work/torchx-venv, made and
checked by bench/run.py's ``ensure_torchx_venv`` (torchx==0.7.0 torch==2.13.0 kubernetes;
TorchX depends on ``docker`` itself). The engine is podman's Docker API, started with
scripts/start-podman.sh under its own ``PODMAN_BASE`` (bench/.work/podman by default) and
stopped, with everything it made, at the end.

Cases, each run as a fresh CLI process with the wall time measured around it:

* ``echo``: ``run -s local_docker --workspace "" utils.echo --image localhost/busybox:tx --msg hi``
  (create network and container, run, wait, relay the line).
* ``ws_build``: ``run -s local_docker --workspace DIR utils.sh ... cat f.txt`` where DIR
  changed since the last run (an image build).
* ``ws_unchanged``: the same again with DIR unchanged (tx reuses the image; TorchX builds).
* ``api_build`` / ``api_unchanged``: only the image build, through each side's Python API
  (the seconds of the build call, measured inside a fresh interpreter), after a change to
  DIR and then again without one.

A run that fails is recorded with its exit code and the last lines of its output, as it
happened (TorchX 0.7.0 on podman).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORK = os.path.join(HERE, ".work")
IMAGE = "localhost/busybox:tx"


def start_engine(base: str) -> Dict[str, str]:
    env = {**os.environ, "PODMAN_BASE": base}
    p = subprocess.run(["bash", os.path.join(REPO, "scripts", "start-podman.sh")], env=env, capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"scripts/start-podman.sh failed: {p.stderr[-2000:]}")
    out: Dict[str, str] = {}
    for line in p.stdout.splitlines():
        if line.startswith("export "):
            for item in line[len("export "):].split():
                k, _, v = item.partition("=")
                out[k] = v
    return out


def stop_engine(base: str, exports: Dict[str, str]) -> None:
    subprocess.run(["bash", os.path.join(REPO, "scripts", "stop-podman.sh")],
                   env={**os.environ, **exports, "PODMAN_BASE": base, "PURGE": "1"}, capture_output=True, timeout=300)


def timed(cmd: List[str], env: Dict[str, str], cwd: str, timeout: float) -> Dict[str, Any]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        rc, out = p.returncode, (p.stdout + p.stderr)
    except subprocess.TimeoutExpired as e:
        rc, out = 124, f"timed out after {timeout} s: {e}"
    return {"s": time.perf_counter() - t0, "rc": rc, "out": out}


def cases(side: str, cli: str, ws: str) -> Dict[str, List[str]]:
    wsflag = ws if side == "tx" else f"file://{ws}"
    return {
        "echo": [cli, "run", "-s", "local_docker", "--workspace", "", "utils.echo", "--image", IMAGE, "--msg", "hi"],
        "ws_build": [cli, "run", "-s", "local_docker", "--workspace", wsflag, "utils.sh", "--image", IMAGE,
                     "cat", "f.txt"],
        "ws_unchanged": [cli, "run", "-s", "local_docker", "--workspace", wsflag, "utils.sh", "--image", IMAGE,
                         "cat", "f.txt"],
    }


#: the image build alone, through each side's Python API, in a fresh interpreter: prints
#: the seconds the build call took (the interpreter's start and imports not counted)
API_BUILD = {
    "tx": (
        "import sys, time\n"
        "from tx.specs import Role\n"
        "from tx_scheduler_docker.workspace import DockerWorkspace\n"
        "t0 = time.perf_counter()\n"
        "role = DockerWorkspace().build(Role('r', image=sys.argv[1], entrypoint='true'), sys.argv[2], {'quiet': True})\n"
        "print('BUILD_S', time.perf_counter() - t0, role.image)\n"
    ),
    "torchx": (
        "import sys, time\n"
        "from torchx.specs import Role\n"
        "from torchx.schedulers.docker_scheduler import DockerScheduler\n"
        "role = Role('r', image=sys.argv[1], entrypoint='true')\n"
        "s = DockerScheduler('bench')\n"
        "t0 = time.perf_counter()\n"
        "s.build_workspace_and_update_role(role, 'file://' + sys.argv[2], {'quiet': True, 'image_repo': None})\n"
        "print('BUILD_S', time.perf_counter() - t0, role.image)\n"
    ),
}


def api_build(side: str, py: str, ws: str, env: Dict[str, str], cwd: str, timeout: float) -> Dict[str, Any]:
    res = timed([py, "-c", API_BUILD[side], IMAGE, ws], env, cwd, timeout)
    for line in res["out"].splitlines():
        if line.startswith("BUILD_S "):
            res["s"] = float(line.split()[1])
            res["image"] = line.split()[2]
    return res


def expect(case: str, out: str, round_: int) -> bool:
    if case == "echo":
        return "hi" in out.split()
    if case.startswith("api_"):
        return "BUILD_S" in out
    return f"round-{round_}" in out


def fmt(xs: List[float]) -> str:
    return f"{statistics.median(xs):.2f} s (min {min(xs):.2f}, n={len(xs)})" if xs else "–"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="rounds per case and side")
    ap.add_argument("--sides", default="tx,torchx")
    ap.add_argument("--torchx-venv", default=os.path.join(WORK, "torchx-venv"))
    ap.add_argument("--podman-base", default=os.path.join(WORK, "podman"))
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS-docker.md"))
    args = ap.parse_args()
    sides = [s for s in args.sides.split(",") if s]
    clis = {"tx": os.path.join(os.path.dirname(sys.executable), "tx")}
    pys = {"tx": sys.executable}
    if "torchx" in sides:
        sys.path.insert(0, HERE)
        import run as bench_run  # bench/run.py: the shared TorchX venv

        py = bench_run.ensure_torchx_venv(args.torchx_venv, False)
        clis["torchx"] = os.path.join(os.path.dirname(py), "torchx")
        pys["torchx"] = py
    base = os.path.abspath(args.podman_base)
    load = [os.getloadavg()[0]]
    exports = start_engine(base)
    env = {**os.environ, **exports, "LOGLEVEL": "WARNING"}
    results: Dict[str, Dict[str, List[Dict[str, Any]]]] = {s: {} for s in sides}
    wss = {s: os.path.join(WORK, f"docker-ws-{s}") for s in sides}
    cwd = os.path.join(WORK, "docker-cwd")
    os.makedirs(cwd, exist_ok=True)
    try:
        for r in range(args.n):
            for side in (sides if r % 2 == 0 else list(reversed(sides))):
                ws = wss[side]
                shutil.rmtree(ws, ignore_errors=True)
                os.makedirs(ws)
                with open(os.path.join(ws, "f.txt"), "w") as f:
                    f.write(f"round-{r}\n")
                runs = [(case, lambda cmd=cmd: timed(cmd, env, cwd, args.timeout))
                        for case, cmd in cases(side, clis[side], ws).items()]
                with open(os.path.join(ws, "g.txt"), "w") as f:
                    pass
                for case in ("api_build", "api_unchanged"):
                    runs.append((case, lambda: api_build(side, pys[side], ws, env, cwd, args.timeout)))
                for i, (case, fn) in enumerate(runs):
                    if case == "api_build":  # a change: the next build is a real one
                        with open(os.path.join(ws, "g.txt"), "w") as f:
                            f.write(f"api-{r}\n")
                    res = fn()
                    res["ok"] = res["rc"] == 0 and expect(case, res["out"], r)
                    results[side].setdefault(case, []).append(res)
                    print(f"round {r} {side:6} {case:13} {res['s']:6.2f} s rc={res['rc']} ok={res['ok']}", flush=True)
    finally:
        stop_engine(base, exports)
    load.append(os.getloadavg()[0])
    write(args.out, results, sides, args.n, load)
    print(f"wrote {args.out}")
    return 0


WHAT = {
    "echo": '`run -s local_docker --workspace "" utils.echo --image localhost/busybox:tx --msg hi`',
    "ws_build": "`run -s local_docker --workspace DIR utils.sh --image localhost/busybox:tx cat f.txt`, DIR changed",
    "ws_unchanged": "the same, DIR unchanged since the previous run",
    "api_build": "API: the workspace image build alone (tx `DockerWorkspace().build`, TorchX "
                 "`DockerScheduler.build_workspace_and_update_role`), DIR changed",
    "api_unchanged": "API: the same build call again, DIR unchanged",
}


def write(path: str, results: Dict[str, Dict[str, List[Dict[str, Any]]]], sides: List[str], n: int,
          load: List[float]) -> None:
    import platform

    lines = [
        "# local_docker: tx beside TorchX 0.7.0",
        "",
        f"Written by `bench/docker_bench.py -n {n}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.node()} ({os.cpu_count()} cores), Python {platform.python_version()}; engine: podman's Docker API "
        "(scripts/start-podman.sh, runc, private storage). Wall time of one CLI process per run, from start to "
        "exit (the app has ended and its output was relayed); median and min of the runs that succeeded. "
        "Both sides run round by round, alternating which goes first. "
        f"1-minute load average: {load[0]:.1f} at the start, {load[-1]:.1f} at the end (other work shared the "
        "machine, so single runs vary; compare the sides within this file).",
        "",
        "| case | " + " | ".join(sides) + " |",
        "|---|" + "---|" * len(sides),
    ]
    for case in WHAT:
        row = [WHAT[case]]
        for side in sides:
            runs = results.get(side, {}).get(case, [])
            ok = [x["s"] for x in runs if x["ok"]]
            bad = len(runs) - len(ok)
            row.append(fmt(ok) + (f"; **{bad} of {len(runs)} failed**" if bad else ""))
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "What the sides do: tx hashes the workspace files it would send (after `.txignore`) and, when the "
              "engine already has the image of that hash, builds nothing; TorchX 0.7.0 first tries to pull the role's "
              "image, then builds an image on every run. Both CLIs wait for the app and relay its output "
              "(local schedulers).", ""]
    lines += ["## Failures as they happened", ""]
    any_fail = False
    for side in sides:
        for case, runs in results.get(side, {}).items():
            failed = [x for x in runs if not x["ok"]]
            if not failed:
                continue
            any_fail = True
            x = failed[0]
            tail = "\n".join(x["out"].strip().splitlines()[-12:])
            lines += [f"**{side}, {case}**: {len(failed)} of {len(runs)} runs failed; the first (exit code {x['rc']}) ended with:",
                      "", "```", tail, "```", ""]
    if not any_fail:
        lines.append("None.")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
