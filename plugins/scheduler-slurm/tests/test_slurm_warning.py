"""The time limit's warning (run option ``signal``, ``sbatch --signal=USR1@60``) through each
replica's launcher, without a cluster: the launcher must not die of the signal, must pass
it on to every process below its program where Slurm signals only the launcher
(proctrack/cgroup), must not pass it on where Slurm signals every process of the step
itself (proctrack/linuxproc, pgid: ``TX_SIGNALS_REACH_ALL=1``), and records it for the batch
script. The program here is shaped like torchrun: a parent that installs no handler and a
child in a session of its own (torchrun's workers) that does. On the cluster:
test_slurm_preemption.py."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict

import pytest

from tx_scheduler_slurm._attempts import read_attempts_file
from tx_scheduler_slurm._preempt import preempted_reason, read_preempted
from tx_scheduler_slurm.request import LAUNCHER

#: a parent (no handler for USR1) whose child runs in a new session, notes each USR1 it gets
#: in GOT and exits 0 once it got one; the parent exits with the child's status
PROG = r"""
import os, signal, subprocess, sys, time
child = '''
import os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1) or open(os.environ["GOT"], "a").write("x"))
open(os.environ["UP"] + ".new", "w").write(str(os.getpid())); os.rename(os.environ["UP"] + ".new", os.environ["UP"])
deadline = time.monotonic() + 30
while not got and time.monotonic() < deadline: time.sleep(0.01)
time.sleep(0.5)  # a second USR1 (passed on twice) would be counted
sys.exit(0 if got else 3)
'''
p = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
open(os.environ["PARENT"], "w").write(str(os.getpid()))
sys.exit(p.wait())
"""


def _run(tmp_path: Path, env: Dict[str, str], to_all: bool) -> subprocess.Popen:
    up, got, parent, warn = (tmp_path / n for n in ("up", "got", "parent", "x.attempts"))
    p = subprocess.Popen(
        ["bash", "-c", LAUNCHER, "tx-launcher", str(tmp_path / "x.exitcode"), "0", sys.executable, "-c", PROG],
        start_new_session=True,
        env={**os.environ, **env, "UP": str(up), "GOT": str(got), "PARENT": str(parent),
             "TX_WARN_SIGNAL": "USR1", "TX_WARN_FILE": str(warn), "SLURM_RESTART_COUNT": "2"})
    try:
        deadline = time.monotonic() + 60
        while not (up.exists() and parent.exists()):  # the child installed its handler
            assert p.poll() is None and time.monotonic() < deadline, p.poll()
            time.sleep(0.01)
        if to_all:  # as proctrack/linuxproc: every process of the step, the deepest first
            os.kill(int(up.read_text()), signal.SIGUSR1)
            os.kill(int(parent.read_text()), signal.SIGUSR1)
        os.kill(p.pid, signal.SIGUSR1)  # the launcher (alone, as proctrack/cgroup signals)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    return p


def test_launcher_passes_the_warning_only_it_gets_to_every_process_below_its_program(tmp_path: Path) -> None:
    """proctrack/cgroup: only the launcher gets the warning. The old launcher died of it
    (SIGUSR1's default action) and the ranks never saw it; now the child in its own session
    gets it once, the parent (torchrun) is not ended by it, and the launcher records it."""
    p = _run(tmp_path, {}, to_all=False)
    assert p.returncode == 0, p.returncode
    assert (tmp_path / "got").read_text() == "x"
    assert (tmp_path / "x.exitcode").read_text() == "2 0\n"
    words = (tmp_path / "x.attempts").read_text().split()
    assert words[:3] == ["2", "warned", "USR1"] and abs(float(words[3]) - time.time()) < 60, words


def test_launcher_does_not_pass_on_a_warning_slurm_sent_every_process(tmp_path: Path) -> None:
    """proctrack/linuxproc (the session cluster's): Slurm signals every process of the step;
    the launcher records the warning but passes nothing on (the child gets one, not two),
    and the parent, started with the signal ignored, is not ended by it (the old launcher
    and the parent died of it)."""
    p = _run(tmp_path, {"TX_SIGNALS_REACH_ALL": "1"}, to_all=True)
    assert p.returncode == 0, p.returncode
    assert (tmp_path / "got").read_text() == "x"
    assert (tmp_path / "x.attempts").read_text().startswith("2 warned USR1 ")


def test_launcher_without_a_warning_signal_leaves_usr1_alone(tmp_path: Path) -> None:
    """Without the run option the launcher traps no warning, and the program gets USR1 with
    its default action (nothing ignored that the user did not ask for)."""
    p = subprocess.run(["bash", "-c", LAUNCHER, "tx-launcher", str(tmp_path / "x.exitcode"), "0",
                        "sh", "-c", "grep SigIgn /proc/self/status"], capture_output=True, text=True, timeout=60)
    same = subprocess.run(["grep", "SigIgn", "/proc/self/status"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == same.stdout, (p.stdout, same.stdout)


def test_a_warned_attempt_is_read_as_preempted_by_the_time_limit(tmp_path: Path) -> None:
    """The launchers' ``warned`` lines are not attempts; the batch script's ``preempted``
    line with a signal names the time limit's warning."""
    (tmp_path / "slurm-7.attempts").write_text(
        "0 warned USR1 1700000000.5\n0 warned USR1 1700000000.6\n0 preempted 1 1700000000.5 1700000003.0 USR1\n"
        "1 warned USR1 1700000100.0\n")
    assert read_attempts_file(str(tmp_path), "7") == {0: ("preempted", 1)}
    got = read_preempted(str(tmp_path), "slurm-7.attempts")
    assert got == {0: (1700000000.5, 1700000003.0, "USR1")}
    reason = preempted_reason("7", got[0], None)
    assert reason.startswith("preempted by its time limit (job 7 warned with SIGUSR1 at "), reason


@pytest.mark.parametrize("sig", ["TERM", "SIGINT", "15", "KILL", "NOPE"])
def test_signal_that_cannot_be_the_warning_is_refused(sig: str, tmp_path: Path) -> None:
    from tx.specs import InvalidRunConfigException

    from tx_scheduler_slurm.options import check_cfg

    with pytest.raises(InvalidRunConfigException, match="run option 'signal'"):
        check_cfg({"signal": f"{sig}@60"})
