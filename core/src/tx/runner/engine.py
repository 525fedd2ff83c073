"""The engine: one app on one scheduler (docs/architecture.md, "The runner's floors").

It creates and looks up schedulers, dry-runs an app (adding the submission environment and
the checkpoint location to every role), submits it, and answers status, wait, cancel,
describe, logs and list for an app reference (:class:`tx.runner.handles.AppRef`), with a
lifecycle event (:mod:`tx.runner.events`) per call. It knows nothing of runs with failover,
sweeps or the log archive: those floors stand above it and take it; the archive learns
what happens to apps by subscribing to :meth:`Engine.subscribe`'s events (an app seen
terminal, an app being waited for).

Run options reach it merged (:func:`tx.runner.options.merge`); the scheduler's own
``runopts.resolve`` is the only other touch.
"""
from __future__ import annotations

import difflib
import os
import sys
from typing import AbstractSet, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

import attrs

from tx.config.environ import CHECKPOINT_DIR, JOB_ID, PARENT_RUN_ID, TRACKERS, tracker_config_var
from tx.config.recovery import checkpoint_root, new_checkpoint_url
from tx.config.trackers import configured_trackers
from tx.log import get_logger
from tx.plugins import PluginError, get_registry, install_hint, not_installed_hint
from tx.runner import _checkpoints
from tx.runner.events import log_event
from tx.runner.handles import AppRef, check_not_reserved
from tx.schedulers.api import ListAppResponse, PartialListError, Scheduler
from tx.schedulers.paging import ListPage, page_of
from tx.schedulers.env import with_torchx_names
from tx.schedulers.saves import with_saves
from tx.workspace.api import localize_workspace
from tx.specs.api import (
    MISSING,
    AppDef,
    AppDryRunInfo,
    UnknownAppException,
    UnknownSchedulerException,
    check_app_name,
    is_terminal,
    macros,
)
from tx.specs.handles import make_app_handle
from tx.specs.mounts import without_mounts
from tx.specs.runopts import runopts
from tx.specs.status import AppStatus

__all__ = ["Engine", "check_roles", "status_of"]

log = get_logger(__name__)

#: ``(app, its description)``: an app seen terminal by :meth:`Engine.status` or :meth:`Engine.wait`
TerminalListener = Callable[[AppRef, Any], None]
#: ``(app) -> stop``: an app about to be waited for; ``stop()`` is called when the wait ends
FollowListener = Callable[[AppRef], Callable[[], None]]
#: ``(app, its description)``: a live app about to be cancelled (:meth:`Engine.cancel`)
CancelListener = Callable[[AppRef, Any], None]
#: ``(app, its description) -> the description to use``: what a look at the app answers,
#: completed from what was recorded earlier (why it failed, when the backend's log is gone);
#: it only reads
AmendListener = Callable[[AppRef, Any], Any]


class Engine:
    """One app on one scheduler: the schedulers of a session and the verbs on one app.

    Args:
        name: the session name (the middle part of app handles).
        scheduler_factories: scheduler name -> factory ``(session_name, **kwargs) ->
            Scheduler``; None: the schedulers of the plugin registry.
        scheduler_params: keyword arguments for every scheduler factory.
        registry: the plugin registry (default: the process-wide one).
        component_defaults: component name -> {argument: value string} (``[component:*]``).
    """

    def __init__(self, name: str, scheduler_factories: Optional[Mapping[str, Any]] = None,
                 scheduler_params: Optional[Mapping[str, Any]] = None, registry: Any = None,
                 component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None) -> None:
        self.session = name
        self.scheduler_factories = dict(scheduler_factories) if scheduler_factories is not None else None
        self.scheduler_params = dict(scheduler_params or {})
        self.component_defaults = {k: dict(v) for k, v in (component_defaults or {}).items()}
        self._registry = registry
        #: the scheduler instances made so far, by name (TorchX's ``_scheduler_instances``)
        self.schedulers: Dict[str, Scheduler[Any]] = {}
        #: the AppDef of each app this engine submitted, by handle
        self.apps: Dict[str, AppDef] = {}
        #: when the backend was asked for the last status :meth:`status` returned, by handle
        #: (epoch seconds), where the scheduler says (a shared status plane's snapshot time;
        #: docs/scale.md): the status is at most ``time.time() - as_of`` seconds old
        self.status_as_of: Dict[str, float] = {}
        self._on_terminal: List[TerminalListener] = []
        self._on_follow: List[FollowListener] = []
        self._on_cancel: List[CancelListener] = []
        self._on_amend: List[AmendListener] = []
        #: None: a role's mounts a scheduler would run without (``Scheduler.ignored_mounts``)
        #: are refused by the scheduler (tx); else the prefix of a one-line warning on stderr
        #: (``"torchx run"``) and the mounts are dropped, as TorchX 0.7 ignores them (the
        #: ``torchx`` command and TorchX's Runner of tx-torchx-compat set it)
        self.drop_unsupported_mounts: Optional[str] = None

    @property
    def registry(self) -> Any:
        """The plugin registry (the process-wide one unless one was given)."""
        if self._registry is None:
            self._registry = get_registry()
        return self._registry

    def subscribe(self, terminal: Optional[TerminalListener] = None, follow: Optional[FollowListener] = None,
                  cancelling: Optional[CancelListener] = None, amend: Optional[AmendListener] = None) -> None:
        """Be told when an app is seen terminal (``terminal(ref, desc)``, from :meth:`status`
        and :meth:`wait`), when an app is waited for (``follow(ref)`` returns the function
        called when the wait ends), and when a live app is about to be cancelled
        (``cancelling(ref, desc)``, before :meth:`cancel` asks the scheduler); ``amend(ref,
        desc)`` returns the description :meth:`status` and :meth:`wait` answer with (a
        look: it reads, never writes). A listener must not raise."""
        if amend is not None:
            self._on_amend.append(amend)
        if terminal is not None:
            self._on_terminal.append(terminal)
        if follow is not None:
            self._on_follow.append(follow)
        if cancelling is not None:
            self._on_cancel.append(cancelling)

    def _amended(self, ref: AppRef, desc: Any) -> Any:
        for amend in self._on_amend:
            desc = amend(ref, desc)
        return desc

    def _seen(self, ref: AppRef, desc: Any) -> None:
        if desc is not None and is_terminal(desc.state):
            for listener in self._on_terminal:
                listener(ref, desc)

    def close(self) -> None:
        """Close every scheduler this engine created (idempotent)."""
        for sched in self.schedulers.values():
            sched.close()
        self.schedulers.clear()

    # -- schedulers ------------------------------------------------------------------
    def scheduler_backends(self) -> List[str]:
        """Names of the installed schedulers (or of the ``scheduler_factories`` given)."""
        if self.scheduler_factories is not None:
            return list(self.scheduler_factories)
        return self.registry.names("schedulers")

    def scheduler(self, scheduler: str) -> Scheduler[Any]:
        """The scheduler named ``scheduler``, created on first use.

        Raises:
            UnknownSchedulerException: no such scheduler installed (a known one names the
                distribution to install).
            tx.plugins.PluginError: its plugin cannot be loaded.
        """
        sched = self.schedulers.get(scheduler)
        if sched is not None:
            return sched
        if self.scheduler_factories is not None:
            factory = self.scheduler_factories.get(scheduler)
            if factory is None:
                raise UnknownSchedulerException(
                    f"unknown scheduler {scheduler!r}: this runner has "
                    f"{', '.join(self.scheduler_factories) or 'no schedulers'}"
                )
            sched = factory(self.session, **self.scheduler_params)
            self.schedulers[scheduler] = sched
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
        sched = reg.load()(self.session, **self.scheduler_params)
        self.schedulers[scheduler] = sched
        return sched

    def run_opts(self, scheduler: str) -> runopts:
        """The run options ``scheduler`` accepts (raises as :meth:`scheduler`)."""
        return self.scheduler(scheduler).run_opts()

    def ref(self, scheduler: str, app_id: str) -> AppRef:
        """The reference of app ``app_id`` on ``scheduler`` in this session."""
        return AppRef(scheduler, self.session, app_id)

    # -- building and submitting ------------------------------------------------------
    def component_app(self, component: str, component_args: Union[List[str], Dict[str, Any]]) -> AppDef:
        """The AppDef a component builds from CLI-style args or a dict of arguments, with
        this session's component defaults.

        Raises:
            tx.components.system.finder.ComponentNotFoundException, ComponentValidationException,
            tx.components.system.builders.ComponentArgumentError.
        """
        # deferred: the component system (~5 ms) only for components, not for Runner.run of an AppDef
        from tx.components.system import builders, finder

        comp = finder.get_component(component)
        defaults = self.component_defaults.get(component)
        if isinstance(component_args, dict):
            return builders.materialize_appdef_from_dict(comp.fn, component_args, defaults, name=component)
        return builders.materialize_appdef(comp.fn, list(component_args), defaults, name=component)

    def component_maker(self, component: str,
                        defaults: Optional[Mapping[str, str]] = None) -> Callable[[Sequence[str]], AppDef]:
        """:meth:`component_app` of many command lines of ``component`` (a sweep's trials):
        the component is found, linted and its parser built once. ``defaults``: the
        component's argument defaults to use (a sweep's, as captured at its launch; None:
        this session's).

        Raises:
            as :meth:`component_app`, when called for the component, and for each call
            for its arguments.
        """
        from tx.components.system import builders, finder  # deferred: as component_app's

        comp = finder.get_component(component)
        if defaults is None:
            defaults = self.component_defaults.get(component)
        return builders.component_maker(comp.fn, defaults, name=component)

    def submission_env(self, scheduler: str, parent_run_id: Optional[str],
                       job_id: Optional[str] = None) -> Dict[str, str]:
        """What :meth:`dryrun` adds to every role's env: ``TX_JOB_ID`` (``job_id``, default
        the app's own handle), ``TX_PARENT_RUN_ID`` (the argument, else the submitter's
        environment), ``TX_TRACKERS`` and each tracker's config, with their TorchX names."""
        extra_env = {JOB_ID: job_id or make_app_handle(scheduler, self.session, macros.app_id)}
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

    def dryrun(self, app: AppDef, scheduler: str, cfg: Mapping[str, Any], workspace: Optional[str] = None,
               parent_run_id: Optional[str] = None, name: Optional[str] = None,
               job_id: Optional[str] = None, ckpt: Optional[Mapping[str, str]] = None) -> AppDryRunInfo[Any]:
        """What :meth:`schedule` would submit for ``app`` on ``scheduler``.

        The app is not modified: the engine works on a copy to which it adds
        ``TX_JOB_ID``, ``TX_CHECKPOINT_DIR`` (unless the role sets it: a fresh location for
        every dryrun, :func:`tx.config.recovery.new_checkpoint_url`, or ``ckpt``: the env of
        the earlier app or run it resumes, ``Runner.checkpoint_env``) (and ``TX_PARENT_RUN_ID``, ``TX_TRACKERS`` and each tracker's
        ``TX_TRACKER_<NAME>_CONFIG``, from ``.txconfig`` or the environment: see
        :func:`tx.tracker.get_configured_trackers`) to every role's env.

        ``cfg``: the run options as :func:`tx.runner.options.merge` made them (``Runner.dryrun``
        and ``tx run`` merge the given ones with the scheduler's ``.txconfig`` section, then
        ``TX_<KEY>``/``TORCHX_<KEY>``; TorchX's Runner reads no config file, only its CLI does).

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
                run on this scheduler, or ``name`` is not a valid app name, or the app's name
                is one tx keeps for run and sweep handles (:func:`tx.runner.handles.check_not_reserved`).
            UnknownSchedulerException: no such scheduler.
            tx.plugins.PluginError: the scheduler's plugin cannot be loaded.
            tx.specs.InvalidRunConfigException: ``cfg`` does not fit the scheduler's run options.
            tx.workspace.WorkspaceError: the workspace kind is not installed or its build failed.
        """
        if name is not None:
            app = attrs.evolve(app, name=check_app_name(name))
        check_roles(app)
        sched = self.scheduler(scheduler)
        with log_event(self.registry, session=self.session, scheduler=scheduler, api="dryrun",
                       app_image=app.roles[0].image, workspace=workspace):
            return self._dryrun_with(sched, scheduler, app, self.submission_env(scheduler, parent_run_id, job_id),
                                     dict(cfg), workspace, ckpt=ckpt)

    def dryrun_many(self, apps: Iterable[AppDef], scheduler: str, cfg: Mapping[str, Any],
                    parent_run_id: Optional[str] = None) -> List[AppDryRunInfo[Any]]:
        """:meth:`dryrun` of each app (a sweep's trials), in order, with one lifecycle event
        and one look at the trackers for all (no workspace); ``cfg`` merged."""
        sched = self.scheduler(scheduler)
        with log_event(self.registry, session=self.session, scheduler=scheduler, api="dryrun_many"):
            extra_env = self.submission_env(scheduler, parent_run_id)
            root = checkpoint_root(scheduler)  # once: it reads the config files
            ready = []
            for app in apps:
                check_roles(app)
                ready.append(self._prepared(sched, scheduler, app, extra_env, dict(cfg), ckpt_root=root))
            # the run options resolved once for all (Scheduler.submit_dryrun_many)
            out = sched.submit_dryrun_many(ready, dict(cfg))
            for info in out:
                info._scheduler = scheduler  # as _dryrun_with
            return out

    def _dryrun_with(self, sched: Scheduler[Any], scheduler: str, app: AppDef, extra_env: Mapping[str, str],
                     cfg: Dict[str, Any], workspace: Optional[str] = None,
                     ckpt_root: Optional[str] = None, ckpt: Optional[Mapping[str, str]] = None) -> AppDryRunInfo[Any]:
        info = sched.submit_dryrun(self._prepared(sched, scheduler, app, extra_env, cfg, workspace, ckpt_root, ckpt), cfg)
        # the name the app was dryrun for (as TorchX's Runner): a scheduler registered
        # under another name than its backend (a subclass of a TorchX scheduler) keeps it
        info._scheduler = scheduler
        return info

    def _prepared(self, sched: Scheduler[Any], scheduler: str, app: AppDef, extra_env: Mapping[str, str],
                  cfg: Dict[str, Any], workspace: Optional[str] = None,
                  ckpt_root: Optional[str] = None, ckpt: Optional[Mapping[str, str]] = None) -> AppDef:
        """``app`` as the scheduler dry-runs it: the run's checkpoint location and
        ``extra_env`` in every role, the workspace built into its first role, mounts the
        scheduler does not support dropped where this engine drops them (with a warning)."""
        # the run's checkpoint location: a fresh one, or the resumed run's (``ckpt``); a
        # role's own TX_CHECKPOINT_DIR wins (and then nothing of the resumed run is added)
        if ckpt is None and not all(r.env.get(CHECKPOINT_DIR) for r in app.roles):
            ckpt = {CHECKPOINT_DIR: new_checkpoint_url(scheduler, self.session, app.name, root=ckpt_root)}
        app = attrs.evolve(app, roles=[
            attrs.evolve(r, env={**r.env, **extra_env} if r.env.get(CHECKPOINT_DIR) else {**(ckpt or {}), **r.env, **extra_env})
            for r in app.roles])
        if workspace:  # TorchX's workspaces are fsspec URLs (file://$PWD, memory://...)
            workspace = localize_workspace(workspace)
            resolved = sched.run_opts().resolve(cfg)
            role = sched.build_workspace(app.roles[0], workspace, resolved)
            if role is not None:
                app = attrs.evolve(app, roles=[role, *app.roles[1:]])
        if self.drop_unsupported_mounts is not None and hasattr(sched, "ignored_mounts"):
            app, dropped = without_mounts(app, sched.ignored_mounts)
            if dropped:
                print(f"{self.drop_unsupported_mounts}: warning: the {scheduler} scheduler supports no mounts; "
                      f"ignored, as TorchX does: {dropped}", file=sys.stderr)
        return app

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppRef:
        """Submit what :meth:`dryrun` returned; returns the app's reference.

        Raises:
            ValueError: ``dryrun_info`` was not made by a scheduler's dryrun.
            UnknownSchedulerException: its scheduler is not installed.
            tx.schedulers.SchedulerError: the backend refused the request or cannot be reached.
        """
        scheduler = dryrun_info._scheduler
        if scheduler is None:
            raise ValueError("dryrun_info was not made by a scheduler's submit_dryrun")
        sched = self.scheduler(scheduler)
        with log_event(self.registry, session=self.session, scheduler=scheduler, api="schedule") as ev:
            app_id = sched.schedule(dryrun_info)
            if ev is not None:
                ev.app_id = app_id
        ref = self.ref(scheduler, app_id)
        if dryrun_info._app is not None:
            self.apps[ref.handle] = dryrun_info._app
            _checkpoints.record(ref.handle, dryrun_info._app)  # for `--resume HANDLE` where describe has no env
        log.info("launched", app_handle=ref.handle)
        return ref

    # -- one app -----------------------------------------------------------------------
    def describe_raw(self, ref: AppRef) -> Any:
        """The scheduler's :class:`tx.schedulers.DescribeAppResponse` of the app, or None
        (no event, no listener: a plain look)."""
        return self.scheduler(ref.scheduler).describe(ref.app_id)

    def status(self, ref: AppRef) -> Optional[AppStatus]:
        """The app's status, or None if its scheduler does not know it; an app seen terminal
        is told to the ``terminal`` listeners (:meth:`subscribe`).

        Raises:
            UnknownSchedulerException: the scheduler is not installed.
            tx.schedulers.SchedulerError: the backend cannot be reached or refused.
        """
        sched = self.scheduler(ref.scheduler)
        with log_event(self.registry, session=self.session, scheduler=ref.scheduler, api="status",
                       app_id=ref.app_id):
            desc = sched.describe(ref.app_id)
        if desc is None:
            self.apps.pop(ref.handle, None)
            return None
        as_of = desc.metadata.get("status_fetched_at") if isinstance(desc.metadata, dict) else None
        if isinstance(as_of, (int, float)):
            self.status_as_of[ref.handle] = float(as_of)
        desc = self._amended(ref, desc)
        self._seen(ref, desc)
        return status_of(desc)

    def wait(self, ref: AppRef, wait_interval: float = 10, timeout: Optional[float] = None) -> Optional[AppStatus]:
        """Block until the app is terminal (or ``timeout`` seconds pass); its status, None if
        it does not exist. The ``follow`` listeners are told for the time of the wait.

        Raises:
            as :meth:`status`.
        """
        sched = self.scheduler(ref.scheduler)
        stops = [follow(ref) for follow in self._on_follow]
        try:
            with log_event(self.registry, session=self.session, scheduler=ref.scheduler, api="wait",
                           app_id=ref.app_id):
                desc = sched.wait(ref.app_id, timeout=timeout, poll_interval=wait_interval)
        finally:
            for stop in stops:
                stop()
        if desc is not None:
            desc = self._amended(ref, desc)
        self._seen(ref, desc)
        return None if desc is None else status_of(desc)

    def cancel(self, ref: AppRef) -> None:
        """Ask the scheduler to cancel the app (non-blocking; no-op for unknown or finished apps),
        after telling the ``cancelling`` listeners (:meth:`subscribe`).

        Raises:
            as :meth:`status`.
        """
        sched = self.scheduler(ref.scheduler)
        with log_event(self.registry, session=self.session, scheduler=ref.scheduler, api="cancel",
                       app_id=ref.app_id):
            desc = sched.describe(ref.app_id)
            if desc is not None and not is_terminal(desc.state):
                for listener in self._on_cancel:
                    listener(ref, desc)
                sched.cancel(ref.app_id)

    def describe(self, ref: AppRef) -> Optional[AppDef]:
        """The AppDef of the app: as submitted when this engine launched it, else as the
        scheduler can rebuild it; None if the app does not exist.

        Raises:
            as :meth:`status`.
        """
        sched = self.scheduler(ref.scheduler)
        with log_event(self.registry, session=self.session, scheduler=ref.scheduler, api="describe",
                       app_id=ref.app_id):
            desc = sched.describe(ref.app_id)
        if desc is None:
            return None
        if ref.handle in self.apps:
            return self.apps[ref.handle]
        if desc.app is not None:
            return desc.app
        return AppDef(name=ref.app_id, roles=list(desc.roles), metadata={
            k: str(v) for k, v in desc.metadata.items()})

    def log_iter(self, ref: AppRef, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Any = None, until: Any = None, should_tail: bool = False,
                 streams: Optional[Any] = None) -> Iterable[str]:
        """The backend's lines of replica ``k`` of ``role_name`` (the scheduler's
        ``log_iter``), after asking whether it knows the app.

        Raises:
            UnknownAppException: the app does not exist.
            tx.schedulers.SchedulerError, ValueError, NotImplementedError: as the scheduler's.
        """
        sched = self.scheduler(ref.scheduler)
        with log_event(self.registry, session=self.session, scheduler=ref.scheduler, api="log_lines",
                       app_id=ref.app_id):
            if sched.describe(ref.app_id) is None:
                raise UnknownAppException(ref.handle)
            return sched.log_iter(ref.app_id, role_name, k, regex, since, until, should_tail, streams)

    def log_blocks(self, ref: AppRef, role_name: str, k: int = 0, should_tail: bool = False,
                   streams: Optional[Any] = None) -> Iterator[bytes]:
        """The backend's log of the replica as byte blocks of whole lines (the scheduler's
        ``log_iter_blocks``)."""
        return self.scheduler(ref.scheduler).log_iter_blocks(ref.app_id, role_name, k, should_tail=should_tail,
                                                             streams=streams)

    def list(self, scheduler: str) -> List[ListAppResponse]:
        """The apps ``scheduler`` can see, with their handles (see :meth:`tx.runner.Runner.list`)."""
        sched = self.scheduler(scheduler)
        with log_event(self.registry, session=self.session, scheduler=scheduler, api="list"):
            try:
                apps = sched.list()
            except PartialListError as e:
                e.apps = self._with_handles(scheduler, e.apps)
                raise
        return self._with_handles(scheduler, apps)

    def list_page(self, scheduler: str, limit: Optional[int] = None, offset: int = 0,
                  states: Optional[AbstractSet[str]] = None, name: Optional[str] = None) -> ListPage:
        """A page of :meth:`list`, with handles: ``limit`` apps (None: all) after the first
        ``offset``, newest first, of those whose state name is in ``states`` (None: any) and
        whose name or handle holds ``name`` (any case), and how many match in all (a
        :class:`tx.schedulers.paging.ListPage`). The local schedulers keep only the page in
        memory; others are listed whole (:func:`tx.schedulers.paging.list_page`).

        Raises:
            PartialListError, SchedulerError: as :meth:`list`.
            ValueError: ``limit`` or ``offset`` < 0.
        """
        sched = self.scheduler(scheduler)
        with log_event(self.registry, session=self.session, scheduler=scheduler, api="list"):
            if getattr(sched, "list_page", None) is None:  # listed whole: handles before the name filter
                return page_of(self._with_handles(scheduler, sched.list()), limit, offset, states, name)
            page = sched.list_page(limit=limit, offset=offset, states=states, name=name)
        return attrs.evolve(page, apps=self._with_handles(scheduler, page.apps))

    def _with_handles(self, scheduler: str, apps: List[ListAppResponse]) -> List[ListAppResponse]:
        return [
            a if a.app_handle and a.app_handle != "<NOT_SET>"
            else attrs.evolve(a, app_handle=make_app_handle(scheduler, self.session, a.app_id))
            for a in apps
        ]


def check_roles(app: AppDef) -> None:
    """Raise ValueError when ``app`` has no roles, a role has no entrypoint, or its name is
    one tx keeps for run and sweep handles (:func:`tx.runner.handles.check_not_reserved`)."""
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles; add at least one Role")
    for role in app.roles:
        if not role.entrypoint or role.entrypoint == MISSING:
            raise ValueError(f"role {role.name!r} has no entrypoint")
    check_not_reserved(app.name)


def status_of(desc: Any) -> AppStatus:
    """The :class:`tx.specs.AppStatus` of a :class:`tx.schedulers.DescribeAppResponse`; each
    preempted attempt with the step it saved and the next with the step it resumed from
    (:func:`tx.schedulers.saves.with_saves`)."""
    return AppStatus(
        state=desc.state,
        num_restarts=desc.num_restarts,
        msg=desc.msg,
        structured_error_msg=desc.structured_error_msg,
        ui_url=desc.ui_url,
        roles=desc.roles_statuses,
        root_cause=desc.root_cause,
        attempts=with_saves(list(desc.attempts)),
    )
