"""Following a replica's log to its end, every byte once, on podman (tx_scheduler_docker._follow).

podman 4.3's own ``logs?follow=1`` drops lines from the middle of a log written fast, and
ends only when it reads the container's ``died`` event from its events log. So tx reads the
log without following, again and again (see the module). Here, on the session's engine, a
follow of a replica writing 50,000 lines gets every one, in order. Then on a second engine of
this module's own that keeps no events (scripts/start-podman.sh's ``PODMAN_EVENTS_LOGGER=none``,
about 3 s), whose follows of a running container never end (checked first), ``tx log -f`` and
the scheduler's ``log_iter(should_tail=True)`` still end, with exact output."""
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

from tx.schedulers import Stream
from tx.specs import AppDef, AppState, Role
from tx.testing.backends import environ
from tx_scheduler_docker.scheduler import DockerScheduler
from tx_scheduler_docker.testing import _ENV_KEYS, IMAGE, SCRIPTS, podman_service

#: seconds a follow may take after its container ended; tx's own bound is one pause between two
#: reads (1 s for a small log), the rest is slack for a loaded machine
FOLLOW_END = 60.0


@pytest.fixture(scope="module")
def silent_engine(podman_engine: Dict[str, str]) -> Iterator[Dict[str, str]]:
    """A second private engine (own socket, storage, networks) that keeps no events; yields
    its client environment. Depends on ``podman_engine`` for its checks (podman, root, the
    scripts) and skips as it does."""
    base = Path(tempfile.mkdtemp(prefix="tx-podnone-"))  # short: unix socket paths below it
    try:
        with podman_service(base, PODMAN_EVENTS_LOGGER="none") as exports:
            yield exports
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


def test_a_base_podman_would_refuse_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    """A ``PODMAN_BASE`` over 46 characters: podman's ``container cleanup`` (conmon's exit
    command) refuses a runroot over 50, so restart policies would silently never fire. The
    script says so in one line, exits 2 and makes nothing."""
    base = tmp_path / ("b" * max(1, 47 - len(str(tmp_path)) - 1))
    assert len(str(base)) >= 47
    p = subprocess.run(["bash", str(SCRIPTS / "start-podman.sh")], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PODMAN_BASE": str(base)})
    assert (p.returncode, p.stdout) == (2, ""), p
    assert p.stderr == (f"[start-podman] PODMAN_BASE {base} is longer than 46 characters: podman refuses its "
                        f"runroot {base}/run (over 50)\n")
    assert not base.exists()


def test_an_unknown_events_logger_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    """``PODMAN_EVENTS_LOGGER`` other than file, none or journald: one line, exit 2, nothing made."""
    base = tmp_path / "engine"
    p = subprocess.run(["bash", str(SCRIPTS / "start-podman.sh")], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PODMAN_BASE": str(base), "PODMAN_EVENTS_LOGGER": "journal"})
    assert (p.returncode, p.stdout) == (2, ""), p
    assert p.stderr == "[start-podman] PODMAN_EVENTS_LOGGER must be file, none or journald, not 'journal'\n"
    assert not base.exists()


#: the fast writer's lines: 2,538,890 bytes, written in about a second
LINES = 50_000


def test_a_fast_writer_loses_no_line(scheduler: DockerScheduler, image: str) -> None:
    """The engine's own follow gave 1.46 to 1.57 MB of this log's 2.54 MB (3 runs; lines
    missing from the middle and at the end); tx's follow, started while the replica runs,
    gives every line in order."""
    script = (f'sleep 1; i=0; while [ $i -lt {LINES} ]; do echo "line $i of the log, some text to make it longer"; '
              'i=$((i+1)); done')
    app_id = scheduler.submit(AppDef("fast", roles=[Role("w", image=image, entrypoint="sh", args=["-c", script])]), {})
    try:
        lines = _within(FOLLOW_END + 120, lambda: list(scheduler.log_iter(app_id, "w", 0, should_tail=True)))
        assert len(lines) == LINES, (len(lines), lines[-1:])
        bad = next((i for i, line in enumerate(lines) if line != f"line {i} of the log, some text to make it longer\n"),
                   None)
        assert bad is None, (bad, lines[bad - 1:bad + 2])
    finally:
        scheduler.cancel(app_id)


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``'s result, or a failure if it has not returned within ``seconds`` (its thread is
    left behind: a daemon, blocked on an open stream)."""
    out: List[Any] = []
    err: List[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # re-raised below
            err.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still following {seconds:g} s after the container ended"
    if err:
        raise err[0]
    return out[0]


def test_the_engine_keeps_its_own_follow_open(silent_engine: Dict[str, str]) -> None:
    """The premise, so that the test below means something: this engine's follow of a running
    container does not end when the container does (one that is over already is read to its
    end at once)."""
    import docker

    client = docker.DockerClient(base_url=silent_engine["DOCKER_HOST"], timeout=60)
    c = client.containers.create(IMAGE, ["sh", "-c", "sleep 1; echo hi"])
    try:
        c.start()
        stream = client.api.logs(c.id, stream=True, follow=True)
        got: List[bytes] = []
        t = threading.Thread(target=lambda: got.extend(stream), daemon=True)
        t.start()
        assert c.wait(timeout=60)["StatusCode"] == 0
        t.join(5)
        assert t.is_alive(), f"the engine ended its follow ({got}): it reads events after all"
        stream.close()
        t.join(30)
        assert b"".join(got) == b"hi\n"
    finally:
        c.remove(force=True)
        client.close()


def test_follow_ends_with_every_byte(silent_engine: Dict[str, str], tmp_path: Path) -> None:
    """Two replicas, one over at once and one writing over 2.5 seconds (stderr too, a last line
    without ``\\n``): the scheduler's follow of each ends with its exact output, and so does
    ``tx log -f`` in a fresh process, for both."""
    quick = 'echo "quick ${replica_id}"'
    slow = ('echo "line 1"; sleep 1; echo "to stderr" >&2; sleep 0.5; printf "a\\rb\\n"; sleep 1; '
            'echo "line 3"; printf "no newline"')
    app = AppDef("follow", roles=[
        Role("quick", image=IMAGE, entrypoint="sh", args=["-c", quick]),
        Role("slow", image=IMAGE, entrypoint="sh", args=["-c", slow]),
    ])
    with environ(silent_engine, unset=_ENV_KEYS):
        sched = DockerScheduler("follow")
        try:
            app_id = sched.submit(app, {})
            slow_lines = _within(FOLLOW_END + 2, lambda: list(sched.log_iter(app_id, "slow", 0, should_tail=True)))
            quick_lines = _within(FOLLOW_END, lambda: list(sched.log_iter(app_id, "quick", 0, should_tail=True)))
            assert quick_lines == ["quick 0\n"]
            assert slow_lines == ["line 1\n", "to stderr\n", "a\rb\n", "line 3\n", "no newline"], slow_lines
            only_err = _within(FOLLOW_END, lambda: list(
                sched.log_iter(app_id, "slow", 0, should_tail=True, streams=Stream.STDERR)))
            assert only_err == ["to stderr\n"]
            desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
            assert desc is not None and desc.state == AppState.SUCCEEDED, desc

            env = {**os.environ, **silent_engine, "TX_STATE_DIR": str(tmp_path / "state")}
            for role, lines in (("quick", quick_lines), ("slow", slow_lines)):
                expected = "".join(f"{role}/0 {line}" + ("" if line.endswith("\n") else "\n") for line in lines)
                p = subprocess.run([str(Path(sys.executable).parent / "tx"), "log", "-f",
                                    f"local_docker://follow/{app_id}/{role}/0"],
                                   env=env, capture_output=True, timeout=FOLLOW_END + 30)
                assert p.returncode == 0, p.stderr
                out = p.stdout.decode()
                assert out == expected, out
        finally:
            sched.close()
