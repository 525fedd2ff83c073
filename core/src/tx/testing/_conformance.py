"""``SchedulerConformance``: the tests every scheduler runs against its real backend."""
from __future__ import annotations

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
from tx.specs.api import AppDef, AppDryRunInfo, AppState, InvalidRunConfigException, Role, is_terminal
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

    * ``timeout`` (seconds, default 120): how long an app may take to end.
    * ``poll_interval`` (seconds, default 0.5): passed to ``Scheduler.wait``.
    * ``log_streams``: the streams the backend keeps; each is read for every replica
      (default stdout, stderr and combined; ``()`` if it keeps no logs).
    * ``reports_replica_statuses`` / ``reports_exit_codes`` (default True): whether
      ``describe`` reports per-replica states and exit codes.
    * ``lines_per_stream`` (default 20): lines each test replica writes per stream.

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

    def fresh_env(self) -> Dict[str, str]:
        """The environment of the fresh processes (default: this process's, so that a
        backend located through environment variables is found the same way)."""
        return dict(os.environ)

    def check_app_id_env(self, app_id: str, value: str) -> None:
        """``TX_APP_ID`` as a replica saw it agrees with the scheduler's app id (default:
        it is non-empty and part of the app id, which may add a namespace or queue)."""
        assert value and value in app_id, f"TX_APP_ID={value!r} does not match app id {app_id!r}"

    def fresh_call(self, scheduler: Scheduler[Any], op: str, app_id: str, *args: str) -> Any:
        """Run ``op`` (describe, log, cancel, list) on ``app_id`` in a fresh interpreter
        through a scheduler created there (:mod:`tx.testing._fresh`); its JSON answer."""
        env = self.fresh_env()
        if self.fresh_factory:
            env["TX_KIT_FACTORY"] = self.fresh_factory
        cmd = [sys.executable, "-m", "tx.testing._fresh", op, scheduler.backend, scheduler.session_name, app_id, *args]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=self.timeout)
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
        return app_id

    def check_states(self, desc: Optional[DescribeAppResponse]) -> None:
        """Every state in ``desc`` is an :class:`AppState`."""
        assert desc is not None
        assert isinstance(desc.state, AppState), f"app state {desc.state!r} is not an AppState"
        for rs in desc.roles_statuses:
            for r in rs.replicas:
                assert isinstance(r.state, AppState), f"replica state {r.state!r} is not an AppState"

    def wait_terminal(self, scheduler: Scheduler[Any], app_id: str) -> DescribeAppResponse:
        """Wait (``timeout`` seconds at most) until the app is terminal; fail otherwise."""
        desc = scheduler.wait(app_id, timeout=self.timeout, poll_interval=self.poll_interval)
        assert desc is not None, f"{app_id} disappeared while waiting for it"
        self.check_states(desc)
        assert is_terminal(desc.state), f"{app_id} not terminal after {self.timeout}s: {desc.state!r} {desc.msg}"
        return desc

    def wait_started(self, scheduler: Scheduler[Any], app_id: str) -> DescribeAppResponse:
        """Wait until the app RUNS (or ends, or ``timeout`` passes)."""
        deadline = time.monotonic() + self.timeout
        while True:
            desc = scheduler.describe(app_id)
            self.check_states(desc)
            assert desc is not None
            if desc.state == AppState.RUNNING or is_terminal(desc.state) or time.monotonic() > deadline:
                return desc
            scheduler.wait(app_id, timeout=min(self.poll_interval, max(0.0, deadline - time.monotonic())))

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
        first = scheduler.describe(app_id)
        self.check_states(first)
        assert first is not None and first.app_id == app_id
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
        again = scheduler.describe(app_id)
        self.check_states(again)
        assert again is not None and again.state == AppState.CANCELLED
        scheduler.cancel(self.unknown_app_id())

    def test_describe_unknown_app(self, scheduler: Scheduler[Any]) -> None:
        assert scheduler.describe(self.unknown_app_id()) is None

    def test_list_contains_app(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        app_id = self.submit(scheduler, self.app("txconflist", image, [("one", "echo listed", 1)]), cfg)
        apps = scheduler.list()
        assert app_id in [a.app_id for a in apps], f"{app_id} not listed"
        for a in apps:
            assert isinstance(a.state, AppState), f"{a.app_id}: state {a.state!r} is not an AppState"
        self.wait_terminal(scheduler, app_id)

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

    def test_states_are_app_states(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        app_id = self.submit(scheduler, self.app("txconfstates", image, [("one", "sleep 1; echo done", 1)]), cfg)
        self.check_states(scheduler.describe(app_id))
        self.check_states(self.wait_started(scheduler, app_id))
        self.check_states(self.wait_terminal(scheduler, app_id))
        for a in scheduler.list():
            assert isinstance(a.state, AppState)

    def test_replica_environment(self, scheduler: Scheduler[Any], cfg: Dict[str, Any], image: str) -> None:
        """Every replica has the replica environment contract (:mod:`tx.schedulers.env`):
        ``TX_APP_ID``, ``TX_ROLE_NAME``, ``TX_REPLICA_ID``, ``TX_RANK0_HOST`` and their
        TorchX names, with values that match the replica."""
        if not self.log_streams:
            pytest.skip("the scheduler keeps no logs to read the environment from")
        names = [*env_contract.REQUIRED, *(env_contract.TORCHX_NAMES[n] for n in env_contract.REQUIRED)]
        script = "; ".join(f"printf 'env {n}=%s\\n' \"${{{n}-UNSET}}\"" for n in names)
        app_id = self.submit(scheduler, self.app("txconfenv", image, [("alpha", script, 2), ("beta", script, 1)]), cfg)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.SUCCEEDED, f"{app_id}: {desc.state!r} {desc.msg}"
        stream = self.log_streams[0]
        for role, k in (("alpha", 0), ("alpha", 1), ("beta", 0)):
            lines = self.read_log(scheduler, app_id, role, k, stream)
            got = dict(ln[len("env "):].rstrip("\n").split("=", 1) for ln in lines if ln.startswith("env "))
            where = f"{app_id} {role}/{k}"
            missing = [n for n in names if got.get(n, "UNSET") == "UNSET"]
            assert not missing, f"{where}: not set in the replica: {missing} (got {got})"
            assert got["TX_ROLE_NAME"] == got["TORCHX_ROLE_NAME"] == role, f"{where}: {got}"
            assert got["TX_REPLICA_ID"] == got["TORCHX_REPLICA_IDX"] == str(k), f"{where}: {got}"
            assert got["TX_RANK0_HOST"] and got["TX_RANK0_HOST"] == got["TORCHX_RANK0_HOST"], f"{where}: {got}"
            assert got["TX_APP_ID"] == got["TORCHX_APP_ID"], f"{where}: {got}"
            self.check_app_id_env(app_id, got["TX_APP_ID"])

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
