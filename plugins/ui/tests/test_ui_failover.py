"""A run with failover in ``tx ui`` (issue 41, item 5): one row under the run handle on the
apps page, whichever of its schedulers the page lists, and the run's page shows its own hops
(their handles, schedulers, why tx left each), with the live hop's record; a real run over
local_cwd then local_dir, its first hop's supervisor SIGKILLed."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from urllib.parse import quote

from tx_scheduler_local.scheduler import create_cwd_scheduler
from tx_ui.testing import serve

JOB = 'if [ -e ran ]; then echo "on the next hop"; exit 0; fi\ntouch ran\nexec sleep 300\n'


def _until(what, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return got


def _rows(page: str):
    return re.findall(r'<tr class="app" data-handle="([^"]+)" data-state="(\w+)">', page)


def _run_over_two_schedulers(txm, ui_env) -> tuple:
    """A run that went from local_cwd to local_dir: its handle and its record."""
    work = Path(ui_env["TX_UI_TEST_WORK"])
    state = Path(ui_env["TX_STATE_DIR"])
    (work / "job.sh").write_text(JOB)
    p = txm("run", "--detach", "-s", "local_cwd", "-cfg", "infra_retries=0", "--fallback", "local_dir",
            "--name", "twohops", "utils.sh", "--image", ".", "--", "sh", "job.sh")
    assert p.returncode == 0, p.stderr
    run = p.stdout.splitlines()[0]
    path = state / "runs" / f"{run.rsplit('/', 1)[1]}.json"
    _until(lambda: (work / "ran").exists())
    first = json.loads(path.read_text())["hops"][0]["app_id"]
    os.kill(create_cwd_scheduler("tx", state_dir=str(state)).describe(first).metadata["supervisor_pid"],
            signal.SIGKILL)

    def done():
        assert txm("status", run).returncode == 0
        rec = json.loads(path.read_text())
        return rec if rec["final"] else None
    rec = _until(done, 90)
    assert rec["final"] == "SUCCEEDED" and [h["scheduler"] for h in rec["hops"]] == ["local_cwd", "local_dir"], rec
    return run, rec


def test_a_run_is_one_row_and_its_page_shows_its_own_hops(ui_env, txm):
    run, rec = _run_over_two_schedulers(txm, ui_env)
    hops = [f"{h['scheduler']}://tx/{h['app_id']}" for h in rec["hops"]]
    other = txm("run", "-s", "local_dir", "utils.echo", "--image", ui_env["TX_UI_TEST_WORK"], "--msg", "x")
    assert other.returncode == 0, other.stderr
    with serve(ui_env, "-s", "local_cwd,local_dir", "--timeout", "5") as ui:
        for scheduler in ("", "local_cwd", "local_dir"):
            rows = _rows(ui.get("/", scheduler=scheduler)[1] if scheduler else ui.get("/")[1])
            handles = [h for h, _ in rows]
            assert handles.count(run) == 1 and not set(hops) & set(handles), (scheduler, rows)
            assert (run, "SUCCEEDED") in rows
        page = ui.get("/")[1]
        assert f'href="/app?handle={quote(run, safe="/")}">twohops [local_cwd -&gt; local_dir]</a>' in page, page
        status, page = ui.get("/app", handle=run)
        assert status == 200
        shown = re.findall(r'<tr class="hop" data-handle="([^"]*)">', page)
        assert shown == hops, (shown, hops)  # this run's hops, oldest first, and none other
        assert "local_cwd: FAILED (infra: " in page and "-&gt; local_dir: SUCCEEDED" in page
        # what the live hop's scheduler keeps of it: its replicas' attempts
        assert 'id="timeline"' in page, page
