"""`tx ui` over HTTP, against a real server the test starts (tx_ui.testing.serve) and real
local_cwd apps: the token on every request, the apps as `tx list` sees them, why an app
failed as `tx status` says it, logs as `tx log` prints them (lossless, in order, resumable),
cancel behind a CSRF check, a hanging scheduler that does not block the page, a sweep as
one row and its trial table."""
from __future__ import annotations

import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import yaml

from tx.testing.backends import require_module
from tx.testing.preemption import app_pids, train_script, until
from tx_ui.testing import json_lines, request, serve

#: a log with what must survive the trip: `\r`, tabs, non-ASCII, a long line, empty lines
LOG_SCRIPT = r"""
import sys
for i in range(20000):
    sys.stdout.write(f"line {i}\tü€ \r{'x' * (i % 7)}\n")
    if i % 5000 == 0:
        sys.stdout.write("\n" + "y" * 10000 + "\n")
"""


def test_every_request_needs_the_token(ui):
    assert ui.base.startswith("http://127.0.0.1:")  # this machine only, unless --host says otherwise
    for path in ("/", "/app", "/events/apps", "/events/app", "/events/log", "/static/ui.js", "/health"):
        status, body = ui.get(path, token=False)
        assert status == 403, path
        assert "needs the token" in body
        status, _ = request(ui.link(path, token=False, token_=None).replace("token_=None", "token=wrong"))
        assert status == 403, path
    status, body = request(ui.base + "/cancel", data=b"handle=x&csrf=y")
    assert status == 403 and "needs the token" in body
    status, body = ui.get("/health")
    assert (status, body) == (200, "ok\n")
    status, body = ui.get("/health", token=False, headers={"Authorization": f"token {ui.token}"})
    assert status == 200
    # the cookie the first page view sets carries the token for the page's own requests
    status, _ = ui.get("/health", token=False, headers={"Cookie": f"tx-ui-token-{ui.base.rsplit(':', 1)[1]}={ui.token}"})
    assert status == 200
    status, _ = ui.get("/health", token=False, headers={"Cookie": f"tx-ui-token-1={ui.token}"})
    assert status == 403


def _rows(page: str):
    return re.findall(r'<tr class="app" data-handle="([^"]+)" data-state="(\w+)">', page)


def test_apps_page_shows_the_apps_newest_first_and_filters(ui, txm, handle):
    ok = handle(txm("run", "-s", "local_cwd", "utils.echo", "--msg", "hi"))
    bad = handle(txm("run", "-s", "local_cwd", "utils.sh", "sh", "-c", "exit 3"))
    status, page = ui.get("/")
    assert status == 200
    rows = _rows(page)
    assert (bad, "FAILED") in rows and (ok, "SUCCEEDED") in rows
    assert rows.index((bad, "FAILED")) < rows.index((ok, "SUCCEEDED"))
    # the same apps as `tx list`
    listed = [json.loads(line)["app_handle"] for line in txm("list", "--all", "--json").stdout.splitlines()]
    assert [h for h, _ in rows] == listed
    assert _rows(ui.get("/", state="FAILED")[1]) == [(h, s) for h, s in rows if s == "FAILED"]
    assert _rows(ui.get("/", state="active")[1]) == [(h, s) for h, s in rows if s in ("RUNNING", "PENDING")]
    assert _rows(ui.get("/", q=ok.rsplit("/", 1)[1])[1]) == [(ok, "SUCCEEDED")]
    assert "state-FAILED" in page and "no apps" in ui.get("/", q="no-such-app")[1]
    # age and duration: a finished app's duration is the one `tx list` prints (tx.durations)
    cells = dict(re.findall(r'<tr class="app" data-handle="([^"]+)".*?<td title="[^"]*">\w+</td>\s*<td>([^<]*)</td>',
                            page, re.S))
    assert _column(txm("list", "--all").stdout, "DURATION")[ok] == cells[ok] != "-"
    assert re.search(rf'data-handle="{re.escape(ok)}".*?<td title="[\d: -]+">\d+[smhd]</td>', page, re.S)


def _column(table: str, header: str) -> dict:
    """``{first cell: cell under header}`` of a table tx prints (columns two spaces apart)."""
    lines = table.splitlines()
    head = next(i for i, line in enumerate(lines) if header in line)
    at = lines[head].index(header)
    return {line.split()[0]: line[at:].split("  ")[0].strip() for line in lines[head + 1:]
            if line.strip() and not line.startswith("-")}


def test_apps_events_carry_the_table(ui, txm, handle):
    h = handle(txm("run", "-s", "local_cwd", "utils.echo", "--msg", "live"))
    events = ui.events("/events/apps", until="apps")
    data = json.loads(events[-1]["data"])
    assert h in data["rows"] and data["total"] >= 1


def test_app_page_says_why_it_failed_as_tx_status_does(ui, txm, handle):
    h = handle(txm("run", "-s", "local_cwd", "utils.python", "-c", "raise ValueError('bad learning rate')"))
    status, page = ui.get("/app", handle=h)
    assert status == 200
    why = json.loads(txm("status", "--json", h).stdout)["root_cause"]["text"]
    assert "ValueError: bad learning rate" in why
    assert re.search(r'<p class="why failed" id="why"><b>why it failed:</b> (.*)</p>', page)[1] == html.escape(why)
    # the status block is `tx status`'s text, character for character but for the Duration
    # line (its "ended Ns ago" moves with the clock; the page shows age and duration itself)
    block = re.search(r"<pre>(AppStatus:.*?)</pre>", page, re.S)[1]
    cli = "".join(ln for ln in txm("status", h).stdout.splitlines(True) if not ln.startswith("  Duration: "))
    assert html.unescape(block) == cli
    # the AppDef as `tx describe` prints it, and the commands to follow it
    assert html.unescape(re.search(r'<pre class="yaml" id="appdef">(.*?)</pre>', page, re.S)[1]) == txm("describe", h).stdout
    assert f"tx log -f {h}" in page
    assert ui.get("/app", handle="local_cwd://tx/no-such-app")[0] == 404
    assert "malformed" in ui.get("/app", handle="not a handle")[1].lower()


def test_log_stream_is_what_tx_log_prints_lossless_in_order_and_resumable(ui, txm, handle):
    h = handle(txm("run", "-s", "local_cwd", "utils.python", "-c", LOG_SCRIPT))
    events = ui.events("/events/log", handle=h, role="python", replica=0, follow=0)
    assert events[-1]["event"] == "end"
    lines = json_lines(events)
    assert json.loads(events[-1]["data"]) == {"lines": len(lines)}
    assert len(lines) == 20000 + 2 * 4
    # each event's id is the number of lines sent so far: the browser's resume point
    ids = [int(e["id"]) for e in events if e["event"] == "lines"]
    assert ids == sorted(ids) and ids[-1] == len(lines)
    printed = txm("log", h, text=False).stdout
    assert "".join("python/0 " + line for line in lines).encode() == printed
    # a browser that reconnects gets the rest, from the line after the one it had
    rest = ui.events("/events/log", headers={"Last-Event-ID": "12345"}, handle=h, role="python", replica=0,
                     follow=0)
    assert json_lines(rest) == lines[12345:]
    # one stream: this app wrote every line to stdout, none to stderr
    assert json_lines(ui.events("/events/log", handle=h, role="python", replica=0, follow=0, streams="stdout")) == lines
    stderr = ui.events("/events/log", handle=h, role="python", replica=0, follow=0, streams="stderr")
    assert (stderr[-1]["event"], json_lines(stderr)) == ("end", [])
    assert ui.get("/events/log", handle=h, role="python", streams="nope")[0] == 400
    # an app that is not there, or a handle that climbs out of tx's directories, never reaches a file
    for gone in ("local_cwd://tx/gone", "local_cwd://tx/..", "local_cwd://tx/../../etc", "local_cwd:///etc/passwd"):
        problem = ui.events("/events/log", until="problem", handle=gone, role="x", follow=0)
        assert problem[-1] == {"event": "problem", "data": f"no app {gone}"}
        assert ui.get("/app", handle=gone)[0] == 404
    # a role or replica the app does not have never reaches a file
    for role, k in (("../../../../etc", 0), ("python", 1), ("python", -1)):
        problem = ui.events("/events/log", until="problem", handle=h, role=role, replica=k, follow=0)
        assert problem[-1] == {"event": "problem",
                               "data": f"app {h} has no replica {role}/{k} (replicas: python/0-0)"}


def test_follow_streams_a_running_app_until_it_ends(ui, txm, handle):
    h = handle(txm("run", "--detach", "-s", "local_cwd", "utils.sh", "sh", "-c",
                   "for i in $(seq 1 40); do echo tick $i; sleep 0.05; done"))
    t0 = time.monotonic()
    events = ui.events("/events/log", handle=h, role="sh", replica=0, follow=1)
    assert events[-1]["event"] == "end"
    assert json_lines(events) == [f"tick {i}\n" for i in range(1, 41)]
    assert len([e for e in events if e["event"] == "lines"]) > 1, "the lines came all at once, not live"
    assert time.monotonic() - t0 >= 1.0


def test_cancel_is_a_post_with_a_csrf_check(ui, txm, handle):
    h = handle(txm("run", "--detach", "-s", "local_cwd", "utils.sh", "sleep", "300"))
    try:
        page = ui.get("/app", handle=h)[1]
        csrf = re.search(r'name="csrf" value="(\w+)"', page)[1]
        cookie = {"Cookie": f"tx-ui-token-{ui.base.rsplit(':', 1)[1]}={ui.token}"}
        body = f"handle={h}&csrf=".encode()
        assert request(ui.base + "/cancel", data=body, headers=cookie)[0] == 403
        assert request(ui.base + "/cancel", data=body + b"0" * 64, headers=cookie)[0] == 403
        good = body + csrf.encode()
        status, text = request(ui.base + "/cancel", data=good, headers={**cookie, "Origin": "http://evil.example"})
        assert (status, "another site" in text) == (403, True)
        assert json.loads(txm("status", "--json", h).stdout)["state"] == "RUNNING"
        assert ui.get("/cancel")[0] == 405  # a GET never cancels
        status, _ = request(ui.base + "/cancel", data=good, headers={**cookie, "Origin": ui.base})
        assert status == 303
        deadline = time.monotonic() + 20
        while json.loads(txm("status", "--json", h).stdout)["state"] != "CANCELLED":
            assert time.monotonic() < deadline, "the app did not end after cancel"
            time.sleep(0.2)
    finally:
        txm("cancel", h)


def test_a_hanging_scheduler_is_one_line_and_the_rest_shows(ui_env, txm, handle, tmp_path):
    """A Kubernetes API server that accepts connections and never answers."""
    require_module("tx_scheduler_k8s", "the page lists a kubernetes scheduler: pip install -e plugins/scheduler-k8s")
    h = handle(txm("run", "-s", "local_cwd", "utils.echo", "--msg", "still here"))
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{silent.getsockname()[1]}', "
        "insecure-skip-tls-verify: true}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n")
    try:
        with serve({**ui_env, "KUBECONFIG": str(kubeconfig)}, "-s", "local_cwd,kubernetes", "--timeout", "2") as server:
            for _ in range(2):  # the second view shares the call still hanging, never a new one
                # the page comes, with the one-line problem below (a hang fails at the read's timeout)
                status, page = server.get("/", timeout=30)
                assert status == 200
                assert h in page
                problems = re.findall(r'<p class="problem">(.*?)</p>', page)
                assert problems == ["could not read all of kubernetes: no answer within 2 s (none of its apps are shown)"]
            # an app of the silent scheduler: its page says so in one line within the timeout
            status, page = server.get("/app", handle="kubernetes://tx/default:train-1", timeout=30)
            assert status == 404 and '<p class="problem" id="problem">no answer within 2 s</p>' in page
    finally:
        silent.close()


def test_port_and_open_serve_there_and_open_the_printed_url(ui_env, tmp_path):
    """``--port N`` listens on N; ``--open`` hands the printed URL (token included) to the
    browser (Python's webbrowser, which runs $BROWSER: here a script that writes it down)."""
    opened = tmp_path / "opened"
    browser = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"w\").write(sys.argv[2])' {opened} %s"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with serve({**ui_env, "BROWSER": browser}, "-s", "local_cwd", "--port", str(port), "--open") as server:
        assert server.base == f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while not (opened.exists() and opened.read_text()):
            assert time.monotonic() < deadline, "--open did not open the URL"
            time.sleep(0.1)
        assert opened.read_text() == server.url and server.get("/health")[0] == 200


def test_bad_options_are_one_line(ui_env, one_line_error):
    tx = str(Path(sys.executable).parent / "tx")
    for args, needle in ((["--port", "99999"], "port number"), (["-s", "nosuch"], "unknown scheduler 'nosuch'"),
                         (["--timeout", "0"], "seconds > 0")):
        p = subprocess.run([tx, "ui", *args], env=ui_env, capture_output=True, text=True, timeout=60)
        one_line_error(p, needle, 2)


def test_app_page_has_a_timeline_of_each_replicas_attempts_and_the_run_options(ui, txm, handle):
    h = handle(txm("run", "-s", "local_cwd", "-cfg", "cancel_timeout=3,prepend_cwd=true", "utils.sh",
                   "--max_retries", "1", "sh", "-c", "sleep 0.2; exit 4"))
    page = ui.get("/app", handle=h)[1]
    # the run options it was submitted with (given and defaults), as local_cwd keeps them
    options = html.unescape(re.search(r'<pre class="yaml" id="runopts">(.*?)</pre>', page, re.S)[1])
    assert yaml.safe_load(options) == {"cancel_timeout": 3.0, "preempt_grace": 30.0, "prepend_cwd": True, "log_dir": None,
                                       "auto_set_cuda_visible_devices": False, "infra_retries": 3}
    row = re.search(r'<td class="replica">sh/0</td>(.*?)</tr>', page, re.S)[1]
    bars = re.findall(r'<span class="bar (\w+)" style="left: ([\d.]+)%; width: ([\d.]+)%"', row)
    assert [kind for kind, _, _ in bars] == ["failed", "failed"]
    assert float(bars[0][1]) == 0.0 and float(bars[1][1]) >= float(bars[0][2])  # the retry comes after
    assert "attempt 1:" in row and "exit code 4" in row
    assert re.search(r'<pre class="yaml" id="record">log_dir: ', page)


def test_app_page_shows_the_step_a_preempted_attempt_saved_and_the_next_resumed_from(ui, txm, handle, ui_env,
                                                                                     tmp_path):
    """A local_cwd app warned from outside (SIGTERM to its replica) saves, leaves and resumes:
    the page's attempts table has the saved step, how long the save took and the step the
    next attempt resumed from, the same as ``tx status --json``."""
    require_module("torch", "the preemptable job saves with tx.distributed: pip install torch==2.13.0")
    h = handle(txm("run", "--detach", "-s", "local_cwd", "-cfg", "preempt_grace=20", "utils.python", "--script",
                   str(train_script(tmp_path))))
    app_id = h.rsplit("/", 1)[1]
    out = Path(ui_env["TMPDIR"]) / f"tx-{os.getuid()}" / "tx" / app_id / "python" / "0" / "stdout.log"
    until(lambda: out.exists() and "started grace" in out.read_text())
    (pid,) = app_pids(app_id, "TX_REPLICA_ID=0")
    os.kill(pid, signal.SIGTERM)
    until(lambda: json.loads(txm("status", "--json", h).stdout)["state"] == "SUCCEEDED", every=0.3)
    attempts = json.loads(txm("status", "--json", h).stdout)["attempts"]
    saved = attempts[0]["saved_step"]
    assert saved is not None and attempts[1]["resumed_step"] == saved, attempts
    page = ui.get("/app", handle=h)[1]
    rows = re.findall(r'<tr class="attempt" data-index="(\d+)">.*?<td class="saved-step">(.*?)</td>\s*'
                      r'<td class="save-seconds">(.*?)</td>\s*<td class="resumed-step">(.*?)</td></tr>', page, re.S)
    assert rows == [("0", str(saved), "%g s" % attempts[0]["save_seconds"], ""), ("1", "", "", str(saved))], page


RECORD = """
from tx.tracker import app_run_from_env
run = app_run_from_env()
run.add_metadata(lr=0.05, optimizer={"name": "sgd"})
run.add_artifact("model", "/models/m.pt", {"accuracy": 0.97})
"""


def test_tracking_pages_show_runs_metadata_artifacts_and_lineage(ui_env, txm, handle, tmp_path):
    env = {**ui_env, "TX_TRACKERS": "file", "TX_TRACKER_FILE_CONFIG": str(tmp_path / "runs")}
    with serve(ui_env, "-s", "local_cwd") as server:
        assert "no tracker is configured" in server.get("/tracking")[1]
    tx = str(Path(sys.executable).parent / "tx")

    def run(*args: str) -> str:
        p = subprocess.run([tx, "run", "-s", "local_cwd", *args], env=env, capture_output=True, text=True,
                           timeout=120, cwd=ui_env["TX_UI_TEST_WORK"])
        return handle(p)

    parent = run("utils.python", "-c", RECORD)
    child = run("--parent_run_id", parent, "utils.python", "-c", RECORD)
    with serve(env, "-s", "local_cwd") as server:
        status, page = server.get("/tracking")
        assert status == 200
        assert {parent, child} <= set(re.findall(r'run=[^"]+">([^<]+)</a>', page))
        page = server.get("/tracking/run", run=parent)[1]
        assert re.search(r"<td>lr</td><td><code>0.05</code></td>", page)
        assert "<td>model</td><td><code>/models/m.pt</code></td>" in page
        assert html.unescape(re.search(r'children \(runs that consumed it\)</h3>\s*<div class="node child">'
                                       r'<a [^>]*>([^<]+)</a>', page)[1]) == child
        page = server.get("/tracking/run", run=child)[1]
        assert html.unescape(re.search(r'parents \(runs it consumed\)</h3>\s*<div class="node parent">'
                                       r'<a [^>]*>([^<]+)</a>', page)[1]) == parent


def test_a_sweep_is_one_row_and_its_page_shows_the_trials_as_tx_status(ui, txm):
    p = txm("sweep", "-s", "local_cwd", "--grid", "x=0,1", "--wait", "utils.sh", "--", "sh", "-c", "exit ${x}")
    sweep = p.stdout.splitlines()[0]
    assert sweep.startswith("local_cwd://tx/sweep-"), p.stdout + p.stderr
    st = json.loads(txm("status", "--json", sweep).stdout)
    page = ui.get("/")[1]
    assert (sweep, "FAILED") in _rows(page)
    assert not {t["app_handle"] for t in st["trials"]} & {h for h, _ in _rows(page)}
    assert f'href="/sweep?handle={quote(sweep, safe="/")}">sh [sweep of 2: 1 succeeded, 1 failed]</a>' in page
    status, page = ui.get("/sweep", handle=sweep)
    assert status == 200
    rows = re.findall(r'<tr class="trial" data-index="(\d+)" data-state="(\w+)" data-handle="([^"]+)">\s*'
                      r'<td>\d+</td><td><code>([^<]*)</code></td>.*?<td class="err">([^<]*)</td>', page, re.S)
    assert rows == [(str(t["index"]), t["state"], t["app_handle"], f"x={t['index']}", t["why"]) for t in st["trials"]]
    assert st["trials"][1]["why"] == "replica sh/0 exited with code 1"
    # each trial's duration as `tx status SWEEP` prints it (one formatter: tx.durations)
    durations = re.findall(r'<tr class="trial" data-index="(\d+)".*?</td><td>\d+</td><td>([^<]*)</td>', page, re.S)
    assert dict(durations) == _column(txm("status", sweep).stdout, "DURATION")
    assert all(d.endswith(" s") for _, d in durations), durations
    assert "no tracker is configured, so no metric to plot" in page  # this server has none
    # the page's live updates: the plot only where it differs from the one the page shows (its
    # choices are not replaced under a person choosing a metric); an unknown digest gets it
    from urllib.parse import parse_qsl, urlsplit

    url = html.unescape(re.search(r'<section id="sweep" data-events="([^"]+)"', page).group(1))
    events = ui.events("/events/sweep", **dict(parse_qsl(urlsplit(url).query)))
    assert [e["event"] for e in events] == ["sweep", "end"]
    assert json.loads(events[0]["data"])["terminal"] is True and "plot" not in json.loads(events[0]["data"])
    events = ui.events("/events/sweep", handle=sweep)
    assert [e["event"] for e in events] == ["sweep", "end"]
    assert "no tracker is configured, so no metric to plot" in json.loads(events[0]["data"])["plot"]
    status, page = ui.get("/sweep", handle="local_cwd://tx/sweep-nope-0000000a")
    assert status == 404 and "no sweep local_cwd://tx/sweep-nope-0000000a on this host" in page


def test_a_run_or_sweep_handle_with_no_record_is_never_shown_as_an_app(ui):
    # the kind follows from the handle's syntax (tx.runner.handles): no record is read to learn
    # it, and a run's or sweep's id is never asked of its scheduler as an app's
    run, sweep = "local_cwd://tx/run-gone-0123abcd", "local_cwd://tx/sweep-gone-0123abcd"
    for handle, needle in ((run, f"no run {run} on this host"), (f"{sweep}/2", f"no sweep {sweep} on this host"),
                           (sweep, f"{sweep} is a sweep: its page is /sweep?handle=")):
        status, body = ui.get("/app", handle=handle)
        assert status == 404, (handle, status)
        assert needle in html.unescape(body), handle
        assert "does not know it" not in body
    assert f"no sweep {sweep} on this host" in html.unescape(ui.get("/sweep", handle=sweep)[1])
    assert "local_cwd://tx/app-1 is not a sweep's handle" in html.unescape(ui.get("/sweep", handle="local_cwd://tx/app-1")[1])
