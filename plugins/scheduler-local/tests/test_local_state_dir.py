"""The local state directory: a damaged or foreign entry is skipped by `tx list` with one
warning naming the file, and commands on that app name the file and what is wrong; a
directory this user cannot read is named; `tx gc` removes the hidden work directories of
killed launchers."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
import time
from pathlib import Path


from tx.testing.backends import backend_unavailable


def _apps_dir(tx_env) -> Path:
    return Path(tx_env["TX_STATE_DIR"]) / "local" / "apps"


def _run_ok(tx, n: int):
    handles = []
    for i in range(n):
        p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", f"hi{i}")
        assert p.returncode == 0, p.stderr
        handles.append(p.stdout.splitlines()[0])
    return handles


def test_damaged_entries_are_skipped_with_one_warning_and_named_by_commands(tx, tx_env):
    handles = _run_ok(tx, 6)
    good, empty, truncated, braces, foreign, nostate = handles
    d = _apps_dir(tx_env)
    aid = {h: h.rsplit("/", 1)[1] for h in handles}
    (d / aid[empty] / "state.json").write_text("")
    full = (d / aid[truncated] / "state.json").read_text()
    (d / aid[truncated] / "state.json").write_text(full[: len(full) // 2])
    (d / aid[truncated] / "summary.json").unlink()  # no final state remembered either
    (d / aid[empty] / "summary.json").unlink()
    (d / aid[braces] / "request.json").write_text("{}")
    (d / aid[braces] / "summary.json").write_text("{}")
    (d / aid[foreign] / "state.json").write_text(json.dumps({"state": "BOGUS"}))
    (d / aid[foreign] / "summary.json").unlink()
    (d / aid[nostate] / "state.json").unlink()
    (d / aid[nostate] / "summary.json").unlink()
    (d / "stray.txt").write_text("not an app")
    (d / "my notes").write_text("not an app either")
    (d / "emptydir").mkdir()

    p = tx("list", "--all", "-s", "local_cwd")
    assert p.returncode == 0, p.stderr
    assert [ln.split()[0] for ln in p.stdout.splitlines()[2:]] == [good]
    warnings = p.stderr.splitlines()
    assert len(warnings) == 8, p.stderr
    expected = {
        empty: f"{d / aid[empty] / 'state.json'}: is empty",
        truncated: f"{d / aid[truncated] / 'state.json'}: is not valid JSON",
        braces: f"{d / aid[braces] / 'request.json'}: is not a request written by tx",
        foreign: f"{d / aid[foreign] / 'state.json'}: is not an app state written by tx: 'state' is 'BOGUS'",
        nostate: f"{d / aid[nostate] / 'state.json'}: is missing",
    }
    for needle in [*expected.values(), f"{d / 'stray.txt'}: is a file, not an app directory",
                   f"{d / 'my notes'}: not an app of tx", f"{d / 'emptydir'}: holds no request.json"]:
        assert sum(needle in w for w in warnings) == 1, (needle, p.stderr)
    assert all("skipped" in w for w in warnings)

    for handle, needle in expected.items():
        for cmd in (["status", handle], ["log", handle], ["cancel", handle], ["describe", handle]):
            q = tx(*cmd)
            lines = [ln for ln in q.stderr.splitlines() if ln.strip()]
            assert q.returncode != 0 and len(lines) == 1, (cmd, q.stderr)
            assert needle in lines[0] and "unexpected" not in lines[0] and "Traceback" not in q.stderr, (cmd, q.stderr)
    q = tx("status", "local_cwd://tx/stray.txt")
    assert q.returncode == 1 and f"{d / 'stray.txt'}: is a file, not an app directory" in q.stderr
    # a directory without a request: named once it is older than an app being launched now
    old = time.time() - 60
    os.utime(d / "emptydir", (old, old))
    for cmd in ("status", "describe", "log", "cancel"):
        q = tx(cmd, "local_cwd://tx/emptydir")
        assert q.returncode != 0 and f"{d / 'emptydir'}: holds no request.json: not an app of tx" in q.stderr, (
            cmd, q.stderr)
    # `..` is no app id: the apps directory's parent is not looked at as a stray app
    os.utime(d.parent, (old, old))
    q = tx("status", "local_cwd://tx/..")
    assert q.returncode != 0 and "app local_cwd://tx/.. does not exist" in q.stderr \
        and "not an app of tx" not in q.stderr, q.stderr
    # nothing was rewritten: the damaged files are left for the user to look at
    assert (d / aid[empty] / "state.json").read_text() == ""
    assert (d / aid[braces] / "request.json").read_text() == "{}"
    # the good app still answers every command
    assert "State: SUCCEEDED" in tx("status", good).stdout


def _as_nobody(fn, *args):
    """Run ``fn(*args)`` in a forked child with uid/gid 65534; returns its result (pickled
    through a pipe) or raises what it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            out = ("ok", fn(*args))
        except BaseException as e:  # noqa: BLE001
            out = ("err", repr(e))
        with os.fdopen(w, "wb") as f:
            f.write(pickle.dumps(out))
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    if kind == "err":
        raise AssertionError(value)
    return value


def _list_and_status(state_dir: str, bad_id: str):
    from tx_scheduler_local.scheduler import create_cwd_scheduler

    warned = []
    from tx_scheduler_local import _listing

    s = create_cwd_scheduler("tx", state_dir=state_dir)
    listed = [a.app_id for a in _listing.list_apps(s.apps_dir, s.describe, warn=warned.append)]
    try:
        s.describe(bad_id)
        err = None
    except ValueError as e:
        err = str(e)
    return listed, warned, err


def test_a_directory_this_user_cannot_read_is_skipped_and_named(tx, tx_env):
    if not hasattr(os, "getuid") or os.getuid() != 0:
        backend_unavailable("root", "the test switches to an unprivileged uid: run the tests as root")
    # a private directory the unprivileged user can reach (pytest's tmp dirs are 0700 root's)
    top = Path(tempfile.mkdtemp(prefix="tx-hardening-"))
    try:
        top.chmod(0o755)
        env = {**tx_env, "TX_STATE_DIR": str(top / "state")}
        p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi", env=env)
        assert p.returncode == 0, p.stderr
        _check_unreadable(p.stdout.splitlines()[0], top / "state")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _check_unreadable(good: str, state: Path) -> None:
    d = state / "local" / "apps"
    # the state directory belongs to the unprivileged user; one app directory is root's 0700
    for root, dirs, files in os.walk(state):
        for name in dirs + files:
            os.chown(os.path.join(root, name), 65534, 65534)
    os.chown(state, 65534, 65534)
    shutil.copytree(d / good.rsplit("/", 1)[1], d / "rootsapp")
    os.chown(d / "rootsapp", 0, 0)
    (d / "rootsapp").chmod(0o700)
    listed, warned, err = _as_nobody(_list_and_status, str(state), "rootsapp")
    assert listed == [good.rsplit("/", 1)[1]]
    assert len(warned) == 1 and f"{d / 'rootsapp'}/" in warned[0] and "permission denied" in warned[0], warned
    assert err is not None and f"{d / 'rootsapp'}/" in err and "cannot be read by uid 65534" in err


def test_gc_removes_stale_work_dirs_of_killed_launchers(tx, tx_env):
    (good,) = _run_ok(tx, 1)
    d = _apps_dir(tx_env)
    old = time.time() - 120
    dead = d / ".new-x-9999999"  # above pid_max: no such process
    young = d / ".new-y-9999998"
    mine = d / f".new-z-{os.getpid()}"  # its writer is alive
    stale_gc = d / ".gc-w-9999997"
    for p in (dead, young, mine, stale_gc):
        p.mkdir()
        (p / "state.json").write_text("{}")
    for p in (dead, mine, stale_gc):
        os.utime(p, (old, old))
    q = tx("gc", "--keep", "30d")
    assert q.returncode == 0, q.stderr
    assert not dead.exists() and not stale_gc.exists()
    assert young.is_dir() and mine.is_dir()
    assert "State: SUCCEEDED" in tx("status", good).stdout
    # and `tx list` never showed or warned about them
    p = tx("list")
    assert p.returncode == 0 and p.stderr == "" and good in p.stdout
