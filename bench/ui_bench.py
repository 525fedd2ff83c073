#!/usr/bin/env python3
"""tx ui's benchmark: the apps page with 1,000 apps, its first paint in chromium, and a
200,000-line log streamed to the page without loss.

    python bench/ui_bench.py            # prints the results as markdown (bench/RESULTS-ui.md)
    python bench/ui_bench.py -n 5 --apps 1000 --lines 200000

Everything runs against a private state directory: one local_cwd app run for real, copied
to make ``--apps`` apps (as tests/test_cli_list_gc.py does; every tenth one FAILED), then a
real ``tx ui -s local_cwd`` (tx_ui.testing.serve). The browser rows use Debian's headless
chromium through chromedriver (selenium), as the plugin's browser tests do.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from tx_ui._backend import PAGE_SIZE
from tx_ui.testing import json_lines, serve

BIN = Path(sys.executable).parent


def _tx(env: Dict[str, str], *args: str) -> str:
    p = subprocess.run([str(BIN / "tx"), *args], env=env, capture_output=True, text=True, timeout=600)
    if p.returncode not in (0, 1):
        raise SystemExit(f"tx {' '.join(args)} failed: {p.stderr}")
    return p.stdout.strip()


def make_apps(env: Dict[str, str], n: int) -> None:
    """``n`` apps in the state directory: one real run, copied."""
    handle = _tx(env, "run", "-s", "local_cwd", "utils.echo", "--msg", "hi").splitlines()[0]  # the job's output follows
    apps = Path(env["TX_STATE_DIR"]) / "local" / "apps"
    src = apps / handle.rsplit("/", 1)[1]
    now = time.time()
    for i in range(n - 1):
        dst = apps / f"bench-{i:05d}"
        shutil.copytree(src, dst)
        summary = json.loads((dst / "summary.json").read_text())
        summary.update(app_id=dst.name, app_name=f"bench{i}", submitted=now - 60 * i - 120)
        (dst / "summary.json").write_text(json.dumps(summary))
        state = json.loads((dst / "state.json").read_text())
        state.update(app_id=dst.name, ended=now - 60 * i - 100)
        if i % 10 == 0:
            state["state"] = "FAILED"
        (dst / "state.json").write_text(json.dumps(state))


def chromium():
    """A headless chromium (selenium), or None where it is not installed."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='tx-ui-bench-chromium-')}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="rounds per measurement")
    ap.add_argument("--apps", type=int, default=1000)
    ap.add_argument("--lines", type=int, default=200_000)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="tx-ui-bench-"))
    env = dict(os.environ, TX_STATE_DIR=str(work / "state"), HOME=str(work), TMPDIR=str(work / "tmp"))
    env.pop("TXCONFIG", None)
    (work / "tmp").mkdir()
    rows: List[str] = []
    try:
        make_apps(env, args.apps)
        log_app = _tx(env, "run", "-s", "local_cwd", "utils.python", "-c",
                      f"import sys\nfor i in range({args.lines}): sys.stdout.write(f'line {{i}} of the log\\n')").splitlines()[0]
        shown = min(args.apps + 1, PAGE_SIZE)
        with serve(env, "-s", "local_cwd") as ui:
            t0 = time.perf_counter()
            status, page = ui.get("/")
            first = time.perf_counter() - t0
            # the apps page shows one page of PAGE_SIZE apps (paged on the server since issue 40)
            assert status == 200 and page.count('<tr class="app"') == shown, page[:500]
            times = []
            for _ in range(args.n):
                t0 = time.perf_counter()
                ui.get("/")
                times.append(time.perf_counter() - t0)
            rows.append(f"| apps page over HTTP, {args.apps + 1} apps ({shown} shown), first request | 1 | {first:.3f} s |")
            rows.append(f"| apps page over HTTP, {args.apps + 1} apps ({shown} shown), later requests | {args.n} | "
                        f"{statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f}) |")

            times, counts = [], []
            for _ in range(args.n):
                t0 = time.perf_counter()
                lines = json_lines(ui.events("/events/log", timeout=600, handle=log_app, role="python", replica=0,
                                             follow=0))
                times.append(time.perf_counter() - t0)
                counts.append(len(lines) == args.lines and lines[-1] == f"line {args.lines - 1} of the log\n"
                              and all(line == f"line {i} of the log\n" for i, line in enumerate(lines)))
            rows.append(f"| log of {args.lines:,} lines over SSE (HTTP client), all in order | {args.n} | "
                        f"{statistics.median(times):.3f} s (min {min(times):.3f}); lossless: {all(counts)} |")

            browser = chromium()
            if browser is None:
                rows.append("| chromium rows | - | not measured: chromium/chromedriver or selenium missing |")
            else:
                try:
                    paints, loads, responses = [], [], []
                    for _ in range(args.n):
                        browser.get(ui.url)
                        # chromium may record the paint entry a frame after the load event
                        # that browser.get waits for: wait for it rather than read nothing
                        paint, deadline = None, time.monotonic() + 10
                        while paint is None and time.monotonic() < deadline:
                            paint = browser.execute_script(
                                "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                                "return p ? p.startTime : null")
                            if paint is None:
                                time.sleep(0.02)
                        assert paint is not None, "chromium recorded no first-contentful-paint in 10 s"
                        nav, response = browser.execute_script(
                            "const n = performance.getEntriesByType('navigation')[0];"
                            "return [n.loadEventEnd, n.responseEnd]")
                        responses.append(response / 1000)
                        assert len(browser.find_elements("css selector", "tr.app")) == shown
                        paints.append(paint / 1000)
                        loads.append(nav / 1000)
                    rows.append(f"| apps page in chromium, {args.apps + 1} apps ({shown} shown): first contentful paint | {args.n} | "
                                f"{statistics.median(paints):.3f} s (max {max(paints):.3f}) |")
                    rows.append(f"| apps page in chromium: the HTML received (responseEnd) | {args.n} | "
                                f"{statistics.median(responses):.3f} s |")
                    rows.append(f"| apps page in chromium: load event | {args.n} | {statistics.median(loads):.3f} s |")
                    times, ok = [], []
                    for _ in range(max(1, args.n // 2)):
                        t0 = time.perf_counter()
                        browser.get(ui.link("/app", handle=log_app))
                        deadline = time.monotonic() + 600
                        while browser.execute_script("return document.getElementById('log').dataset.done") != "1":
                            assert time.monotonic() < deadline
                            time.sleep(0.05)
                        times.append(time.perf_counter() - t0)
                        got = browser.execute_script(
                            "const t = document.getElementById('log').textContent.split('\\n');"
                            "return [t.length - 1, t[0], t[t.length - 2],"
                            " t.slice(0, -1).every((l, i) => l === 'line ' + i + ' of the log')]")
                        ok.append(got[0] == args.lines and got[3])
                    rows.append(f"| log of {args.lines:,} lines into the page (chromium), to the last line | {len(times)} | "
                                f"{statistics.median(times):.3f} s; every line, in order: {all(ok)} |")
                finally:
                    browser.quit()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    print("| what | n | result |\n| --- | --- | --- |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
