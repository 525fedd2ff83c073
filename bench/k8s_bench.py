#!/usr/bin/env python3
"""Speed of the ``kubernetes`` (Volcano) dryrun: tx beside TorchX 0.7.0, in one run.

    /work/venvs/k8s/bin/python bench/k8s_bench.py            # n=5, writes bench/RESULTS-k8s.md
    python bench/k8s_bench.py -n 3 --out /tmp/k8s.md

The tx side is the interpreter running this file (tx-core and tx-scheduler-k8s installed;
``tx`` next to it); the TorchX side is ``bench/.work/torchx-venv`` (made by
``bench/run.py --setup-only``: ``torchx==0.7.0 torch==2.13.0 kubernetes``).

Cases (each a whole process, wall time from spawn to exit; each round runs both sides back
to back, alternating which goes first; ``--warmup`` rounds are not counted):

* ``dryrun_k8s_512x8``: ``CLI run --dryrun -s kubernetes -cfg queue=default --workspace ""
  dist.ddp -j 512x8 --script train.py`` (in bench/, where train.py is). Budget: tx's median
  at most 0.3x TorchX's.
* ``api_dryrun_1000x4``: a fresh interpreter builds an AppDef of 1,000 roles x 4 replicas
  and times ``runner.dryrun(app, "kubernetes", cfg={"queue": "default"})`` plus
  ``str(info)`` in-process. Budget: tx under 1 s (median).

No cluster is needed: dryruns never contact one.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHX_VENV = os.path.join(HERE, ".work", "torchx-venv")

API_SNIPPET = r"""
import json, sys, time
pkg = sys.argv[1]
t = time.perf_counter()
specs = __import__(pkg + ".specs", fromlist=["x"])
runner_mod = __import__(pkg + ".runner", fromlist=["x"])
roles = [specs.Role(name=f"role{i}", image="ghcr.io/example/img:1", entrypoint="echo",
                    args=["hello", specs.macros.replica_id], num_replicas=4,
                    resource=specs.Resource(cpu=1, gpu=0, memMB=256)) for i in range(1000)]
app = specs.AppDef(name="bigapp", roles=roles)
out = {"build_s": time.perf_counter() - t}
with runner_mod.get_runner() as runner:
    t = time.perf_counter()
    info = runner.dryrun(app, "kubernetes", cfg={"queue": "default"})
    out["dryrun_s"] = time.perf_counter() - t
    t = time.perf_counter()
    text = str(info)
    out["format_s"] = time.perf_counter() - t
out["chars"] = len(text)
out["total_s"] = out["dryrun_s"] + out["format_s"]
print("RESULT " + json.dumps(out))
"""


def run(argv: List[str], env: Dict[str, str], cwd: str) -> Tuple[float, int, str]:
    """Wall seconds, exit code and the last 400 characters of stderr of one process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.run(argv, env=env, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        tail = err.read().decode(errors="replace")[-400:]
    return wall, p.returncode, text if p.returncode == 0 else tail


def sides() -> Dict[str, Dict[str, str]]:
    tx_bin = os.path.dirname(sys.executable)
    tx_py = sys.executable
    tc_py = os.path.join(TORCHX_VENV, "bin", "python")
    if not os.path.exists(tc_py):
        sys.exit(f"no TorchX venv at {TORCHX_VENV}: run `python bench/run.py --setup-only` first")
    return {
        "tx": {"py": tx_py, "cli": os.path.join(tx_bin, "tx"), "pkg": "tx"},
        "torchx": {"py": tc_py, "cli": os.path.join(TORCHX_VENV, "bin", "torchx"), "pkg": "torchx"},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="counted rounds (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="uncounted rounds first (default 1)")
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS-k8s.md"))
    args = ap.parse_args()
    sd = sides()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TX_", "TORCHX_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env["XDG_CACHE_HOME"] = os.path.join(HERE, ".work", "xdg-cache-k8s")
    env["KUBECONFIG"] = os.path.join(HERE, ".work", "no-kubeconfig")  # a dryrun needs no cluster
    subprocess.run([sd["tx"]["py"], "-m", "compileall", "-q", os.path.join(HERE, "..", "core", "src"),
                    os.path.join(HERE, "..", "plugins", "scheduler-k8s", "src")], check=False)
    cli_case = lambda s: [sd[s]["cli"], "run", "--dryrun", "-s", "kubernetes", "-cfg", "queue=default",  # noqa: E731
                          "--workspace", "", "dist.ddp", "-j", "512x8", "--script", "train.py"]
    api_case = lambda s: [sd[s]["py"], "-c", API_SNIPPET, sd[s]["pkg"]]  # noqa: E731
    cases = {"dryrun_k8s_512x8": cli_case, "api_dryrun_1000x4": api_case}
    walls: Dict[str, Dict[str, List[float]]] = {c: {"tx": [], "torchx": []} for c in cases}
    inproc: Dict[str, List[Dict[str, float]]] = {"tx": [], "torchx": []}
    errors: Dict[str, str] = {}
    for rnd in range(args.warmup + args.n):
        order = ["tx", "torchx"] if rnd % 2 == 0 else ["torchx", "tx"]
        for case, mk in cases.items():
            for side in order:
                wall, rc, text = run(mk(side), env, HERE)
                if rc != 0:
                    errors[f"{case}/{side}"] = text.strip()
                    continue
                if rnd < args.warmup:
                    continue
                walls[case][side].append(wall)
                if case == "api_dryrun_1000x4":
                    line = next((ln for ln in text.splitlines() if ln.startswith("RESULT ")), None)
                    if line:
                        inproc[side].append(json.loads(line[len("RESULT "):]))
        print(f"round {rnd + 1}/{args.warmup + args.n} done", file=sys.stderr, flush=True)

    def stats(xs: List[float]) -> str:
        return f"{min(xs):.3f} / **{statistics.median(xs):.3f}** / {max(xs):.3f}" if xs else "n/a"

    def med(xs: List[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    lines = [
        "# Kubernetes dryrun benchmark: tx beside TorchX 0.7.0",
        "",
        f"Written by `bench/k8s_bench.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"{args.n} counted rounds after {args.warmup} warm-up, tx and TorchX interleaved; "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs. Wall seconds min / **median** / max.",
        "",
        "| case | tx | TorchX 0.7.0 | ratio of medians |",
        "| --- | --- | --- | --- |",
    ]
    for case in cases:
        t, c = walls[case]["tx"], walls[case]["torchx"]
        ratio = med(t) / med(c) if t and c else float("nan")
        lines.append(f"| `{case}` | {stats(t)} | {stats(c)} | {ratio:.3f} |")
    lines += ["", "In-process timings of `api_dryrun_1000x4` (medians, seconds):", "",
              "| side | runner.dryrun | str(info) | total | characters |", "| --- | --- | --- | --- | --- |"]
    for side in ("tx", "torchx"):
        rs = inproc[side]
        if rs:
            lines.append(f"| {side} | {med([r['dryrun_s'] for r in rs]):.3f} | {med([r['format_s'] for r in rs]):.3f} | "
                         f"{med([r['total_s'] for r in rs]):.3f} | {int(med([r['chars'] for r in rs]))} |")
    t, c = walls["dryrun_k8s_512x8"]["tx"], walls["dryrun_k8s_512x8"]["torchx"]
    cli_ratio = med(t) / med(c) if t and c else float("nan")
    api_total = med([r["total_s"] for r in inproc["tx"]]) if inproc["tx"] else float("nan")
    budgets = [
        ("`tx run --dryrun -s kubernetes dist.ddp -j 512x8` <= 0.3x TorchX", f"{cli_ratio:.3f}x", cli_ratio <= 0.3),
        ("API dryrun (+ str) of 1,000 roles x 4 replicas on kubernetes < 1 s", f"{api_total:.3f} s", api_total < 1.0),
    ]
    lines += ["", "## Budgets", "", "| budget | measured | verdict |", "| --- | --- | --- |"]
    for what, got, ok in budgets:
        lines.append(f"| {what} | {got} | {'PASS' if ok else 'FAIL'} |")
    if errors:
        lines += ["", "## Errors", ""] + [f"- `{k}`: {v[-300:]}" for k, v in sorted(errors.items())]
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    # a FAIL verdict is a result (written above), not a failure of the bench: exit 1 only
    # when a case could not be measured (bench/regen.py stamps the file on exit 0)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
