"""What every test tree of the repository shares (core/tests, plugins/*/tests, tests/).

* The plugins' pytest fixtures: each plugin whose tests start a private backend keeps the
  session fixtures that start it in its ``testing`` module (``tx_scheduler_docker.testing``:
  the podman engine and the image registry; ``tx_scheduler_slurm.testing``: the Slurm
  cluster; ``tx_scheduler_k8s.testing`` and ``tx_scheduler_gcp_batch.testing``: the fake
  Kubernetes and GCP Batch servers, test code beside those plugins' tests; ...), loaded here
  with ``pytest_plugins`` as tox loads ``tox.pytest``: so a backend another tree needs too
  (the podman engine of the AWS Batch and workspace-image tests, the fake servers of
  tests/test_portability.py) is defined once and started once per session. Only the
  installed plugins are loaded: hatch's ``core`` and ``local`` environments have none or one
  of them. ``tx.testing.torchserve`` (core's: ``serve.torchserve`` is a core component) holds
  the private TorchServe.
* A session that ends in any way (its last test, Ctrl-C, SIGTERM, a timeout, SIGKILL) stops
  every backend it started: ``tx.testing._reaper`` (loaded first) turns SIGTERM into a
  clean pytest exit that runs the fixtures' finalizers, and a reaper process, watching
  pytest's pid, stops whatever is left after (every process marked with the session's
  ``TX_TEST_SESSION``, the stop scripts the fixtures recorded).
* ``tx_env``, ``tx`` and ``one_line_error``: run ``tx`` in a subprocess with a private
  state directory and home, and check a one-line error.
* No test leaves a file in the repository's root directory (a test that writes into its
  working directory fails, naming what it left there).
* Tests marked ``restarts_engine`` run last: they SIGKILL and restart a backend the session
  shares (the podman engine in a simulated host reboot, the Ray head), and no later test of
  the session may meet a backend that has just been through that.
"""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple

import pytest

REPO = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent

#: the plugins' fixture modules, each loaded where its distribution is installed
PLUGIN_FIXTURES = (
    "tx_scheduler_docker.testing",
    "tx_scheduler_k8s.testing",
    "tx_scheduler_gcp_batch.testing",
    "tx_scheduler_aws_batch.testing",
    "tx_scheduler_slurm.testing",
    "tx_scheduler_lsf.testing",
    "tx_scheduler_ray.testing",
    "tx_tracker_mlflow.testing",
)


def _installed(module: str) -> bool:
    """Whether ``module``'s top-level package can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(module.partition(".")[0]) is not None
    except ImportError:
        return False


pytest_plugins = ["tx.testing._reaper", "tx.testing.torchserve"] + [m for m in PLUGIN_FIXTURES if _installed(m)]


@pytest.fixture(scope="session")
def _tx_cache_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One ``XDG_CACHE_HOME`` for the session's ``tx`` subprocesses: tx's plugin caches
    (entry points, plugin snapshot: ``tx._plugin_cache``) are keyed by a fingerprint of the
    interpreter's ``sys.path``, so tests share them safely, as a user's commands do; a cache
    of its own per test (its private HOME) cost every test's first ``tx`` a scan of the
    environment's distributions (~0.1 s of CPU). Tests of the caches set their own."""
    return str(tmp_path_factory.mktemp("xdg-cache"))


@pytest.fixture
def tx_env(tmp_path: Path, _tx_cache_home: str) -> Dict[str, str]:
    """Environment for ``tx`` subprocesses: private state dir, home and temporary directory
    (the local schedulers' default log root is ``$TMPDIR/tx-<uid>``: a test's logs are its
    own, never a user's or another session's), no user .txconfig; tx's plugin caches shared
    by the session (:func:`_tx_cache_home`)."""
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = _tx_cache_home
    env["TX_STATE_DIR"] = str(tmp_path / "state")
    env["HOME"] = str(tmp_path / "home")
    env["TMPDIR"] = str(tmp_path / "tmp")
    os.makedirs(env["HOME"], exist_ok=True)
    os.makedirs(env["TMPDIR"], exist_ok=True)
    env.pop("TXCONFIG", None)
    env.pop("LOGLEVEL", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture
def tx(tx_env: Dict[str, str], tmp_path: Path) -> Callable[..., "subprocess.CompletedProcess[str]"]:
    """``tx(*args, cwd=None, timeout=120, env=None, input=None)``: run ``tx ARGS...`` (in
    ``tmp_path`` with :func:`tx_env` unless given) and return the CompletedProcess (text)."""

    def run(*args: str, cwd: Optional[Path] = None, timeout: float = 120, env: Optional[Dict[str, str]] = None,
            input: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(
            [str(BIN / "tx"), *args], cwd=str(cwd or tmp_path), env=env or tx_env, text=True,
            capture_output=True, timeout=timeout, input=input,
        )

    return run


@pytest.fixture
def one_line_error() -> Callable[..., None]:
    """:func:`assert_one_line_error`, as a fixture (test modules cannot import a conftest
    under --import-mode=importlib)."""
    return assert_one_line_error


def assert_one_line_error(proc: "subprocess.CompletedProcess[str]", needle: str, code: Optional[int] = None) -> None:
    """The process failed (with exit status ``code`` if given) with exactly one line on
    stderr, containing ``needle``, and no traceback."""
    lines: List[str] = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode != 0, proc
    if code is not None:
        assert proc.returncode == code, proc
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0], lines[0]


def _declared_outputs() -> Set[str]:
    """The repository root's entries that hold what a run was told to keep ($TX_UI_SCREENSHOTS:
    .ci/run puts the browser tests' screenshots in ./test-artifacts, made by whichever test
    takes the first, while the other workers' tests run)."""
    out = set()
    for var in ("TX_UI_SCREENSHOTS",):
        path = os.environ.get(var)
        if path:
            rel = os.path.relpath(os.path.abspath(path), REPO)
            if not rel.startswith(os.pardir):
                out.add(rel.split(os.sep)[0])
    return out


_DECLARED_OUTPUTS = _declared_outputs()


@pytest.fixture(autouse=True)
def _repository_root_untouched() -> Iterator[None]:
    """Fail the test that leaves a new entry in the repository's root directory (the
    working directory of a plain ``pytest`` run): tests write under ``tmp_path``."""
    before = set(os.listdir(REPO)) | _DECLARED_OUTPUTS
    yield
    new = sorted(set(os.listdir(REPO)) - before)
    if new:
        pytest.fail(f"the test left {', '.join(new)} in {REPO}: write under tmp_path", pytrace=False)


class Pane:
    """A bash in a tmux pane of a private tmux server (``-L``), 200 columns wide."""

    def __init__(self, env: dict, cwd: Path, shell: str = "bash") -> None:
        self.sock = f"tx-test-{os.getpid()}-{time.time_ns()}"
        self.env = env
        argv = {"bash": "bash --norc --noprofile", "zsh": "zsh -f"}[shell]
        self.tmux("new-session", "-d", "-x", "200", "-y", "50", "-c", str(cwd), argv)
        self.send(f"export PS1='$ ' PATH='{BIN}':\"$PATH\"; clear", "Enter")
        self.wait_for(lambda s: s.strip() == "$")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], env=self.env, capture_output=True, text=True,
                              check=True, timeout=30).stdout

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "0", *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "0")

    def wait_for(self, pred, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            if pred(s):
                return s
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never showed what was waited for:\n{s}")
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], env=self.env, capture_output=True, timeout=30)


@pytest.fixture
def terminal() -> Iterator[Callable[..., Pane]]:
    """``terminal(env, cwd, shell="bash")``: a :class:`Pane` (a shell in tmux, of its own tmux
    server), closed after the test. Without tmux the test skips, or fails under
    ``TX_TEST_REQUIRE_BACKENDS=1`` (``.ci/run`` installs tmux)."""
    import shutil

    from tx.testing.backends import backend_unavailable

    if shutil.which("tmux") is None:
        backend_unavailable("tmux", "the terminal tests drive a shell in a tmux pane: apt-get install tmux")
    panes: List[Pane] = []

    def make(env: Dict[str, str], cwd: Path, shell: str = "bash") -> Pane:
        panes.append(Pane(env, cwd, shell))
        return panes[-1]

    yield make
    for p in panes:
        p.close()


#: the session backends whose tests one pytest-xdist worker runs, all of them (``--dist
#: loadgroup``: an ``xdist_group`` each), by the fixtures that start them: podman's engines
#: share the host's bridge names (two engines name their first network alike); a test that
#: restarts a backend (the podman engine, the Ray head: ``restarts_engine``) must come after
#: every other test that uses it, which holds when one worker runs them all; and Slurm, Ray
#: and OpenLava start once instead of once per worker; so do the fake Kubernetes API server
#: and the MLflow server, which each worker started for itself (x8: two of each, their
#: start and idle CPU paid twice). First match wins (a test of several backends goes with
#: the first).
XDIST_GROUPS = (
    ("podman", ("podman_engine", "moto_docker")),
    ("slurm", ("slurm_cluster",)),
    ("ray", ("ray_head_service",)),
    ("lsf", ("lsf_cluster",)),
    ("k8s", ("fake_cluster",)),
    ("mlflow", ("mlflow_server", "store_uri")),  # store_uri: tracker-mlflow's tests, the server among its params
)


def xdist_group(item: pytest.Item) -> Optional[str]:
    """The :data:`XDIST_GROUPS` group of ``item``: by the fixtures it uses, or by its
    ``backend("NAME")`` marker (a test that asks for its backend's fixture at run time,
    ``request.getfixturevalue``, says which with it); None for a test of none of them."""
    marker = item.get_closest_marker("backend")
    names = set(getattr(item, "fixturenames", ()))
    for group, fixtures in XDIST_GROUPS:
        if (marker is not None and group in marker.args) or names.intersection(fixtures):
            return group
    return None


def _groups_dir(config: pytest.Config) -> Path:
    """Where each pytest-xdist worker writes the :data:`XDIST_GROUPS` group of its tests
    (``{nodeid: group}``) for the controller's scheduler: the controller's base temporary
    directory, whose ``popen-gwN`` is each worker's."""
    base = Path(config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    return (base.parent if hasattr(config, "workerinput") else base) / "xdist-groups"


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Move the tests marked ``restarts_engine`` to the end of the session (a stable sort:
    every other test keeps its place); under pytest-xdist's ``--dist loadgroup``, a worker
    writes the :data:`XDIST_GROUPS` group of each test of a backend for the controller's
    scheduler (:func:`pytest_xdist_make_scheduler`), which sends one worker all of a group's
    tests, in this order (so its ``restarts_engine`` tests still run after its others)."""
    items.sort(key=lambda item: item.get_closest_marker("restarts_engine") is not None)
    if _loadgroup_worker(config):
        import json

        groups = {item.nodeid: g for item in items if (g := xdist_group(item)) is not None}
        d = _groups_dir(config)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{config.workerinput['workerid']}.json"  # type: ignore[attr-defined]
        tmp.write_text(json.dumps(groups))
        tmp.rename(d / tmp.name[1:])


def _loadgroup_worker(config: pytest.Config) -> bool:
    """Whether this process is a pytest-xdist worker of ``--dist loadgroup``."""
    # a worker sees ``dist`` as "no" and ``loadgroup`` as True (xdist.remote.setup_config)
    return hasattr(config, "workerinput") and bool(getattr(config.option, "loadgroup", False))


#: the signals whose disposition a test must leave as it found it
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE, signal.SIGCHLD)


def _ignored() -> Set[int]:
    """The signals this process ignores as the kernel has it (``/proc/self/status``
    ``SigIgn``): a library's C code can ignore one without Python's ``signal.getsignal``
    seeing it."""
    try:
        with open("/proc/self/status") as f:
            bits = int(next(ln for ln in f if ln.startswith("SigIgn:")).split()[1], 16)
    except (OSError, StopIteration, ValueError):
        return set()
    return {s for s in _SIGNALS if bits >> (int(s) - 1) & 1}


def _signal_state() -> Tuple[Dict[int, object], Set[int]]:
    handlers: Dict[int, object] = {s: signal.getsignal(s) for s in _SIGNALS}
    for s in _ignored():  # ignored underneath Python's table
        handlers[s] = signal.SIG_IGN
    return handlers, set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


#: the signal dispositions and mask this process had when the session started
_SESSION_SIGNALS: List[Tuple[Dict[int, object], Set[int]]] = []


@pytest.hookimpl(trylast=True)  # after tx.testing's reaper installed its SIGTERM handler
def pytest_sessionstart(session: pytest.Session) -> None:
    """The tests run with SIGINT and SIGQUIT as a terminal gives them. A session started in
    the background by a non-interactive shell (``cmd &``, as this stop's full runs were)
    starts with both ignored, and its workers and every process a test starts inherit that:
    a launcher deaf to SIGINT, an LSF script that cannot trap it (x10-x12: 3 failures on the
    workers where no earlier test had set SIGINT back; each reproduced by starting pytest
    with SIGINT ignored)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    _SESSION_SIGNALS.append(_signal_state())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    _restore_signals(item, "before")
    return (yield)


def _restore_signals(item: pytest.Item, when: str) -> None:
    """Put back the signal dispositions and mask this process had when the session started,
    with a warning naming the test before or after which they had changed: each test starts
    from the session's (:func:`pytest_sessionstart`). Children inherit an ignored signal
    and a blocked one. Seen: compat's DistributedTestCase leaves torch elastic's handlers,
    nbclient (test_notebook) set SIGTERM to SIG_DFL (the session reaper's handler gone); both
    now put theirs back."""
    if not _SESSION_SIGNALS:
        return
    handlers, mask = _SESSION_SIGNALS[0]
    now_handlers, now_mask = _signal_state()
    changed = []
    for s in _SIGNALS:
        if now_handlers[s] == handlers[s]:
            continue
        changed.append(f"{signal.Signals(s).name} {handlers[s]} -> {now_handlers[s]}")
        if handlers[s] is not None:
            # where only the kernel's disposition changed, Python's table still holds the
            # old handler: setting it again puts the kernel's back too
            signal.signal(s, handlers[s])  # type: ignore[arg-type]
    if now_mask != mask:
        changed.append(f"blocked {sorted(now_mask)} (was {sorted(mask)})")
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if changed:
        import warnings

        warnings.warn(f"signals found changed {when} {item.nodeid}, put back: {'; '.join(changed)}", stacklevel=1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Optional[pytest.Item]) -> Iterator[None]:
    """Under ``--dist loadgroup``, stop a group's session backend once the worker ran the
    group's last test, not when the session ends: the groups are the largest units, so
    they run first, and their backends idled through the rest of the session (x8: the Ray
    head alone about 6 CPU-s a minute, on a machine whose two cores the suite keeps busy).
    A worker runs all of a group's tests one after the other (:func:`pytest_xdist_make_scheduler`),
    and knows the test it runs next; a test that asks for the backend later gets a new one
    (pytest sets up a finished fixture again)."""
    try:
        result = yield
    finally:
        _restore_signals(item, "after")
    group = xdist_group(item)
    if group is None or nextitem is None or not _loadgroup_worker(item.config):
        return result
    if xdist_group(nextitem) == group:
        return result
    names = dict(XDIST_GROUPS)[group]
    manager = item.session._fixturemanager  # pytest's own, as its fixtures use it
    for name in names:
        for fixturedef in manager.getfixturedefs(name, item) or ():
            if fixturedef.scope == "session" and fixturedef.cached_result is not None:
                # finishing it finishes the fixtures set up on it first (their finalizers)
                fixturedef.finish(item._request)  # type: ignore[attr-defined]
    _restore_signals(item, "after")
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's ``--dist loadgroup``, its groups read from what the workers wrote
    (:func:`pytest_collection_modifyitems`): xdist 3.8 marks a group by appending
    ``@group`` to the test's node id, which pytest 9 no longer lets a plugin change (a
    node's id is computed), so its own ``loadgroup`` ran every test anywhere. Each group is
    one unit of work (LoadScopeScheduling sends a unit to one worker, the largest first);
    every other test is a unit of its own."""
    if config.getoption("dist", "no") != "loadgroup":
        return None
    import json

    from xdist.scheduler import LoadScopeScheduling

    groups_dir = _groups_dir(config)

    class BackendGroups(LoadScopeScheduling):  # type: ignore[misc]
        _groups: Optional[Dict[str, str]] = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # read once all workers collected (schedule() calls this)
                self._groups = {}
                for f in sorted(groups_dir.glob("gw*.json")):
                    self._groups.update(json.loads(f.read_text()))
            if nodeid in self._groups:
                return f"group:{self._groups[nodeid]}"
            if "@" in nodeid:  # an older pytest, where xdist's own suffix still works
                return "group:" + nodeid.rsplit("@", 1)[1]
            return nodeid

    return BackendGroups(config, log)
