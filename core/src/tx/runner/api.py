"""The Runner: submit apps and components to schedulers and act on app handles.

Same API as TorchX's ``torchx.runner.Runner`` (https://pytorch.org/torchx/latest/runner.html).
Schedulers are created lazily, one per name, and closed by :meth:`Runner.close`.
"""
from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Mapping as _Mapping
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Union

import attrs

from tx.config.environ import JOB_ID, PARENT_RUN_ID, TRACKERS, tracker_config_var
from tx.config.run_options import env_run_opts
from tx.config.trackers import configured_trackers
from tx.log import get_logger
from tx.plugins import PluginError, get_registry, install_hint, not_installed_hint
from tx.runner.events import log_event
from tx.schedulers.api import ListAppResponse, PartialListError, Scheduler
from tx.schedulers.env import with_torchx_names
from tx.specs.api import (
    MISSING,
    AppDef,
    AppDryRunInfo,
    UnknownAppException,
    UnknownSchedulerException,
    is_terminal,
    macros,
)
from tx.specs.handles import AppHandle, make_app_handle, parse_app_handle
from tx.specs.runopts import CfgVal, runopts
from tx.specs.status import AppStatus

if TYPE_CHECKING:
    from datetime import datetime

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
    ) -> AppDryRunInfo[Any]:
        """What :meth:`schedule` would submit for ``app`` on ``scheduler``.

        The app is not modified: the runner works on a copy to which it adds
        ``TX_JOB_ID`` (and ``TX_PARENT_RUN_ID``, ``TX_TRACKERS`` and each tracker's
        ``TX_TRACKER_<NAME>_CONFIG``, from ``.txconfig`` or the environment: see
        :func:`tx.tracker.get_configured_trackers`) to every role's env.

        Run options missing from ``cfg`` are taken from the environment, as TorchX
        does: ``TX_<KEY>``, else ``TORCHX_<KEY>`` (``KEY`` the option name upper-cased,
        ``-`` as ``_``) sets option ``key``; values in ``cfg`` (``-cfg``, config files)
        win. A value that does not parse raises InvalidRunConfigException naming the
        variable.

        With ``workspace`` (a local directory), the scheduler's workspace kind
        (:attr:`tx.schedulers.Scheduler.workspace_kind`) puts it into the first role (an
        image build, a job directory copy) before the dryrun; schedulers without a kind
        ignore it.

        Raises:
            ValueError: the app has no roles or a role has no entrypoint, or the app cannot
                run on this scheduler.
            UnknownSchedulerException: no such scheduler.
            tx.plugins.PluginError: the scheduler's plugin cannot be loaded.
            tx.specs.InvalidRunConfigException: ``cfg`` does not fit the scheduler's run options.
            tx.workspace.WorkspaceError: the workspace kind is not installed or its build failed.
        """

        if not app.roles:
            raise ValueError(f"app {app.name!r} has no roles; add at least one Role")
        for role in app.roles:
            if not role.entrypoint or role.entrypoint == MISSING:
                raise ValueError(f"role {role.name!r} has no entrypoint")
        sched = self._scheduler(scheduler)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="dryrun",
                       app_image=app.roles[0].image, workspace=workspace):

            extra_env = {JOB_ID: make_app_handle(scheduler, self._name, macros.app_id)}
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
            extra_env = with_torchx_names(extra_env)
            app = attrs.evolve(
                app, roles=[attrs.evolve(r, env={**r.env, **extra_env}) for r in app.roles]
            )
            cfg = dict(env_run_opts(scheduler, sched.run_opts(), dict(cfg or {})))
            if workspace:
                resolved = sched.run_opts().resolve(cfg)
                role = sched.build_workspace(app.roles[0], workspace, resolved)
                if role is not None:
                    app = attrs.evolve(app, roles=[role, *app.roles[1:]])
            return sched.submit_dryrun(app, cfg)

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
    ) -> AppHandle:
        """Dry-run and schedule ``app``; returns its handle ``scheduler://session/app_id``."""
        return self.schedule(self.dryrun(app, scheduler, cfg, workspace, parent_run_id))

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
    ) -> AppDryRunInfo[Any]:
        """:meth:`dryrun` of the app a component builds (``dist.ddp``, ``file.py:fn``)."""
        return self.dryrun(self.component_app(component, component_args), scheduler, cfg,
                           workspace, parent_run_id)

    def run_component(
        self,
        component: str,
        component_args: Union[List[str], Dict[str, Any]],
        scheduler: str,
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
    ) -> AppHandle:
        """Run a component; returns the app handle."""
        return self.schedule(self.dryrun_component(component, component_args, scheduler, cfg,
                                                   workspace, parent_run_id))

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
        """

        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="status",
                       app_id=app_id):
            desc = sched.describe(app_id)
        if desc is None:
            self._apps.pop(app_handle, None)
            return None
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
        """

        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="wait",
                       app_id=app_id):
            desc = sched.wait(app_id, timeout=timeout, poll_interval=wait_interval)
        return None if desc is None else _status_of(desc)

    def cancel(self, app_handle: AppHandle) -> None:
        """Ask the scheduler to cancel the app (non-blocking; no-op for unknown or finished apps).

        Raises:
            MalformedAppHandleException: ``app_handle`` is not ``{scheduler}://{session}/{app_id}``.
            UnknownSchedulerException: the handle's scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.
        """

        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="cancel",
                       app_id=app_id):
            desc = sched.describe(app_id)
            if desc is not None and not is_terminal(desc.state):
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
        """

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
        """

        sched, scheduler, app_id = self._resolve(app_handle)
        with log_event(self.registry, session=self._name, scheduler=scheduler, api="log_lines",
                       app_id=app_id):
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
        sched, _scheduler, app_id = self._resolve(app_handle)
        return sched.log_iter_blocks(app_id, role_name, k, should_tail=should_tail, streams=streams)

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

