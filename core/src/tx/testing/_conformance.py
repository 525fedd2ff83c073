"""``SchedulerConformance``: the tests every scheduler runs against its real backend (its
settings, fixtures and helpers: :class:`tx.testing._conformance_kit.ConformanceKit`)."""
from __future__ import annotations

import copy
from typing import Any, Dict

import pytest

from tx.schedulers import env as env_contract
from tx.schedulers.api import Scheduler
from tx.schedulers.streams import Stream
from tx.specs.api import AppDef, AppState, InvalidRunConfigException, Resource, Role, macros
from tx.specs.files import appdef_to_dict, storable_run_options
from tx.specs.handles import make_app_handle
from tx.testing._conformance_kit import ConformanceKit, _wrong_value, is_subsequence

__all__ = ["SchedulerConformance", "is_subsequence"]


class SchedulerConformance(ConformanceKit):
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
    * ``rank0_is_localhost_on_rank0`` (default None): a backend whose replica 0 of role 0
      gets ``TX_RANK0_HOST=localhost`` (itself) while the others get its address says why
      here; the kit then requires exactly that (``localhost`` there, one other value
      everywhere else). None: every replica has the same value.
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
        with values that match the replica; one app id and one rank-0 host for the app
        (but ``localhost`` on replica 0 of role 0 where ``rank0_is_localhost_on_rank0``
        says why)."""
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
            if name == env_contract.RANK0_HOST and self.rank0_is_localhost_on_rank0:
                own = values.pop("alpha/0")
                assert own == "localhost", (
                    f"{app_id}: alpha/0 has {name}={own!r}, declared localhost "
                    f"({self.rank0_is_localhost_on_rank0})")
                assert "localhost" not in values.values(), f"{app_id}: only alpha/0 may have {name}=localhost: {values}"
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
