"""tx.runner.archive: incremental, byte-exact copies of replica logs on any fsspec
filesystem; the Runner's copy while it waits, its catch-up, and its fallback when the
backend has lost a log (a scheduler of this file whose logs can be deleted)."""
import threading
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

import pytest

from tx.config.recovery import archive_interval, archive_url, checkpoint_root
from tx.runner import Runner
from tx.runner.archive import BackendReadError, LogArchive
from tx.schedulers import DescribeAppResponse, Scheduler
from tx.schedulers.api import SchedulerError
from tx.specs import AppDef, AppState, Role, UnknownAppException

H = "fake://s/app-1"
RAW = [b"one\n", b"\x00\xff bytes\n", b"two", b" halves\n", b"no newline"]


def reader(chunks: List[bytes]) -> Any:
    return lambda role, k: iter(chunks)


@pytest.mark.parametrize("url", ["dir", "memory://tx-archive-test"])
def test_copies_are_incremental_and_byte_exact(tmp_path: Path, url: str) -> None:
    archive = LogArchive(str(tmp_path / url) if url == "dir" else url)
    for n in range(1, len(RAW) + 1):  # the log grows; each copy writes only what is new
        archive.copy(H, [("r", 0)], reader(RAW[:n]))
        assert b"".join(archive.read_blocks(H, "r", 0)) == b"".join(RAW[:n])
    assert len(list(archive.read_blocks(H, "r", 0))) == len(RAW)  # one part per copy
    assert archive.copy(H, [("r", 0)], reader(RAW)) == 0  # nothing new: no empty part
    assert not archive.is_complete(H)
    archive.copy(H, [("r", 0), ("r", 1)], reader(RAW), ended="SUCCEEDED")
    assert archive.is_complete(H) and archive.replicas(H) == [("r", 0), ("r", 1)]
    assert archive.size(H, "r", 1) == len(b"".join(RAW))
    assert not archive.has(H, "r", 2) and archive.replicas("fake://s/other") is None


def parts(archive: LogArchive) -> List[str]:
    return [Path(p).name for p, _size in archive._parts(H, "r", 0)]


def test_a_log_that_started_again_shorter_is_archived_after_the_first_attempt(tmp_path: Path) -> None:
    """A retry recreates the pod under the same name: the backend's log starts from zero.
    The archive keeps attempt 1's bytes and archives attempt 2's after them, as it grows."""
    archive = LogArchive(str(tmp_path))
    archive.copy(H, [("r", 0)], reader([b"a\nb\n", b"c"]))
    assert archive.copy(H, [("r", 0)], reader([])) == 0  # attempt 2 wrote nothing yet
    assert archive.copy(H, [("r", 0)], reader([b"x\n"])) == 2  # shorter: a new attempt
    assert archive.copy(H, [("r", 0)], reader([b"x\n", b"y\n"])) == 2  # it grows on
    assert archive.copy(H, [("r", 0)], reader([b"x\n", b"y\n"])) == 0
    assert b"".join(archive.read_blocks(H, "r", 0)) == b"a\nb\ncx\ny\n"
    assert [n[:17] for n in parts(archive)] == ["part-000000", "part-001-000000", "part-001-000001-c"]
    assert archive.size(H, "r", 0) == 9


@pytest.mark.parametrize("attempt2", [b"2 start\ncommon\nnew\n",  # differs before the last part
                                      b"1 start\nCOMMON\nnew\n"])  # differs in the last part
def test_a_restart_that_outgrew_the_archive_is_not_mangled(tmp_path: Path, attempt2: bytes) -> None:
    """By the next copy the new attempt's log is longer than the archived one: it is
    archived whole after attempt 1, never its tail at attempt 1's offset."""
    archive = LogArchive(str(tmp_path))
    archive.copy(H, [("r", 0)], reader([b"1 start\n"]))
    archive.copy(H, [("r", 0)], reader([b"1 start\n", b"common\n"]))
    assert archive.copy(H, [("r", 0)], reader([attempt2[:5], attempt2[5:]])) == len(attempt2)
    assert b"".join(archive.read_blocks(H, "r", 0)) == b"1 start\ncommon\n" + attempt2
    archive.copy(H, [("r", 0)], reader([attempt2, b"more\n"]))
    assert b"".join(archive.read_blocks(H, "r", 0)) == b"1 start\ncommon\n" + attempt2 + b"more\n"


def test_an_archive_of_older_tx_goes_on(tmp_path: Path) -> None:
    """Parts named without a segment mark (tx before attempts) continue; a restart is found."""
    archive = LogArchive(str(tmp_path))
    d = tmp_path / "fake" / "s" / "app-1" / "r" / "0"
    d.mkdir(parents=True)
    (d / "part-000000").write_bytes(b"old\n")
    (d / "part-000001").write_bytes(b"more\n")
    archive.copy(H, [("r", 0)], reader([b"old\nmore\n", b"and more\n"]))
    archive.copy(H, [("r", 0)], reader([b"new attempt\n"]))
    assert b"".join(archive.read_blocks(H, "r", 0)) == b"old\nmore\nand more\nnew attempt\n"


def test_a_replica_the_backend_cannot_give_is_skipped_and_the_app_stays_incomplete(tmp_path: Path) -> None:
    archive = LogArchive(str(tmp_path))

    def read(role: str, k: int) -> Iterable[bytes]:
        if k == 1:
            raise BackendReadError("gone")
        return [b"ok\n"]

    with pytest.raises(BackendReadError):
        archive.copy(H, [("r", 0), ("r", 1)], read, ended="FAILED")
    assert b"".join(archive.read_blocks(H, "r", 0)) == b"ok\n" and not archive.is_complete(H)
    assert archive.has(H, "r", 0) and not archive.has(H, "r", 1)  # nothing of r/1 to stand in


def test_two_copiers_at_once_lose_and_repeat_nothing(tmp_path: Path) -> None:
    """Copiers racing on one log (two tx processes) each continue the archive where it
    ended; whichever part lands, the archive holds each attempt's log, in order, once."""
    archive = LogArchive(str(tmp_path))
    attempts = [[f"attempt {a} line {i}\n".encode() for i in range(120)] for a in (1, 2)]
    backend = [attempts[0][:0]]  # what the backend gives now: it only grows, then restarts once
    done = threading.Event()
    barrier = threading.Barrier(5)

    def copier() -> None:
        barrier.wait()
        while not done.is_set():
            archive.copy(H, [("r", 0)], lambda role, k: iter(list(backend[0])))

    threads = [threading.Thread(target=copier) for _ in range(4)]
    for t in threads:
        t.start()
    barrier.wait()
    for a, lines in enumerate(attempts):
        for n in range(0, len(lines) + 1, 8):
            backend[0] = lines[:n]
            __import__("time").sleep(0.002)
        backend[0] = lines
        if a == 0:  # the last copy of attempt 1 (the Runner's, when the replica ended)
            archive.copy(H, [("r", 0)], reader(lines))
    done.set()
    for t in threads:
        t.join()
    archive.copy(H, [("r", 0)], reader(attempts[1]))
    assert b"".join(archive.read_blocks(H, "r", 0)) == b"".join(attempts[0] + attempts[1])


def test_prune_deletes_complete_archives_that_ended_before_keep(tmp_path: Path) -> None:
    archive = LogArchive(str(tmp_path))
    archive.copy("a://s/old", [("r", 0)], reader([b"x\n"]), ended="SUCCEEDED")
    archive.copy("b://s/old", [("r", 0)], reader([b"x\n"]), ended="SUCCEEDED")
    archive.copy("a://s/running", [("r", 0)], reader([b"x\n"]))
    later = __import__("time").time() + 100
    assert archive.prune(3600, now=later) == []
    assert archive.prune(10, dry_run=True, now=later, schedulers=["a"]) == ["a://s/old"]
    assert archive.is_complete("a://s/old")
    assert sorted(archive.prune(10, now=later)) == ["a://s/old", "b://s/old"]
    assert archive.replicas("a://s/old") is None and archive.replicas("a://s/running") is not None


def test_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    conf = tmp_path / ".txconfig"
    conf.write_text("[tx:logs]\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    assert archive_url() == str(tmp_path / "state" / "logs") and archive_interval() == 30
    assert checkpoint_root("slurm") == str(tmp_path / "state" / "checkpoints")
    conf.write_text("[tx:logs]\narchive = s3://b/logs\ninterval = 2m\n"
                    "[tx:checkpoint]\nroot = s3://b/ckpt\nslurm = ~/ckpt\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    assert archive_url() == "s3://b/logs" and archive_interval() == 120
    assert checkpoint_root("slurm").endswith("/ckpt") and checkpoint_root("slurm").startswith("/")
    assert checkpoint_root("local_cwd") == "s3://b/ckpt"
    conf.write_text("[tx:logs]\narchive = off\ninterval = soon\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    assert archive_url() is None
    with pytest.raises(ValueError, match=r"\[tx:logs\] interval"):
        archive_interval()


# -- the Runner ----------------------------------------------------------------------------

class FileLogs(Scheduler[Any]):
    """Apps whose replicas' logs are files the test writes (and deletes)."""

    def __init__(self, session_name: str, logs: Dict[str, bytes], **kw: Any) -> None:
        super().__init__("fake", session_name)
        self.logs = logs
        self.state = AppState.RUNNING
        self.known = True
        self.no_roles = False  # describe answers with neither roles nor replica statuses
        self.released = threading.Event()

    def schedule(self, dryrun_info: Any) -> str:
        return "app-1"

    def _submit_dryrun(self, app: AppDef, cfg: Any) -> Any:
        raise NotImplementedError

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if not self.known:
            return None
        roles = [] if self.no_roles else [Role("r", image="", entrypoint="x", num_replicas=2)]
        return DescribeAppResponse(app_id=app_id, state=self.state, roles=roles)

    def wait(self, app_id: str, timeout: Optional[float] = None, poll_interval: float = 1.0) -> Any:
        self.released.wait(30)
        return self.describe(app_id)

    def _cancel_existing(self, app_id: str) -> None:
        pass

    def list(self) -> List[Any]:
        return []

    def log_iter_blocks(self, app_id: str, role_name: str, k: int = 0, should_tail: bool = False,
                        streams: Any = None) -> Iterable[bytes]:
        key = f"{role_name}/{k}"
        if key not in self.logs:
            raise SchedulerError(f"log of {key} deleted")
        return iter([self.logs[key]])


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\ninterval = 0.05\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    logs: Dict[str, bytes] = {"r/0": b"", "r/1": b""}
    sched = FileLogs("s", logs)
    runner = Runner("s", scheduler_factories={"fake": lambda session, **kw: sched})
    return runner, sched, logs


def test_runner_copies_while_it_waits_and_reads_the_archive_once_the_log_is_gone(
        fake: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture) -> None:
    runner, sched, logs = fake
    archive = runner.log_archive
    result: List[Any] = []
    waiter = threading.Thread(target=lambda: result.append(runner.wait(H)))
    waiter.start()
    for i in range(5):  # the replicas write while the runner waits: copies follow them
        logs["r/0"] += f"line {i}\n".encode()
        logs["r/1"] += b"\xff"
        deadline = __import__("time").monotonic() + 10
        while archive.size(H, "r", 0) < len(logs["r/0"]) and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.02)
        assert archive.size(H, "r", 0) == len(logs["r/0"])
    assert not archive.is_complete(H)
    logs["r/0"] += b"last, no newline"
    sched.state = AppState.SUCCEEDED
    sched.released.set()
    waiter.join()
    assert result[0].state == AppState.SUCCEEDED and archive.is_complete(H)
    assert len(list(archive.read_blocks(H, "r", 0))) > 2  # copied in several parts
    full = dict(logs)
    del logs["r/0"]  # the backend lost one log, then forgot the app
    assert b"".join(runner.log_blocks(H, "r", 0)) == full["r/0"]
    assert list(runner.log_lines(H, "r", 0, regex="line [13]")) == ["line 1\n", "line 3\n"]
    assert b"".join(runner.log_blocks(H, "r", 1)) == full["r/1"]  # the backend still has it
    sched.known = False
    assert b"".join(runner.log_blocks(H, "r", 1)) == full["r/1"]
    assert runner.archived_replicas(H) == [("r", 0), ("r", 1)]
    with pytest.raises(UnknownAppException):  # neither the backend nor the archive has it
        runner.log_lines(H, "r", 2)
    with pytest.raises(SchedulerError, match="r/2"):  # the backend's own error
        runner.log_blocks(H, "r", 2)
    assert "reading the log from tx's log archive" in capsys.readouterr().err


def test_status_catches_up_a_finished_app_once(fake: Any) -> None:
    runner, sched, logs = fake
    logs["r/0"], logs["r/1"] = b"a\n", b"b\n"
    sched.state = AppState.FAILED
    assert runner.status(H).state == AppState.FAILED
    assert runner.log_archive.is_complete(H)
    logs["r/0"] = b"a\nchanged afterwards\n"
    runner.status(H)  # complete: not copied again
    assert b"".join(runner.log_archive.read_blocks(H, "r", 0)) == b"a\n"


def test_an_unwritable_archive_is_one_warning_and_the_run_goes_on(
        fake: Any, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    runner, sched, logs = fake
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    runner.log_archive = LogArchive(str(blocker / "archive"))
    sched.state = AppState.SUCCEEDED
    for _ in range(3):
        assert runner.status(H).state == AppState.SUCCEEDED
    err = capsys.readouterr().err
    assert err.count("cannot write the log archive at") == 1, err


def test_no_archive_when_it_is_off(fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, sched, logs = fake
    conf = tmp_path / "off.txconfig"
    conf.write_text("[tx:logs]\narchive = off\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    runner = Runner("s", scheduler_factories={"fake": lambda session, **kw: sched})
    sched.state = AppState.SUCCEEDED
    runner.status(H)
    assert runner.log_archive is None and not (tmp_path / "archive").exists()


def test_tx_log_of_an_app_whose_backend_reports_no_replicas_reads_the_archive(fake: Any) -> None:
    """A backend that still knows the app but keeps nothing of its roles (Ray's job record
    written back empty after a delete) must not make `tx log` print nothing and exit 0."""
    from tx.cli import cmd_log
    from tx.cli.errors import CLIError

    runner, sched, logs = fake
    logs["r/0"], logs["r/1"] = b"a\n", b"b\n"
    sched.state = AppState.SUCCEEDED
    runner.status(H)  # a finished app: copied into the archive once
    sched.no_roles = True
    assert cmd_log._replicas(runner, H, None, None) == [("r", 0), ("r", 1)]
    assert cmd_log._replicas(runner, H, "r", None) == [("r", 0), ("r", 1)]
    with pytest.raises(CLIError, match="the log archive has no role 'q'"):
        cmd_log._replicas(runner, H, "q", None)
    runner.log_archive = None  # archiving off: nothing to read, said in one line
    with pytest.raises(CLIError, match="no roles or replicas on its backend .* none in the log archive"):
        cmd_log._replicas(runner, H, None, None)


def test_tx_log_of_a_live_app_prints_the_archived_earlier_attempts_first(
        fake: Any, capsys: pytest.CaptureFixture) -> None:
    """A retry started the backend's log again (a Kubernetes pod recreated): `tx log`
    prints the attempts the archive kept, then the live one, each byte once, and says so."""
    runner, sched, logs = fake
    logs["r/0"], logs["r/1"] = b"attempt 1 \xff\n", b"only attempt\n"
    runner.archive_logs(H)
    capsys.readouterr()
    assert b"".join(runner.log_blocks(H, "r", 1)) == b"only attempt\n"  # no retry: as before
    assert b"".join(runner.log_blocks(H, "r", 0)) == b"attempt 1 \xff\n"
    assert "earlier attempt" not in capsys.readouterr().err
    logs["r/0"] = b""  # the retry's pod has printed nothing yet
    assert b"".join(runner.log_blocks(H, "r", 0)) == b"attempt 1 \xff\n"
    logs["r/0"] = b"attempt 2\nno newline"  # not archived yet: `tx log` copies it first
    for _ in range(2):  # and again: nothing twice
        assert list(runner.log_lines(H, "r", 0)) == ["attempt 1 \ufffd\n", "attempt 2\n", "no newline"]
    err = capsys.readouterr().err
    assert err.count("r/0: printing 1 earlier attempt from tx's log archive, then the backend's log") == 3, err
    assert runner.log_archive.segments(H, "r", 0) == 2
    sched.state = AppState.SUCCEEDED
    runner.status(H)  # complete: the backend's log is the last attempt's
    assert b"".join(runner.log_blocks(H, "r", 0)) == b"attempt 1 \xff\nattempt 2\nno newline"
    del logs["r/0"]  # then the backend's log is gone: every attempt from the archive, once
    assert b"".join(runner.log_blocks(H, "r", 0)) == b"attempt 1 \xff\nattempt 2\nno newline"


def test_a_local_archive_is_written_without_fsspec(tmp_path: Path) -> None:
    """An archive given as a local path (the default, under tx's state directory) copies,
    reads, finds restarts and prunes with the standard library: the detached copier never
    imports fsspec (~100 ms of imports, more than all of the runner); a URL still goes
    through fsspec."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tx.runner.archive import LogArchive\n"
        f"a = LogArchive({str(tmp_path / 'arch')!r})\n"
        "H = 'fake://s/app-1'\n"
        "a.copy(H, [('r', 0)], lambda r, k: iter([b'one\\n', b'two']))\n"
        "a.copy(H, [('r', 0)], lambda r, k: iter([b'one\\n', b'two', b' three\\n']))\n"
        "a.copy(H, [('r', 0)], lambda r, k: iter([b'again\\n']), ended='FAILED')\n"
        "print(b''.join(a.read_blocks(H, 'r', 0)), a.segments(H, 'r', 0), a.is_complete(H))\n"
        "print(a.prune(keep=-1.0, now=4e9), 'fsspec' in sys.modules)\n"
        "LogArchive('memory://x')\n"
        "print('fsspec' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["b'one\\ntwo three\\nagain\\n' 2 True", "['fake://s/app-1'] False", "True"]


def test_the_local_archive_files_answer_as_fsspecs_local_filesystem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call LogArchive makes on a local directory answers as fsspec's LocalFileSystem
    does: its root (absolute, ``~``, ``.``, relative, trailing ``/``), ls, exists, cat_file
    ranges, glob (hidden names included), mv over a file, rm."""
    import fsspec
    from fsspec.implementations.local import LocalFileSystem

    from tx.runner.archive import _LocalFS

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    for url in (str(tmp_path / "a") + "/", "~/a", ".", "./a/b", "a/b/", "/"):
        assert _LocalFS.root(url) == fsspec.core.url_to_fs(url)[1], url
    mine, theirs = _LocalFS(), LocalFileSystem()
    root = str(tmp_path / "t")
    for d in ("s/x/app", "s/.hid/app", "s/y/other"):
        (tmp_path / "t" / d).mkdir(parents=True)
    (tmp_path / "t" / "s/x/app/complete").write_bytes(b"0123456789")
    (tmp_path / "t" / "s/.hid/app/complete").write_bytes(b"x")
    (tmp_path / "t" / "s/x/app/part-000000").write_bytes(b"abc")
    pattern = f"{root}/*/*/*/complete"
    assert mine.glob(pattern) == sorted(theirs.glob(pattern))
    assert mine.glob(f"{root}/nothing/*/x") == theirs.glob(f"{root}/nothing/*/x") == []

    def listing(fs: Any) -> List[Any]:
        return sorted((e["name"], e["size"], e["type"]) for e in fs.ls(f"{root}/s/x/app", detail=True))

    assert listing(mine) == listing(theirs)
    for fs in (mine, theirs):
        with pytest.raises(FileNotFoundError):
            fs.ls(f"{root}/missing", detail=True)
    path = f"{root}/s/x/app/complete"
    for start, end in ((None, None), (3, None), (3, 7), (-4, None), (-40, 2), (2, -3), (5, 50)):
        assert mine.cat_file(path, start=start, end=end) == theirs.cat_file(path, start=start, end=end), (start, end)
    assert mine.exists(path) and not mine.exists(f"{root}/missing") and theirs.exists(path)
    mine.makedirs(f"{root}/new/dir", exist_ok=True)
    mine.makedirs(f"{root}/new/dir", exist_ok=True)
    with mine.open(f"{root}/new/dir/f", "wb") as f:
        f.write(b"new")
    mine.mv(f"{root}/new/dir/f", f"{root}/s/x/app/part-000000")  # over an existing file
    assert (tmp_path / "t/s/x/app/part-000000").read_bytes() == b"new"
    mine.rm(f"{root}/s/x/app/complete")
    mine.rm(f"{root}/s", recursive=True)
    assert not (tmp_path / "t/s").exists() and (tmp_path / "t/new/dir").is_dir()


class CausedFileLogs(FileLogs):
    """A backend that reads why a failed app failed from its log at each describe (as the
    non-local schedulers do), with two user attempts."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is None or desc.state != AppState.FAILED:
            return desc
        from tx.schedulers import root_cause
        from tx.specs import Attempt, FailureKind, ReplicaStatus, RoleStatus

        cause = root_cause("r", 0, self.logs.get("r/0", b""), exit_code=1)
        desc.structured_error_msg, desc.root_cause = cause.text, cause
        desc.roles_statuses = [RoleStatus("r", [ReplicaStatus(0, AppState.FAILED, "r", structured_error_msg=cause.text,
                                                              exit_code=1, root_cause=cause),
                                                ReplicaStatus(1, AppState.FAILED, "r", exit_code=1)])]
        desc.attempts = [Attempt(0, AppState.FAILED, FailureKind.USER, cause.text, retried=True),
                         Attempt(1, AppState.FAILED, FailureKind.USER, cause.text)]
        return desc


def test_why_it_failed_is_recorded_when_it_ends_and_answers_once_the_log_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    logs = {"r/0": b'Traceback (most recent call last):\n  File "/job/fail.py", line 5, in <module>\n'
                   b"ValueError: bad learning rate\n", "r/1": b""}
    sched = CausedFileLogs("s", logs)
    sched.state = AppState.FAILED
    why = "r/0: ValueError: bad learning rate at fail.py:5 (exit code 1)"
    runner = Runner("s", scheduler_factories={"fake": lambda session, **kw: sched})
    assert runner.status(H).structured_error_msg == why  # seen ending: recorded with the archive
    mark = tmp_path / "archive" / "fake" / "s" / "app-1" / "complete"
    assert mark.exists()
    recorded = mark.read_bytes()

    logs["r/0"] = b""  # the backend keeps the app but loses its log
    later = Runner("s", scheduler_factories={"fake": lambda session, **kw: sched})
    st = later.status(H)
    assert st.structured_error_msg == why and st.root_cause is not None and st.root_cause.text == why
    assert (st.root_cause.exception_type, st.root_cause.file, st.root_cause.line) == ("ValueError", "/job/fail.py", 5)
    assert st.roles[0].replicas[0].structured_error_msg == why and st.roles[0].replicas[1].root_cause is None
    assert [a.reason for a in st.attempts] == [why, why]  # the attempts name the cause, not the exit status
    assert mark.read_bytes() == recorded  # a look does not write

    # a backend answer that names a cause of its own is kept
    logs["r/0"] = b"Traceback (most recent call last):\nKeyError: 'x'\n"
    assert "KeyError" in later.status(H).structured_error_msg


def test_a_look_that_reads_more_than_the_one_that_saw_the_end_is_kept_and_never_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process that saw the app end read less than a later look (the backend had not
    given the failing replica's log yet, or could not be read at that moment): the later,
    better cause is recorded, and no later weaker write (a copier that described first and
    wrote last) replaces it."""
    conf = tmp_path / ".txconfig"
    conf.write_text(f"[tx:logs]\narchive = {tmp_path / 'archive'}\n")
    monkeypatch.setenv("TXCONFIG", str(conf))
    full = b'Traceback (most recent call last):\n  File "/job/fail.py", line 5, in <module>\nValueError: bad learning rate\n'
    logs = {"r/0": b"", "r/1": b""}
    sched = CausedFileLogs("s", logs)
    sched.state = AppState.FAILED
    why = "r/0: ValueError: bad learning rate at fail.py:5 (exit code 1)"

    def runner() -> Runner:
        return Runner("s", scheduler_factories={"fake": lambda session, **kw: sched})

    weak = runner().status(H).structured_error_msg  # seen ending with nothing to read
    assert "ValueError" not in weak and (tmp_path / "archive" / "fake" / "s" / "app-1" / "complete").exists()
    weak_desc = sched.describe("app-1")

    logs["r/0"] = full
    assert runner().status(H).structured_error_msg == why  # a later look reads the cause: kept

    r = runner()  # a copier that described while nothing was readable writes last
    r.archive_logs(H, weak_desc)
    r.log_archive.copy(H, [("r", 0), ("r", 1)], lambda role, k: iter([]), ended="FAILED",
                       why={"structured_error_msg": weak, "root_cause": None, "replicas": [], "attempts": []})

    logs["r/0"] = b""  # the backend keeps the app but loses its log
    st = runner().status(H)
    assert st.structured_error_msg == why and st.root_cause is not None and st.root_cause.line == 5
