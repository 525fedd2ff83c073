"""``SchedulerConformance``: the tests every scheduler runs against its real backend."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import pytest

from tx.schedulers import env as env_contract
from tx.schedulers.api import DescribeAppResponse, Scheduler
from tx.schedulers.streams import Stream
from tx.specs.api import (
    NONE, AppDef, AppDryRunInfo, AppState, InvalidRunConfigException, Resource, Role, is_terminal, macros,
)
from tx.specs.files import appdef_to_dict, storable_run_options
from tx.specs.handles import make_app_handle
from tx.specs.runopts import runopt


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


class SchedulerConformance:
    """Conformance tests of a scheduler, run against its real backend.

    Subclass it in a test module (the subclass's name must start with ``Test``) and
    provide fixtures (or override the defaults):

    * ``scheduler`` (required): the :class:`tx.schedulers.Scheduler` under test.
    * ``cfg``: run options for every submission (default ``{}``).
    * ``image``: ``role.image`` of the test apps (default ``""``).

    Class attributes to adjust:

    * ``timeout`` (seconds, default 120): how long an app may take to start and to end.
    * ``poll_interval`` (seconds, default 0.5): how often the kit describes an app while it
      waits (also passed to ``Scheduler.wait``).
    * ``log_streams``: the streams the backend keeps; each is read for every replica
      (default stdout, stderr and combined; ``()`` if it keeps no logs).
    * ``reports_replica_statuses`` / ``reports_exit_codes`` (default True): whether
      ``describe`` reports per-replica states and exit codes.
    * ``lines_per_stream`` (default 20): lines each test replica writes per stream.
    * ``running_seconds`` (default 5): how long the app of
      :meth:`test_states_move_forward` runs; the kit must see it RUNNING in that time.
    * ``running_not_observable`` (default None): a backend whose ``describe`` cannot show
      RUNNING for an app of ``running_seconds`` (it learns only the end, or reports no
      states between submission and the end) declares it here, as a sentence saying why;
      the kit then does not require RUNNING before SUCCEEDED, and
      :meth:`test_states_move_forward` says so in its skip reason. None (the default): the
      kit requires it.
    * ``appdef_not_stored`` (default None): a backend that keeps no copy of the submitted
      AppDef says why here; None: ``describe`` must give back the whole AppDef
      (``DescribeAppResponse.app``), here and in a fresh process in another directory.
    * ``run_options_not_stored`` (default None): a backend that keeps the AppDef but not
      the run options says why here; None: ``describe`` must give back the run options
      it was submitted with in ``metadata["run_options"]`` (see :meth:`kept_run_option`).

    What every description the kit reads must satisfy (:meth:`check_states`): the app id
    asked for; :class:`AppState` values; roles and replica ids of the submitted app, each
    once; a SUCCEEDED app has every replica SUCCEEDED (exit code 0 where reported); a
    FAILED app says why and, where replica states are reported, has a FAILED replica
    (exit code not 0); UNKNOWN (app or replica) only with a message saying what the backend
    answered. And across the descriptions of one app (:meth:`describe`): once the app or a
    replica is terminal it stays in that state.

    Methods to override where the backend needs it: :meth:`command` (how a shell script
    is run: by default ``sh -c SCRIPT``), :meth:`unknown_app_id`, :meth:`dryrun_app_id`,
    :meth:`read_log`.

    The test apps only use a POSIX shell, ``printf``, ``sleep`` and the ``${replica_id}``
    macro. Apps a test leaves running are cancelled when it ends.
    """

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
        through a scheduler created there (:mod:`tx.testing._fresh`), in directory ``cwd``
        (default: this one); its JSON answer."""
        env = self.fresh_env()
        if self.fresh_factory:
            env["TX_KIT_FACTORY"] = self.fresh_factory
        cmd = [sys.executable, "-m", "tx.testing._fresh", op, scheduler.backend, scheduler.session_name, app_id, *args]
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

    # -- the tests ------------------------------------------------------------------------------
    def test_submit_describe_logs(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """2 roles x 2 replicas print known lines: the app succeeds, describe knows its
        replicas, every replica's logs hold every line in order, ``\\r`` kept."""
        roles = ["alpha", "beta"]
        app = self.app("txconf", image, [(r, self._printing_script(r), 2) for r in roles])
        app_id = self.submit(scheduler, app, cfg)
        self.describe(scheduler, app_id)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.SUCCEEDED, f"{app_id}: {desc.state!r} {desc.msg}"
        if self.reports_replica_statuses:
            got = {rs.role: sorted(r.id for r in rs.replicas) for rs in desc.roles_statuses}
            assert got == {"alpha": [0, 1], "beta": [0, 1]}, got
            for rs in desc.roles_statuses:
                for r in rs.replicas:
                    assert r.state == AppState.SUCCEEDED, f"{rs.role}[{r.id}]: {r.state!r}"
        for role in roles:
            for k in (0, 1):
                out, err = self._expected(role, k, "out"), self._expected(role, k, "err")
                for stream in self.log_streams:
                    lines = self.read_log(scheduler, app_id, role, k, stream)
                    where = f"{app_id} {role}/{k} {stream}"
                    if stream in (Stream.STDOUT, Stream.COMBINED):
                        assert is_subsequence(out, lines), f"{where}: stdout lines missing or out of order: {lines}"
                        assert "progress 1\rprogress 2\n" in lines, f"{where}: '\\r' not kept: {lines}"
                    if stream in (Stream.STDERR, Stream.COMBINED):
                        assert is_subsequence(err, lines), f"{where}: stderr lines missing or out of order: {lines}"

    def test_failing_replica(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """A replica that exits with 3 fails the app, with its exit code where reported."""
        script = 'if [ "${replica_id}" = 1 ]; then echo "boom ${replica_id}" >&2; exit 3; fi; echo fine'
        app_id = self.submit(scheduler, self.app("txconffail", image, [("worker", script, 2)]), cfg)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.FAILED, f"{app_id}: {desc.state!r} {desc.msg}"
        if self.reports_replica_statuses:
            (rs,) = desc.roles_statuses
            r1 = next(r for r in rs.replicas if r.id == 1)
            assert r1.state == AppState.FAILED, f"worker[1]: {r1.state!r}"
            if self.reports_exit_codes:
                assert r1.exit_code == 3, f"worker[1] exit code {r1.exit_code!r}, expected 3"

    def test_cancel(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """Cancelling a long app ends it CANCELLED; cancel is idempotent; cancelling an
        unknown app does nothing."""
        app_id = self.submit(scheduler, self.app("txconfcancel", image, [("sleeper", "echo started; sleep 600", 2)]), cfg)
        self.wait_started(scheduler, app_id)
        scheduler.cancel(app_id)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.CANCELLED, f"{app_id}: {desc.state!r} {desc.msg}"
        scheduler.cancel(app_id)
        again = self.describe(scheduler, app_id)
        assert again.state == AppState.CANCELLED, f"{app_id}: {again.state!r} after a second cancel"
        scheduler.cancel(self.unknown_app_id())

    def test_describe_unknown_app(self, scheduler: Scheduler[Any]) -> None:
        assert scheduler.describe(self.unknown_app_id()) is None

    def test_list_contains_app(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """A submitted app is listed at once; once it ended, list() gives describe's state."""
        app_id = self.submit(scheduler, self.app("txconflist", image, [("one", "echo listed", 1)]), cfg)
        apps = scheduler.list()
        assert app_id in [a.app_id for a in apps], f"{app_id} not listed"
        for a in apps:
            assert isinstance(a.state, AppState), f"{a.app_id}: state {a.state!r} is not an AppState"
        desc = self.wait_terminal(scheduler, app_id)
        listed = {a.app_id: a.state for a in scheduler.list()}
        assert listed.get(app_id) == desc.state, (
            f"{app_id}: list() says {listed.get(app_id)!r}, describe says {desc.state!r}"
        )

    def test_dryrun_is_deterministic_and_submits_nothing(
        self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str
    ) -> None:
        app = self.app("txconfdry", image, [("alpha", "echo a", 2), ("beta", "echo b", 1)])
        before = sorted(a.app_id for a in scheduler.list())
        texts = []
        for _ in range(2):
            info = scheduler.submit_dryrun(app, cfg)
            text = str(info)
            assert isinstance(text, str) and text.strip(), "str(dryrun info) is empty"
            app_id = self.dryrun_app_id(info)
            if app_id:
                text = text.replace(app_id, "<APP_ID>")
                assert scheduler.describe(app_id) is None, f"dryrun created {app_id}"
                assert app_id not in [a.app_id for a in scheduler.list()], f"dryrun listed {app_id}"
            texts.append(text)
        after = sorted(a.app_id for a in scheduler.list())
        assert after == before, f"dryrun submitted something: list() went from {before} to {after}"
        assert texts[0] == texts[1], "two dryruns of one app differ (beyond the app id)"

    def test_bad_cfg_wrong_type(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        opts = list(scheduler.run_opts())
        if not opts:
            pytest.skip("the scheduler has no run options")
        app = self.app("txconfcfg", image, [("one", "echo x", 1)])
        for key, opt in opts:
            with pytest.raises(InvalidRunConfigException):
                scheduler.submit_dryrun(app, {**cfg, key: _wrong_value(opt)})

    def test_bad_cfg_missing_required(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        required = [k for k, o in scheduler.run_opts() if o.is_required]
        if not required:
            pytest.skip("the scheduler has no required run options")
        app = self.app("txconfcfg", image, [("one", "echo x", 1)])
        for key in required:
            with pytest.raises(InvalidRunConfigException):
                scheduler.submit_dryrun(app, {k: v for k, v in cfg.items() if k != key})

    def test_states_move_forward(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """An app that runs ``running_seconds`` is seen RUNNING before SUCCEEDED, and so is
        each of its replicas where replica states are reported (unless the backend declares
        ``running_not_observable``); it stays SUCCEEDED, and every state the kit saw on the
        way was valid (:meth:`observe`)."""
        script = f"sleep {self.running_seconds:g}; echo done"
        app_id = self.submit(scheduler, self.app("txconfstates", image, [("one", script, 2)]), cfg)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.SUCCEEDED, f"{app_id}: {desc.state!r} {desc.msg}"
        seen = self.states_seen(app_id)
        for a in scheduler.list():
            assert isinstance(a.state, AppState), f"{a.app_id}: state {a.state!r} is not an AppState"
        if self.running_not_observable:
            pytest.skip(f"RUNNING before SUCCEEDED not required: {self.running_not_observable}")
        assert AppState.RUNNING in seen, (
            f"{app_id} ran {self.running_seconds:g}s but was never seen RUNNING: "
            f"{' -> '.join(map(str, seen))} (polled every {self.poll_interval:g}s; a backend that cannot "
            "show RUNNING declares running_not_observable)"
        )
        if self.reports_replica_statuses:
            for k in (0, 1):
                got = self.states_seen(app_id, ("one", k))
                assert AppState.RUNNING in got, (
                    f"{app_id} replica one/{k} was never seen RUNNING: {' -> '.join(map(str, got))} "
                    f"(the app was: {' -> '.join(map(str, seen))})"
                )

    def contract_env(self, scheduler: Scheduler[Any]) -> Dict[str, str]:
        """What the Runner adds to every role's env before the scheduler sees the app
        (``TX_JOB_ID`` with the ``${app_id}`` macro, under both names): the kit submits to
        the scheduler directly, so it adds the same."""
        return env_contract.with_torchx_names(
            {env_contract.JOB_ID: make_app_handle(scheduler.backend, scheduler.session_name, macros.app_id)}
        )

    def check_replica_env(
        self, scheduler: Scheduler[Any], app: AppDef, app_id: str, role: str, k: int, got: Dict[str, str],
    ) -> None:
        """The contract variables replica ``role/k`` printed (``got``) are all set, under both
        names, with the values :mod:`tx.schedulers.env` defines."""
        where = f"{app_id} {role}/{k}"
        names = [*env_contract.REQUIRED, *(env_contract.TORCHX_NAMES[n] for n in env_contract.REQUIRED)]
        missing = [n for n in names if got.get(n, "UNSET") == "UNSET"]
        assert not missing, f"{where}: not set in the replica: {missing} (got {got})"
        for n in env_contract.REQUIRED:
            alias = env_contract.TORCHX_NAMES[n]
            assert got[n] == got[alias], f"{where}: {n}={got[n]!r} but {alias}={got[alias]!r}"
        idx = [r.name for r in app.roles].index(role)
        want = {
            env_contract.ROLE_NAME: role,
            env_contract.ROLE_IDX: str(idx),
            env_contract.REPLICA_ID: str(k),
            env_contract.NUM_REPLICAS: str(app.roles[idx].num_replicas),
            env_contract.JOB_ID: make_app_handle(scheduler.backend, scheduler.session_name, got[env_contract.APP_ID]),
        }
        wrong = {n: f"{got[n]!r}, expected {v!r}" for n, v in want.items() if got[n] != v}
        assert not wrong, f"{where}: wrong contract values: {wrong}"
        assert got[env_contract.RANK0_HOST].strip(), f"{where}: TX_RANK0_HOST is empty"
        self.check_app_id_env(app_id, got[env_contract.APP_ID])

    def test_replica_environment(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """Every replica has the replica environment contract (:mod:`tx.schedulers.env`):
        all of ``TX_APP_ID``, ``TX_JOB_ID``, ``TX_ROLE_NAME``, ``TX_ROLE_IDX``,
        ``TX_REPLICA_ID``, ``TX_NUM_REPLICAS`` and ``TX_RANK0_HOST`` and their TorchX names,
        with values that match the replica; one app id and one rank-0 host for the app."""
        if not self.log_streams:
            pytest.skip("the scheduler keeps no logs to read the environment from (log_streams is empty)")
        names = [*env_contract.REQUIRED, *(env_contract.TORCHX_NAMES[n] for n in env_contract.REQUIRED)]
        script = "; ".join(f"printf 'env {n}=%s\\n' \"${{{n}-UNSET}}\"" for n in names)
        app = self.app("txconfenv", image, [("alpha", script, 2), ("beta", script, 1)])
        extra = self.contract_env(scheduler)
        for role in app.roles:
            role.env.update(extra)
        app_id = self.submit(scheduler, app, cfg)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.SUCCEEDED, f"{app_id}: {desc.state!r} {desc.msg}"
        stream = self.log_streams[0]
        seen: Dict[str, Dict[str, str]] = {}
        for role, k in (("alpha", 0), ("alpha", 1), ("beta", 0)):
            lines = self.read_log(scheduler, app_id, role, k, stream)
            got = dict(ln[len("env "):].rstrip("\n").split("=", 1) for ln in lines if ln.startswith("env "))
            self.check_replica_env(scheduler, app, app_id, role, k, got)
            seen[f"{role}/{k}"] = got
        for name in (env_contract.APP_ID, env_contract.RANK0_HOST):
            values = {where: got[name] for where, got in seen.items()}
            assert len(set(values.values())) == 1, f"{app_id}: the replicas disagree on {name}: {values}"

    def test_describe_gives_back_the_appdef(
        self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str, tmp_path: Any
    ) -> None:
        """A 2-role AppDef with args, env, resources, retries and metadata comes back whole
        from ``describe``, here and in a fresh process started in another directory (as
        ``tx describe`` from another shell): the scheduler keeps it with the job. And the
        run options it was submitted with come back in ``metadata["run_options"]``, one of
        them not at its default (:meth:`kept_run_option`)."""
        if self.appdef_not_stored:
            pytest.skip(self.appdef_not_stored)
        extra = self.kept_run_option(scheduler)
        cfg = {**cfg, extra[0]: extra[1]} if extra else dict(cfg)
        defaults = {name: opt.default for name, opt in scheduler.run_opts()}
        changed = {k: v for k, v in storable_run_options(cfg).items() if v != defaults.get(k)}
        entrypoint, args = self.command("echo kept ${replica_id}")
        res = Resource(cpu=1, gpu=0, memMB=64)
        app = AppDef("txconfkept", metadata={"kit": "describe"}, roles=[
            Role("alpha", image=image, entrypoint=entrypoint, args=list(args), env={"TX_KIT_A": "a b"},
                 num_replicas=2, resource=res, max_retries=1),
            Role("beta", image=image, entrypoint=entrypoint, args=list(args), env={"TX_KIT_B": "2"},
                 resource=res, max_retries=2),
        ])
        submitted = copy.deepcopy(app)
        app_id = self.submit(scheduler, app, cfg)
        desc = self.describe(scheduler, app_id)
        assert desc.app == submitted, (
            f"{app_id}: describe gave back {desc.app!r} ({desc.metadata.get('app_not_stored')}), not {submitted!r}")
        if not self.run_options_not_stored:
            assert changed, f"no run option of {cfg} differs from its default: override kept_run_option"
            kept = desc.metadata.get("run_options")
            assert isinstance(kept, dict) and {k: kept.get(k, "<absent>") for k in changed} == changed, (
                f"{app_id}: describe's metadata['run_options'] is {kept!r}; submitted with {changed}")
        got = self.fresh_call(scheduler, "describe", app_id, cwd=str(tmp_path))
        assert got.get("app") == appdef_to_dict(submitted), f"a fresh process in {tmp_path} describes {app_id} as {got}"

    def test_fresh_process_sees_the_app(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """A scheduler created in a fresh process (as ``tx status``, ``tx log`` and ``tx
        cancel`` from another shell create it) describes, lists, reads the logs of and
        cancels apps this one submitted: no state lives only in memory."""
        done = self.submit(scheduler, self.app("txconffresh", image, [("alpha", self._printing_script("alpha"), 2)]), cfg)
        running = self.submit(scheduler, self.app("txconffresh", image, [("sleeper", "echo started; sleep 600", 1)]), cfg)
        desc = self.wait_terminal(scheduler, done)
        assert desc.state == AppState.SUCCEEDED, f"{done}: {desc.state!r} {desc.msg}"
        got = self.fresh_call(scheduler, "describe", done)
        assert got["found"], f"a fresh process does not know {done}"
        assert got["state"] == "SUCCEEDED", f"a fresh process sees {done} as {got}"
        if self.reports_replica_statuses:
            assert sorted(got["replicas"].get("alpha", {})) == ["0", "1"], f"fresh describe of {done}: {got}"
        for k in (0, 1):
            for stream in self.log_streams:
                lines = self.fresh_call(scheduler, "log", done, "alpha", str(k), stream.value)["lines"]
                want = self._expected("alpha", k, "err" if stream == Stream.STDERR else "out")
                assert is_subsequence(want, lines), f"fresh log of {done} alpha/{k} {stream}: {lines}"
        listed = self.fresh_call(scheduler, "list", done)["app_ids"]
        assert done in listed and running in listed, f"a fresh list() lacks {done} or {running}: {listed}"
        self.wait_started(scheduler, running)
        got = self.fresh_call(scheduler, "describe", running)
        assert got["found"] and got["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"), (
            f"a fresh process sees the running app {running} as {got}"
        )
        self.fresh_call(scheduler, "cancel", running)
        desc = self.wait_terminal(scheduler, running)
        assert desc.state == AppState.CANCELLED, f"cancel from a fresh process: {running} is {desc.state!r} {desc.msg}"
