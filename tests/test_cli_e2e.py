"""`tx` end to end in subprocesses, on the local scheduler: run, dryrun, detach, status,
describe, log, list, cancel, signals, AppDef files, failures."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path


BIN = Path(sys.executable).parent


def _wait_for(pred, timeout=30.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return False


def _handle(proc) -> str:
    lines = proc.stdout.strip().splitlines()
    assert lines and "://" in lines[0], proc
    return lines[0]


def test_run_echo_relays_prefixed_lines(tx, tmp_path):
    p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hello world")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("local_cwd://tx/echo-")
    assert "echo/0 hello world\n" in p.stdout


def test_replicas_stdout_to_stdout_stderr_to_stderr_and_a_pipe_gets_the_job_output(tx, tx_env, tmp_path):
    script = 'echo "accuracy=0.$TX_REPLICA_ID"; echo "warning $TX_REPLICA_ID" >&2'
    p = tx("run", "-s", "local_cwd", "utils.sh", "--num_replicas", "2", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    out, err = p.stdout.splitlines(), p.stderr.splitlines()
    assert out[0].startswith("local_cwd://tx/sh-") and sorted(out[1:]) == ["sh/0 accuracy=0.0", "sh/1 accuracy=0.1"]
    assert sorted(err[:-1]) == ["sh/0 warning 0", "sh/1 warning 1"] and err[-1].startswith("tx run: SUCCEEDED")
    # as a person types it: a shell pipe sees the job's stdout, the terminal keeps tx's own lines
    sh = subprocess.run(["bash", "-c", f"{BIN}/tx run -s local_cwd utils.sh sh -c '{script}' 2>err.txt | grep accuracy"],
                        cwd=tmp_path, env=tx_env, capture_output=True, text=True, timeout=120)
    assert sh.stdout == "sh/0 accuracy=0.0\n", sh
    assert "tx run: SUCCEEDED" in (tmp_path / "err.txt").read_text()


def test_run_ends_with_one_line_state_duration_handle_logs(tx, tmp_path):
    p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert p.returncode == 0, p.stderr
    handle, relayed = p.stdout.splitlines()
    assert relayed == "echo/0 hi"
    lines = p.stderr.splitlines()
    m = re.fullmatch(rf"tx run: SUCCEEDED after (\d+\.\d) s: {re.escape(handle)}; logs: (/\S+)", lines[-1])
    assert m and len(lines) == 1, p.stderr
    # the logs are where the line says
    assert "hi" in "".join(f.read_text() for f in Path(m.group(2)).rglob("stdout*"))


def test_run_waits_and_fails_with_status(tx, tmp_path):
    # the order is forced: replica 1 fails only once replica 0 has written its line and marked
    # it (fail-fast stops replica 0 then; without the wait it could stop replica 0 before its
    # shell ran `echo`, and the line would never be in any log)
    mark = tmp_path / "r0-wrote"
    script = (f'echo out$TX_REPLICA_ID; if [ "$TX_REPLICA_ID" = 0 ]; then touch {mark}; sleep 60; fi; '
              f'while [ ! -e {mark} ]; do sleep 0.01; done; echo err >&2; exit 3')
    p = tx("run", "-s", "local_cwd", "utils.sh", "--num_replicas", "2", "sh", "-c", script)
    assert p.returncode == 1
    assert "sh/0 out0" in p.stdout and "sh/1 out1" in p.stdout and "sh/1 err" in p.stderr, p
    # relayed once, then one summary line naming the failed replica
    assert [ln for ln in p.stderr.splitlines() if ln.endswith("err")] == ["sh/1 err"], p.stderr
    last = p.stderr.splitlines()[-1]
    assert re.fullmatch(rf"tx run: FAILED after \d+\.\d s: {re.escape(_handle(p))} "
                        r"\(replica sh/1 exited with code 3.*\); logs: /\S+", last), last


def test_run_relays_every_line_its_replicas_logged_before_a_failure_stopped_them(tx, tmp_path):
    # replica 0 writes 20,000 lines and, on the fail-fast SIGTERM, 100 more; replica 1 fails as
    # soon as replica 0's last periodic line is in replica 0's log: every byte of each log is
    # in tx run's output, in order, whatever the relay had read when the app ended
    mark = tmp_path / "r0-wrote"
    script = (
        'if [ "$TX_REPLICA_ID" = 0 ]; then '
        "trap 'seq -f bye%g 100; exit 0' TERM; "
        f"seq -f line%g 20000; touch {mark}; while :; do sleep 0.01; done; "
        f"else while [ ! -e {mark} ]; do sleep 0.01; done; exit 3; fi"
    )
    p = tx("run", "-s", "local_cwd", "utils.sh", "--num_replicas", "2", "sh", "-c", script)
    assert p.returncode == 1, p
    relayed = [ln[len("sh/0 "):] for ln in p.stdout.splitlines() if ln.startswith("sh/0 ")]
    logs = Path(re.search(r"; logs: (/\S+)$", p.stderr.splitlines()[-1]).group(1))
    written = next(logs.rglob("sh/0/stdout.log")).read_text().splitlines()
    assert written[:20000] == [f"line{i}" for i in range(1, 20001)], written[-3:]
    assert relayed == written, (len(relayed), len(written), relayed[-3:], written[-3:])


def test_shell_metacharacters_arrive_unchanged(tx, tmp_path):
    nasty = ["a;b", "$(touch pwned)", "`id`", "'q'", '"dq"', "line1\nline2", "$HOME", "", "*"]
    script = tmp_path / "argv.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    app = {"name": "argv", "roles": [{
        "name": "p", "image": str(tmp_path), "entrypoint": sys.executable,
        "args": [str(script), *nasty], "env": {"NASTY": "$(touch pwned2);x"},
    }]}
    (tmp_path / "app.json").write_text(json.dumps(app))
    p = tx("run", "-s", "local_cwd", "app.json")
    assert p.returncode == 0, p.stderr
    out = [ln[len("p/0 "):] for ln in p.stdout.splitlines() if ln.startswith("p/0 [")]
    assert json.loads(out[0]) == nasty
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_dryrun_prints_app_and_request_and_runs_nothing(tx, tx_env):
    p = tx("run", "--dryrun", "-s", "local_cwd", "dist.ddp", "-j", "2x2", "--script", "train.py")
    assert p.returncode == 0, p.stderr
    assert "=== APPLICATION ===" in p.stdout and "=== SCHEDULER REQUEST ===" in p.stdout
    app_part = p.stdout.split("=== SCHEDULER REQUEST ===")[0]
    assert "name: train" in app_part and "num_replicas: 2" in app_part
    state = Path(tx_env["TX_STATE_DIR"])
    assert not state.exists() or not any(state.rglob("*.json"))


def test_detach_then_status_log_describe_list_cancel_from_other_processes(tx, tmp_path):
    p = tx("run", "--detach", "-s", "local_cwd", "utils.sh", "--num_replicas", "2",
           "sh", "-c", "echo started; sleep 600; echo never")
    assert p.returncode == 0, p.stderr
    handle = _handle(p)
    # the next steps, each a command that works as printed
    assert p.stderr.splitlines()[1:] == [f"  tx status {handle}", f"  tx log -f {handle}", f"  tx cancel {handle}"]
    assert _wait_for(lambda: "RUNNING" in tx("status", handle).stdout)
    st = tx("status", "--json", handle)
    data = json.loads(st.stdout)
    assert data["state"] == "RUNNING" and len(data["roles"][0]["replicas"]) == 2
    assert _wait_for(lambda: "sh/1 started" in tx("log", handle).stdout)
    d = tx("describe", handle)
    assert d.returncode == 0 and "num_replicas: 2" in d.stdout
    lst = tx("list", "-s", "local_cwd")
    assert handle in lst.stdout and "RUNNING" in lst.stdout
    c = tx("cancel", handle)
    assert c.returncode == 0, c.stderr
    # it says what it did, and has waited: the app is terminal as it returns
    assert re.fullmatch(rf"tx cancel: {re.escape(handle)} is CANCELLED \(after \d+\.\d s\)\n", c.stderr), c.stderr
    assert "State: CANCELLED" in tx("status", handle).stdout
    again = tx("cancel", "--no-wait", handle)
    assert again.returncode == 0 and f"{handle} had already ended: CANCELLED" in again.stderr
    out = tx("log", handle).stdout
    assert "never" not in out and out.count("started") == 2


def test_log_follow_regex_streams_and_replica_selection(tx, tmp_path):
    p = tx("run", "-s", "local_cwd", "utils.sh", "--num_replicas", "3",
           "sh", "-c", "for i in 1 2 3; do echo out$i; echo err$i >&2; done")
    handle = _handle(p)
    out = tx("log", f"{handle}/sh/0,2", "--streams", "stdout").stdout
    assert out == "".join(f"sh/{k} out{i}\n" for k in (0, 2) for i in (1, 2, 3)) or sorted(
        out.splitlines()) == sorted(f"sh/{k} out{i}" for k in (0, 2) for i in (1, 2, 3))
    err = tx("log", f"{handle}/sh", "--streams", "stderr", "--regex", "err[13]").stdout
    assert sorted(err.splitlines()) == sorted(f"sh/{k} err{i}" for k in range(3) for i in (1, 3))
    bad = tx("log", f"{handle}/nosuchrole")
    assert bad.returncode == 1 and "no role 'nosuchrole'" in bad.stderr


def test_log_tail_n_prints_the_last_n_lines_and_tail_alone_still_follows(tx, tmp_path):
    p = tx("run", "-s", "local_cwd", "utils.sh", "sh", "-c", "for i in 1 2 3 4 5; do echo l$i; done")
    handle = _handle(p)
    for args in (["--tail", "2", handle], [handle, "--tail", "2"], ["-t", "2", handle]):
        q = tx("log", *args)
        assert q.returncode == 0 and q.stdout == "sh/0 l4\nsh/0 l5\n", (args, q.stderr)
    # TorchX's meaning: --tail (or -t) alone follows, also right before the handle
    for args in (["--tail", handle], ["-t", handle], [handle, "--tail"]):
        q = tx("log", *args)
        assert q.returncode == 0 and q.stdout.splitlines() == [f"sh/0 l{i}" for i in range(1, 6)], (args, q.stderr)


def test_sigterm_to_run_wait_cancels_and_leaves_nothing(tx_env, tmp_path):
    """SIGTERM to a waiting `tx run` cancels the app: no process of it is left (the replicas'
    shells, their background and foreground sleeps, the supervisor). This test's processes
    are found by a variable only they carry (every process tx starts inherits it), never by
    a command line that processes of other tests or users could share."""
    marker = f"tx-sigterm-{os.getpid()}-{time.time_ns()}"
    proc = subprocess.Popen(
        [str(BIN / "tx"), "run", "-s", "local_cwd", "utils.sh", "--num_replicas", "2",
         "sh", "-c", "sleep 120 & sleep 121; echo done"],
        cwd=tmp_path, env={**tx_env, "TX_TEST_MARKER": marker}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    handle = proc.stdout.readline().strip()
    assert handle.startswith("local_cwd://")
    # both replicas reached their foreground sleep (so both background sleeps run too)
    assert _wait_for(lambda: len([c for c in _procs_marked(marker).values() if c == "sleep 121"]) >= 2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, out, err)
    assert _wait_for(lambda: not _procs_marked(marker), timeout=20), _procs_marked(marker)


def _procs_marked(marker: str) -> dict:
    """{pid: command line} of the live processes whose environment has
    ``TX_TEST_MARKER=<marker>`` (zombies have no environment left)."""
    needle = f"TX_TEST_MARKER={marker}".encode()
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found[int(pid)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
    return found


def test_app_survives_a_killed_cli(tx, tx_env, tmp_path):
    proc = subprocess.Popen(
        [str(BIN / "tx"), "run", "-s", "local_cwd", "utils.sh", "sh", "-c", "sleep 2; echo survived"],
        cwd=tmp_path, env=tx_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    handle = proc.stdout.readline().strip()
    proc.kill()
    proc.wait()
    assert _wait_for(lambda: "SUCCEEDED" in tx("status", handle).stdout, timeout=60)
    assert "sh/0 survived" in tx("log", handle).stdout


def test_appdef_yaml_roundtrip_through_describe(tx, tmp_path):
    (tmp_path / "app.yaml").write_text(
        "name: two-roles\nroles:\n"
        "- name: a\n  image: .\n  entrypoint: echo\n  args: [from-a]\n"
        "- name: b\n  image: .\n  entrypoint: echo\n  args: [from-b]\n  num_replicas: 2\n"
    )
    p = tx("run", "app.yaml")
    assert p.returncode == 0, p.stderr
    assert {"a/0 from-a", "b/0 from-b", "b/1 from-b"} <= set(p.stdout.splitlines())
    d = tx("describe", "--json", _handle(p))
    roles = json.loads(d.stdout)["roles"]
    assert [(r["name"], r.get("num_replicas", 1)) for r in roles] == [("a", 1), ("b", 2)]


def test_txconfig_defaults(tx, tmp_path):
    (tmp_path / ".txconfig").write_text(
        "[cli:run]\nscheduler = local_cwd\ncomponent = utils.echo\n"
        "[component:utils.echo]\nmsg = from-config\n"
        f"[local_cwd]\nlog_dir = {tmp_path / 'logs'}\n"
    )
    p = tx("run")
    assert p.returncode == 0, p.stderr
    assert "echo/0 from-config" in p.stdout
    assert (tmp_path / "logs").is_dir()
    p = tx("run", "--", "--msg", "explicit")
    assert "echo/0 explicit" in p.stdout


def test_info_commands(tx):
    assert tx("--version").stdout.startswith("tx ")
    b = tx("builtins")
    assert b.returncode == 0 and "dist.ddp" in b.stdout and "utils.echo" in b.stdout
    r = tx("runopts", "local_cwd")
    assert "log_dir" in r.stdout and "usage:" in r.stdout
    md = tx("runopts", "local_cwd", "--format", "markdown").stdout
    assert "| `log_dir` |" in md
    pl = tx("plugins", "--json")
    names = {p["distribution"] for p in json.loads(pl.stdout)["plugins"]}
    assert {"tx-core", "tx-scheduler-local"} <= names
    c = tx("configure", "--print", "-s", "local_cwd", "-a")
    assert c.stdout.startswith("# tx configuration") and "\n[local_cwd]\n# log_dir (str, default: unset): " in c.stdout
    h = tx("run", "dist.ddp", "--help")
    assert h.returncode == 0 and "--script" in h.stdout and "(default: 1x2)" in " ".join(h.stdout.split())


def test_run_log_relays_every_line_of_every_replica_in_order(tx, tmp_path):
    n = 20000
    (tmp_path / "gen.py").write_text(
        "import os, sys\n"
        "r = os.environ['TX_REPLICA_ID']\n"
        f"for i in range({n}):\n"
        "    (sys.stdout if i % 3 else sys.stderr).write(f'replica {r} line {i} ' + 'x' * (i % 50) + '\\n')\n"
    )
    p = tx("run", "-s", "local_cwd", "--log", "utils.python", "--num_replicas", "2", "--script", "gen.py")
    assert p.returncode == 0, p.stderr[-2000:]
    for r in (0, 1):
        # lines are whole and each stream's lines keep their order, each on tx's stream of
        # the same name (stdout and stderr are two pipes: only the order within each is defined)
        for text, stream in ((p.stderr, lambda i: i % 3 == 0), (p.stdout, lambda i: i % 3 != 0)):
            mine = [ln for ln in text.splitlines() if ln.startswith(f"python/{r} ")]
            expected = [f"python/{r} replica {r} line {i} " + "x" * (i % 50) for i in range(n) if stream(i)]
            assert mine == expected


def test_log_follow_on_a_detached_app_until_it_ends(tx, tx_env, tmp_path):
    script = "for i in 1 2 3 4 5; do echo tick$i; sleep 0.3; done"
    p = tx("run", "--detach", "-s", "local_cwd", "utils.sh", "sh", "-c", script)
    handle = _handle(p)
    follow = subprocess.run([str(BIN / "tx"), "log", "-f", handle], cwd=tmp_path, env=tx_env,
                            capture_output=True, text=True, timeout=60)
    assert follow.returncode == 0, follow.stderr
    assert follow.stdout.splitlines() == [f"sh/0 tick{i}" for i in range(1, 6)]
    assert "SUCCEEDED" in tx("status", handle).stdout


def test_log_level_renders_library_events(tx, tx_env):
    quiet = tx("run", "-s", "local_cwd", "utils.echo")
    assert "launched" not in quiet.stderr  # WARNING by default
    p = tx("--log_level", "INFO", "run", "-s", "local_cwd", "utils.echo")
    assert p.returncode == 0
    line = next(ln for ln in p.stderr.splitlines() if "launched" in ln)
    assert "[info" in line and f"app_handle={_handle(p)}" in line
    env = dict(tx_env, LOGLEVEL="INFO")
    j = tx("--log_json", "run", "-s", "local_cwd", "utils.echo", env=env)
    event = json.loads(next(ln for ln in j.stderr.splitlines() if '"launched"' in ln))
    assert event["level"] == "info" and event["app_handle"] == j.stdout.splitlines()[0]


def test_two_roles_end_with_a_table_and_status_reads_without_placeholders(tx, tx_env, tmp_path):
    # the reader fails once both trainers have ended and been reaped (their pids gone), so
    # its failure does not stop them first, as it did on a loaded machine (CI, stop 46)
    d = tmp_path
    trainer = f"read pid x < /proc/self/stat; echo $pid > {d}/t-${{replica_id}}; echo ok"
    reader = (f"for f in {d}/t-0 {d}/t-1; do while [ ! -s $f ]; do sleep 0.05; done; "
              "while kill -0 $(cat $f) 2>/dev/null; do sleep 0.05; done; done; echo one >&2; echo two >&2; exit 4")
    (tmp_path / "app.yaml").write_text(
        "name: pair\nroles:\n"
        f"- name: trainer\n  image: .\n  entrypoint: sh\n  args: ['-c', '{trainer}']\n  num_replicas: 2\n"
        f"- name: reader\n  image: .\n  entrypoint: sh\n  args: ['-c', '{reader}']\n"
    )
    p = tx("run", "-s", "local_cwd", "app.yaml")
    assert p.returncode == 1, p.stderr
    handle = _handle(p)
    err = p.stderr.splitlines()
    i = err.index(next(ln for ln in err if ln.startswith("ROLE")))
    assert err[i].split() == ["ROLE", "REPLICAS", "STATE", "DURATION", "EXIT"]
    rows = {ln.split()[0]: ln.split() for ln in err[i + 2:i + 4]}
    assert rows["trainer"][1:3] == ["2", "SUCCEEDED"] and rows["trainer"][-1] == "0"
    assert rows["reader"][1:3] == ["1", "FAILED"] and rows["reader"][-1] == "4"
    assert re.fullmatch(r"\d+\.\d s", " ".join(rows["reader"][3:5])), rows
    assert err[-1].startswith("tx run: FAILED")
    st = tx("status", handle).stdout
    assert "<NONE>" not in st and "\x1b[" not in st
    assert re.search(r"^  Duration: \d+\.\d s \(ended \d+s ago\)$", st, re.M), st
    # a message of several lines is indented under its label
    msg = st[st.index("  Msg: "):].splitlines()
    assert msg[1:3] == ["       one", "       two"], st
    ok = tx("status", _handle(tx("run", "-s", "local_cwd", "utils.echo"))).stdout
    assert "<NONE>" not in ok and "Msg:" not in ok and "Structured Error Msg" not in ok, ok
    # the state in colour where asked for (as tx list), never with NO_COLOR
    assert "  State: \x1b[31mFAILED\x1b[0m" in tx("status", handle, env={**tx_env, "FORCE_COLOR": "1"}).stdout
    assert "\x1b[" not in tx("status", handle, env={**tx_env, "FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout


def test_list_colors_states_only_on_request_and_says_when_nothing_matches(tx, tx_env):
    assert tx("run", "-s", "local_cwd", "utils.echo").returncode == 0
    plain = tx("list", "-s", "local_cwd")
    assert plain.stdout.splitlines()[0].split() == ["APP", "HANDLE", "APP", "STATUS", "AGE", "DURATION", "APP", "NAME"]
    assert "\x1b[" not in plain.stdout and re.search(r"SUCCEEDED +\d+s +\d+\.\d s +echo", plain.stdout), plain.stdout
    forced = tx("list", "-s", "local_cwd", env={**tx_env, "FORCE_COLOR": "1"})
    assert "\x1b[32mSUCCEEDED\x1b[0m" in forced.stdout
    assert "\x1b[" not in tx("list", "-s", "local_cwd", env={**tx_env, "FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout
    none = tx("list", "-s", "local_cwd", "--state", "FAILED")
    assert none.returncode == 0 and none.stdout == ""
    assert none.stderr == "tx list: no apps in state FAILED on local_cwd (1 in other states)\n"
