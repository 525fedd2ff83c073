#!/usr/bin/env python3
"""tx at 10,000 apps (issue 40): ``tx list`` and the first page of ``tx ui`` at 1,000 and
10,000 finished local_cwd apps, time and peak memory, beside TorchX 0.7.0's ``torchx list
-s local_cwd``; writes bench/RESULTS-scale.md (its other sections, the status plane, the
10,000-trial sweeps and the watcher, are kept as they are: other benches fill them).

The apps: one real ``tx run -s local_cwd utils.echo`` in a private state directory, copied
``N - 1`` times by ``tx_scheduler_local._clone.clone_finished_app`` (the files the scheduler
wrote, with new ids; every tenth FAILED), then listed once (which writes the listing index,
timed as its own row). Each row runs ``-n`` times: the median and range of the wall time,
and the median of the process's peak RSS (``os.wait4``'s ``ru_maxrss``; for ``tx ui``, the
server's ``VmHWM`` after the requests). ``--before COMMIT`` also measures that commit's
code (its sources from ``git archive``, on its own copy of the apps) for a before/after.

    python bench/scale_bench.py [-n 5] [--sizes 1000,10000] [--before COMMIT] [--torchx PATH]
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
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _common import git_state, load_avg, spread  # noqa: E402 - the benches' shared helpers

OUT = REPO / "bench" / "RESULTS-scale.md"
TORCHX = REPO / "bench" / ".work" / "torchx-venv" / "bin" / "torchx"
BIN = Path(sys.executable).parent
#: the sections other benches fill (kept as they are when this one rewrites the file)
OTHERS = ("## Status plane: backend calls", "## Sweeps of 10,000 trials", "## The watcher following 2,000 runs")
PLACEHOLDER = {
    OTHERS[0]: "Not measured yet: the calls per tick counted at each backend (Slurm's `sdiag`, moto's and "
               "the test servers' request logs, a counting proxy before the Ray head) with 1,000 and 2,000 "
               "apps followed, and the 40-token bucket refilled 4 per minute. Its bench adds the rows here.",
    OTHERS[1]: "Not measured yet: submit, status and resume of a 10,000-trial sweep (Slurm with "
               "`MaxArraySize` 10,001; moto, the tests' GCP and Kubernetes servers): calls and tx time. "
               "Its bench adds the rows here.",
    OTHERS[2]: "Not measured yet: the watcher following 2,000 runs across local_cwd, Slurm and moto: calls "
               "per tick, CPU and memory. Its bench adds the rows here.",
}


def _sources(commit: Optional[str], work: Path) -> str:
    """The PYTHONPATH of the code measured: this checkout's, or ``commit``'s sources."""
    root = REPO
    if commit:
        root = work / f"src-{commit[:12]}"
        if not root.exists():
            tar = work / "src.tar"
            subprocess.run(["git", "archive", "-o", str(tar), commit, "core/src", "plugins"], cwd=REPO, check=True)
            with tarfile.open(tar) as t:
                t.extractall(root)
            tar.unlink()
    return os.pathsep.join([str(root / "core" / "src"), *sorted(str(p) for p in (root / "plugins").glob("*/src"))])


def _timed(argv: List[str], env: Dict[str, str]) -> Tuple[float, float, int, str]:
    """``(seconds, peak RSS in MB, exit status, stderr)`` of one run of ``argv``."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read() if p.stderr else ""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss / 1024, p.returncode, err


#: medians of the rows of the last :func:`measure`, by (size, key): seconds, or MB for "rss"
METRICS: Dict[Tuple[int, str], float] = {}


def _row(label: str, runs: List[Tuple[float, float, int, str]], size: int = 0, key: str = "") -> str:
    secs = [r[0] for r in runs]
    if key:
        METRICS[(size, key)] = statistics.median(secs)
        METRICS[(size, key + " rss")] = statistics.median(r[1] for r in runs)
    rss = statistics.median(r[1] for r in runs)
    codes = sorted({r[2] for r in runs})
    return f"| {label} | {spread(secs)} | {rss:.1f} MB | {','.join(map(str, codes))} |"


def make_apps(env: Dict[str, str], n: int) -> float:
    """``n`` finished apps in ``env``'s state directory; the seconds the first listing took
    (it writes the listing index)."""
    p = subprocess.run([str(BIN / "tx"), "run", "-s", "local_cwd", "utils.echo", "--msg", "hi"], env=env,
                       capture_output=True, text=True, timeout=300, cwd=env["TMPDIR"])
    if p.returncode != 0:
        raise SystemExit(f"tx run failed: {p.stderr}")
    first = p.stdout.splitlines()[0].rsplit("/", 1)[1]
    apps = Path(env["TX_STATE_DIR"]) / "local" / "apps"
    from tx_scheduler_local._clone import clone_finished_app  # this checkout's helper, whatever code is measured

    t = time.time()
    clone_finished_app(str(apps), first, n - 1, prefix="bench", submitted=lambda i: t - 60 * i - 120,
                       state=lambda i: "FAILED" if i % 10 == 0 else "SUCCEEDED")
    return _timed([str(BIN / "tx"), "list", "-s", "local_cwd"], env)[0]


#: the listing work alone, in one process: the first page of 20, timed n times after one call
IN_PROCESS = """
import json, sys, time
from tx.runner import Runner
r = Runner()
page = getattr(r.engine, "list_page", None)
def first():
    if page is not None:
        return page("local_cwd", 20).apps
    from tx.views import newest_first
    return newest_first(r.list("local_cwd"))[0][:20]
first()
out = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter(); first(); out.append(time.perf_counter() - t)
print(json.dumps(out))
"""


def in_process_row(env: Dict[str, str], n: int, size: int) -> str:
    """The listing work without the interpreter's start: ``n`` first pages in one process."""
    p = subprocess.run([sys.executable, "-c", IN_PROCESS, str(n)], env=env, capture_output=True, text=True,
                       timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"in-process listing failed: {p.stderr}")
    secs = [float(x) for x in json.loads(p.stdout.strip().splitlines()[-1])]
    METRICS[(size, "in process")] = statistics.median(secs)
    return f"| the newest 20 in one process (`Engine.list_page`; before: `Runner.list` sorted), no start-up | " \
           f"{spread(secs)} | - | - |"


def ui_rows(env: Dict[str, str], n: int, size: int) -> List[str]:
    """The first page of ``tx ui -s local_cwd`` (and page 50 at 10,000) ``n`` times each,
    on one server; its peak RSS after."""
    from tx_ui.testing import serve  # the helper only: the server runs env's code

    rows = []
    with serve(env, "-s", "local_cwd", "--timeout", "120", timeout=300) as ui:
        t0 = time.perf_counter()
        status, body = ui.get("/", timeout=300)
        first = time.perf_counter() - t0
        shown = len(re.findall(r'<tr class="app"', body))
        cases = [("first page (`/`)", {}), ("first page, FAILED only (`/?state=FAILED`)", {"state": "FAILED"})]
        if size >= 5000:
            cases.append(("page 50 (`/?page=50`)", {"page": 50}))
        for label, query in cases:
            secs = []
            for _ in range(n):
                t = time.perf_counter()
                status, body = ui.get("/", timeout=300, **query)
                secs.append(time.perf_counter() - t)
                if status != 200:
                    raise SystemExit(f"tx ui {query}: {status} {body[:200]}")
            rows.append((label, secs, len(body)))
            METRICS.setdefault((size, "ui"), statistics.median(secs))
        hwm = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{ui.process.pid}/status").read_text())
        peak = int(hwm.group(1)) / 1024 if hwm else float("nan")
        METRICS[(size, "ui rss")] = peak
    out = [f"| tx ui: the first request after start-up | {first:.2f} s (n=1) | {shown} rows | - |"]
    out += [f"| tx ui: {label} | {spread(secs)} | {size_b / 1024:.0f} KB page | - |" for label, secs, size_b in rows]
    out.append(f"| tx ui: the server's peak RSS after these requests | - | {peak:.1f} MB | - |")
    return out


def measure(sizes: List[int], n: int, commit: Optional[str], work: Path, torchx: Path) -> List[str]:
    lines: List[str] = []
    for size in sizes:
        base = Path(tempfile.mkdtemp(prefix=f"scale-{size}-", dir=work))
        env = dict(os.environ, TX_STATE_DIR=str(base / "state"), HOME=str(base / "home"), TMPDIR=str(base / "tmp"),
                   PYTHONPATH=_sources(commit, work), NO_COLOR="1")
        env.pop("TXCONFIG", None)
        for d in ("home", "tmp"):
            (base / d).mkdir()
        index_s = make_apps(env, size)
        tx = str(BIN / "tx")
        lines += [f"| **{size:,} apps** | | | |",
                  f"| tx list: the first listing after they finished (writes the index) | {index_s:.2f} s (n=1) | - | - |"]
        for label, args in (("tx list -s local_cwd (the newest 20)", []),
                            ("tx list -s local_cwd --state FAILED -n 20", ["--state", "FAILED", "-n", "20"]),
                            ("tx list -s local_cwd --json -n 100", ["--json", "-n", "100"]),
                            ("tx list -s local_cwd --all (every app printed)", ["--all"])):
            runs = [_timed([tx, "list", "-s", "local_cwd", *args], env) for _ in range(n)]
            lines.append(_row(label, runs, size, "list" if not args else ""))
        lines.append(in_process_row(env, n, size))
        lines += ui_rows(env, n, size)
        if torchx.exists():
            runs = [_timed([str(torchx), "list", "-s", "local_cwd"], dict(env, PYTHONPATH="")) for _ in range(n)]
            failed = all(r[2] != 0 and "cannot be listed" in r[3] for r in runs)
            lines.append(_row("TorchX 0.7.0: torchx list -s local_cwd" + (" (fails: keeps no record of local apps)"
                                                                           if failed else ""), runs, size, "torchx"))
        shutil.rmtree(base, ignore_errors=True)
    return lines


def verdict_lines(sizes: List[int]) -> List[str]:
    """What the rows of this checkout say against the issue's bar (first page under 1 s,
    memory bounded), from :data:`METRICS`."""
    big, small = max(sizes), min(sizes)
    m = METRICS.get
    out = ["Verdict (from the rows above):", ""]
    if m((big, "list")) is not None and m((big, "in process")) is not None:
        floor = m((big, "torchx"))
        out.append(f"- `tx list`, first page at {big:,} apps: {m((big, 'list')):.2f} s wall, of which the listing "
                   f"itself (in one process) {m((big, 'in process')):.2f} s: "
                   + ("under a second" if m((big, "in process")) < 1 else "NOT under a second")
                   + " for the listing; the wall time is mostly the interpreter's start at this load"
                   + (f" (TorchX's `torchx list`, which lists nothing, takes {floor:.2f} s)" if floor else "") + ".")
    if m((big, "ui")) is not None:
        out.append(f"- `tx ui`, first page at {big:,} apps: {m((big, 'ui')):.2f} s: "
                   + ("under a second." if m((big, "ui")) < 1 else "NOT under a second."))
    if m((big, "list rss")) is not None and m((small, "list rss")) is not None and big != small:
        out.append(f"- Memory of `tx list`'s first page: {m((small, 'list rss')):.1f} MB at {small:,} apps, "
                   f"{m((big, 'list rss')):.1f} MB at {big:,} (the apps' ids and one page; `--all` holds every app); "
                   f"`tx ui`'s server {m((small, 'ui rss')):.1f} MB and {m((big, 'ui rss')):.1f} MB.")
    return out


def keep_others(old: str) -> str:
    """The sections of other benches in ``old`` (or their placeholders)."""
    out = []
    for head in OTHERS:
        if head in old:
            sec = old[old.index(head):]
            nxt = sec.find("\n## ", 1)
            out.append(sec[:nxt if nxt > 0 else len(sec)].rstrip() + "\n")
        else:
            out.append(f"{head}\n\n{PLACEHOLDER[head]}\n")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--before", default="", help="also measure this commit's code (a before/after)")
    ap.add_argument("--torchx", default=str(TORCHX), help="TorchX 0.7.0's torchx (bench/run.py --setup-only)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = REPO / "bench" / ".work" / "scale"
    work.mkdir(parents=True, exist_ok=True)
    git, load0 = git_state(), load_avg()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = ["| case | wall time: median (range) | peak RSS (median) / size | exit |", "| --- | --- | --- | --- |"]
    now_rows = measure(sizes, args.n, None, work, Path(args.torchx))
    verdict = verdict_lines(sizes)
    before_rows = measure(sizes, args.n, args.before, work, Path("/nonexistent")) if args.before else []
    load1 = load_avg()
    cpus = os.cpu_count()
    old = Path(args.out).read_text() if Path(args.out).exists() else ""
    text = [
        "# Bench: tx at 10,000 apps (issue 40)",
        "",
        f"Stamp: commit {git['commit'][:12]} (tree dirty: {git['dirty']}), {date}, load average before {load0}, "
        f"after {load1}, n={args.n}, `python bench/scale_bench.py -n {args.n}"
        + (f" --before {args.before}" if args.before else "") + "`.",
        "",
        "## `tx list` and `tx ui` at 1,000 and 10,000 apps",
        "",
        f"Measured {date} on {cpus} CPUs shared with other work (load average {load0} before, {load1} after: the "
        "wall times carry that load; the RSS does not). Apps: one real local_cwd run copied as the scheduler "
        "writes them (`tx_scheduler_local._clone`), every tenth FAILED. Each row n="
        f"{args.n}: median (range) of the wall time, median of the peak RSS (`ru_maxrss`; `tx ui`: the server's "
        "VmHWM). The RSS of a `tx list` with no apps at all is the interpreter and tx's imports (about 25 MB).",
        "",
        "TorchX 0.7.0 cannot do this work: its local_cwd scheduler keeps no record of apps "
        "(`LocalScheduler.list` raises \"App handles cannot be listed for local scheduler as they are not "
        "persisted by torchx\"), so its row is the time to that error; TorchX has no web UI. Slurm: not measured "
        "here (10,000 apps on the private cluster need `MaxArraySize` raised and hours of this shared machine: "
        "`tx list -s slurm` is one `squeue` and one `sacct` whatever the count, bench/RESULTS-sweeps.md at 1,000).",
        "",
        *head, *now_rows, "", *verdict, "",
    ]
    if before_rows:
        text += [f"### The same at commit {args.before[:12]} (before paging), for comparison", "", *head, *before_rows, ""]
    text += [keep_others(old)]
    Path(args.out).write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
