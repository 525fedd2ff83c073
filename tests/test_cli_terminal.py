"""`tx run` in a real terminal, as a person sees it: a tmux pane (its own tmux server),
keys sent, the screen captured. The live status line, Ctrl-C (cancel, detach)."""
from __future__ import annotations

import re

import pytest

NOISY = """\
import signal, time
def dying(signum, frame):
    raise RuntimeError("SignalException: process got signal 15 (the replica's dying noise)")
signal.signal(signal.SIGTERM, dying)
print("training", flush=True)
time.sleep(120)
"""


@pytest.fixture
def pane(terminal, tx_env, tmp_path):
    return terminal(tx_env, tmp_path)


def _lines(screen: str) -> list:
    return [ln.rstrip() for ln in screen.splitlines() if ln.strip()]


def test_live_line_shows_state_and_time_while_quiet_and_never_garbles_the_logs(pane):
    pane.send("tx run -s local_cwd utils.sh sh -c 'echo start; sleep 3; echo end'", "Enter")
    s = pane.wait_for(lambda s: re.search(r"^tx run: RUNNING [12] s  \(Ctrl-C cancels\)$", s, re.M))
    assert _lines(s)[-2] == "sh/0 start", s
    s = pane.wait_for(lambda s: "tx run: SUCCEEDED" in s)
    lines = _lines(s)
    # the live line was erased before each relayed line and at the end: no trace of it
    assert lines[1:4] == [lines[1], "sh/0 start", "sh/0 end"] and lines[1].startswith("local_cwd://tx/sh-"), s
    assert lines[4].startswith("tx run: SUCCEEDED after ") and "RUNNING" not in s, s


def test_no_live_line_when_stderr_is_not_a_terminal(pane, tmp_path):
    pane.send("tx run -s local_cwd utils.sh sh -c 'sleep 2.5; echo done' 2>err.txt; echo rc=$?", "Enter")
    s = pane.wait_for(lambda s: re.search(r"^rc=\d+$", s, re.M))
    assert "rc=0" in s and "RUNNING" not in s
    err = (tmp_path / "err.txt").read_text()
    assert "\r" not in err and "\x1b" not in err and err.startswith("tx run: SUCCEEDED"), err


def test_ctrl_c_cancels_in_one_plain_line_and_keeps_the_dying_noise_in_the_logs(pane, tx, tmp_path):
    (tmp_path / "noisy.py").write_text(NOISY)
    pane.send("tx run -s local_cwd utils.python --script noisy.py; echo rc=$?", "Enter")
    pane.wait_for(lambda s: "python/0 training" in s)
    pane.send("C-c")
    s = pane.wait_for(lambda s: re.search(r"^rc=\d+$", s, re.M))
    lines = _lines(s)
    handle = lines[1]
    assert lines[2:] == ["python/0 training",
                         f"tx run: cancelled {handle} (Ctrl-C); its logs: `tx log {handle}`",
                         "rc=130", "$"], s
    assert "State: CANCELLED" in tx("status", handle).stdout
    assert "SignalException" in tx("log", handle).stdout  # the noise is kept, in the logs


def test_ctrl_c_with_on_interrupt_detach_leaves_the_app_running(pane, tx, tmp_path):
    (tmp_path / "noisy.py").write_text(NOISY)
    pane.send("tx run -s local_cwd --on_interrupt detach utils.python --script noisy.py; echo rc=$?", "Enter")
    s = pane.wait_for(lambda s: re.search(r"\(Ctrl-C detaches\)$", s, re.M))
    pane.send("C-c")
    s = pane.wait_for(lambda s: re.search(r"^rc=\d+$", s, re.M))
    lines = _lines(s)
    handle = lines[1]
    assert lines[-6:] == [f"tx run: detached (Ctrl-C); {handle} keeps running; to follow it:",
                          f"  tx status {handle}", f"  tx log -f {handle}", f"  tx cancel {handle}", "rc=0", "$"], s
    assert "State: RUNNING" in tx("status", handle).stdout
    assert tx("cancel", handle).returncode == 0
