"""What Slurm users run into (issue 18) and the exit-code race (issue 15), on the real
private test cluster where Slurm is involved: why an app waits or failed, only tx's jobs
listed and named by their app, the retry policy instead of always ``--requeue``, logs read
without slurmctld, deleted logs, run options. Why an app failed (time limit, memory, a
signal) and a hanging sacct, with and without accounting: test_slurm_why_failed.py."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from tx.schedulers.api import SchedulerError
from tx.specs import AppState, FailureKind
from tx.testing.backends import backend_unavailable
from tx_scheduler_slurm import _client, _plane
from tx_scheduler_slurm._client import SlurmError
from tx_scheduler_slurm.request import LAUNCHER

BIN = Path(sys.executable).parent


def _catches_term(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(ln.split()[1], 16) for ln in f if ln.startswith("SigCgt:"))
    return bool(mask & (1 << (signal.SIGTERM - 1)))


def test_launcher_records_a_sigterm_that_comes_before_the_program_starts(tmp_path: Path) -> None:
    """The race behind ``exit_code=None`` (issue 15): srun's --kill-on-bad-exit sends
    SIGTERM to a replica whose launcher had not yet reached the program; the launcher
    died without recording anything. Now it traps TERM first and records 143."""
    exit_file = tmp_path / "x.exitcode"
    n = 20000  # exporting these takes a while: the signal lands before the program starts
    args = ["bash", "-c", LAUNCHER, "tx-launcher", str(exit_file), str(n), *[f"V{i}=x" for i in range(n)],
            "sh", "-c", f"touch {tmp_path / 'ran'}; sleep 30"]
    p = subprocess.Popen(args, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not _catches_term(p.pid):  # the first line of the launcher ran
            assert time.monotonic() < deadline
            time.sleep(0.001)
        os.killpg(p.pid, signal.SIGTERM)  # as slurmstepd signals every process of the step
        assert p.wait(timeout=30) == 143
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert exit_file.read_text() == "0 143\n"


def test_launcher_that_outlives_its_programs_sigkill_records_slurms_kill(tmp_path: Path) -> None:
    """srun's --kill-on-bad-exit: SIGTERM to every process of the step, SIGKILL after
    KillWait. proctrack/linuxproc (the test cluster's) and pgid kill them one by one, so
    the launcher may outlive its program and record the SIGKILL (``0 137`` in 2 runs of 14
    at load 6, where the batch script recorded ``0 143 slurm`` for a killed launcher). The
    same event is now always ``0 137 slurm``; here the launcher is spared the SIGKILL."""
    exit_file, pid_file = tmp_path / "x.exitcode", tmp_path / "prog.pid"
    prog = f'trap "" TERM; echo $$ > {pid_file}.new; mv {pid_file}.new {pid_file}; exec sleep 60'
    args = ["bash", "-c", LAUNCHER, "tx-launcher", str(exit_file), "0", "sh", "-c", prog]
    p = subprocess.Popen(args, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists():  # the program runs, ignoring SIGTERM
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        os.killpg(p.pid, signal.SIGTERM)  # slurmstepd: SIGTERM to the step (the launcher traps it)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)  # after KillWait: the program first
        assert p.wait(timeout=30) == 137
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert exit_file.read_text() == "0 137 slurm\n"


def test_launcher_killed_while_writing_its_record_leaves_a_whole_one(tmp_path: Path) -> None:
    """Slurm's SIGKILL after KillWait may take the launcher in the middle of writing its
    record: proctrack/linuxproc kills the step's processes one by one, the program first,
    and under load the launcher runs between those kills (seen at load 16: 25 ms between
    the program's SIGKILL and the launcher's, 2 stubborn apps of 20). A record written in
    place was then an empty file, which the batch script took for a launcher that never ran
    (``0 143 slurm`` for a replica Slurm SIGKILLed: the [143, 3] flake of
    test_failed_replicas_get_a_status_even_when_killed_before_recording). strace forces
    that moment: the launcher is SIGKILLed at its second write to the record (its last
    record; the first is ``running``); the file must still hold a whole record (the batch
    script then records ``0 137 slurm``: test_slurm_dryrun)."""
    if shutil.which("strace") is None:
        backend_unavailable("strace", "strace is not installed (apt-get install strace; .ci/run installs it)")
    probe = subprocess.run(["strace", "-qq", "-o", "/dev/null", "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        backend_unavailable("strace", f"strace cannot trace here (ptrace refused?): {probe.stderr.strip()[:200]}")
    exit_file = tmp_path / "x.exitcode"
    p = subprocess.run(["strace", "-f", "-qq", "-o", str(tmp_path / "strace.log"), "-P", str(exit_file),
                        "-P", f"{exit_file}.new", "-e", "trace=write", "-e", "inject=write:signal=KILL:when=2",
                        "bash", "-c", LAUNCHER, "tx-launcher", str(exit_file), "0", "sh", "-c", "exit 3"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)  # killed, as forced
    assert exit_file.read_text() == "0 running\n"


def test_launcher_passes_a_sigterm_that_only_it_gets_to_the_program(tmp_path: Path) -> None:
    """Slurm's proctrack/cgroup (the why-failed clusters', most real clusters') signals only
    the task's own process with SIGTERM (``_slurm_cgroup_is_pid_a_slurm_task``: children of
    slurmstepd; the rest get only the SIGKILL after KillWait). The launcher is that process:
    it passes the SIGTERM on, so the program ends now with its own status (143), not 60 s or
    KillWait later with a SIGKILL (the launcher trapped it and waited: test fails on it)."""
    exit_file, pid_file = tmp_path / "x.exitcode", tmp_path / "prog.pid"
    prog = f"echo $$ > {pid_file}.new; mv {pid_file}.new {pid_file}; exec sleep 60"
    p = subprocess.Popen(["bash", "-c", LAUNCHER, "tx-launcher", str(exit_file), "0", "sh", "-c", prog],
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists():  # the program runs
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(p.pid, signal.SIGTERM)  # the launcher alone, as proctrack/cgroup does
        assert p.wait(timeout=30) == 143
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert exit_file.read_text() == "0 143\n"


def test_launcher_does_not_pass_on_what_slurm_sent_the_program_itself(tmp_path: Path) -> None:
    """Where Slurm signals every process of the step (proctrack/linuxproc, the program
    first: kill_tree.c), the batch script exports TX_SIGNALS_REACH_ALL=1 and the launcher
    does not pass the SIGTERM on: the program gets one, not two. (The program counts those
    that come after its handler ran, for up to 1 s after the launcher's.)"""
    prog = ("import os, signal, sys, time; got = []\n"
            "def on_term(*a):\n got.append(1)\n open(os.environ['GOT'], 'a').write('x')\n"
            "signal.signal(signal.SIGTERM, on_term)\n"
            "open(os.environ['UP'] + '.new', 'w').write(str(os.getpid())); os.rename(os.environ['UP'] + '.new', os.environ['UP'])\n"
            "while not os.path.exists(os.environ['LAUNCHER_TERMED']): time.sleep(0.01)\n"
            "time.sleep(1); sys.exit(len(got))")

    def sigterms(env: Dict[str, str]) -> int:
        up, got, termed = tmp_path / "up", tmp_path / "got", tmp_path / "termed"
        for f in (up, got, termed):
            f.unlink(missing_ok=True)
        p = subprocess.Popen(["bash", "-c", LAUNCHER, "tx-launcher", str(tmp_path / "x.exitcode"), "0",
                              sys.executable, "-c", prog], start_new_session=True,
                             env={**os.environ, **env, "UP": str(up), "GOT": str(got), "LAUNCHER_TERMED": str(termed)})
        try:
            deadline = time.monotonic() + 30
            while not up.exists():
                assert p.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            os.kill(int(up.read_text()), signal.SIGTERM)  # as linuxproc: the program, then its launcher
            while not got.exists():
                assert time.monotonic() < deadline
                time.sleep(0.01)
            os.kill(p.pid, signal.SIGTERM)
            termed.touch()
            assert p.wait(timeout=30) in (1, 2)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        return int((tmp_path / "x.exitcode").read_text().split()[1])

    assert sigterms({"TX_SIGNALS_REACH_ALL": "1"}) == 1
    assert sigterms({}) == 2


def test_launcher_keeps_the_programs_stdin_stdout_and_signals(tmp_path: Path) -> None:
    """The program runs in the background of the launcher (so that its traps run), yet reads
    the launcher's stdin, writes its stdout, ignores no more signals than the launcher was
    given (bash ignores SIGINT/SIGQUIT in background commands) and gets no launcher file
    descriptor."""
    prog = "read -r l; echo got $l; grep SigIgn /proc/self/status; ls /proc/self/fd"
    p = subprocess.run(["bash", "-c", LAUNCHER, "tx-launcher", str(tmp_path / "x.exitcode"), "0", "sh", "-c", prog],
                       input="line1\n", capture_output=True, text=True, timeout=60)
    out = p.stdout.split("\n")
    assert p.returncode == 0 and out[0] == "got line1", p
    # what a program started the same way but without the launcher ignores (the test's own
    # parent may ignore SIGHUP/SIGINT/SIGQUIT: nohup, a background job; the launcher keeps that)
    same = subprocess.run(["grep", "SigIgn", "/proc/self/status"], capture_output=True, text=True, timeout=60)
    assert out[1] == same.stdout.strip(), (out[1], same.stdout)
    assert sorted(out[2:-1]) == ["0", "1", "2", "3"], out  # ls's own directory fd is 3
    assert (tmp_path / "x.exitcode").read_text() == "0 0\n"


slurm = pytest.mark.slurm


def scontrol_job(job_id: str) -> str:
    return _client.run(["scontrol", "show", "job", "--oneliner", job_id]).stdout


def wait_for(pred: Any, timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@slurm
def test_failed_replicas_get_a_status_even_when_killed_before_recording(apps: Any) -> None:
    """A replica that ignores SIGTERM is SIGKILLed by Slurm after KillWait: 137, marked
    ``slurm``. What Slurm 22.05 does (srun's --kill-on-bad-exit): srun asks for SIG_TERM_KILL
    on every step (launch_slurm.c ``_task_finish``); slurmstepd sends SIGCONT and SIGTERM to
    the step's processes, sleeps KillWait, then sends SIGKILL (slurmstepd/req.c). With this
    cluster's proctrack/linuxproc each is one kill() per process, the deepest first
    (kill_tree.c), so the launcher is usually SIGKILLed before it can write (the batch
    script then turns its ``0 running`` into ``0 137 slurm``) and sometimes, under load,
    outlives its program and writes ``0 137 slurm`` itself: the same record either way.
    Before, the first was '0 143 slurm' (the batch script's guess for no record) and the
    second '0 137' (1 run in 4 to 7 under load): the flake of issue 37. Then, at load 16-18,
    [143, 3] again (2 runs of 20): the launcher was SIGKILLed while it rewrote its record in
    place, and the batch script read the empty file as no record; records now replace the
    file whole (test_launcher_killed_while_writing_its_record_leaves_a_whole_one).
    Replica 1 fails only once replica 0 ignores SIGTERM (its ``up`` line is in its file):
    failing at once, the SIGTERM could come while replica 0 was still starting, and its
    launcher then recorded 143 itself (``0 143``, once at load 4-7)."""
    stubborn = ('if [ "${replica_id}" = 1 ]; then '
                'for i in $(seq 600); do grep -qx up "slurm-$TX_APP_ID-w-0.out" && break; sleep 0.1; done; exit 3; fi; '
                'trap "" TERM; echo up; sleep 60')
    app_id = apps.submit([apps.role("w", "sh", ["-c", stubborn], replicas=2)], name="stubborn")
    desc = apps.wait(app_id)
    assert [r.exit_code for r in desc.roles_statuses[0].replicas] == [137, 3], desc
    assert (apps.job_dir / f"slurm-{app_id}-w-0.exitcode").read_text() == "0 137 slurm\n"
    assert desc.structured_error_msg.startswith("w[1] (het component 1 on node"), desc
    assert "exit code 3" in desc.structured_error_msg


@slurm
def test_pending_app_says_why_it_waits(apps: Any) -> None:
    """A job behind another for the same node pends for Resources; one after it for its
    dependency: both explained in AppStatus.msg."""
    first = apps.submit([apps.role("hog", "sleep", ["600"])], name="hog", nodelist="node1", exclusive=True)
    wait_for(lambda: apps.sched.describe(first).state == AppState.RUNNING, what="the first job to run")
    second = apps.submit([apps.role("wait", "true", [])], name="behind", nodelist="node1")
    desc = wait_for(lambda: (d := apps.sched.describe(second)) and "Resources" in d.msg and d, what="Resources")
    assert desc.state == AppState.PENDING
    assert desc.msg == "PENDING: Resources: the nodes it needs are busy with other jobs; it starts when they are free"
    third = apps.submit([apps.role("dep", "true", [])], name="dep", dependency=f"afterok:{first}")
    desc = wait_for(lambda: (d := apps.sched.describe(third)) and "Dependency" in d.msg and d, what="Dependency")
    assert desc.msg == "PENDING: Dependency: it waits for the jobs it depends on (run option dependency)"
    with _runner() as runner:  # tx status shows it
        assert "Dependency: it waits" in runner.status(f"slurm://tx/{third}").format()


@slurm
def test_only_tx_jobs_are_listed_and_named_by_their_app(apps: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _client.run(["sbatch", "--parsable", "--hold", f"--output={tmp_path}/%j.out", "--job-name=sh-0",
                      "--wrap", "true"]).stdout.strip()
    try:
        name = "Über-run (exp) 日本語"
        app_id = apps.submit([apps.role("sh", "true", [])], name=name)
        apps.wait(app_id)
        _plane.plane().invalidate()  # no shared answer of the status plane: the list asks
        calls = _count_calls(monkeypatch)
        listed = {a.app_id: a for a in apps.sched.list()}
        assert plain not in listed and listed[app_id].name == name
        assert [c[0] for c in calls] == ["squeue"]  # one call, no sacct without accounting
        monkeypatch.undo()
        # the app's name from another process (tx describe), not its job id
        p = subprocess.run([str(BIN / "tx"), "describe", f"slurm://tx/{app_id}"], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0 and name in p.stdout, p.stdout + p.stderr
        assert "JobName=_ber-run__exp_____@sh-0 " in scontrol_job(app_id)
        assert f"Comment=tx-app:{name}" in scontrol_job(app_id)
        # tx log of a job tx did not submit: an error that says so
        _client.run(["scontrol", "release", plain])
        wait_for(lambda: "JobState=COMPLETED" in scontrol_job(plain), what="the plain job")
        with pytest.raises(SchedulerError, match=f"job {plain} was not submitted by tx"):
            list(apps.sched.log_iter(plain, "sh", 0))
    finally:
        _client.run(["scancel", plain], check=False)


@slurm
def test_retry_policy_decides_requeue(apps: Any) -> None:
    """Slurm may requeue the job where either kind of retry is left: max_retries (the user's
    failures) or infra_retries (default 3: node failures, preemption)."""
    once = apps.submit([apps.role("a", "true", [])], name="norequeue", infra_retries=0)
    retried = apps.submit([apps.role("b", "true", [], max_retries=2)], name="requeue", infra_retries=0)
    infra = apps.submit([apps.role("c", "true", [])], name="infra")
    assert "Requeue=0" in scontrol_job(once) and "Requeue=1" in scontrol_job(retried)
    assert "Requeue=1" in scontrol_job(infra)


@slurm
def test_logs_are_read_from_disk_without_slurm_and_deleted_logs_are_errors(apps: Any, slurm_cluster: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With slurmctld stopped for real, the logs are read from disk (no Slurm call), and a
    follower goes on following while Slurm does not answer; once slurmctld is back, it
    learns that the app ended and stops."""
    app_id = apps.submit([apps.role("talk", "sh", ["-c", "echo hello; echo oops >&2"])], name="logs")
    apps.wait(app_id)
    _plane.plane().invalidate()  # no shared answer of the status plane: the follower must ask Slurm
    import threading

    from tx_scheduler_slurm import _logs as slurm_logs

    monkeypatch.setenv("TX_SLURM_TIMEOUT", "3")  # a Slurm call fails after 3 s, not 30
    monkeypatch.setattr(slurm_logs, "FOLLOW_CHECK_S", 0.5)  # the follower asks Slurm again soon
    failed: List[List[str]] = []
    calls = _count_calls(monkeypatch, failed)  # what the scheduler asks Slurm (each call runs for real)
    lines: List[str] = []
    with slurm_cluster.controller_down():
        assert list(apps.sched.log_iter(app_id, "talk", 0)) == ["hello\n"]
        assert list(apps.sched.log_iter(app_id, "talk", 0, streams="stderr")) == ["oops\n"]
        assert calls == []
        # following: while Slurm does not answer, the file is followed on (a second call
        # after the first one failed); once it answers that the app ended, the follow ends
        reader = threading.Thread(target=lambda: lines.extend(apps.sched.log_iter(app_id, "talk", 0,
                                                                                  should_tail=True)), daemon=True)
        reader.start()
        asked_again = lambda: failed and len(calls) > calls.index(failed[0]) + 1  # noqa: E731
        wait_for(asked_again, timeout=60, what="the follower to ask Slurm again after a failed call")
        assert reader.is_alive() and failed[0][0] == "squeue", failed
        with pytest.raises(SlurmError):  # slurmctld is really down
            _client.run(["squeue", "--noheader"], timeout=3)
    reader.join(timeout=60)  # slurmctld is back
    assert not reader.is_alive() and lines == ["hello\n"]
    (apps.job_dir / f"slurm-{app_id}-talk-0.out").unlink()
    with pytest.raises(SchedulerError, match="does not exist although the job ran: it was deleted"):
        list(apps.sched.log_iter(app_id, "talk", 0))
    env = {k: v for k, v in os.environ.items()}
    p = subprocess.run([str(BIN / "tx"), "log", f"slurm://tx/{app_id}/talk/0"], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode != 0 and "does not exist although the job ran" in p.stderr, (p.returncode, p.stderr)


@slurm
def test_run_options_reach_slurm(apps: Any) -> None:
    app_id = apps.submit([apps.role("o", "sleep", ["600"], replicas=2)], name="opts", exclusive=True,
                         nodelist="node[3-4]", signal="USR1@60", requeue=False)
    text = scontrol_job(app_id)
    assert "OverSubscribe=NO" in text and "ReqNodeList=node3" in text and "Requeue=0" in text, text
    second = _client.run(["scontrol", "show", "job", "--oneliner", str(int(app_id) + 1)]).stdout
    assert "ReqNodeList=node4" in second, second
    apps.sched.cancel(app_id)
    apps.wait(app_id)
    excluded = apps.submit([apps.role("x", "true", [])], name="excl", exclude="node1,node2,node3")
    desc = apps.wait(excluded)
    assert apps.replica(desc, "x", 0).hostname == "node4"


# -- counting Slurm calls ------------------------------------------------------------------

def _count_calls(monkeypatch: pytest.MonkeyPatch, failed: Optional[List[List[str]]] = None) -> List[List[str]]:
    """Record every Slurm command the scheduler runs (each runs for real); those that fail
    are also appended to ``failed``, once they failed."""
    calls: List[List[str]] = []
    real = _client.run

    def run(argv: List[str], *a: Any, **kw: Any) -> Any:
        calls.append(list(argv))
        try:
            return real(argv, *a, **kw)
        except SlurmError:
            if failed is not None:
                failed.append(list(argv))
            raise

    monkeypatch.setattr(_client, "run", run)
    return calls


def _runner() -> Any:
    from tx.runner import get_runner

    return get_runner()


@slurm
def test_node_that_goes_down_is_named(apps: Any) -> None:
    """max_retries=0 and infra_retries=0 (so --no-requeue): a node taken down under the job
    ends it NODE_FAIL, and why-failed names the nodes; the job is not requeued."""
    app_id = apps.submit([apps.role("n", "sleep", ["600"], replicas=2)], name="nodefail", nodelist="node3,node4",
                         infra_retries=0)
    wait_for(lambda: apps.sched.describe(app_id).state == AppState.RUNNING, what="the job to run")
    try:
        _client.run(["scontrol", "update", "nodename=node4", "state=down", "reason=tx-test"])
        desc = apps.wait(app_id, timeout=120)
    finally:
        _client.run(["scontrol", "update", "nodename=node4", "state=resume"], check=False)
    assert desc.state == AppState.FAILED and desc.num_restarts == 0, desc
    assert desc.structured_error_msg.startswith("NODE_FAIL: the job lost a node that failed under it (nodes "), desc
    assert "node4" in desc.structured_error_msg and "node4" in desc.msg
    assert [(a.kind, a.reason) for a in desc.attempts] == [(FailureKind.INFRA, "NODE_FAIL: a node of the job failed")]


@slurm
def test_requeued_job_names_the_node_that_went_down(apps: Any) -> None:
    """max_retries=1: Slurm requeues the job after the node failure; the pending app names
    the node (squeue says only BeginTime, then ReqNodeNotAvail)."""
    app_id = apps.submit([apps.role("n", "sleep", ["600"], replicas=2, max_retries=1)], name="requeued",
                         nodelist="node3,node4")
    wait_for(lambda: apps.sched.describe(app_id).state == AppState.RUNNING, what="the job to run")
    try:
        _client.run(["scontrol", "update", "nodename=node4", "state=down", "reason=tx-test"])
        # keep it out (the test node's slurmd is alive and would register again at once)
        _client.run(["scontrol", "update", "nodename=node4", "state=drain", "reason=tx-test"])
        desc = wait_for(lambda: (d := apps.sched.describe(app_id)) and d.num_restarts == 1
                        and d.state == AppState.PENDING and d, what="the requeue")
        assert "nodes down or drained now: node4 (tx-test)" in desc.msg, desc.msg
    finally:
        _client.run(["scontrol", "update", "nodename=node4", "state=resume"], check=False)
