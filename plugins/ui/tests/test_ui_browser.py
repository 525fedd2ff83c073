"""`tx ui` in a real browser: Debian's headless chromium driven through its chromedriver
(selenium; no browser is downloaded). Local apps appear and update without a reload; a
running app's log lines arrive live, in order, none lost (compared with `tx log`); a failed
DDP app shows its root cause; cancel from the page (after it asks) ends the app; a request
without the token is refused; a sweep's trials, their states and the plot of the metric they
recorded, and cancel of all its trials. Screenshots of the pages go to $TX_UI_SCREENSHOTS (default: a
temporary directory, printed), the test artifacts CI keeps."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from tx.testing.backends import require_module
from tx_ui.testing import serve

webdriver = require_module("selenium.webdriver", "the browser tests drive chromium: pip install selenium")
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402 - after the check above
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

pytestmark = pytest.mark.slow

#: a DDP app (torchrun, 2 workers) whose rank 1 fails in its third step
DDP_SCRIPT = '''\
import os
import time


def train_step(step, rank):
    if rank == 1 and step == 3:
        raise RuntimeError(f"loss is NaN at step {step} (simulated)")


for step in range(1, 5):
    train_step(step, int(os.environ["RANK"]))
    time.sleep(0.1)
'''


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go."""
    d = Path(os.environ.get("TX_UI_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    print(f"tx ui screenshots: {d}")
    return d


def wait_for(what: Callable[[], object], timeout: float = 30, message: str = "") -> object:
    """``what()`` once it is truthy, polling every 0.1 s."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message or what}")
        time.sleep(0.1)


def _js(browser, script: str):
    return browser.execute_script(script)


def _text(browser, element_id: str) -> str:
    """The text of element ``element_id`` now (the live parts of a page are re-rendered:
    a selenium element found earlier may be gone)."""
    return browser.execute_script(f"const e = document.getElementById('{element_id}'); return e ? e.textContent : ''")


def test_a_request_without_the_token_is_refused(browser, ui):
    browser.get(ui.base + "/")
    assert "needs the token" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(ui.base + "/static/ui.js")
    assert "needs the token" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(ui.url)
    assert browser.title == "tx ui: apps"


def test_local_apps_appear_and_new_ones_arrive_without_a_reload(browser, ui, txm, handle, shots):
    ok = handle(txm("run", "-s", "local_cwd", "utils.echo", "--msg", "hello"))
    bad = handle(txm("run", "-s", "local_cwd", "utils.sh", "sh", "-c", "exit 3"))
    browser.get(ui.url)
    states = _states(browser)
    assert states[ok] == "SUCCEEDED" and states[bad] == "FAILED"
    # each state in its colour (ui.css): a failed app's badge is not a succeeded one's
    colours = _js(browser, "return ['SUCCEEDED', 'FAILED'].map(s => getComputedStyle(document.querySelector("
                           "`tr.app[data-state=\"${s}\"] .state`)).backgroundColor)")
    assert colours[0] != colours[1] and "rgba(0, 0, 0, 0)" not in colours, colours
    _js(browser, "window.notReloaded = true")
    new = handle(txm("run", "--detach", "-s", "local_cwd", "utils.sh", "sleep", "2"))
    try:
        wait_for(lambda: new in _states(browser), message="the new app's row")
        wait_for(lambda: _states(browser)[new] == "SUCCEEDED", message="the new app to succeed on the page")
        assert _js(browser, "return window.notReloaded") is True
        # the count line, as the live update wrote it: the page's range of the apps that match
        n = len(_states(browser))
        wait_for(lambda: _text(browser, "live").startswith("live"), message="a live update")
        assert _text(browser, "count") == f"1-{n} of {n} apps"
        browser.save_screenshot(str(shots / "apps.png"))
    finally:
        txm("cancel", new)


def test_a_running_apps_log_arrives_live_in_order_none_lost(browser, ui, txm, handle, shots):
    n = 400
    h = handle(txm("run", "--detach", "-s", "local_cwd", "utils.sh", "sh", "-c",
                   f"for i in $(seq 1 {n}); do echo \"step $i loss 0.$i\"; sleep 0.01; done"))
    try:
        browser.get(ui.link("/app", handle=h))
        seen_while_running = wait_for(lambda: 0 < int(_js(browser, "return document.getElementById('log')"
                                                                   ".dataset.lines")) < n,
                                      message="lines before the app ended")
        assert seen_while_running
        browser.save_screenshot(str(shots / "app-running.png"))
        wait_for(lambda: _js(browser, "return document.getElementById('log').dataset.done") == "1", timeout=60,
                 message="the end of the log")
        text = _js(browser, "return document.getElementById('log').textContent")
        printed = txm("log", h, text=False).stdout.decode()
        assert text == "".join(line[len("sh/0 "):] for line in printed.splitlines(keepends=True))
        assert text.splitlines() == [f"step {i} loss 0.{i}" for i in range(1, n + 1)]
        # search: only the lines containing the text
        browser.find_element(By.ID, "search").send_keys("step 39")
        shown = _js(browser, "return document.getElementById('log').textContent").splitlines()
        assert shown == [f"step {i} loss 0.{i}" for i in [39, *range(390, 400)]]
    finally:
        txm("cancel", h)


def test_a_failed_ddp_app_shows_its_root_cause(browser, ui, txm, handle, shots, ui_env):
    require_module("torch", "the DDP app runs torchrun: pip install torch==2.13.0")
    script = Path(ui_env["TX_UI_TEST_WORK"]) / "train.py"
    script.write_text(DDP_SCRIPT)
    p = txm("run", "-s", "local_cwd", "dist.ddp", "-j", "1x2", "--script", str(script), timeout=300)
    h = handle(p)
    why = json.loads(txm("status", "--json", h).stdout)["root_cause"]["text"]
    assert why.startswith("train/0 rank 1: RuntimeError: loss is NaN at step 3 (simulated) at train.py:"), why
    browser.get(ui.link("/app", handle=h))
    assert _text(browser, "state") == "FAILED"
    assert _text(browser, "why") == f"why it failed: {why}"
    assert not browser.find_element(By.ID, "cancel").is_enabled()
    wait_for(lambda: _js(browser, "return document.getElementById('log').dataset.done") == "1",
             message="the failed app's log")
    assert "RuntimeError: loss is NaN at step 3" in _js(browser, "return document.getElementById('log').textContent")
    browser.save_screenshot(str(shots / "app-failed.png"))


def test_cancel_from_the_page_asks_first_then_ends_the_app(browser, ui, txm, handle):
    h = handle(txm("run", "--detach", "-s", "local_cwd", "utils.sh", "sleep", "300"))
    try:
        browser.get(ui.link("/app", handle=h))
        wait_for(lambda: _text(browser, "state") == "RUNNING", message="RUNNING")
        browser.find_element(By.ID, "cancel").click()
        alert = wait_for(lambda: _alert(browser), message="the confirmation")
        assert alert.text == f"Cancel {h}?"
        alert.dismiss()
        time.sleep(0.5)
        assert json.loads(txm("status", "--json", h).stdout)["state"] == "RUNNING"
        browser.find_element(By.ID, "cancel").click()
        wait_for(lambda: _alert(browser), message="the confirmation").accept()
        wait_for(lambda: browser.find_elements(By.ID, "message"), message="the page after cancel")
        assert _text(browser, "message") == f"asked {h} to cancel"
        wait_for(lambda: json.loads(txm("status", "--json", h).stdout)["state"] == "CANCELLED", timeout=30,
                 message="the app to be cancelled")
        wait_for(lambda: _text(browser, "state") == "CANCELLED", message="CANCELLED on the page")
    finally:
        txm("cancel", h)


def _states(browser) -> dict:
    """``{handle: state}`` of the apps table now (read at once: the live table is re-rendered)."""
    return dict(_js(browser, "return Array.from(document.querySelectorAll('tr.app'))"
                             ".map(r => [r.dataset.handle, r.dataset.state])"))


def _alert(browser):
    try:
        return browser.switch_to.alert
    except NoAlertPresentException:
        return None


#: a sweep trial: records loss = |x - 2.5| in the configured tracker, and fails for x=3
TRIAL = ("import sys; from tx.tracker import app_run_from_env; app_run_from_env().add_metadata(loss=abs(${x} - 2.5), "
         "steps=${x} * 10); sys.exit(1 if ${x} == 3 else 0)")


@pytest.fixture(scope="module")
def tracked(ui_env, tmp_path_factory):
    """``(env, server)``: the module's environment with the file tracker, and a ``tx ui`` over it
    (the page reads the trials' metrics from the tracker its own environment configures)."""
    env = {**ui_env, "TX_TRACKERS": "file", "TX_TRACKER_FILE_CONFIG": str(tmp_path_factory.mktemp("runs"))}
    with serve(env, "-s", "local_cwd", "--timeout", "5") as server:
        yield env, server


def _tx(env, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([shutil.which("tx", path=env["PATH"]), *args], env=env, cwd=env["TX_UI_TEST_WORK"],
                          text=True, capture_output=True, timeout=120)


def test_a_sweeps_trials_states_and_the_plot_of_their_metric(browser, tracked, shots):
    env, server = tracked
    p = _tx(env, "sweep", "-s", "local_cwd", "--grid", "x=1,2,3,4", "--wait", "utils.python", "-c", TRIAL)
    sweep = p.stdout.splitlines()[0]
    assert sweep.startswith("local_cwd://tx/sweep-"), p.stdout + p.stderr
    trials = json.loads(_tx(env, "status", "--json", sweep).stdout)["trials"]
    # the apps page: the sweep is one row, with its trial counts, linking to its page
    browser.get(server.url)
    row = browser.find_element(By.CSS_SELECTOR, f'tr.app[data-handle="{sweep}"]')
    assert row.get_attribute("data-state") == "FAILED"
    assert "[sweep of 4: 3 succeeded, 1 failed]" in row.text
    assert not set(t["app_handle"] for t in trials) & set(_states(browser))  # its trials are not rows of their own
    row.find_element(By.TAG_NAME, "a").click()
    wait_for(lambda: _text(browser, "handle") == sweep, message="the sweep page")
    assert _text(browser, "state") == "FAILED"
    table = _js(browser, "return Array.from(document.querySelectorAll('tr.trial')).map(r => [r.dataset.index, "
                         "r.dataset.state, r.dataset.handle, r.cells[1].textContent, r.cells[5].textContent])")
    assert table == [[str(t["index"]), t["state"], t["app_handle"], f"x={t['index'] + 1}", t["why"]] for t in trials]
    assert [t["state"] for t in trials] == ["SUCCEEDED", "SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert trials[2]["why"] == "replica python/0 exited with code 1"
    # the plot: one dot per trial at (x, loss), the first metric (by name) against the parameter
    assert _js(browser, "return document.getElementById('metric').value") == "loss"
    dots = _js(browser, "return Array.from(document.querySelectorAll('#plot-svg svg g.dots')).map(g => "
                        "[g.querySelector('desc.label').textContent, g.querySelector('desc.value').textContent])")
    assert dots == [[f"trial {i}: x={i + 1}", f"{i + 1}: {abs(i + 1 - 2.5):g}"] for i in range(4)]
    assert not browser.find_elements(By.CSS_SELECTOR, "#plot script[src]")  # no script from the network
    browser.save_screenshot(str(shots / "sweep.png"))
    # another metric: chosen in the page, plotted
    Select(browser.find_element(By.ID, "metric")).select_by_visible_text("steps")
    wait_for(lambda: "metric=steps" in browser.current_url, message="the page of metric steps")
    values = _js(browser, "return Array.from(document.querySelectorAll('#plot-svg desc.value')).map(d => d.textContent)")
    assert values == [f"{i + 1}: {(i + 1) * 10}" for i in range(4)]
    # a trial's link opens its app page
    browser.find_element(By.CSS_SELECTOR, 'tr.trial[data-index="2"] a.logs').click()
    wait_for(lambda: _text(browser, "handle") == trials[2]["app_handle"], message="the failed trial's app page")
    assert _text(browser, "state") == "FAILED"


def test_cancel_all_from_the_sweep_page_asks_first_then_ends_every_trial(browser, tracked):
    env, server = tracked
    p = _tx(env, "sweep", "-s", "local_cwd", "--grid", "x=1,2", "utils.sh", "--", "sh", "-c", "sleep 300 # ${x}")
    sweep = p.stdout.splitlines()[0]
    assert sweep.startswith("local_cwd://tx/sweep-"), p.stdout + p.stderr
    try:
        browser.get(server.link("/sweep", handle=sweep))
        wait_for(lambda: _text(browser, "state") == "RUNNING", message="RUNNING")
        browser.find_element(By.ID, "cancel").click()
        alert = wait_for(lambda: _alert(browser), message="the confirmation")
        assert alert.text == f"Cancel every trial of {sweep}?"
        alert.dismiss()
        assert json.loads(_tx(env, "status", "--json", sweep).stdout)["state"] == "RUNNING"
        browser.find_element(By.ID, "cancel").click()
        wait_for(lambda: _alert(browser), message="the confirmation").accept()
        wait_for(lambda: browser.find_elements(By.ID, "message"), message="the page after cancel")
        assert _text(browser, "message") == f"asked every trial of {sweep} to cancel"
        wait_for(lambda: _text(browser, "state") == "CANCELLED", timeout=30, message="CANCELLED on the page")
        states = _js(browser, "return Array.from(document.querySelectorAll('tr.trial')).map(r => r.dataset.state)")
        assert states == ["CANCELLED", "CANCELLED"]
        assert not browser.find_element(By.ID, "cancel").is_enabled()
        assert json.loads(_tx(env, "status", "--json", sweep).stdout)["counts"] == {"CANCELLED": 2}
    finally:
        _tx(env, "cancel", sweep)
