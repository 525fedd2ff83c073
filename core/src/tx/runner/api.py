"""The Runner: submit apps and components to schedulers and act on their handles.

TorchX's ``torchx.runner.Runner`` API, a thin facade over the runner's floors
(docs/architecture.md): handles parsed once (:mod:`tx.runner.handles`), options merged once
per hop (:mod:`tx.runner.options`), the engine (:mod:`tx.runner.engine`), and beside each
other above it the archive (:mod:`tx.runner.archiver`), failover and sweeps.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping as _Mapping
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Union

import attrs

from tx.runner import _checkpoints, options
from tx.runner.archiver import Archiver
from tx.runner.engine import Engine
from tx.runner.handles import AppRef, Ref, RunRef, SweepRef, TrialRef, parse
from tx.schedulers.api import ListAppResponse, Scheduler
from tx.schedulers.streams import filter_regex, split_lines
from tx.config.environ import CHECKPOINT_DIR
from tx.specs.api import AppDef, AppDryRunInfo, check_app_name
from tx.specs.handles import AppHandle
from tx.specs.runopts import CfgVal, runopts
from tx.specs.status import AppStatus

if TYPE_CHECKING:
    from tx.runner import failover
    from datetime import datetime

    from tx.runner.archive import LogArchive

__all__ = ["DEFAULT_SESSION", "Runner", "get_runner"]

DEFAULT_SESSION = "tx"


class Runner:
    """Submits apps to schedulers and acts on handles of apps, runs (with failover) and sweeps.

    Args (TorchX 0.7's positional order): ``name``, the session name (the middle part of
    handles); ``scheduler_factories``, scheduler name -> factory ``(session_name, **kwargs)
    -> Scheduler`` (None: the plugin registry's schedulers); ``component_defaults``,
    component name -> {argument: value string} (``[component:<name>]`` of ``.txconfig``);
    ``scheduler_params``, keyword arguments for every factory; ``registry`` (default: the
    process-wide one). Use it as a context manager (or call :meth:`close`).

    Raises:
        TypeError: ``scheduler_factories`` is not a mapping of callables.
    """

    def __init__(self, name: str = DEFAULT_SESSION, scheduler_factories: Optional[Mapping[str, Any]] = None,
                 component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
                 scheduler_params: Optional[Mapping[str, Any]] = None, registry: Any = None) -> None:
        if scheduler_factories is not None and (not isinstance(scheduler_factories, _Mapping) or not all(
                callable(f) for f in scheduler_factories.values())):
            raise TypeError("Runner(name, scheduler_factories, component_defaults, scheduler_params): scheduler_"
                            "factories must map scheduler names to factories; pass component_defaults= and "
                            "scheduler_params= by keyword")
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

    def scheduler_backends(self) -> List[str]:
        """Names of the installed schedulers (or of the ``scheduler_factories`` given)."""
        return self._engine.scheduler_backends()

    @property
    def _scheduler_instances(self) -> Dict[str, Scheduler[Any]]:
        """The scheduler instances made so far, by name (TorchX 0.7.0's attribute: codeflare-sdk
        puts its own there, ``runner._scheduler_instances["ray"] = RayScheduler(...)``)."""
        return self._engine.schedulers

    def _scheduler(self, scheduler: str) -> Scheduler[Any]:
        return self._engine.scheduler(scheduler)

    def scheduler(self, scheduler: str) -> Scheduler[Any]:
        """The scheduler object named ``scheduler``, created on first use, closed by :meth:`close`.
        Raises UnknownSchedulerException (not installed: the hint names the distribution) or
        tx.plugins.PluginError (its plugin cannot be loaded)."""
        return self._engine.scheduler(scheduler)

    def scheduler_runs_on_host(self, scheduler: str) -> bool:
        """Whether ``scheduler`` runs replicas on this host (raises as :meth:`scheduler`)."""
        return bool(getattr(self._engine.scheduler(scheduler), "runs_on_host", False))

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The run options ``scheduler`` accepts. Raises as :meth:`scheduler`."""
        return self._engine.run_opts(scheduler)

    def _merged(self, scheduler: str, cfg: Optional[Mapping[str, CfgVal]]) -> Dict[str, Any]:
        """The hop's run options (:func:`tx.runner.options.merge`, as the ``tx`` command's)."""
        return options.merge(scheduler, self._engine.run_opts(scheduler), cfg)

    def dryrun(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None,
               workspace: Optional[str] = None, parent_run_id: Optional[str] = None, name: Optional[str] = None,
               job_id: Optional[str] = None, resume: Optional[str] = None) -> AppDryRunInfo[Any]:
        """What :meth:`schedule` would submit for ``app`` on ``scheduler`` (the app is not
        modified): ``cfg`` merged with ``.txconfig`` and ``TX_*`` as ``tx run`` merges it
        (:func:`tx.runner.options.merge`), then :meth:`tx.runner.engine.Engine.dryrun`, whose
        docstring says what is added to each role, what ``workspace``, ``name`` and ``job_id``
        do, and what is raised (``tx.specs.InvalidRunConfigException`` too, for ``cfg``).
        ``resume``: the handle of an earlier app or run whose checkpoints it continues
        (:meth:`checkpoint_env`; ValueError if it has none)."""
        ckpt = self.checkpoint_env(resume) if resume is not None else None
        return self._engine.dryrun(app, scheduler, self._merged(scheduler, cfg), workspace, parent_run_id,
                                   name, job_id, ckpt=ckpt)

    def checkpoint_env(self, resume: str) -> Dict[str, str]:
        """``TX_CHECKPOINT_DIR`` of the app or run ``resume`` as its AppDef (:meth:`describe`),
        else :meth:`schedule` on this host, recorded it, never from a name; and ``TX_RESUME_FROM``.
        Raises ValueError (no such app or run, or no location), MalformedAppHandleException."""
        try:
            app = self.describe(resume)
        except _failover().UnknownRunError:
            app = None
        return _checkpoints.resume_env(resume, app)

    def dryrun_many(self, apps: Iterable[AppDef], scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None,
                    parent_run_id: Optional[str] = None) -> List[AppDryRunInfo[Any]]:
        """:meth:`dryrun` of each app (a sweep's trials), with one event and one look at the
        trackers and the options for all (no workspace); raises as :meth:`dryrun`."""
        return self._engine.dryrun_many(apps, scheduler, self._merged(scheduler, cfg), parent_run_id)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submit what :meth:`dryrun` returned; returns the app handle ``{scheduler}://{session}/{app_id}``.
        Raises ValueError (not a scheduler's dryrun), UnknownSchedulerException, or
        tx.schedulers.SchedulerError (refused or unreachable; nothing is left half-created)."""
        return self._engine.schedule(dryrun_info).handle

    def run(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None, workspace: Optional[str] = None,
            parent_run_id: Optional[str] = None, name: Optional[str] = None, resume: Optional[str] = None) -> AppHandle:
        """Dry-run and schedule ``app``; returns its handle (``name``, ``resume``: see :meth:`dryrun`)."""
        return self.schedule(self.dryrun(app, scheduler, cfg, workspace, parent_run_id, name, resume=resume))

    def run_with_fallback(self, app: AppDef, schedulers: List[Union[str, tuple]], pending_timeout: Optional[float] = None,
                          workspace: Optional[str] = None, parent_run_id: Optional[str] = None, watch: bool = True,
                          name: Optional[str] = None, resume: Optional[str] = None) -> str:
        """Run ``app`` on the first of ``schedulers`` (names or ``(name, cfg)``), failing over to the next
        when PENDING ``pending_timeout`` s (None: never) or failed by the infrastructure (docs/recovery.md):
        :meth:`dryrun_with_fallback`, :meth:`schedule_with_fallback`; the run handle. Raises as they do."""
        return self.schedule_with_fallback(self.dryrun_with_fallback(
            app, schedulers, pending_timeout, workspace, parent_run_id, watch, name, resume))

    def dryrun_with_fallback(self, app: AppDef, schedulers: List[Union[str, tuple]],
                             pending_timeout: Optional[float] = None, workspace: Optional[str] = None,
                             parent_run_id: Optional[str] = None, watch: bool = True, name: Optional[str] = None,
                             resume: Optional[str] = None) -> "failover.RunDryRunInfo":
        """The run :meth:`run_with_fallback` creates, checked (each scheduler dry-runs once; ``.first``:
        the first hop's), not submitted; options merged now; every hop keeps the run's checkpoint
        location and ``TX_JOB_ID``. ``watch``: a watcher follows it. ``name``, ``resume``: as in
        :meth:`dryrun`. Raises ValueError, ChainRefusedError, and what :meth:`dryrun` raises."""
        if name is not None:
            app = attrs.evolve(app, name=check_app_name(name))
        if resume is not None:  # every hop keeps it: the run's record holds it in the roles' env
            ckpt = self.checkpoint_env(resume)
            app = attrs.evolve(app, roles=[r if r.env.get(CHECKPOINT_DIR) else attrs.evolve(r, env={**ckpt, **r.env})
                                           for r in app.roles])
        chain = [(s, self._merged(s, None)) if isinstance(s, str) else (s[0], self._merged(s[0], s[1])) for s in schedulers]
        return _failover().prepare(self._engine, app, chain, pending_timeout, workspace, parent_run_id, watch=watch)

    def schedule_with_fallback(self, dryrun_info: "failover.RunDryRunInfo") -> str:
        """Record and start the run :meth:`dryrun_with_fallback` checked; its handle (raises as :meth:`schedule`)."""
        rec = _failover().launch(self._engine, dryrun_info)
        if rec.watch:
            _failover().ensure_watcher(new_run=True)
        return rec.handle

    def run_status(self, run_handle: str) -> "failover.RunStatus":
        """The run's state and chain (``slurm: PENDING 10 min 00 s (Resources) -> local_docker:
        RUNNING``), after a failover step. Raises UnknownRunError, SchedulerError."""
        return self._run_status(parse(run_handle))[0]

    def _run_status(self, ref: Ref) -> Any:
        """A look at a run and the steps it takes, in plain view: a watcher, one failover step."""
        _failover().ensure_watcher()
        rec = _failover().step(self._engine, ref.handle, blocking=False)
        return _failover().run_status(self._engine, ref.handle, rec)

    def component_app(self, component: str, component_args: Union[List[str], Dict[str, Any]]) -> AppDef:
        """Build the AppDef of a component from CLI-style args or a dict of arguments (raises
        what :meth:`tx.runner.engine.Engine.component_app` raises)."""
        return self._engine.component_app(component, component_args)

    def dryrun_component(self, component: str, component_args: Union[List[str], Dict[str, Any]], scheduler: str,
                         cfg: Optional[Mapping[str, CfgVal]] = None, workspace: Optional[str] = None,
                         parent_run_id: Optional[str] = None, name: Optional[str] = None,
                         resume: Optional[str] = None) -> AppDryRunInfo[Any]:
        """:meth:`dryrun` of the app a component builds (``dist.ddp``, ``file.py:fn``); ``name``
        replaces the name the component gave the app (its own ``name`` argument keeps its
        other effects, such as the tracking run name)."""
        return self.dryrun(self.component_app(component, component_args), scheduler, cfg,
                           workspace, parent_run_id, name, resume=resume)

    def run_component(self, component: str, component_args: Union[List[str], Dict[str, Any]], scheduler: str,
                      cfg: Optional[Mapping[str, CfgVal]] = None, workspace: Optional[str] = None,
                      parent_run_id: Optional[str] = None, name: Optional[str] = None,
                      resume: Optional[str] = None) -> AppHandle:
        """Run a component; returns the app handle (``name``, ``resume``: see :meth:`dryrun`)."""
        return self.schedule(self.dryrun_component(component, component_args, scheduler, cfg,
                                                   workspace, parent_run_id, name, resume=resume))

    def dryrun_sweep(self, app_or_component: Union[AppDef, str], spec: Any, scheduler: str,
                     component_args: Optional[List[str]] = None, cfg: Optional[Mapping[str, CfgVal]] = None,
                     max_parallel: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
                     name: Optional[str] = None) -> Any:
        """What :meth:`run_sweep` would submit (a :class:`tx.runner.sweep.SweepDryRunInfo`): the app
        or component (``${NAME}`` in ``component_args``, else ``--NAME=VALUE``) times ``spec``, at
        most ``max_parallel`` at once, ``env`` in every role, ``name`` every trial's app name.
        Raises tx.specs.sweep.SweepFormatError and what :meth:`dryrun` raises."""
        return _sweep().dryrun_sweep(self._engine, app_or_component, spec, scheduler, component_args or [],
                                     self._merged(scheduler, cfg), max_parallel, env, name)

    def schedule_sweep(self, sweep_dryrun_info: Any) -> str:
        """Submit what :meth:`dryrun_sweep` returned; returns the sweep handle (a supervisor
        submits the trials beyond ``max_parallel`` as others finish)."""
        return _sweep().run_sweep(self._engine, sweep_dryrun_info)

    def run_sweep(self, app_or_component: Union[AppDef, str], spec: Any, scheduler: str,
                  component_args: Optional[List[str]] = None, cfg: Optional[Mapping[str, CfgVal]] = None,
                  max_parallel: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
                  name: Optional[str] = None) -> str:
        """:meth:`dryrun_sweep` then :meth:`schedule_sweep`; returns the sweep handle."""
        return self.schedule_sweep(self.dryrun_sweep(app_or_component, spec, scheduler, component_args,
                                                     cfg, max_parallel, env, name))

    def sweep_status(self, sweep_handle: str) -> Any:
        """The sweep's trials (a :class:`tx.runner.sweep.SweepStatus`). Raises
        tx.runner.sweep.UnknownSweepError, tx.schedulers.SchedulerError."""
        return _sweep().sweep_status(self._engine, sweep_handle)

    def cancel_sweep(self, sweep_handle: str) -> Any:
        """Cancel every trial of the sweep, pending ones never submitted; returns which (a
        :class:`tx.runner.sweep.SweepCancel`), without waiting. Raises UnknownSweepError."""
        return _sweep().cancel_sweep(self._engine, sweep_handle)

    def resume_sweep(self, sweep_handle: str) -> List[int]:
        """Submit again exactly the trials that failed or were cancelled (new attempts of the
        same trials); returns their indexes. Raises as :meth:`sweep_status`."""
        return _sweep().resume_sweep(self._engine, sweep_handle)

    def _app(self, ref: Ref) -> AppRef:
        """The app a reference names: an app's own, a trial's last attempt's (a sweep's or a
        run's id, asked of its scheduler as an app id, names none there)."""
        if isinstance(ref, AppRef):
            return ref
        if isinstance(ref, TrialRef):
            rec = _sweep().load_record(ref.sweep.handle)
            if ref.index >= len(rec.trials) or not rec.trials[ref.index].attempts:
                raise _sweep().UnknownSweepError(f"no trial {ref.index} of {ref.sweep.handle} was submitted")
            return AppRef(rec.scheduler, rec.session, rec.trials[ref.index].attempts[-1])
        ident = ref.sweep_id if isinstance(ref, SweepRef) else ref.run_id
        return AppRef(ref.scheduler, ref.session, ident)

    def status(self, app_handle: AppHandle) -> Optional[AppStatus]:
        """The app's status, None if its scheduler does not know it; of a run handle, the live
        hop's with the run's state (never None), after the failover step this look takes; of a
        trial handle (``SWEEP/4``), its last attempt's. Raises MalformedAppHandleException,
        UnknownSchedulerException, tx.schedulers.SchedulerError."""
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            run, status = self._run_status(ref)  # the failover step this look takes
            if status is None:  # a hop being submitted, or one its backend forgot
                return AppStatus(state=run.state, msg=run.chain)
            return status if status.state == run.state else attrs.evolve(status, state=run.state)
        return self._engine.status(self._app(ref))

    def wait(self, app_handle: AppHandle, wait_interval: float = 10,
             timeout: Optional[float] = None) -> Optional[AppStatus]:
        """Block until the app is terminal (or ``timeout`` s pass); its status, None if it does not
        exist (``wait_interval``: s between polls). Of a run: follows its hops."""
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            _failover().ensure_watcher()  # a watcher follows the run when this wait ends
            return _failover().wait(self._engine, ref.handle, wait_interval, timeout)
        return self._engine.wait(self._app(ref), wait_interval, timeout)

    def cancel(self, app_handle: AppHandle) -> None:
        """Cancel the app (non-blocking; no-op for unknown or finished apps; its logs archived
        first); of a run handle, no hop is submitted any more and the live hop is cancelled."""
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            _failover().cancel(self._engine, ref.handle)
            _failover().ensure_watcher()  # it ends the run's live hop and records the run's end
            return
        self._engine.cancel(self._app(ref))

    def stop(self, app_handle: AppHandle) -> None:
        """Deprecated alias of :meth:`cancel` (TorchX's name); warns with PendingDeprecationWarning."""
        warnings.warn("Runner.stop is deprecated, use Runner.cancel", PendingDeprecationWarning, stacklevel=2)
        self.cancel(app_handle)

    def describe(self, app_handle: AppHandle) -> Optional[AppDef]:
        """The app's AppDef (as submitted here, else as the scheduler rebuilds it; None: no such
        app); of a run handle, the run's."""
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            # the AppDef reader: only for a run's record
            from tx.specs.files import appdef_from_dict

            return appdef_from_dict(_failover().load_record(ref.handle).appdef)
        return self._engine.describe(self._app(ref))

    def log_lines(self, app_handle: AppHandle, role_name: str, k: int = 0, regex: Optional[str] = None,
                  since: Optional[datetime] = None, until: Optional[datetime] = None, should_tail: bool = False,
                  streams: Optional[Any] = None) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name`` (from tx's log archive where the backend lost
        them; of a run, every hop's). Raises UnknownAppException, ValueError, NotImplementedError."""
        ref = parse(app_handle)
        if isinstance(ref, RunRef):
            if since is not None or until is not None:
                raise ValueError("--since/--until read one app: give the hop's handle (`tx status` lists them)")
            _failover().ensure_watcher()  # a watcher follows the run while no one reads it
            blocks = _failover().log_blocks(self._engine, ref.handle, role_name, k, should_tail, streams, self.log_blocks)
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
            _failover().ensure_watcher()  # see log_lines
            return _failover().log_blocks(self._engine, ref.handle, role_name, k, should_tail, streams, self.log_blocks)
        if streams is None:
            return self._archiver.blocks(self._app(ref), role_name, k, should_tail)
        return self._engine.log_blocks(self._app(ref), role_name, k, should_tail=should_tail, streams=streams)

    def list(self, scheduler: str) -> List[ListAppResponse]:
        """The apps ``scheduler`` can see, with handles (raises PartialListError, SchedulerError)."""
        return self._engine.list(scheduler)

    @property
    def log_archive(self) -> Optional["LogArchive"]:
        """The :class:`tx.runner.archive.LogArchive` this runner copies logs into (default:
        ``[tx:logs] archive``, else under tx's state directory); None: no archive. Settable."""
        return self._archiver.log_archive

    @log_archive.setter
    def log_archive(self, archive: Optional["LogArchive"]) -> None:
        self._archiver.log_archive = archive

    def archive_logs(self, app_handle: AppHandle, desc: Any = None, catch_up: bool = False) -> int:
        """Copy what is new of the app's logs into :attr:`log_archive` (complete when ``desc`` is
        terminal; ``catch_up``: nothing if complete already); never raises; returns bytes."""
        return self._archiver.archive_logs(self._app(parse(app_handle)), desc, catch_up)

    def archived_replicas(self, app_handle: AppHandle) -> Optional[List[tuple]]:
        """``[(role, k), ...]`` the log archive holds for the app, or None."""
        return self._archiver.archived_replicas(self._app(parse(app_handle)))


def _failover() -> Any:
    # deferred: runs with failover (attrs records, the watcher's subprocess) are off an app's path
    from tx.runner import failover
    return failover


def _sweep() -> Any:
    """:mod:`tx.runner.sweep`, imported on first use."""
    # deferred: sweeps need the component system, which Runner.run of an AppDef does not
    from tx.runner import sweep

    return sweep


def get_runner(name: Optional[str] = None, component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
               **scheduler_params: Any) -> Runner:
    """A :class:`Runner` for session ``name`` (default ``tx``); ``scheduler_params`` go to every scheduler factory."""
    return Runner(name or DEFAULT_SESSION, component_defaults=component_defaults,
                  scheduler_params=scheduler_params)
