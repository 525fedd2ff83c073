"""`tx ui -s local_cwd,slurm` on the session's private Slurm cluster: a Slurm job shows in the
apps page beside a local app (over HTTP and in headless chromium), its page shows its replica
and the run options it was submitted with, a job that waits for it says why in the one line of
`tx status`, and cancel from the page (in the browser, after it asks) ends it."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx_ui.testing import serve

pytestmark = pytest.mark.slurm

BIN = Path(sys.executable).parent


@pytest.fixture
def env(slurm_nodes: List[str], tmp_path: Path) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    e["PATH"] = f"{BIN}{os.pathsep}{e['PATH']}"
    e["HOME"] = str(tmp_path)  # no ~/.txconfig of the developer; the state under it
    e["TMPDIR"] = str(tmp_path)
    return e


def tx(env: Dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tx"), *args], cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=300)


def test_slurm_jobs_show_beside_local_apps_and_cancel_from_the_page(env: Dict[str, str], tmp_path: Path,
                                                                   browser: Any) -> None:
    from selenium.webdriver.support import expected_conditions  # selenium: the browser fixture checked it
    from selenium.webdriver.support.ui import WebDriverWait

    local = tx(env, tmp_path, "run", "-s", "local_cwd", "utils.echo", "--msg", "hi").stdout.splitlines()[0]
    p = tx(env, tmp_path, "run", "-s", "slurm", "-cfg", f"job_dir={tmp_path / 'j'},time=10", "utils.sh", "sleep", "300")
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip()
    waiting = ""
    try:
        with serve(env, "-s", "local_cwd,slurm") as ui:
            deadline = time.monotonic() + 120
            while True:
                page = ui.get("/")[1]
                rows = dict(re.findall(r'<tr class="app" data-handle="([^"]+)" data-state="(\w+)">', page))
                if rows.get(job) == "RUNNING":
                    break
                assert time.monotonic() < deadline, rows
                time.sleep(0.5)
            assert rows[local] == "SUCCEEDED"
            assert '<p class="problem">' not in page
            assert ui.get("/", scheduler="slurm")[1].count('<tr class="app"') == sum(
                h.startswith("slurm://") for h in rows)
            page = ui.get("/app", handle=job)[1]
            assert re.search(r"<tr><td>sh</td><td>0</td><td><span class=\"state state-RUNNING\">", page), page
            runopts = html.unescape(re.search(r'<pre class="yaml" id="runopts">(.*?)</pre>', page, re.S)[1])
            assert re.search(r"^time: '?10'?$", runopts, re.M) and f"job_dir: {tmp_path / 'j'}" in runopts, runopts
            # a job that waits for the running one: its page says why as `tx status` does
            p = tx(env, tmp_path, "run", "-s", "slurm", "-cfg", f"job_dir={tmp_path / 'j'},time=10,"
                   f"dependency=afterok:{job.rsplit('/', 1)[1]}", "utils.echo", "--msg", "later")
            assert p.returncode == 0, p.stderr
            waiting = p.stdout.strip()
            status = json.loads(tx(env, tmp_path, "status", "--json", waiting).stdout)
            assert status["state"] == "PENDING" and "Dependency" in status["msg"], status
            page = ui.get("/app", handle=waiting)[1]
            why = re.search(r'<p class="why " id="why"><b>why it waits:</b> (.*)</p>', page)
            assert why and why[1] == html.escape(" ".join(status["msg"].split())), page
            # the same in the browser: both apps in the table, the job's page, cancel after it asks
            browser.get(ui.url)
            shown = dict(browser.execute_script("return Array.from(document.querySelectorAll('tr.app'))"
                                                ".map(r => [r.dataset.handle, r.dataset.state])"))
            assert (shown[job], shown[local]) == ("RUNNING", "SUCCEEDED")
            browser.get(ui.link("/app", handle=job))
            assert browser.execute_script("return document.getElementById('state').textContent") == "RUNNING"
            browser.find_element("id", "cancel").click()
            alert = WebDriverWait(browser, 30).until(expected_conditions.alert_is_present())
            assert alert.text == f"Cancel {job}?"
            alert.accept()
            message = WebDriverWait(browser, 30).until(lambda b: b.find_elements("id", "message"))
            assert message[0].text == f"asked {job} to cancel"
            while json.loads(tx(env, tmp_path, "status", "--json", job).stdout)["state"] != "CANCELLED":
                assert time.monotonic() < deadline + 60, "the Slurm job did not end after cancel"
                time.sleep(0.5)
    finally:
        tx(env, tmp_path, "cancel", job)
        if waiting:
            tx(env, tmp_path, "cancel", "--no-wait", waiting)
