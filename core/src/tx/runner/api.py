"""The Runner: submit apps and components to schedulers and act on their handles.

Same API as TorchX's ``torchx.runner.Runner`` (https://pytorch.org/torchx/latest/runner.html).
A thin facade over the runner's floors (docs/architecture.md): every handle is parsed once
(:mod:`tx.runner.handles`), run options are merged once per hop (:mod:`tx.runner.options`),
one app on one scheduler is the engine's (:mod:`tx.runner.engine`), and the archive
(:mod:`tx.runner.archiver`), failover (:mod:`tx.runner.failover`) and sweeps
(:mod:`tx.runner.sweep`) stand beside each other above it.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping as _Mapping
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Union

import attrs

from tx.runner import failover, options
from tx.runner.archiver import Archiver
from tx.runner.engine import Engine
from tx.runner.handles import AppRef, Ref, RunRef, SweepRef, TrialRef, parse
from tx.schedulers.api import ListAppResponse, Scheduler
from tx.schedulers.streams import filter_regex, split_lines
from tx.specs.api import AppDef, AppDryRunInfo, check_app_name
from tx.specs.handles import AppHandle
from tx.specs.runopts import CfgVal, runopts
from tx.specs.status import AppStatus

if TYPE_CHECKING:
    from datetime import datetime

    from tx.runner.archive import LogArchive

__all__ = ["DEFAULT_SESSION", "Runner", "get_runner"]

DEFAULT_SESSION = "tx"


class Runner:
    """Submits apps to schedulers and queries them by app handle.

    Args:
        name: the session name (the middle part of app handles).
        scheduler_factories: scheduler name -> factory ``(session_name, **kwargs) ->
            Scheduler``, as TorchX's ``Runner`` takes them; None (the default): the
            schedulers of the plugin registry.
        component_defaults: component name -> {argument: value string}, as in the
            ``[component:<name>]`` sections of ``.txconfig``.
        scheduler_params: keyword arguments for every scheduler factory.
        registry: the plugin registry (default: the process-wide one).

    The positional order is TorchX 0.7's ``Runner(name, scheduler_factories,
    component_defaults, scheduler_params)``.

    Use it as a context manager (or call :meth:`close`) so schedulers release their
    clients.

    Raises:
        TypeError: ``scheduler_factories`` is not a mapping of callables (e.g. component
            defaults passed in its place).
    """

    def __init__(
        self,
        name: str = DEFAULT_SESSION,
        scheduler_factories: Optional[Mapping[str, Any]] = None,
        component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
        scheduler_params: Optional[Mapping[str, Any]] = None,
        registry: Any = None,
    ) -> None:
        if scheduler_factories is not None and (not isinstance(scheduler_factories, _Mapping) or not all(
                callable(f) for f in scheduler_factories.values())):
            raise TypeError(
                "Runner(name, scheduler_factories, component_defaults, scheduler_params): "
                "scheduler_factories must map scheduler names to factories; pass "
                "component_defaults= and scheduler_params= by keyword"
            )
        self._name = name
        self._engine = Engine(name, scheduler_factories, scheduler_params, registry, component_defaults)
        self._archiver = Archiver(self._engine)  # it subscribes to the engine's lifecycle events

    @property
    def engine(self) -> Engine:
        """The :class:`tx.runner.engine.Engine` under this runner (one app on one scheduler)."""
        return self._engine

    @property
    def registry(self) -> Any:
        """The plugin registry."""
        return self._engine.registry

    def name(self) -> str:
        """The session name."""
        return self._name

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close every scheduler this runner created (idempotent)."""
        self._engine.close()

    # -- schedulers ------------------------------------------------------------------
    def scheduler_backends(self) -> List[str]:
        """Names of the installed schedulers (or of the ``scheduler_factories`` given)."""
        return self._engine.scheduler_backends()

    @property
    def _scheduler_instances(self) -> Dict[str, Scheduler[Any]]:
        """The scheduler instances made so far, by name, under TorchX 0.7.0's attribute name:
        code written for TorchX (codeflare-sdk's DDPJobDefinition) puts its own instance
        there (``runner._scheduler_instances["ray"] = RayScheduler(...)``), and the runner
        then uses it for that scheduler."""
        return self._engine.schedulers

    def _scheduler(self, scheduler: str) -> Scheduler[Any]:
        return self._engine.scheduler(scheduler)

    def scheduler(self, scheduler: str) -> Scheduler[Any]:
        """The scheduler object named ``scheduler``, created on first use and closed by
        :meth:`close` (for scheduler-specific calls, such as the local schedulers'
        ``prune``).

        Raises:
            UnknownSchedulerException: no such scheduler installed (a known one names the
                distribution to install).
            tx.plugins.PluginError: its plugin cannot be loaded.
        """
        return self._engine.scheduler(scheduler)

    def scheduler_runs_on_host(self, scheduler: str) -> bool:
        """Whether ``scheduler`` runs replicas on this host
        (:attr:`tx.schedulers.Scheduler.runs_on_host`). Raises as :meth:`scheduler`."""
        return bool(getattr(self._engine.scheduler(scheduler), "runs_on_host", False))

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The run options ``scheduler`` accepts. Raises as :meth:`scheduler`."""
        return self._engine.run_opts(scheduler)

    def _merged(self, scheduler: str, cfg: Optional[Mapping[str, CfgVal]]) -> Dict[str, Any]:
        """The hop's run options (:func:`tx.runner.options.merge`, as the ``tx`` command's)."""
        return options.merge(scheduler, self._engine.run_opts(scheduler), cfg)

    # -- submitting ------------------------------------------------------------------
    def dryrun(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        name: Optional[str] = None,
        job_id: Optional[str] = None,
    ) -> AppDryRunInfo[Any]:
        """What :meth:`schedule` would submit for ``app`` on ``scheduler``.

        The app is not modified: the runner works on a copy to which it adds
        ``TX_JOB_ID``, ``TX_CHECKPOINT_DIR`` (unless the role sets it:
        :func:`tx.config.recovery.checkpoint_url`) (and ``TX_PARENT_RUN_ID``, ``TX_TRACKERS`` and each tracker's
        ``TX_TRACKER_<NAME>_CONFIG``, from ``.txconfig`` or the environment: see
        :func:`tx.tracker.get_configured_trackers`) to every role's env.

        Run options are merged as ``tx run`` merges them (:func:`tx.runner.options.merge`):
        ``cfg`` first, then the scheduler's ``[<scheduler>]`` section of ``.txconfig``
        (TorchX's Runner reads no config file: only its CLI does), then the environment,
        as TorchX does: ``TX_<KEY>``, else ``TORCHX_<KEY>`` (``KEY`` the option name
        upper-cased, ``-`` as ``_``). A value that does not parse raises
        InvalidRunConfigException naming the variable. A key of ``cfg`` that is not a run
        option of the scheduler is an error, as on the command line (TorchX 0.7 ignores it).

        With ``workspace`` (a local directory, or a ``file://`` URL of one as TorchX writes
        it), the scheduler's workspace kind
        (:attr:`tx.schedulers.Scheduler.workspace_kind`) puts it into the first role (an
        image build, a job directory copy) before the dryrun; schedulers without a kind
        ignore it.

        ``name`` (``tx run --name``) replaces ``app.name``, whatever the component named it:
        schedulers make the job's name or id from it (``tx list``'s NAME, Slurm's job
        name, the Kubernetes object names...). It must pass :func:`tx.specs.check_app_name`.

        ``job_id``: the replicas' ``TX_JOB_ID`` (their tracker run id), default the app's
        own handle; a run with failover passes its run handle, the same in every hop.

        Raises:
            ValueError: the app has no roles or a role has no entrypoint, or the app cannot
                run on this scheduler, or ``name`` is not a valid app name.
            UnknownSchedulerException: no such scheduler.
            tx.plugins.PluginError: the scheduler's plugin cannot be loaded.
            tx.specs.InvalidRunConfigException: ``cfg`` does not fit the scheduler's run options.
            tx.workspace.WorkspaceError: the workspace kind is not installed or its build failed.
        """
        return self._engine.dryrun(app, scheduler, self._merged(scheduler, cfg), workspace, parent_run_id,
                                   name, job_id)

    def dryrun_many(self, apps: Iterable[AppDef], scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None,
                    parent_run_id: Optional[str] = None) -> List[AppDryRunInfo[Any]]:
        """:meth:`dryrun` of each app (a sweep's trials), in order, with one lifecycle event
        and one look at the trackers and the run options for all (no workspace). Raises what
        :meth:`dryrun` raises, for the first app that fails."""
        return self._engine.dryrun_many(apps, scheduler, self._merged(scheduler, cfg), parent_run_id)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submit what :meth:`dryrun` returned; returns the app handle
        ``{scheduler}://{session}/{app_id}``.

        Raises:
            ValueError: ``dryrun_info`` was not made by a scheduler's dryrun.
            UnknownSchedulerException: its scheduler is not installed.
            tx.schedulers.SchedulerError: the backend refused the request or cannot be
                reached (nothing is left half-created on it).
        """
        return self._engine.schedule(dryrun_info).handle

    def run(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None,
            workspace: Optional[str] = None, parent_run_id: Optional[str] = None,
            name: Optional[str] = None) -> AppHandle:
        """Dry-run and schedule ``app``; returns its handle ``scheduler://session/app_id``
        (``name``: the app's name instead of ``app.name``, see :meth:`dryrun`)."""
        return self.schedule(self.dryrun(app, scheduler, cfg, workspace, parent_run_id, name))

    def run_with_fallback(
        self,
        app: AppDef,
        schedulers: List[Union[str, tuple]],
        pending_timeout: Optional[float] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        watch: bool = True,
        name: Optional[str] = None,
    ) -> str:
        """Run ``app`` on the first of ``schedulers``, failing over to the next when it is
        still PENDING ``pending_timeout`` seconds after its submission, or when it failed
        with an infrastructure failure (after the scheduler's ``infra_retries``); the hop
        left is cancelled, and the cancel confirmed, before the next is submitted
        (:mod:`tx.runner.failover`, docs/recovery.md). Every hop keeps the run's
        ``TX_CHECKPOINT_DIR`` and its tracker run (``TX_JOB_ID`` is the run handle).

        Args:
            app: the AppDef.
            schedulers: scheduler names, or ``(name, cfg)`` pairs; a name alone gets the run
                options of its ``.txconfig`` section.
            pending_timeout: seconds (None: never fail over a pending app).
            watch: a detached watcher follows the run when no tx process does (one is
                started unless one lives: :func:`tx.runner.failover.ensure_watcher`); False:
                only the tx processes that look at the run follow it.
            name: the app's name instead of ``app.name`` in every hop (``tx run --name``,
                :meth:`dryrun`).

        Returns:
            the run handle ``{first scheduler}://{session}/run-<name>-<hex>``, which
            :meth:`status`, :meth:`wait`, :meth:`cancel`, :meth:`describe`,
            :meth:`log_lines` and :meth:`log_blocks` take as they take an app handle
            (acting on the live hop) and :meth:`run_status` describes.

        Raises:
            ValueError: an empty chain, a scheduler twice, ``pending_timeout`` <= 0, a bad ``name``.
            what :meth:`dryrun` and :meth:`schedule` raise for the first scheduler.
        """
        if name is not None:
            app = attrs.evolve(app, name=check_app_name(name))
        # every hop's options merged once, now, as the first hop's (kept in the run's record)
        chain = [(s, self._merged(s, None)) if isinstance(s, str) else (s[0], self._merged(s[0], s[1]))
                 for s in schedulers]
        rec = failover.create(self._engine, app, chain, pending_timeout, workspace, parent_run_id, watch=watch)
        if watch:
            failover.ensure_watcher(new_run=True)
        return rec.handle

    def run_status(self, run_handle: str) -> "failover.RunStatus":
        """The run's state and its chain of hops
        (``slurm: PENDING 10 min 00 s (Resources) -> local_docker: RUNNING``), after a failover step.

        Raises:
            tx.runner.failover.UnknownRunError: no such run on this host.
            tx.schedulers.SchedulerError: a backend cannot be reached.
        """
        return self._run_status(parse(run_handle))[0]

    def _run_status(self, ref: Ref) -> Any:
        """A look at a run, and the steps a look takes: a watcher started when none follows
        the unfinished runs, then one failover step that does not wait for another process's."""
        failover.ensure_watcher()
        rec = failover.step(self._engine, ref.handle, blocking=False)
        return failover.run_status(self._engine, ref.handle, rec)

    def component_app(self, component: str, component_args: Union[List[str], Dict[str, Any]]) -> AppDef:
        """Build the AppDef of a component from CLI-style args or a dict of arguments.

        Raises:
            tx.components.system.finder.ComponentNotFoundException, ComponentValidationException,
            tx.components.system.builders.ComponentArgumentError.
        """
        return self._engine.component_app(component, component_args)

    def dryrun_component(self, component: str, component_args: Union[List[str], Dict[str, Any]], scheduler: str,
                         cfg: Optional[Mapping[str, CfgVal]] = None, workspace: Optional[str] = None,
                         parent_run_id: Optional[str] = None, name: Optional[str] = None) -> AppDryRunInfo[Any]:
        """:meth:`dryrun` of the app a component builds (``dist.ddp``, ``file.py:fn``);
        ``name`` (``tx run --name``) replaces the name the component gave the app, also of
        a component that takes no ``name`` argument (a component's own ``name`` argument,
        as ``dist.ddp --name EXP/RUN``, keeps its other effects, such as the tracking
        run name)."""
        return self.dryrun(self.component_app(component, component_args), scheduler, cfg,
                           workspace, parent_run_id, name)

    def run_component(self, component: str, component_args: Union[List[str], Dict[str, Any]], scheduler: str,
                      cfg: Optional[Mapping[str, CfgVal]] = None, workspace: Optional[str] = None,
                      parent_run_id: Optional[str] = None, name: Optional[str] = None) -> AppHandle:
        """Run a component; returns the app handle (``name``: see :meth:`dryrun_component`)."""
        return self.schedule(self.dryrun_component(component, component_args, scheduler, cfg,
                                                   workspace, parent_run_id, name))

    # -- sweeps ----------------------------------------------------------------------
    def dryrun_sweep(
        self,
        app_or_component: Union[AppDef, str],
        spec: Any,
        scheduler: str,
        component_args: Optional[List[str]] = None,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        max_parallel: Optional[int] = None,
        env: Optional[Mapping[str, str]] = None,
        name: Optional[str] = None,
    ) -> Any:
        """What :meth:`run_sweep` would submit: every trial's request and, where the
        scheduler has one, the native array request (a :class:`tx.runner.sweep.SweepDryRunInfo`;
        ``str()`` of it is the request(s) and the trial table).

        Args:
            app_or_component: an AppDef, or a component name (``dist.ddp``, ``file.py:fn``).
            spec: the :class:`tx.specs.sweep.SweepSpec` (grid, random, trials, seed).
            component_args: the component's arguments; ``${NAME}`` stands for parameter
                NAME. A parameter not used as ``${NAME}`` is passed as ``--NAME=VALUE``.
            max_parallel: the most trials running at once (None: no bound).
            env: env added to every role (``${NAME}`` substituted).
            name: the sweep's name (default: the app's or the component's); given, it is also
                every trial's app name (it must pass :func:`tx.specs.check_app_name`).

        Every replica of trial ``i`` gets ``TX_SWEEP_ID`` (the sweep handle),
        ``TX_TRIAL_INDEX`` (``i``) and ``TX_TRIAL_PARAMS`` (its parameters as JSON).

        Raises:
            tx.specs.sweep.SweepFormatError: no parameters, an empty grid, a parameter the
                app does not take, a value the component rejects, more trials than the
                scheduler's array limit.
            what :meth:`dryrun` raises, for a trial.
        """
        # deferred: sweeps need the component system, which Runner.run of an AppDef does not
        from tx.runner import sweep

        return sweep.dryrun_sweep(self._engine, app_or_component, spec, scheduler, component_args or [],
                                  self._merged(scheduler, cfg), max_parallel, env, name)

    def schedule_sweep(self, sweep_dryrun_info: Any) -> str:
        """Submit what :meth:`dryrun_sweep` returned; returns the sweep handle
        ``{scheduler}://{session}/{sweep_id}``. Trials beyond ``max_parallel`` are submitted
        by a supervisor process as others finish.

        Raises:
            tx.schedulers.SchedulerError: the backend refused a request.
        """
        # deferred: see dryrun_sweep
        from tx.runner import sweep

        return sweep.run_sweep(self._engine, sweep_dryrun_info)

    def run_sweep(self, app_or_component: Union[AppDef, str], spec: Any, scheduler: str,
                  component_args: Optional[List[str]] = None, cfg: Optional[Mapping[str, CfgVal]] = None,
                  max_parallel: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
                  name: Optional[str] = None) -> str:
        """:meth:`dryrun_sweep` then :meth:`schedule_sweep`; returns the sweep handle."""
        return self.schedule_sweep(self.dryrun_sweep(app_or_component, spec, scheduler, component_args,
                                                     cfg, max_parallel, env, name))

    def sweep_status(self, sweep_handle: str) -> Any:
        """The sweep's trials (a :class:`tx.runner.sweep.SweepStatus`: index, params,
        state, attempts, duration, why failed).

        Raises:
            tx.runner.sweep.UnknownSweepError: no such sweep recorded on this host.
            tx.schedulers.SchedulerError: the backend cannot be reached.
        """
        # deferred: see dryrun_sweep
        from tx.runner import sweep

        return sweep.sweep_status(self._engine, sweep_handle)

    def cancel_sweep(self, sweep_handle: str) -> None:
        """Cancel every trial of the sweep; pending trials are not submitted any more.
        Raises tx.runner.sweep.UnknownSweepError: no such sweep recorded on this host."""
        # deferred: see dryrun_sweep
        from tx.runner import sweep

        sweep.cancel_sweep(self._engine, sweep_handle)

    def resume_sweep(self, sweep_handle: str) -> List[int]:
        """Submit again exactly the trials that failed or were cancelled (each a new attempt
        of the same trial, in the same sweep); returns their indexes.

        Raises:
            tx.runner.sweep.UnknownSweepError: no such sweep recorded on this host.
            tx.schedulers.SchedulerError: the backend refused a request.
        """
        # deferred: see dryrun_sweep
        from tx.runner import sweep

        return sweep.resume_sweep(self._engine, sweep_handle)

    # -- handles -----------------------------------------------------------------------
    def _app(self, ref: Ref) -> AppRef:
        """The app a reference names: an app's own, a trial's last attempt's (a sweep's or a
        run's id, asked of its scheduler as an app id, names none there)."""
        if isinstance(ref, AppRef):
            return ref
        if isinstance(ref, TrialRef):
            # deferred: see dryrun_sweep
            from tx.runner import sweep

            rec = sweep.load_record(ref.sweep.handle)
            if ref.index >= len(rec.trials) or not rec.trials[ref.index].attempts:
                raise sweep.UnknownSweepError(f"no trial {ref.index} of {ref.sweep.handle} was submitted")
            return AppRef(rec.scheduler, rec.session, rec.trials[ref.index].attempts[-1])
        ident = ref.sweep_id if isinstance(ref, SweepRef) else ref.run_id
        return AppRef(ref.scheduler, ref.session, ident)

    def status(self, app_handle: AppHandle) -> Optional[AppStatus]:
        """The app's status, or None if its scheduler does not know it.

        Raises:
            MalformedAppHandleException: ``app_handle`` is not ``{scheduler}://{session}/{app_id}``.
            UnknownSchedulerException: the handle's scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.

        Of a run handle (:meth:`run_with_fallback`): the live hop's status with the run's
        state (PENDING between two hops; without a live app, a status of the run's state
        whose ``msg`` is the chain), never None.
        """
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            run, status = self._run_status(ref)  # the failover step this look takes
            if status is None:  # a hop being submitted, or one its backend forgot
                return AppStatus(state=run.state, msg=run.chain)
            return status if status.state == run.state else attrs.evolve(status, state=run.state)
        return self._engine.status(self._app(ref))

    def wait(self, app_handle: AppHandle, wait_interval: float = 10,
             timeout: Optional[float] = None) -> Optional[AppStatus]:
        """Block until the app is terminal (or ``timeout`` seconds pass) and return its
        status; None if the app does not exist. ``wait_interval`` (seconds) bounds the
        polling period of schedulers that cannot be notified. Raises as :meth:`status`.

        Of a run handle: follows the run over its hops, failing it over when due.
        """
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            failover.ensure_watcher()  # a watcher follows the run when this wait ends
            return failover.wait(self._engine, ref.handle, wait_interval, timeout)
        return self._engine.wait(self._app(ref), wait_interval, timeout)

    def cancel(self, app_handle: AppHandle) -> None:
        """Ask the scheduler to cancel the app (non-blocking; no-op for unknown or finished
        apps). Raises as :meth:`status`.

        Of a run handle: no hop is submitted any more and the live hop is cancelled.
        """
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            failover.cancel(self._engine, ref.handle)
            failover.ensure_watcher()  # it ends the run's live hop and records the run's end
            return
        self._engine.cancel(self._app(ref))

    def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of :meth:`cancel` (TorchX's name); warns with
        PendingDeprecationWarning."""
        warnings.warn("Runner.stop is deprecated, use Runner.cancel", PendingDeprecationWarning,
                      stacklevel=2)
        self.cancel(app_handle)

    def describe(self, app_handle: AppHandle) -> Optional[AppDef]:
        """The AppDef of the app: as submitted when this runner launched it, else as the
        scheduler can rebuild it; None if the app does not exist. Raises as :meth:`status`.

        Of a run handle: the run's AppDef (with its ``TX_CHECKPOINT_DIR``).
        """
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            # the AppDef reader: only for a run's record
            from tx.specs.files import appdef_from_dict

            return appdef_from_dict(failover.load_record(ref.handle).appdef)
        return self._engine.describe(self._app(ref))

    def log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[str]:
        """Lines (with ``\\n``) of replica ``k`` of ``role_name``; from tx's log archive
        where the backend no longer has them.

        Raises:
            UnknownAppException: the app does not exist.
            MalformedAppHandleException: ``app_handle`` is not ``{scheduler}://{session}/{app_id}``.
            UnknownSchedulerException: the handle's scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.
            ValueError: a stream the scheduler does not keep.
            NotImplementedError: the scheduler keeps no logs.

        Of a run handle: every hop's lines, oldest first (following: across hops).
        """
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            if since is not None or until is not None:
                raise ValueError("--since/--until read one app: give the hop's handle (`tx status` lists them)")
            failover.ensure_watcher()  # a watcher follows the run while no one reads it
            blocks = failover.log_blocks(self._engine, ref.handle, role_name, k, should_tail, streams, self.log_blocks)
            return filter_regex(regex, (line for b in blocks for line in split_lines(b.decode("utf-8", "replace"))))
        app = self._app(ref)
        if streams is None and since is None and until is None:  # the archive may stand in
            blocks = self._archiver.blocks(app, role_name, k, should_tail, check_known=True)
            return filter_regex(regex, (line for b in blocks for line in split_lines(b.decode("utf-8", "replace"))))
        return self._engine.log_iter(app, role_name, k, regex, since, until, should_tail, streams)

    def log_blocks(self, app_handle: AppHandle, role_name: str, k: int = 0, should_tail: bool = False,
                   streams: Optional[Any] = None) -> Iterable[bytes]:
        """Like :meth:`log_lines` without filtering, as byte blocks of whole lines (fast relay)."""
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            failover.ensure_watcher()  # see log_lines
            return failover.log_blocks(self._engine, ref.handle, role_name, k, should_tail, streams, self.log_blocks)
        if streams is None:
            return self._archiver.blocks(self._app(ref), role_name, k, should_tail)
        return self._engine.log_blocks(self._app(ref), role_name, k, should_tail=should_tail, streams=streams)

    def list(self, scheduler: str) -> List[ListAppResponse]:
        """The apps ``scheduler`` can see, with their handles (a handle the scheduler set
        itself, e.g. for another session, is kept).

        Raises:
            UnknownSchedulerException: ``scheduler`` is not installed.
            tx.schedulers.PartialListError: only part could be read; its ``apps`` (with their
                handles) are what could.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.
        """
        return self._engine.list(scheduler)

    # -- the log archive (tx.runner.archiver, docs/recovery.md) ---------------------------
    @property
    def log_archive(self) -> Optional["LogArchive"]:
        """The :class:`tx.runner.archive.LogArchive` this runner copies logs into (default:
        ``[tx:logs] archive``, else under tx's state directory); None: no archive. Settable."""
        return self._archiver.log_archive

    @log_archive.setter
    def log_archive(self, archive: Optional["LogArchive"]) -> None:
        self._archiver.log_archive = archive

    def archive_logs(self, app_handle: AppHandle, desc: Any = None, catch_up: bool = False) -> int:
        """Copy what is new in each replica's log into :attr:`log_archive`; when ``desc``
        (the app's description) is terminal, mark the app's archive complete. Never raises:
        an archive that cannot be written is one warning, a log the backend cannot give is
        left for the next copy.

        Args:
            app_handle: the app.
            desc: its :class:`tx.schedulers.DescribeAppResponse` (None: asked here).
            catch_up: do nothing when the archive of the app is already complete.

        Returns:
            bytes written.
        """
        return self._archiver.archive_logs(self._app(parse(app_handle)), desc, catch_up)

    def archived_replicas(self, app_handle: AppHandle) -> Optional[List[tuple]]:
        """``[(role, k), ...]`` the log archive holds for the app, or None."""
        return self._archiver.archived_replicas(self._app(parse(app_handle)))


def get_runner(
    name: Optional[str] = None,
    component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
    **scheduler_params: Any,
) -> Runner:
    """A :class:`Runner` for session ``name`` (default ``tx``); ``scheduler_params`` go to
    every scheduler factory."""
    return Runner(name or DEFAULT_SESSION, component_defaults=component_defaults,
                  scheduler_params=scheduler_params)
