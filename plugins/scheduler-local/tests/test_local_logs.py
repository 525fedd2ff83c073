"""log_iter / log_iter_blocks: streams, regex, tail, time windows, and lossless relay; combined.log
around lines over 8 MiB; `tx run | head` and `tx log` of logs that are gone."""
import datetime as dt
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from tx.specs import AppDef, AppState, Role, UnknownAppException
from tx_scheduler_local import _relay
from tx_scheduler_local.scheduler import create_cwd_scheduler

GEN = '''
import random, sys
random.seed(int(sys.argv[1]))
n = int(sys.argv[2])
out, err = sys.stdout.buffer, sys.stderr.buffer
bufs = {1: b"", 2: b""}
for i in range(n):
    fd = 2 if i % 4 == 3 else 1
    text = "x" * random.randint(0, 120)
    cr = "\\r" if i % 97 == 0 else ""
    bufs[fd] += f"{fd} {i} {cr}{text} \\u00e9\\n".encode()
    if random.random() < 0.02:
        for f, stream in ((1, out), (2, err)):
            b = bufs[f]
            cut = random.randint(0, len(b))
            stream.write(b[:cut]); stream.flush()
            bufs[f] = b[cut:]
for f, stream in ((1, out), (2, err)):
    stream.write(bufs[f]); stream.flush()
'''


def test_200k_lines_relayed_without_loss(sched: Any, cfg: Dict[str, Any], tmp_path: Path, h: Any) -> None:
    gen = tmp_path / "gen.py"
    gen.write_text(GEN)
    n = 200_000
    app_id = sched.submit(AppDef("flood", roles=[Role("g", image="", entrypoint=h.py, args=[str(gen), "7", str(n)])]), cfg)
    tailed = b"".join(sched.log_iter_blocks(app_id, "g", 0, should_tail=True))
    desc = sched.wait(app_id, timeout=120)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    out, err = _gen_expected(h, gen, n)
    rdir = Path(desc.metadata["log_dir"]) / "g" / "0"
    assert (rdir / "stdout.log").read_bytes() == "".join(out).encode()
    assert (rdir / "stderr.log").read_bytes() == "".join(err).encode()
    combined = (rdir / "combined.log").read_bytes()
    assert tailed == combined
    lines = _lines(combined.decode())
    assert len(lines) == n and combined.endswith(b"\n")
    assert [line for line in lines if line.startswith("1 ")] == out
    assert [line for line in lines if line.startswith("2 ")] == err
    assert list(sched.log_iter(app_id, "g", 0)) == lines


def _gen_expected(h: Any, gen: Path, n: int) -> Tuple[List[str], List[str]]:
    """Run the generator's line logic here (no output split) to get the expected lines."""
    import subprocess

    res = subprocess.run([h.py, str(gen), "7", str(n)], capture_output=True, check=True)
    return _lines(res.stdout.decode()), _lines(res.stderr.decode())


def _lines(text: str) -> List[str]:
    return [line + "\n" for line in text.split("\n")[:-1]]


def test_streams_regex_and_blocks(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done; printf 'half\\rdone\\n'; printf 'tail'"
    app_id, desc = h.run(sched, [h.sh("r", script, 2)], cfg)
    out = list(sched.log_iter(app_id, "r", 1, streams="stdout"))
    assert out == ["out1\n", "out2\n", "out3\n", "half\rdone\n", "tail"]
    assert list(sched.log_iter(app_id, "r", 1, streams="stderr")) == ["err1\n", "err2\n", "err3\n"]
    combined = list(sched.log_iter(app_id, "r", 1))
    assert sorted(combined) == sorted(["out1\n", "out2\n", "out3\n", "half\rdone\n", "tail\n", "err1\n", "err2\n", "err3\n"])
    assert list(sched.log_iter(app_id, "r", 1, streams="combined")) == combined
    assert list(sched.log_iter(app_id, "r", 0, regex=r"^err[13]")) == ["err1\n", "err3\n"]
    assert list(sched.log_iter(app_id, "r", 0, regex="done", streams="stdout")) == ["half\rdone\n"]
    blocks = list(sched.log_iter_blocks(app_id, "r", 0, streams="stdout"))
    assert b"".join(blocks) == b"out1\nout2\nout3\nhalf\rdone\ntail"


def test_log_errors(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    app_id, _ = h.run(sched, [h.sh("r", "true", 2)], cfg)
    with pytest.raises(UnknownAppException):
        sched.log_iter("nope-123", "r", 0)
    with pytest.raises(ValueError, match="has no role 'x'"):
        sched.log_iter(app_id, "x", 0)
    with pytest.raises(ValueError, match=r"replicas 0..1, not 2"):
        sched.log_iter(app_id, "r", 2)
    with pytest.raises(ValueError, match="unknown log stream 'stdin'"):
        sched.log_iter_blocks(app_id, "r", 0, streams="stdin")
    with pytest.raises(TypeError, match="since/until"):
        list(sched.log_iter(app_id, "r", 0, since="yesterday"))


def test_tail_follows_until_the_app_ends(sched: Any, cfg: Dict[str, Any], tmp_path: Path, h: Any) -> None:
    go = tmp_path / "go"
    app_id = sched.submit(AppDef("tail", roles=[
        h.sh("r", f"echo one; while [ ! -e {go} ]; do sleep 0.02; done; echo two; echo three >&2")
    ]), cfg)
    assert list(sched.log_iter(app_id, "r", 0)) in ([], ["one\n"])  # no tail: what is there now
    lines = iter(sched.log_iter(app_id, "r", 0, should_tail=True, streams="stdout"))
    assert next(lines) == "one\n"
    go.touch()
    assert list(lines) == ["two\n"]
    assert sched.describe(app_id).state == AppState.SUCCEEDED


def test_a_follower_describes_the_app_when_its_state_changes_not_per_wake_up(
        sched: Any, cfg: Dict[str, Any], h: Any, monkeypatch: Any) -> None:
    """A follower looks at the app's state (a describe) when state.json was replaced, not at
    every wake-up: 60 lines written 10 ms apart wake it about 60 times, and it describes the
    app a handful of times (each state the supervisor records, with the time bound set
    high); it still sees the end and reads every line. Before, one describe per wake-up."""
    from tx_scheduler_local import _logs

    monkeypatch.setattr(_logs, "DONE_TTL_S", 600.0, raising=False)
    looks = []
    describe = sched.describe
    monkeypatch.setattr(sched, "describe", lambda app_id: looks.append(app_id) or describe(app_id))
    app_id = sched.submit(AppDef("trickle", roles=[
        h.sh("r", "for i in $(seq 60); do echo line $i; sleep 0.01; done")]), cfg)
    blocks = list(sched.log_iter_blocks(app_id, "r", 0, should_tail=True, streams="stdout"))
    assert b"".join(blocks) == b"".join(b"line %d\n" % i for i in range(1, 61))
    assert len(blocks) >= 20, len(blocks)  # woken (and read) once per line or few
    assert len(looks) <= 8, (len(looks), len(blocks))


def test_a_follower_sees_the_end_of_an_app_whose_supervisor_died_without_a_word(
        sched: Any, cfg: Dict[str, Any], h: Any, monkeypatch: Any) -> None:
    """The supervisor SIGKILLed writes no state file: the follower looks at the app again
    when it sees the supervisor exit (not only when the time bound passes, set high here),
    the look finalizes the app, and the follow ends with every line."""
    import os
    import signal
    import threading

    from tx_scheduler_local import _logs

    monkeypatch.setattr(_logs, "DONE_TTL_S", 600.0, raising=False)
    app_id = sched.submit(AppDef("orphan", roles=[h.sh("r", "echo up; exec sleep 300")]), {**cfg, "infra_retries": 0})
    lines = iter(sched.log_iter(app_id, "r", 0, should_tail=True))
    assert next(lines) == "up\n"
    rest: List[Any] = []
    follower = threading.Thread(target=lambda: rest.extend(lines), daemon=True)
    follower.start()
    os.kill(sched.describe(app_id).metadata["supervisor_pid"], signal.SIGKILL)
    follower.join(60)
    assert not follower.is_alive(), "the follow did not end after its supervisor died"
    assert rest == [] and sched.describe(app_id).state == AppState.FAILED


def test_unless_state_changed_looks_again_once_the_state_file_is_replaced_or_gone(tmp_path: Path) -> None:
    """The follower's end check: the last answer while state.json is the same file and the
    time bound holds; a look once it is replaced (os.replace, as the supervisor writes it),
    once it is gone, and once the bound passed."""
    from tx_scheduler_local import _inotify, _logs, _store

    answers = iter([False, False, True, True, True, True, True])
    looks = []

    def look() -> bool:
        looks.append(1)
        return next(answers)

    _store.write_json_atomic(str(tmp_path / _store.STATE), {"state": "RUNNING"})
    done = _logs.unless_state_changed(str(tmp_path), look, ttl=600.0)
    assert [done() for _ in range(50)] == [False] * 50 and len(looks) == 1
    _store.write_json_atomic(str(tmp_path / _store.STATE), {"state": "RUNNING", "n": 1})
    assert done() is False and len(looks) == 2
    _store.write_json_atomic(str(tmp_path / _store.STATE), {"state": "SUCCEEDED"})
    assert done() is True and done() is True and len(looks) == 3
    (tmp_path / _store.STATE).unlink()
    assert done() is True and done() is True and len(looks) == 5
    _store.write_json_atomic(str(tmp_path / _store.STATE), {"state": "SUCCEEDED"})
    bounded = _logs.unless_state_changed(str(tmp_path), look, ttl=0.0)
    assert bounded() is True and bounded() is True and len(looks) == 7
    sleeper = subprocess.Popen(["sleep", "60"])
    notifier = _inotify.Notifier()
    try:
        assert notifier.watch_process(sleeper.pid)
        watched = _logs.unless_state_changed(str(tmp_path), lambda: bool(looks.append(1)), notifier, ttl=600.0)
        assert watched() is False and watched() is False and len(looks) == 8
        sleeper.kill()
        assert notifier.wait(30) and notifier.exited == 1  # the process is gone: look again
        assert watched() is False and len(looks) == 9
    finally:
        sleeper.kill()
        sleeper.wait()
        notifier.close()


def test_since_and_until(sched: Any, cfg: Dict[str, Any], tmp_path: Path, h: Any) -> None:
    go = tmp_path / "go"
    app_id = sched.submit(AppDef("times", roles=[
        h.sh("r", f"echo before; echo before-err >&2; while [ ! -e {go} ]; do sleep 0.02; done; echo after")
    ]), cfg)
    lines = iter(sched.log_iter(app_id, "r", 0, should_tail=True))
    assert sorted([next(lines), next(lines)]) == ["before\n", "before-err\n"]  # both relayed
    mid = dt.datetime.now()
    go.touch()
    assert sched.wait(app_id, timeout=30).state == AppState.SUCCEEDED
    assert list(sched.log_iter(app_id, "r", 0, since=mid)) == ["after\n"]
    assert sorted(sched.log_iter(app_id, "r", 0, until=mid)) == ["before\n", "before-err\n"]
    assert list(sched.log_iter(app_id, "r", 0, until=mid, streams="stdout")) == ["before\n"]
    assert list(sched.log_iter(app_id, "r", 0, since=mid.timestamp(), streams="stderr")) == []
    assert list(sched.log_iter(app_id, "r", 0, since=mid - dt.timedelta(hours=1), regex="aft")) == ["after\n"]


def test_bad_utf8_is_replaced(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    app_id, _ = h.run(sched, [h.sh("r", "printf 'ok \\377\\376 bytes\\n'")], cfg)
    assert list(sched.log_iter(app_id, "r", 0)) == ["ok \ufffd\ufffd bytes\n"]


def _app_id(handle: str) -> str:
    return handle.rsplit("/", 1)[1]


@pytest.mark.parametrize("streams", ["2>&1", ""])
def test_tx_run_into_head_keeps_the_app_and_exits_with_its_result(tx_env, tmp_path, streams):
    script = "echo first; sleep 1; for i in $(seq 1 20000); do echo line $i; done; exit 3"
    p = subprocess.run(["bash", "-c", f'tx run -s local_cwd utils.sh sh -c "$0" {streams} | head -n 1; '
                        'echo "rc=${PIPESTATUS[0]}"', script],
                       env=tx_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    assert lines[-1] == "rc=1", (p.stdout, p.stderr)
    handle = lines[0]
    assert handle.startswith("local_cwd://")
    assert "Traceback" not in p.stderr and "Broken pipe" not in p.stderr, p.stderr
    # the app ran to its end: every line is in its log
    status = subprocess.run(["tx", "status", handle], env=tx_env, capture_output=True, text=True, timeout=60)
    assert "State: FAILED" in status.stdout and "exited with code 3" in status.stdout
    log = subprocess.run(["tx", "log", handle], env=tx_env, capture_output=True, text=True, timeout=60)
    assert log.stdout.splitlines()[-1] == "sh/0 line 20000"


def test_a_stdout_line_over_8_mib_has_no_stderr_inside_it(tmp_path):
    code = (
        "import sys, time\n"
        "for i in range(10):\n"
        "    sys.stdout.write('x' * (1 << 20)); sys.stdout.flush()\n"
        "    sys.stderr.write(f'err {i}\\n'); sys.stderr.flush()\n"
        "    time.sleep(0.05)\n"
        "sys.stdout.write('\\n'); sys.stdout.flush()\n"
        "sys.stderr.write('after\\n')\n"
    )
    s = create_cwd_scheduler("tx", state_dir=str(tmp_path / "state"))
    app_id = s.submit(AppDef("long", roles=[Role("r", image="", entrypoint=sys.executable, args=["-c", code])]),
                      {"log_dir": str(tmp_path / "logs")})
    desc = s.wait(app_id, timeout=60)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    combined = (tmp_path / "logs" / "tx" / app_id / "r" / "0" / "combined.log").read_bytes()
    lines = combined.split(b"\n")
    assert lines[-1] == b""
    long = [ln for ln in lines if ln.startswith(b"x")]
    assert len(long) == 1 and long[0] == b"x" * (10 << 20)
    others = [ln for ln in lines[:-1] if not ln.startswith(b"x")]
    assert sorted(others) == sorted([f"err {i}".encode() for i in range(10)] + [b"after"])
    assert len(lines) == 13
    # the per-stream files are untouched
    assert (tmp_path / "logs" / "tx" / app_id / "r" / "0" / "stdout.log").read_bytes() == b"x" * (10 << 20) + b"\n"


def test_tx_log_of_deleted_logs_says_so(tx, tx_env, tmp_path, one_line_error):
    p = tx("run", "-s", "local_cwd", "-cfg", f"log_dir={tmp_path / 'logs'}", "utils.echo", "--msg", "hi")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    log_file = tmp_path / "logs" / "tx" / _app_id(handle) / "echo" / "0" / "combined.log"
    # tx's detached copier makes the archive's last copy after `tx run` returns: its mark
    complete = Path(tx_env["TX_STATE_DIR"]) / "logs" / "local_cwd" / "tx" / _app_id(handle) / "complete"
    deadline = time.monotonic() + 60
    while not complete.exists():
        assert time.monotonic() < deadline, "the log archive was not completed within 60 s"
        time.sleep(0.02)
    log_file.unlink()
    archived = tx("log", handle)  # tx's log archive (docs/recovery.md) stands in, and says so
    assert archived.returncode == 0 and archived.stdout == "echo/0 hi\n", archived.stderr
    assert "reading the log from tx's log archive (the log of echo/0" in archived.stderr
    conf = tmp_path / "no-archive.txconfig"
    conf.write_text("[tx:logs]\narchive = off\n")
    tx_env["TXCONFIG"] = str(conf)  # without the archive: the backend's own error
    one_line_error(tx("log", handle), f"the log of echo/0 of {_app_id(handle)} is gone: {log_file} does not exist")
    assert tx("log", "--streams", "stdout", handle).stdout == "echo/0 hi\n"
    shutil.rmtree(tmp_path / "logs" / "tx" / _app_id(handle))
    for args in (["log", handle], ["log", f"{handle}/echo/0"]):
        one_line_error(tx(*args), f"the logs of {_app_id(handle)} are gone: {tmp_path / 'logs' / 'tx' / _app_id(handle)} does not exist")


def test_combined_log_holds_lines_of_the_other_stream_until_a_long_line_ends(tmp_path):
    """ReplicaLogs alone: the held stream closes (its last line unterminated) while the
    long line is still being written; it comes after the long line, with its \\n."""
    logs = _relay.ReplicaLogs(str(tmp_path / "r"))
    big = b"y" * (_relay._MAX_PARTIAL + 5)
    logs.write(_relay.OUT, big, 1.0)
    logs.write(_relay.ERR, b"e1\ne2", 1.0)
    logs.close_stream(_relay.ERR)
    logs.write(_relay.OUT, b"tail\nnext", 1.0)
    logs.close_stream(_relay.OUT)
    logs.close()
    combined = (tmp_path / "r" / "combined.log").read_bytes()
    assert combined == big + b"tail\n" + b"e1\ne2\n" + b"next\n"
