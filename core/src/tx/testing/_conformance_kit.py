"""The machinery of :class:`tx.testing.SchedulerConformance`: its settings, fixtures and
helpers (submitting test apps, describing them and checking every description, waiting,
fresh processes); the tests themselves are in :mod:`tx.testing._conformance`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import pytest

from tx.schedulers.api import DescribeAppResponse, Scheduler
from tx.schedulers.streams import Stream
from tx.specs.api import (
    NONE, AppDef, AppDryRunInfo, AppState, Role, is_terminal,
)
from tx.specs.runopts import runopt


#: the fresh interpreter's program: :mod:`tx.testing._fresh` run from its file (``runpy``
#: leaves ``sys.path`` as it is for a file), so that the ``tx.testing`` package is not imported
_FRESH_MAIN = (f"import runpy, sys; sys.argv[0] = {os.path.join(os.path.dirname(__file__), '_fresh.py')!r}; "
               "runpy.run_path(sys.argv[0], run_name='__main__')")


def _wrong_value(opt: runopt) -> Any:
    """A value that is not of ``opt``'s type."""
    if opt.is_type_list_of_str:
        return "not-a-list"
    if opt.is_type_dict_of_str:
        return ["not", "a", "dict"]
    if opt.opt_type is bool:
        return "not-a-bool"
    if opt.opt_type in (int, float):
        return "not-a-number"
    return 12345


def _said(text: Optional[str]) -> bool:
    """True if a message field holds something (not empty, not the ``<NONE>`` placeholder)."""
    return bool(text and text.strip() and text != NONE)


def is_subsequence(expected: Sequence[str], actual: Iterable[str]) -> bool:
    """True if ``expected`` occurs in ``actual`` in order (other lines may come between)."""
    it = iter(actual)
    return all(any(line == want for line in it) for want in expected)


class ConformanceKit:
    """Settings, fixtures and helpers of :class:`tx.testing.SchedulerConformance` (see
    its docstring for what a subclass provides and may adjust)."""

    timeout: float = 120.0
    poll_interval: float = 0.5
    log_streams: Sequence[Stream] = (Stream.STDOUT, Stream.STDERR, Stream.COMBINED)
    reports_replica_statuses: bool = True
    reports_exit_codes: bool = True
    lines_per_stream: int = 20
    running_seconds: float = 5.0
    #: why this backend cannot show RUNNING for a short app (None: it can, and must)
    running_not_observable: Optional[str] = None
    #: why this backend keeps no copy of the submitted AppDef (None: it keeps one, and
    #: :meth:`test_describe_gives_back_the_appdef` requires ``describe`` to give it back whole)
    appdef_not_stored: Optional[str] = None
    #: why this backend keeps no copy of the run options (None: it keeps them, and
    #: :meth:`test_describe_gives_back_the_appdef` requires ``metadata["run_options"]``)
    run_options_not_stored: Optional[str] = None
    #: why replica 0 of role 0 has ``TX_RANK0_HOST=localhost`` while every other replica has
    #: its address (None: every replica has the same value, and the kit requires it)
    rank0_is_localhost_on_rank0: Optional[str] = None
    #: dotted path of the factory a fresh process creates the scheduler with (None: by
    #: name through the plugin registry, as the ``tx`` CLI does)
    fresh_factory: Optional[str] = None

    # -- fixtures a subclass provides ------------------------------------------------------
    @pytest.fixture
    def scheduler(self) -> Scheduler[Any]:
        """The scheduler under test: a subclass must provide this fixture."""
        pytest.fail(f"{type(self).__name__} must define a 'scheduler' fixture returning the scheduler under test")

    @pytest.fixture
    def cfg(self) -> Dict[str, Any]:
        """Run options of every submission."""
        return {}

    @pytest.fixture
    def image(self) -> str:
        """``role.image`` of the test apps."""
        return ""

    @pytest.fixture(autouse=True)
    def _tx_cancel_leftovers(self) -> Iterable[None]:
        self._submitted: List[Tuple[Scheduler[Any], str]] = []
        self._apps: Dict[str, AppDef] = {}
        self._history: Dict[str, List[AppState]] = {}
        self._replica_history: Dict[str, Dict[Tuple[str, int], List[AppState]]] = {}
        yield
        for sched, app_id in self._submitted:
            try:
                sched.cancel(app_id)
            except Exception:  # noqa: BLE001 - best effort clean-up
                pass

    # -- overridable helpers ---------------------------------------------------------------
    def command(self, script: str) -> Tuple[str, List[str]]:
        """``(entrypoint, args)`` that run ``script`` with a POSIX shell."""
        return "sh", ["-c", script]

    def unknown_app_id(self) -> str:
        """An app id the backend cannot know."""
        return "tx-conformance-unknown-0000"

    def dryrun_app_id(self, info: AppDryRunInfo[Any]) -> Optional[str]:
        """The app id a dryrun request holds, if the backend chooses it before submitting
        (replaced by a placeholder when comparing two dryruns)."""
        value = getattr(info.request, "app_id", None)
        return value if isinstance(value, str) and value else None

    def read_log(self, scheduler: Scheduler[Any], app_id: str, role: str, k: int, stream: Stream) -> List[str]:
        """The lines of one replica's stream, once the app is terminal."""
        return list(scheduler.log_iter(app_id, role, k, streams=stream))

    def kept_run_option(self, scheduler: Scheduler[Any]) -> Optional[Tuple[str, Any]]:
        """A run option ``(name, value)`` with a value not its default that does not change
        what the test app does; :meth:`test_describe_gives_back_the_appdef` submits with it
        added to ``cfg`` and requires it back. None (the default): ``cfg`` itself holds
        one (the kit fails the test where no entry of ``cfg`` differs from its default)."""
        return None

    def fresh_env(self) -> Dict[str, str]:
        """The environment of the fresh processes (default: this process's, so that a
        backend located through environment variables is found the same way)."""
        return dict(os.environ)

    def check_app_id_env(self, app_id: str, value: str) -> None:
        """``TX_APP_ID`` as a replica saw it agrees with the scheduler's app id (default:
        it is non-empty and part of the app id, which may add a namespace or queue)."""
        assert value and value in app_id, f"TX_APP_ID={value!r} does not match app id {app_id!r}"

    def fresh_call(self, scheduler: Scheduler[Any], op: str, app_id: str, *args: str,
                   cwd: Optional[str] = None) -> Any:
        """Run ``op`` (describe, log, cancel, list) on ``app_id`` in a fresh interpreter
        through a scheduler created there (:mod:`tx.testing._fresh`, run from its file as
        ``tx status`` runs: without the ``tx.testing`` package, pytest and this kit, whose
        imports took 1.6 s of each call on a loaded 2-core machine), in directory ``cwd``
        (default: this one); its JSON answer."""
        env = self.fresh_env()
        if self.fresh_factory:
            env["TX_KIT_FACTORY"] = self.fresh_factory
        cmd = [sys.executable, "-c", _FRESH_MAIN, op, scheduler.backend, scheduler.session_name, app_id, *args]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=self.timeout, cwd=cwd)
        assert p.returncode == 0, f"fresh process {' '.join(cmd[3:])} failed ({p.returncode}): {p.stderr[-3000:]}"
        return json.loads(p.stdout.strip().splitlines()[-1])

    # -- helpers ------------------------------------------------------------------------------
    def app(self, name: str, image: str, roles: Sequence[Tuple[str, str, int]]) -> AppDef:
        """An AppDef of ``(role name, shell script, replicas)`` roles."""
        out = []
        for role_name, script, replicas in roles:
            entrypoint, args = self.command(script)
            out.append(Role(role_name, image=image, entrypoint=entrypoint, args=args, num_replicas=replicas))
        return AppDef(name, roles=out)

    def submit(self, scheduler: Scheduler[Any], app: AppDef, cfg: Dict[str, Any]) -> str:
        """Submit ``app``; it is cancelled when the test ends, if still running."""
        app_id = scheduler.submit(app, cfg)
        self._submitted.append((scheduler, app_id))
        self._apps[app_id] = app
        return app_id

    def check_states(self, desc: Optional[DescribeAppResponse], app_id: Optional[str] = None) -> None:
        """The values of one description make sense (see the class docstring): ``desc`` is
        the answer to ``describe(app_id)``; the app's roles are checked where the kit
        submitted it (:meth:`submit`)."""
        assert desc is not None, f"describe({app_id!r}) is None for an app the kit submitted"
        where = app_id or desc.app_id
        if app_id is not None:
            assert desc.app_id == app_id, f"describe({app_id!r}) answered for app {desc.app_id!r}"
        assert isinstance(desc.state, AppState), f"{where}: app state {desc.state!r} is not an AppState"
        assert isinstance(desc.num_restarts, int) and desc.num_restarts >= -1, (
            f"{where}: num_restarts {desc.num_restarts!r} is not an int >= -1"
        )
        app = self._apps.get(where)
        sizes = {r.name: r.num_replicas for r in app.roles} if app is not None else None
        seen_roles: List[str] = []
        replicas = []
        for rs in desc.roles_statuses:
            assert rs.role not in seen_roles, f"{where}: role {rs.role!r} is described twice"
            seen_roles.append(rs.role)
            if sizes is not None:
                assert rs.role in sizes, f"{where}: describe reports role {rs.role!r}, the app has {sorted(sizes)}"
            ids: List[int] = []
            for r in rs.replicas:
                rwhere = f"{where} {rs.role}/{r.id}"
                assert isinstance(r.state, AppState), f"{rwhere}: replica state {r.state!r} is not an AppState"
                assert isinstance(r.id, int) and not isinstance(r.id, bool), f"{rwhere}: replica id {r.id!r} is not an int"
                assert r.id not in ids, f"{rwhere}: replica {r.id} is described twice"
                ids.append(r.id)
                if sizes is not None:
                    assert 0 <= r.id < sizes[rs.role], (
                        f"{rwhere}: replica id {r.id} is outside the role's {sizes[rs.role]} replicas"
                    )
                assert r.role in ("", rs.role), f"{rwhere}: the replica names role {r.role!r}"
                replicas.append((rs.role, r))
        unknown = desc.state == AppState.UNKNOWN or any(r.state == AppState.UNKNOWN for _, r in replicas)
        assert not unknown or _said(desc.msg), (
            f"{where}: UNKNOWN state without a message saying what the backend answered "
            f"(app {desc.state!r}, replicas {[(role, r.id, str(r.state)) for role, r in replicas]})"
        )
        if desc.state == AppState.SUCCEEDED:
            if self.reports_replica_statuses and sizes is not None:
                got = {(role, r.id) for role, r in replicas}
                want = {(role, k) for role, n in sizes.items() for k in range(n)}
                assert got == want, f"{where}: SUCCEEDED, but describe lacks replicas {sorted(want - got)}"
            for role, r in replicas:
                assert r.state == AppState.SUCCEEDED, f"{where}: SUCCEEDED with replica {role}/{r.id} {r.state!r}"
                if self.reports_exit_codes:
                    assert r.exit_code in (None, 0), f"{where}: replica {role}/{r.id} SUCCEEDED with exit code {r.exit_code!r}"
        if desc.state == AppState.FAILED:
            assert _said(desc.msg) or _said(desc.structured_error_msg), f"{where}: FAILED without saying why (msg, structured_error_msg empty)"
            if self.reports_replica_statuses and replicas:
                assert any(r.state == AppState.FAILED for _, r in replicas), (
                    f"{where}: FAILED, but no replica FAILED: {[(role, r.id, str(r.state)) for role, r in replicas]}"
                )
        if self.reports_exit_codes:
            for role, r in replicas:
                if r.state == AppState.FAILED:
                    assert r.exit_code != 0, f"{where}: replica {role}/{r.id} FAILED with exit code 0"

    def describe(self, scheduler: Scheduler[Any], app_id: str) -> DescribeAppResponse:
        """``scheduler.describe(app_id)``, checked (:meth:`check_states`) and recorded: the
        app (and each replica) must not leave a terminal state it was seen in."""
        desc = scheduler.describe(app_id)
        return self.observe(app_id, desc)

    def observe(self, app_id: str, desc: Optional[DescribeAppResponse]) -> DescribeAppResponse:
        """Check and record a description of ``app_id`` the kit obtained (see :meth:`describe`)."""
        self.check_states(desc, app_id)
        assert desc is not None
        history = self._history.setdefault(app_id, [])
        if history and is_terminal(history[-1]):
            assert desc.state == history[-1], (
                f"{app_id} went back from the terminal state {history[-1]} to {desc.state} "
                f"(states seen: {' -> '.join(map(str, [*history, desc.state]))})"
            )
        if not history or history[-1] != desc.state:
            history.append(desc.state)
        replicas = self._replica_history.setdefault(app_id, {})
        for rs in desc.roles_statuses:
            for r in rs.replicas:
                seen = replicas.setdefault((rs.role, r.id), [])
                if seen and is_terminal(seen[-1]):
                    assert r.state == seen[-1], (
                        f"{app_id} replica {rs.role}/{r.id} went back from the terminal state {seen[-1]} to {r.state} "
                        f"(states seen: {' -> '.join(map(str, [*seen, r.state]))})"
                    )
                if not seen or seen[-1] != r.state:
                    seen.append(r.state)
        return desc

    def states_seen(self, app_id: str, replica: Optional[Tuple[str, int]] = None) -> List[AppState]:
        """The states of the app (or of its ``(role, k)`` replica) the kit saw so far, in
        order, repeats collapsed."""
        if replica is not None:
            return list(self._replica_history.get(app_id, {}).get(replica, []))
        return list(self._history.get(app_id, []))

    def wait_terminal(self, scheduler: Scheduler[Any], app_id: str) -> DescribeAppResponse:
        """Wait (``timeout`` seconds at most) until the app is terminal, describing it every
        ``poll_interval`` (and through ``Scheduler.wait``); fail otherwise. Once terminal it
        is described once more: it must stay in that state."""
        deadline = time.monotonic() + self.timeout
        desc = self.describe(scheduler, app_id)
        while not is_terminal(desc.state) and time.monotonic() < deadline:
            step = min(self.poll_interval, max(0.0, deadline - time.monotonic()))
            waited = scheduler.wait(app_id, timeout=step, poll_interval=self.poll_interval)
            assert waited is not None, f"{app_id} disappeared while waiting for it"
            self.observe(app_id, waited)
            desc = self.describe(scheduler, app_id)
        assert is_terminal(desc.state), (
            f"{app_id} not terminal after {self.timeout}s: {desc.state!r} {desc.msg} "
            f"(states seen: {' -> '.join(map(str, self.states_seen(app_id)))})"
        )
        again = self.describe(scheduler, app_id)  # a terminal state stays (checked by describe)
        return again

    def wait_started(self, scheduler: Scheduler[Any], app_id: str) -> DescribeAppResponse:
        """Wait until the app RUNS; fail if ``timeout`` seconds pass first or the app ends
        before it was seen RUNNING (the apps this is used for run for minutes)."""
        deadline = time.monotonic() + self.timeout
        while True:
            desc = self.describe(scheduler, app_id)
            if desc.state == AppState.RUNNING:
                return desc
            seen = " -> ".join(map(str, self.states_seen(app_id)))
            assert not is_terminal(desc.state), (
                f"{app_id} ended {desc.state} before it was seen RUNNING: {desc.msg} (states seen: {seen})"
            )
            assert time.monotonic() < deadline, (
                f"{app_id} not RUNNING after {self.timeout}s: {desc.state!r} {desc.msg} (states seen: {seen})"
            )
            time.sleep(min(self.poll_interval, max(0.0, deadline - time.monotonic())))

    def _printing_script(self, role: str) -> str:
        n = self.lines_per_stream
        return (
            f"i=1; while [ $i -le {n} ]; do "
            f"printf 'out {role} %s %s\\n' ${{replica_id}} $i; "
            f"printf 'err {role} %s %s\\n' ${{replica_id}} $i >&2; "
            "i=$((i+1)); done; "
            "printf 'progress 1\\rprogress 2\\n'"
        )

    def _expected(self, role: str, k: int, stream: str) -> List[str]:
        lines = [f"{stream} {role} {k} {i}\n" for i in range(1, self.lines_per_stream + 1)]
        if stream == "out":
            lines.append("progress 1\rprogress 2\n")
        return lines
