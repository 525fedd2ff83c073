"""The Runner: submit apps and components to schedulers and act on app handles.

Same API as TorchX's ``torchx.runner.Runner`` (https://pytorch.org/torchx/latest/runner.html).
Schedulers are created lazily, one per name, and closed by :meth:`Runner.close`.
"""
from __future__ import annotations

import difflib
import os
import sys
import threading
import warnings
from collections.abc import Mapping as _Mapping
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Union

import attrs

from tx.config.environ import CHECKPOINT_DIR, JOB_ID, PARENT_RUN_ID, TRACKERS, tracker_config_var
from tx.config.recovery import archive_url, checkpoint_root, checkpoint_url
from tx.config.run_options import env_run_opts
from tx.config.trackers import configured_trackers
from tx.log import get_logger
from tx.runner import failover
from tx.plugins import PluginError, get_registry, install_hint, not_installed_hint
from tx.runner.events import log_event
from tx.schedulers.api import ListAppResponse, PartialListError, Scheduler, SchedulerError
from tx.schedulers.env import with_torchx_names
from tx.workspace.api import localize_workspace
from tx.schedulers.streams import filter_regex, split_lines
from tx.specs.api import (
    MISSING,
    AppDef,
    AppDryRunInfo,
    InvalidRunConfigException,
    UnknownAppException,
    UnknownSchedulerException,
    check_app_name,
    is_terminal,
    macros,
)
from tx.specs.handles import AppHandle, make_app_handle, parse_app_handle
from tx.specs.runopts import CfgVal, runopts
from tx.specs.status import AppStatus

if TYPE_CHECKING:
    from datetime import datetime

    from tx.runner.archive import LogArchive

log = get_logger(__name__)
_UNSET: Any = object()

__all__ = ["DEFAULT_SESSION", "Runner", "get_runner"]

DEFAULT_SESSION = "tx"



def _backend_log_reader(sched: Any, app_id: str) -> Callable[[str, int], Iterator[bytes]]:
    """The reader :class:`tx.runner.archive.LogArchive` copies from: one replica's whole log
    from the backend, as blocks of bytes; any failure of the backend raised as
    ``BackendReadError``."""
    # the archive's module (fsspec) is loaded by log_archive, before a reader is asked for
    from tx.runner.archive import BackendReadError

    def read(role: str, k: int) -> Iterator[bytes]:
        try:
            yield from sched.log_iter_blocks(app_id, role, k, should_tail=False)
        except Exception as e:  # noqa: BLE001 - any backend failure: the caller decides
            raise BackendReadError(f"{role}/{k}: {e}") from e

    return read

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
        if scheduler_factories is not None:

            if not isinstance(scheduler_factories, _Mapping) or not all(
                callable(f) for f in scheduler_factories.values()
            ):
                raise TypeError(
                    "Runner(name, scheduler_factories, component_defaults, scheduler_params): "
                    "scheduler_factories must map scheduler names to factories; pass "
                    "component_defaults= and scheduler_params= by keyword"
                )
        self._scheduler_factories = dict(scheduler_factories) if scheduler_factories is not None else None
        self._name = name
        self._component_defaults = {k: dict(v) for k, v in (component_defaults or {}).items()}
        self._scheduler_params = dict(scheduler_params or {})
        self._registry = registry
        self._schedulers: Dict[str, Scheduler[Any]] = {}
        self._apps: Dict[AppHandle, AppDef] = {}
        self._log_archive: Any = _UNSET
        self._archive_from_settings = False
        self._archive_warned = False

    @property
    def registry(self) -> Any:
        if self._registry is None:

            self._registry = get_registry()
        return self._registry

    def name(self) -> str:
        return self._name

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close every scheduler this runner created (idempotent)."""
        for sched in self._schedulers.values():
            sched.close()
        self._schedulers.clear()

    # -- schedulers ------------------------------------------------------------------
    def scheduler_backends(self) -> List[str]:
        """Names of the installed schedulers (or of the ``scheduler_factories`` given)."""
        if self._scheduler_factories is not None:
            return list(self._scheduler_factories)
        return self.registry.names("schedulers")

    @property
    def _scheduler_instances(self) -> Dict[str, Scheduler[Any]]:
        """The scheduler instances made so far, by name, under TorchX 0.7.0's attribute name:
        code written for TorchX (codeflare-sdk's DDPJobDefinition) puts its own instance
        there (``runner._scheduler_instances["ray"] = RayScheduler(...)``), and the runner
        then uses it for that scheduler."""
        return self._schedulers

    def _scheduler(self, scheduler: str) -> Scheduler[Any]:
        sched = self._schedulers.get(scheduler)
        if sched is not None:
            return sched

        if self._scheduler_factories is not None:
            factory = self._scheduler_factories.get(scheduler)
            if factory is None:
                raise UnknownSchedulerException(
                    f"unknown scheduler {scheduler!r}: this runner has "
                    f"{', '.join(self._scheduler_factories) or 'no schedulers'}"
                )
            sched = factory(self._name, **self._scheduler_params)
            self._schedulers[scheduler] = sched
            return sched
        reg = self.registry.get("schedulers", scheduler)
        if reg is None:

            hint = not_installed_hint("schedulers", scheduler)
            if hint:
                raise UnknownSchedulerException(f"scheduler {scheduler!r} is not installed: {hint}")
            names = self.scheduler_backends()
            if not names:

                raise UnknownSchedulerException(f"unknown scheduler {scheduler!r}: {install_hint()}")

            close = difflib.get_close_matches(scheduler, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UnknownSchedulerException(
                f"unknown scheduler {scheduler!r}: {hint}installed: {', '.join(names)}"
            )
        missing = reg.missing_requirements()
        if missing:
            raise PluginError(
                f"scheduler {scheduler!r} needs {', '.join(missing)}: "
                f"{reg.install or 'pip install ' + reg.distribution}"
            )
        sched = reg.load()(self._name, **self._scheduler_params)
        self._schedulers[scheduler] = sched
        return sched

    def scheduler(self, scheduler: str) -> Scheduler[Any]:
        """The scheduler object named ``scheduler``, created on first use and closed by
        :meth:`close` (for scheduler-specific calls, such as the local schedulers'
        ``prune``).

        Raises:
            UnknownSchedulerException: no such scheduler installed (a known one names the
                distribution to install).
            tx.plugins.PluginError: its plugin cannot be loaded.
        """
        return self._scheduler(scheduler)

    def scheduler_runs_on_host(self, scheduler: str) -> bool:
        """Whether ``scheduler`` runs replicas on this host
        (:attr:`tx.schedulers.Scheduler.runs_on_host`).

        Raises:
            UnknownSchedulerException: no such scheduler installed.
        """
        return bool(getattr(self._scheduler(scheduler), "runs_on_host", False))

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The run options ``scheduler`` accepts.

        Raises:
            UnknownSchedulerException: no such scheduler installed.
        """
        return self._scheduler(scheduler).run_opts()

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

        Run options missing from ``cfg`` are taken from the environment, as TorchX
        does: ``TX_<KEY>``, else ``TORCHX_<KEY>`` (``KEY`` the option name upper-cased,
        ``-`` as ``_``) sets option ``key``; values in ``cfg`` (``-cfg``, config files)
        win. A value that does not parse raises InvalidRunConfigException naming the
        variable. A key of ``cfg`` that is not a run option of the scheduler is an error,
        as on the command line (TorchX 0.7 ignores it).

        With ``workspace`` (a local directory, or an fsspec URL as TorchX writes it:
        ``file://DIR``, or ``memory://...`` copied into a temporary directory by
        :func:`tx.workspace.localize_workspace`), the scheduler's workspace kind
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

        if name is not None:
            app = attrs.evolve(app, name=check_app_name(name))
        _check_roles(app)
        sched = self._scheduler(scheduler)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="dryrun",
                       app_image=app.roles[0].image, workspace=workspace):
            opts = sched.run_opts()
            _check_known(scheduler, opts, cfg or {})
            return self._dryrun_with(sched, scheduler, app, self._submission_env(scheduler, parent_run_id, job_id),
                                     dict(env_run_opts(scheduler, opts, dict(cfg or {}))), workspace)

    def _submission_env(self, scheduler: str, parent_run_id: Optional[str],
                        job_id: Optional[str] = None) -> Dict[str, str]:
        """What :meth:`dryrun` adds to every role's env (its docstring says what)."""
        extra_env = {JOB_ID: job_id or make_app_handle(scheduler, self._name, macros.app_id)}
        # an explicit argument wins over the submitter's environment (as in TorchX)
        parent = parent_run_id or os.environ.get(PARENT_RUN_ID)
        if parent:
            extra_env[PARENT_RUN_ID] = parent
        # the trackers of .txconfig / TX_TRACKERS, with their configs (tx.tracker)
        trackers = configured_trackers()
        if trackers:
            extra_env[TRACKERS] = ",".join(trackers)
            for tracker_name, tracker_config in trackers.items():
                if tracker_config:
                    extra_env[tracker_config_var(tracker_name)] = tracker_config
        return with_torchx_names(extra_env)

    def _dryrun_with(self, sched: Scheduler[Any], scheduler: str, app: AppDef, extra_env: Mapping[str, str],
                     cfg: Dict[str, Any], workspace: Optional[str] = None,
                     ckpt_root: Optional[str] = None) -> AppDryRunInfo[Any]:
        # the run's checkpoint location; a role's own TX_CHECKPOINT_DIR wins
        ckpt = {CHECKPOINT_DIR: checkpoint_url(scheduler, self._name, app.name, root=ckpt_root)}
        app = attrs.evolve(
            app, roles=[attrs.evolve(r, env={**ckpt, **r.env, **extra_env}) for r in app.roles]
        )
        if workspace:  # TorchX's workspaces are fsspec URLs (file://$PWD, memory://...)
            workspace = localize_workspace(workspace)
            resolved = sched.run_opts().resolve(cfg)
            role = sched.build_workspace(app.roles[0], workspace, resolved)
            if role is not None:
                app = attrs.evolve(app, roles=[role, *app.roles[1:]])
        info = sched.submit_dryrun(app, cfg)
        # the name the app was dryrun for (as TorchX's Runner): a scheduler registered
        # under another name than its backend (a subclass of a TorchX scheduler) keeps it
        info._scheduler = scheduler
        return info

    def dryrun_many(self, apps: Iterable[AppDef], scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None,
                    parent_run_id: Optional[str] = None) -> List[AppDryRunInfo[Any]]:
        """:meth:`dryrun` of each app (a sweep's trials), in order, with one lifecycle event
        and one look at the trackers and the run options for all (no workspace).

        Raises:
            what :meth:`dryrun` raises, for the first app that fails.
        """
        sched = self._scheduler(scheduler)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="dryrun_many"):
            extra_env = self._submission_env(scheduler, parent_run_id)
            opts = sched.run_opts()
            _check_known(scheduler, opts, cfg or {})
            resolved = dict(env_run_opts(scheduler, opts, dict(cfg or {})))
            root = checkpoint_root(scheduler)  # once: it reads the config files
            out = []
            for app in apps:
                _check_roles(app)
                out.append(self._dryrun_with(sched, scheduler, app, extra_env, resolved, ckpt_root=root))
            return out

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submit what :meth:`dryrun` returned; returns the app handle
        ``{scheduler}://{session}/{app_id}``.

        Raises:
            ValueError: ``dryrun_info`` was not made by a scheduler's dryrun.
            UnknownSchedulerException: its scheduler is not installed.
            tx.schedulers.SchedulerError: the backend refused the request or cannot be
                reached (nothing is left half-created on it).
        """

        scheduler = dryrun_info._scheduler
        if scheduler is None:
            raise ValueError("dryrun_info was not made by a scheduler's submit_dryrun")
        sched = self._scheduler(scheduler)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="schedule") as ev:
            app_id = sched.schedule(dryrun_info)
            if ev is not None:
                ev.app_id = app_id
        handle = make_app_handle(scheduler, self._name, app_id)
        if dryrun_info._app is not None:
            self._apps[handle] = dryrun_info._app

        get_logger(__name__).info("launched", app_handle=handle)
        return handle

    def run(
        self,
        app: AppDef,
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        name: Optional[str] = None,
    ) -> AppHandle:
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
        # settings of each fallback scheduler's section, read when a run fails over
        from tx.config.run_options import apply

        if name is not None:
            app = attrs.evolve(app, name=check_app_name(name))
        chain = []
        for entry in schedulers:
            name, cfg = (entry, None) if isinstance(entry, str) else entry
            if cfg is None:
                cfg = {}
                apply(name, cfg, opts=self.scheduler_run_opts(name))
            chain.append((name, dict(cfg)))
        rec = failover.create(self, app, chain, pending_timeout, workspace, parent_run_id, watch=watch)
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
        return failover.run_status(self, run_handle)[0]

    def component_app(self, component: str, component_args: Union[List[str], Dict[str, Any]]) -> AppDef:
        """Build the AppDef of a component from CLI-style args or a dict of arguments.

        Raises:
            tx.components.system.finder.ComponentNotFoundException, ComponentValidationException,
            tx.components.system.builders.ComponentArgumentError.
        """
        # deferred: the component system (~5 ms) only for components, not for Runner.run of an AppDef
        from tx.components.system import builders, finder

        comp = finder.get_component(component)
        defaults = self._component_defaults.get(component)
        if isinstance(component_args, dict):
            return builders.materialize_appdef_from_dict(comp.fn, component_args, defaults, name=component)
        return builders.materialize_appdef(comp.fn, list(component_args), defaults, name=component)

    def dryrun_component(
        self,
        component: str,
        component_args: Union[List[str], Dict[str, Any]],
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        name: Optional[str] = None,
    ) -> AppDryRunInfo[Any]:
        """:meth:`dryrun` of the app a component builds (``dist.ddp``, ``file.py:fn``);
        ``name`` (``tx run --name``) replaces the name the component gave the app, also of
        a component that takes no ``name`` argument (a component's own ``name`` argument,
        as ``dist.ddp --name EXP/RUN``, keeps its other effects, such as the tracking
        run name)."""
        return self.dryrun(self.component_app(component, component_args), scheduler, cfg,
                           workspace, parent_run_id, name)

    def run_component(
        self,
        component: str,
        component_args: Union[List[str], Dict[str, Any]],
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        name: Optional[str] = None,
    ) -> AppHandle:
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

        return sweep.dryrun_sweep(self, app_or_component, spec, scheduler, component_args or [],
                                  cfg, max_parallel, env, name)

    def schedule_sweep(self, sweep_dryrun_info: Any) -> str:
        """Submit what :meth:`dryrun_sweep` returned; returns the sweep handle
        ``{scheduler}://{session}/{sweep_id}``. Trials beyond ``max_parallel`` are submitted
        by a supervisor process as others finish.

        Raises:
            tx.schedulers.SchedulerError: the backend refused a request.
        """
        # deferred: see dryrun_sweep
        from tx.runner import sweep

        return sweep.run_sweep(self, sweep_dryrun_info)

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

        return sweep.sweep_status(self, sweep_handle)

    def cancel_sweep(self, sweep_handle: str) -> Any:
        """Cancel every trial of the sweep; pending trials are not submitted any more.
        Returns which trials were asked to stop and which will not be submitted (a
        :class:`tx.runner.sweep.SweepCancel`); it does not wait for them to end.

        Raises:
            tx.runner.sweep.UnknownSweepError: no such sweep recorded on this host.
        """
        # deferred: see dryrun_sweep
        from tx.runner import sweep

        return sweep.cancel_sweep(self, sweep_handle)

    def resume_sweep(self, sweep_handle: str) -> List[int]:
        """Submit again exactly the trials that failed or were cancelled (each a new attempt
        of the same trial, in the same sweep); returns their indexes.

        Raises:
            tx.runner.sweep.UnknownSweepError: no such sweep recorded on this host.
            tx.schedulers.SchedulerError: the backend refused a request.
        """
        # deferred: see dryrun_sweep
        from tx.runner import sweep

        return sweep.resume_sweep(self, sweep_handle)

    # -- app handles -----------------------------------------------------------------
    def _resolve(self, app_handle: AppHandle) -> tuple:

        scheduler, _session, app_id = parse_app_handle(app_handle)
        return self._scheduler(scheduler), scheduler, app_id

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
        if failover.is_run_handle(app_handle):
            run, status = failover.run_status(self, app_handle)
            if status is None:  # a hop being submitted, or one its backend forgot
                return AppStatus(state=run.state, msg=run.chain)
            return status if status.state == run.state else attrs.evolve(status, state=run.state)
        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="status",
                       app_id=app_id):
            desc = sched.describe(app_id)
        if desc is None:
            self._apps.pop(app_handle, None)
            return None
        if is_terminal(desc.state):
            self.archive_logs(app_handle, desc, catch_up=True)
        return _status_of(desc)

    def wait(
        self, app_handle: AppHandle, wait_interval: float = 10, timeout: Optional[float] = None
    ) -> Optional[AppStatus]:
        """Block until the app is terminal (or ``timeout`` seconds pass) and return its
        status; None if the app does not exist. ``wait_interval`` (seconds) bounds the
        polling period of schedulers that cannot be notified.

        Raises:
            MalformedAppHandleException: ``app_handle`` is not ``{scheduler}://{session}/{app_id}``.
            UnknownSchedulerException: the handle's scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.

        Of a run handle: follows the run over its hops, failing it over when due.
        """
        if failover.is_run_handle(app_handle):
            return failover.wait(self, app_handle, wait_interval, timeout)
        sched, scheduler, app_id = self._resolve(app_handle)
        stop = self._follow_logs(app_handle)
        try:
            with log_event(self.registry, session=self._name, scheduler=scheduler, api="wait",
                           app_id=app_id):
                desc = sched.wait(app_id, timeout=timeout, poll_interval=wait_interval)
        finally:
            stop()
        if desc is not None and is_terminal(desc.state):
            self._archive_ended(app_handle, sched, desc)
        return None if desc is None else _status_of(desc)

    def cancel(self, app_handle: AppHandle) -> None:
        """Ask the scheduler to cancel the app (non-blocking; no-op for unknown or finished apps).

        Raises:
            MalformedAppHandleException: ``app_handle`` is not ``{scheduler}://{session}/{app_id}``.
            UnknownSchedulerException: the handle's scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.

        Of a run handle: no hop is submitted any more and the live hop is cancelled.

        The app's logs are copied into tx's log archive first: a backend that deletes an
        app's pods or containers when it cancels it (Kubernetes) takes their logs with them.
        """
        if failover.is_run_handle(app_handle):
            failover.cancel(self, app_handle)
            return
        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="cancel",
                       app_id=app_id):
            desc = sched.describe(app_id)
            if desc is not None and not is_terminal(desc.state):
                self.archive_logs(app_handle, desc)
                sched.cancel(app_id)

    def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of :meth:`cancel` (TorchX's name); warns with
        PendingDeprecationWarning."""

        warnings.warn("Runner.stop is deprecated, use Runner.cancel", PendingDeprecationWarning,
                      stacklevel=2)
        self.cancel(app_handle)

    def describe(self, app_handle: AppHandle) -> Optional[AppDef]:
        """The AppDef of the app: as submitted when this runner launched it, else as the
        scheduler can rebuild it; None if the app does not exist.

        Raises:
            MalformedAppHandleException: ``app_handle`` is not ``{scheduler}://{session}/{app_id}``.
            UnknownSchedulerException: the handle's scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.

        Of a run handle: the run's AppDef (with its ``TX_CHECKPOINT_DIR``).
        """
        if failover.is_run_handle(app_handle):
            # the AppDef reader: only for a run's record
            from tx.specs.files import appdef_from_dict

            return appdef_from_dict(failover.load_record(app_handle).appdef)
        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="describe",
                       app_id=app_id):
            desc = sched.describe(app_id)
        if desc is None:
            return None
        if app_handle in self._apps:
            return self._apps[app_handle]
        if desc.app is not None:
            return desc.app
        return AppDef(name=app_id, roles=list(desc.roles), metadata={
            k: str(v) for k, v in desc.metadata.items()})

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
        """Lines (with ``\\n``) of replica ``k`` of ``role_name``.

        Raises:
            UnknownAppException: the app does not exist.
            MalformedAppHandleException: ``app_handle`` is not ``{scheduler}://{session}/{app_id}``.
            UnknownSchedulerException: the handle's scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.
            ValueError: a stream the scheduler does not keep.
            NotImplementedError: the scheduler keeps no logs.

        Of a run handle: every hop's lines, oldest first (following: across hops).
        """
        if failover.is_run_handle(app_handle):
            if since is not None or until is not None:
                raise ValueError("--since/--until read one app: give the hop's handle (`tx status` lists them)")
            blocks = failover.log_blocks(self, app_handle, role_name, k, should_tail, streams)
            return filter_regex(regex, (line for b in blocks for line in split_lines(b.decode("utf-8", "replace"))))
        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="log_lines",
                       app_id=app_id):
            if streams is None and since is None and until is None:  # the archive may stand in
                blocks = self._blocks_or_archived(app_handle, role_name, k, should_tail, check_known=True)
                return filter_regex(regex, (line for b in blocks
                                            for line in split_lines(b.decode("utf-8", "replace"))))
            if sched.describe(app_id) is None:
                raise UnknownAppException(app_handle)
            return sched.log_iter(app_id, role_name, k, regex, since, until, should_tail, streams)

    def log_blocks(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[bytes]:
        """Like :meth:`log_lines` without filtering, as byte blocks of whole lines (fast relay)."""
        if failover.is_run_handle(app_handle):
            return failover.log_blocks(self, app_handle, role_name, k, should_tail, streams)
        if streams is None:
            return self._blocks_or_archived(app_handle, role_name, k, should_tail)
        sched, _scheduler, app_id = self._resolve(app_handle)
        return sched.log_iter_blocks(app_id, role_name, k, should_tail=should_tail, streams=streams)

    # -- the log archive (tx.runner.archive, docs/recovery.md) ---------------------------
    @property
    def log_archive(self) -> Optional["LogArchive"]:
        """The :class:`tx.runner.archive.LogArchive` this runner copies logs into (default:
        ``[tx:logs] archive``, else under tx's state directory); None: no archive. Settable."""
        if self._log_archive is _UNSET:
            try:
                url = archive_url()
                if url is None:  # `archive = off`: fsspec (and asyncio under it) stay unloaded
                    self._log_archive = None
                    return None
                # fsspec only once logs are archived or read
                from tx.runner.archive import LogArchive

                self._log_archive = LogArchive(url)
                self._archive_from_settings = True
            except (ValueError, ImportError, OSError) as e:
                self._warn_archive(f"cannot open the log archive: {e}")
                self._log_archive = None
        return self._log_archive

    @log_archive.setter
    def log_archive(self, archive: Optional["LogArchive"]) -> None:
        self._log_archive = archive
        self._archive_from_settings = False

    def _archive_wanted(self) -> bool:
        """Whether there is an archive to copy into, without opening it (fsspec stays
        unloaded while the setting alone answers)."""
        if self._log_archive is _UNSET:
            try:
                return archive_url() is not None
            except ValueError:
                pass  # log_archive warns
        return self.log_archive is not None

    def _archive_ended(self, app_handle: AppHandle, sched: Any, desc: Any) -> None:
        """The last copy of an app :meth:`wait` saw end. For a scheduler whose replicas run
        on this host (``runs_on_host``), with the archive of the settings (``[tx:logs]``)
        and ``last_copy = detached`` (the default), a detached process makes it
        (:mod:`tx.runner._archive_copier`) and the waiting caller pays nothing; else (an
        archive set in code, scheduler factories or parameters another process cannot
        rebuild, a remote backend) it is made here, before returning."""
        url = None
        if getattr(sched, "runs_on_host", False) and self._scheduler_factories is None \
                and not self._scheduler_params and (self._log_archive is _UNSET or self._archive_from_settings):
            # settings are read where they are used
            from tx.config.recovery import last_copy_detached

            try:
                url = archive_url() if last_copy_detached() else None
            except ValueError as e:
                self._warn_archive(str(e))
                return
            if url is None and archive_url() is None:
                return  # `archive = off`
        if url is not None:
            try:
                _start_copier(self._name, app_handle, url)
                return
            except OSError as e:  # no process: copy here
                log.debug("log archive: no detached copier", handle=app_handle, error=str(e))
        self.archive_logs(app_handle, desc, catch_up=True)

    def _warn_archive(self, text: str) -> None:
        if not self._archive_warned:
            self._archive_warned = True
            log.warning(f"{text}; the app runs on, its logs are not archived")

    def _replicas_of(self, app_handle: AppHandle, desc: Any) -> List[tuple]:
        app = self._apps.get(app_handle) or getattr(desc, "app", None)
        roles = list(app.roles) if app is not None else list(getattr(desc, "roles", None) or [])
        if roles:
            return [(r.name, k) for r in roles for k in range(r.num_replicas)]
        return [(rs.role, k) for rs in getattr(desc, "roles_statuses", None) or []
                for k in range(len(rs.replicas))]

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
        archive = self.log_archive
        if archive is None:
            return 0
        # the archive's module (fsspec) is loaded by log_archive above
        from tx.runner.archive import BackendReadError

        try:
            if catch_up and archive.is_complete(app_handle):
                return 0
            sched, _scheduler, app_id = self._resolve(app_handle)
            if desc is None:
                desc = sched.describe(app_id)
                if desc is None:
                    return 0
            replicas = self._replicas_of(app_handle, desc)
            ended = desc.state.name if is_terminal(desc.state) else None
            return archive.copy(app_handle, replicas, _backend_log_reader(sched, app_id), ended=ended)
        except BackendReadError as e:
            log.debug("log archive: the backend did not give a log", handle=app_handle, error=str(e))
        except Exception as e:  # noqa: BLE001 - the archive must never harm the run
            self._warn_archive(f"cannot write the log archive at {archive.url}: {e}")
        return 0

    def _follow_logs(self, app_handle: AppHandle) -> Any:
        """Copy the app's logs into the archive every ``[tx:logs] interval`` seconds, in a
        thread, until the returned function is called."""
        if not self._archive_wanted():  # the archive is opened (fsspec) at the first copy
            return lambda: None
        # settings are read where they are used
        from tx.config.recovery import archive_interval

        try:
            interval = archive_interval()
        except ValueError as e:
            self._warn_archive(str(e))
            return lambda: None
        done = threading.Event()

        def loop() -> None:
            while not done.wait(interval):
                self.archive_logs(app_handle)

        t = threading.Thread(target=loop, name="tx-log-archive", daemon=True)
        t.start()

        def stop() -> None:
            done.set()
            t.join()

        return stop

    def archived_replicas(self, app_handle: AppHandle) -> Optional[List[tuple]]:
        """``[(role, k), ...]`` the log archive holds for the app, or None."""
        archive = self.log_archive
        return None if archive is None else archive.replicas(app_handle)

    def _blocks_or_archived(self, app_handle: AppHandle, role_name: str, k: int,
                            should_tail: bool, check_known: bool = False) -> Iterator[bytes]:
        """The replica's log from the backend, or from the archive when the backend no
        longer has it: it does not know the app, cannot give the log, or gives nothing
        where the archive holds the app's complete log (a warning says so). With
        ``check_known``, ask the backend first whether it knows the app (as
        :meth:`log_lines` always has), and raise UnknownAppException when neither it nor
        the archive does."""
        sched, _scheduler, app_id = self._resolve(app_handle)
        archive = self.log_archive

        def archived(why: str) -> Optional[Iterator[bytes]]:
            if archive is None or not archive.has(app_handle, role_name, k):
                return None
            return self._from_archive(archive, app_handle, role_name, k, why)

        if check_known:
            try:
                known = sched.describe(app_id) is not None
            except SchedulerError as e:
                found = archived(str(e))
                if found is None:
                    raise
                return found
            if not known:
                found = archived("the backend no longer knows the app")
                if found is None:
                    raise UnknownAppException(app_handle)
                return found
        try:
            blocks = iter(sched.log_iter_blocks(app_id, role_name, k, should_tail=should_tail))
        except (UnknownAppException, SchedulerError, OSError) as e:  # e.g. the job's files deleted
            found = archived(str(e) or type(e).__name__)
            if found is None:
                raise
            return found
        earlier = self._earlier_attempts(archive, sched, app_id, app_handle, role_name, k)
        return self._unless_gone(blocks, archive, app_handle, role_name, k, earlier)

    @staticmethod
    def _earlier_attempts(archive: Optional["LogArchive"], sched: Any, app_id: str,
                          app_handle: AppHandle, role: str, k: int) -> int:
        """How many archived attempts of the replica come before the one the backend's log
        holds now (a Kubernetes retry recreates the pod, its log starting from zero); 0
        when there is no archive or it cannot tell (the backend's log is then printed
        alone, as without an archive)."""
        if archive is None:
            return 0
        try:
            return archive.earlier_segments(app_handle, role, k, _backend_log_reader(sched, app_id))
        except Exception as e:  # noqa: BLE001 - the archive must never keep the live log from `tx log`
            log.debug("log archive: earlier attempts unknown", handle=app_handle, error=str(e))
            return 0

    def _unless_gone(self, blocks: Iterator[bytes], archive: Optional["LogArchive"],
                     app_handle: AppHandle, role: str, k: int, earlier: int = 0) -> Iterator[bytes]:
        if earlier and archive is not None:  # before the live log, which may be followed
            log.warning(f"{app_handle} {role}/{k}: printing {earlier} earlier attempt"
                        f"{'s' if earlier > 1 else ''} from tx's log archive, then the backend's log",
                        archive=archive.url)
            yield from archive.read_blocks(app_handle, role, k, stop=earlier)
        first = next(blocks, None)
        if first is None and archive is not None and archive.is_complete(app_handle) \
                and archive.size(app_handle, role, k) > 0:
            if earlier:
                yield from archive.read_blocks(app_handle, role, k, start=earlier)
            else:
                yield from self._from_archive(archive, app_handle, role, k, "the backend's log is gone")
            return
        if first is not None:
            yield first
        yield from blocks

    @staticmethod
    def _from_archive(archive: "LogArchive", app_handle: AppHandle, role: str, k: int,
                      why: str) -> Iterator[bytes]:
        log.warning(f"{app_handle} {role}/{k}: reading the log from tx's log archive ({why})",
                    archive=archive.url)
        return archive.read_blocks(app_handle, role, k)

    def list(self, scheduler: str) -> List[ListAppResponse]:
        """The apps ``scheduler`` can see, with their handles (a handle the scheduler set
        itself, e.g. for another session, is kept).

        Raises:
            UnknownSchedulerException: ``scheduler`` is not installed.
            tx.schedulers.PartialListError: only part could be read; its ``apps`` (with their
                handles) are what could.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.
        """
        sched = self._scheduler(scheduler)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="list"):
            try:
                apps = sched.list()
            except PartialListError as e:
                e.apps = self._with_handles(scheduler, e.apps)
                raise
        return self._with_handles(scheduler, apps)

    def _with_handles(self, scheduler: str, apps: List[ListAppResponse]) -> List[ListAppResponse]:
        return [
            a if a.app_handle and a.app_handle != "<NOT_SET>"
            else attrs.evolve(a, app_handle=make_app_handle(scheduler, self._name, a.app_id))
            for a in apps
        ]


def _start_copier(session: str, handle: str, url: str) -> None:
    """Start ``python -m tx.runner._archive_copier SESSION HANDLE URL`` detached (its own
    session, stdio on /dev/null) and return at once; :mod:`subprocess` reaps it at a later
    start, or init does once this process exits.

    Raises:
        OSError: the process cannot be started.
    """
    # only when an app this process waited for ends
    import subprocess

    subprocess.Popen(  # noqa: S603 - our own module
        [sys.executable, "-m", "tx.runner._archive_copier", session, handle, url],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True)


def _check_roles(app: AppDef) -> None:
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles; add at least one Role")
    for role in app.roles:
        if not role.entrypoint or role.entrypoint == MISSING:
            raise ValueError(f"role {role.name!r} has no entrypoint")
def _check_known(scheduler: str, opts: runopts, cfg: Mapping[str, Any]) -> None:
    """Raise InvalidRunConfigException for the first key of ``cfg`` that is not one of
    ``opts``, with the CLI's words (``unknown run option 'log_dri' (did you mean 'log_dir'?)``)."""
    for key in cfg:
        if key not in opts:
            known = ", ".join(k for k, _ in opts) or "none"
            raise InvalidRunConfigException(
                f"unknown run option {key!r} of {scheduler}{opts.suggest(key)}; options: {known}", key, dict(cfg))


def _status_of(desc: Any) -> AppStatus:
    return AppStatus(
        state=desc.state,
        num_restarts=desc.num_restarts,
        msg=desc.msg,
        structured_error_msg=desc.structured_error_msg,
        ui_url=desc.ui_url,
        roles=desc.roles_statuses,
        root_cause=desc.root_cause,
        attempts=list(desc.attempts),
    )


def get_runner(
    name: Optional[str] = None,
    component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
    **scheduler_params: Any,
) -> Runner:
    """A :class:`Runner` for session ``name`` (default ``tx``); ``scheduler_params`` go to
    every scheduler factory."""
    return Runner(name or DEFAULT_SESSION, component_defaults=component_defaults,
                  scheduler_params=scheduler_params)

