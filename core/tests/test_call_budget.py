"""The call budget (tx.schedulers.budget) and the status plane (tx.schedulers.plane): shared
by processes through files under tx's state directory, fcntl locks that a crash releases,
throttling answers retried, the config keys."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List

import pytest

from tx.config.files import ConfigError
from tx.schedulers import budget as budget_mod
from tx.schedulers.budget import BackendThrottled, CallBudget, ThrottledError, budget_for, is_throttle
from tx.schedulers.plane import StatusPlane, max_age_for


def _py(code: str, *args: str) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_bucket_is_shared_by_processes(tmp_path: Path) -> None:
    """Three processes take 4 calls each from one bucket of 4 refilled 10 per second: the 8
    beyond the burst wait for the refill (0.8 s at least), and every call is counted once."""
    code = """
        import sys
        from tx.schedulers.budget import CallBudget
        b = CallBudget("fake", "c1", per_minute=600, burst=4, directory=sys.argv[1])
        for _ in range(4):
            b.call(lambda: None)
    """
    start = time.monotonic()
    procs = [_py(code, str(tmp_path)) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    elapsed = time.monotonic() - start
    counts = CallBudget("fake", "c1", per_minute=600, burst=4, directory=str(tmp_path)).counts()
    assert counts["calls"] == 12
    assert elapsed >= 0.75, elapsed  # 8 tokens at 10/s; each process alone would need 0 s
    # another cluster has a bucket of its own
    assert CallBudget("fake", "c2", directory=str(tmp_path)).counts() == {}


def test_a_crash_holding_the_lock_leaves_no_lock(tmp_path: Path) -> None:
    """A process killed while it holds the bucket's lock releases it: the next call goes on."""
    b = CallBudget("fake", "c", per_minute=60, directory=str(tmp_path))
    b.call(lambda: None)
    holder = _py("""
        import fcntl, os, sys, time
        fd = os.open(sys.argv[1], os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, b'{"tok', 0)  # killed mid-write: a cut file
        print("locked", flush=True)
        time.sleep(600)
    """, b.path)
    assert holder.stdout.readline().strip() == "locked"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert b.call(lambda: "ran") == "ran"  # no hang, and the cut file reads as a full bucket
    assert json.loads(Path(b.path).read_text())["calls"] == 1


def test_throttling_answers_are_retried_not_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget_mod, "BACKOFF_BASE_S", 0.01)
    b = CallBudget("fake", "c", directory=str(tmp_path))
    answers: List[Any] = [BackendThrottled("slurm_load_jobs error: Rate limit exceeded, please retry momentarily"),
                          RuntimeError("An error occurred (TooManyRequestsException) when calling SubmitJob"),
                          "done"]

    def call() -> Any:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    assert b.call(call) == "done"
    assert b.counts()["throttled"] == 2 and b.counts()["calls"] == 3
    with pytest.raises(ValueError, match="not a throttle"):  # other errors pass through at once
        b.call(lambda: (_ for _ in ()).throw(ValueError("not a throttle")))

    def always() -> None:
        raise BackendThrottled("Rate limit exceeded")

    with pytest.raises(ThrottledError, match="states are unknown, not failed"):
        b.call(always, what="squeue", max_wait=0.2)


class _ClientError(Exception):  # botocore's shape: .response["Error"]["Code"]
    def __init__(self, code: str) -> None:
        super().__init__("boom")
        self.response = {"Error": {"Code": code}}


class _Http(Exception):
    status = 429


@pytest.mark.parametrize("exc,throttle", [
    (_ClientError("ThrottlingException"), True),
    (_ClientError("TooManyRequestsException"), True),
    (_ClientError("ClientException"), False),
    (_Http("too much"), True),
    (RuntimeError("squeue: error: slurm_load_jobs error: Rate limit exceeded, please retry momentarily"), True),
    (RuntimeError("HTTP 429 Too Many Requests"), True),
    (RuntimeError("squeue: error: Invalid job id specified"), False),
    (RuntimeError("job 4290 failed"), False),
])
def test_throttle_answers_are_recognised(exc: Exception, throttle: bool) -> None:
    assert is_throttle(exc) is throttle


def test_budget_from_txconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TXCONFIG", raising=False)
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path))
    budget_mod._reset_for_tests()
    (tmp_path / ".txconfig").write_text("[slurm]\nmax_calls_per_minute = 40\nmax_call_burst = 10\n"
                                        "[aws_batch]\nmax_calls_per_minute = unlimited\n[gcp_batch]\n"
                                        "max_calls_per_minute = lots\n")
    b = budget_for("slurm", "conf-a")
    assert (b.per_minute, b.burst) == (40.0, 10.0) and b.path.startswith(str(tmp_path / "state"))
    assert budget_for("aws_batch", "r", default_per_minute=3000).per_minute is None
    assert budget_for("kubernetes", "k", default_per_minute=300).per_minute == 300
    with pytest.raises(ConfigError, match=r"\[gcp_batch\] max_calls_per_minute .* 'lots'"):
        budget_for("gcp_batch", "p")
    budget_mod._reset_for_tests()


def test_budget_keys_are_not_run_options(tx: Any, tmp_path: Path) -> None:
    """``[local_cwd] max_calls_per_minute`` beside run options: not an unknown run option."""
    (tmp_path / ".txconfig").write_text("[local_cwd]\nmax_calls_per_minute = 40\nstatus_max_age_s = 1\n")
    p = tx("run", "--dryrun", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert p.returncode == 0, p.stderr


# -- the status plane --------------------------------------------------------------------

def test_one_fetch_for_many_processes(tmp_path: Path) -> None:
    """Six processes look at once: one of them asks the backend, the others read its answer."""
    code = """
        import os, sys, time
        from tx.schedulers.plane import StatusPlane
        def fetch():
            with open(os.path.join(sys.argv[1], "fetches"), "a") as f:
                f.write("x")
            time.sleep(0.3)  # a slow backend: the others arrive while it is asked
            return {"7": {"state": "RUNNING"}}
        snap = StatusPlane("fake", "c", directory=sys.argv[1]).get(fetch, max_age=60)
        print(snap.items["7"]["state"], snap.fetched_here)
    """
    procs = [_py(code, str(tmp_path)) for _ in range(6)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(out.split())
    assert (tmp_path / "fetches").read_text() == "x"
    assert sorted(o[1] for o in outs) == ["False"] * 5 + ["True"] and {o[0] for o in outs} == {"RUNNING"}


class _Down(Exception):
    """A backend's error of one message (as SlurmError)."""


class _Unreachable(_Down):
    """A subclass of one message: shared as itself."""


class _Failed(_Down):
    """A subclass with arguments of its own (as SlurmCommandError): shared as its base."""

    def __init__(self, argv: List[str], stderr: str) -> None:
        super().__init__(f"{argv[0]}: {stderr}")


def test_a_failed_fetch_is_shared_like_an_answer(tmp_path: Path) -> None:
    """A fetch that fails with the scheduler's shared error is raised again by the looks
    within the age, without asking; ``--fresh``, a stale mark or another kind of error asks."""
    plane = StatusPlane("fake", "c", directory=str(tmp_path))
    asked: List[int] = []
    errors: List[Exception] = [_Unreachable("squeue: error: Unable to contact slurm controller")]

    def fetch() -> Any:
        asked.append(1)
        if errors:
            raise errors.pop(0)
        return {"7": "RUNNING"}

    with pytest.raises(_Unreachable, match=r"^squeue: error: Unable to contact slurm controller$"):
        plane.get(fetch, max_age=60, shared_failure=_Down)
    for _ in range(3):  # shared: the same class and message, how old it is, no call
        with pytest.raises(_Unreachable, match=r"controller \(the shared status plane's look \d+\.\d s ago; "):
            plane.get(fetch, max_age=60, shared_failure=_Down)
    assert len(asked) == 1
    errors.append(_Failed(["squeue"], "error: Invalid user"))
    with pytest.raises(_Failed):  # --fresh asks
        plane.get(fetch, max_age=0, shared_failure=_Down)
    with pytest.raises(_Down, match=r"^squeue: error: Invalid user \(the shared") as got:
        plane.get(fetch, max_age=60, shared_failure=_Down)
    assert type(got.value) is _Down and len(asked) == 2  # its own class takes other arguments
    plane.invalidate()  # a submit or cancel from this host: asks again, and the answer is shared
    assert plane.get(fetch, max_age=60, shared_failure=_Down).items == {"7": "RUNNING"} and len(asked) == 3
    assert plane.get(fetch, max_age=60, shared_failure=_Down).items == {"7": "RUNNING"} and len(asked) == 3
    errors.append(ValueError("not the backend's"))  # not the shared kind: kept by no one
    with pytest.raises(ValueError):
        plane.get(fetch, max_age=0, shared_failure=_Down)
    assert plane.get(fetch, max_age=0, shared_failure=_Down).items == {"7": "RUNNING"} and len(asked) == 5
    errors.append(_Unreachable("down"))
    plane.invalidate()
    with pytest.raises(_Unreachable):  # a scheduler that shares no failure keeps none
        plane.get(fetch, max_age=60)
    assert plane.get(fetch, max_age=60, shared_failure=_Down).items == {"7": "RUNNING"} and len(asked) == 7


def test_one_failed_fetch_for_many_processes(tmp_path: Path) -> None:
    """Six processes look at once at a backend that is down: one of them asks it, the others
    get its error (with slurmctld down each used to wait its whole command timeout in turn)."""
    code = """
        import os, sys, time
        from tx.schedulers.plane import StatusPlane
        class Down(Exception):
            pass
        def fetch():
            with open(os.path.join(sys.argv[1], "fetches"), "a") as f:
                f.write("x")
            time.sleep(0.3)  # a slow failure: the others arrive while it is asked
            raise Down("squeue: error: Unable to contact slurm controller (connect failure)")
        try:
            StatusPlane("fake", "c", directory=sys.argv[1]).get(fetch, max_age=60, shared_failure=Down)
        except Down as e:
            print("shared" if "shared status plane" in str(e) else "asked")
    """
    procs = [_py(code, str(tmp_path)) for _ in range(6)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(out.strip())
    assert (tmp_path / "fetches").read_text() == "x"
    assert sorted(outs) == ["asked"] + ["shared"] * 5, outs


def test_plane_age_fresh_and_invalidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plane = StatusPlane("fake", "c", directory=str(tmp_path))
    fetches: List[float] = []

    def fetch() -> Any:
        fetches.append(time.time())
        return {"a": len(fetches)}

    first = plane.get(fetch, max_age=60)
    assert first.fetched_here and first.fetched_at <= fetches[0]  # stated before the backend was asked
    assert plane.get(fetch, max_age=60).items == {"a": 1} and len(fetches) == 1
    assert plane.get(fetch, max_age=0).items == {"a": 2}  # --fresh: always asks
    plane.invalidate()  # a submit or cancel from this host
    assert plane.get(fetch, max_age=60).items == {"a": 3}
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "0")
    assert max_age_for("fake") == 0.0
    assert plane.get(fetch).items == {"a": 4}
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "-1")
    with pytest.raises(ConfigError, match="TX_STATUS_MAX_AGE"):
        plane.get(fetch)


def test_a_fetch_slower_than_max_age_is_shared_after_it_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fetch that takes longer than ``max_age`` (a squeue of 10,000 array tasks) is used
    by the looks that follow it for ``max_age`` after it ended, with its age stated from
    before it asked; before, every look after it asked the backend again (a sweep status's
    describe of each of 100 failed trials made 16 squeue). Another process reads the same
    file the same way, and the writer does not parse what it has just written."""
    from tx.schedulers import plane as plane_mod

    clock = [1000.0]
    monkeypatch.setattr(plane_mod, "time", SimpleNamespace(time=lambda: clock[0]))  # the plane's clock only
    plane = StatusPlane("fake-slow", "c", directory=str(tmp_path))
    fetches: List[float] = []

    def slow_fetch() -> Any:
        fetches.append(clock[0])
        clock[0] += 3.0  # the backend's answer and its parsing take 3 s
        return {"n": len(fetches)}

    first = plane.get(slow_fetch, max_age=1)
    assert first.fetched_here and (first.fetched_at, first.done_at) == (1000.0, 1003.0)
    loads: List[int] = []
    real_load = plane_mod.json.load
    monkeypatch.setattr(plane_mod.json, "load", lambda f: loads.append(1) or real_load(f))
    clock[0] += 0.5
    again = plane.get(slow_fetch, max_age=1)
    assert not again.fetched_here and again.items == {"n": 1} and len(fetches) == 1
    assert again.age == 3.5 and loads == []  # its age counts from before it asked; not parsed again
    other = StatusPlane("fake-slow", "c", directory=str(tmp_path)).get(slow_fetch, max_age=1)  # another process
    assert not other.fetched_here and (other.fetched_at, other.done_at) == (1000.0, 1003.0) and loads == [1]
    clock[0] += 0.6  # 1.1 s after the fetch ended
    assert plane.get(slow_fetch, max_age=1).items == {"n": 2} and fetches == [1000.0, 1004.1]
    assert plane.get(slow_fetch, max_age=0).items == {"n": 3}  # --fresh still always asks
    plane.invalidate()  # a submit from this host: a snapshot fetched before it is not used
    assert plane.get(slow_fetch, max_age=60).items == {"n": 4}


def test_one_look_asks_each_backend_once_however_long_it_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside :func:`one_look` (a sweep's status: a listing, then a describe of each failed
    trial) a snapshot fresh at the look's start or fetched during it serves the whole look,
    also after ``max_age`` has passed (on a loaded host 100 describes took longer than the
    1 s snapshot: 5 squeue for one status); outside the look it is fetched again; ``--fresh``
    asks once per look; a stale mark inside the look (a submit) still makes the next get ask."""
    from tx.schedulers import plane as plane_mod

    clock = [1000.0]
    monkeypatch.setattr(plane_mod, "time", SimpleNamespace(time=lambda: clock[0]))
    plane = StatusPlane("fake-look", "c", directory=str(tmp_path))
    fetches: List[float] = []

    def fetch() -> Any:
        fetches.append(clock[0])
        return {"n": len(fetches)}

    plane.get(fetch, max_age=1)  # fetched just before the look
    clock[0] += 0.5
    with plane_mod.one_look() as since:
        assert since == 1000.5
        for _ in range(100):  # 100 describes, 0.1 s each: the look lasts 10 s
            assert plane.get(fetch, max_age=1).items == {"n": 1}
            clock[0] += 0.1
        with plane_mod.one_look() as inner:  # nested: the same look
            assert inner == since and plane.get(fetch, max_age=1).items == {"n": 1}
    assert fetches == [1000.0]
    assert plane.get(fetch, max_age=1).items == {"n": 2}  # outside the look: 10.5 s old, asked again
    clock[0] += 0.1
    with plane_mod.one_look():
        assert plane.get(fetch, max_age=0).items == {"n": 3}  # --fresh: asked once in the look...
        clock[0] += 5
        assert plane.get(fetch, max_age=0).items == {"n": 3}  # ...and that answer serves the rest of it
        plane.invalidate()  # a submit inside the look
        assert plane.get(fetch, max_age=60).items == {"n": 4}
        clock[0] += 5
        assert plane.get(fetch, max_age=1).items == {"n": 4}
    assert len(fetches) == 4


def test_plane_newer_than_another_answer(tmp_path: Path) -> None:
    """``newer_than``: a record fetched at or after that time is fresh whatever its age (one
    read per answer of another snapshot, however long the others waited for it); one
    fetched before it, or before a stale mark, is fetched again."""
    plane = StatusPlane("fake-state", "c", directory=str(tmp_path))
    fetches: List[int] = []

    def fetch() -> Any:
        fetches.append(1)
        return {"n": len(fetches)}

    listed = time.time()
    first = plane.get(fetch, newer_than=listed)
    assert first.fetched_here and first.items == {"n": 1}
    again = StatusPlane("fake-state", "c", directory=str(tmp_path)).get(fetch, newer_than=listed)  # another process
    assert not again.fetched_here and again.items == {"n": 1}
    assert plane.get(fetch, newer_than=first.fetched_at + 0.001).items == {"n": 2}  # a later answer
    plane.invalidate()
    assert plane.get(fetch, newer_than=listed).items == {"n": 3}


def test_plane_after_a_crash_during_a_fetch(tmp_path: Path) -> None:
    """A process killed while it fetches (holding the lock) stores nothing and blocks no one."""
    holder = _py("""
        import sys, time
        from tx.schedulers.plane import StatusPlane
        def fetch():
            print("fetching", flush=True)
            time.sleep(600)
        StatusPlane("fake", "c", directory=sys.argv[1]).get(fetch, max_age=60)
    """, str(tmp_path))
    assert holder.stdout.readline().strip() == "fetching"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    snap = StatusPlane("fake", "c", directory=str(tmp_path)).get(lambda: {"b": 1}, max_age=60)
    assert snap.fetched_here and snap.items == {"b": 1}


def test_fresh_flags(tx: Any) -> None:
    """``tx list --fresh`` and ``tx status --fresh`` are accepted (the local schedulers have no
    shared snapshot: the same answer, and no ``Status as of`` line)."""
    p = tx("list", "--fresh", "-s", "local_cwd")
    assert p.returncode == 0, p.stderr
    p = tx("run", "-s", "local_cwd", "--wait", "utils.echo", "--msg", "hi")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.split()[0]
    p = tx("status", "--fresh", handle)
    assert p.returncode == 0 and "SUCCEEDED" in p.stdout and "Status as of" not in p.stdout, p.stdout + p.stderr
    p = tx("status", "--json", handle)  # and its JSON says no snapshot answered
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["state"] == "SUCCEEDED" and (got["status_as_of"], got["status_age_s"]) == (None, None), got
