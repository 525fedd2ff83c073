"""Sweeps: one app times a parameter set, submitted, followed, cancelled and resumed as one.

A sweep has a handle, ``{scheduler}://{session}/{sweep_id}``, like an app's. What tx needs
to follow it from any process on this host is a record, a JSON file under
``state_dir()/sweeps/{scheduler}/{sweep_id}.json``: where each trial's app came from (the
component and its arguments, or the AppDef), each trial's parameters and the app ids of its
attempts. A trial's state is its last attempt's state, asked of the scheduler.

Submitting: each trial is one AppDef (the parameters substituted for ``${name}`` in the
component's arguments, the roles' args and env), dry-run like any app; a scheduler with a
native array for these trials (:meth:`tx.schedulers.Scheduler.submit_sweep_dryrun`) gets
one request, the others one request per trial, at most ``max_parallel`` running at once:
what does not fit at once is submitted by a supervisor process
(:mod:`tx.runner._sweep_supervisor`) as trials finish. Every replica of every trial has
``TX_SWEEP_ID`` (the sweep handle), ``TX_TRIAL_INDEX`` and ``TX_TRIAL_PARAMS`` (JSON).

Every function takes the engine (:class:`tx.runner.engine.Engine`) for the apps it submits
and looks at.
"""
from __future__ import annotations

import functools
import gc
import inspect
import json
import re
import secrets
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import attrs

from tx.components.system import finder
from tx.components.system.errors import ComponentError
from tx.config.environ import CHECKPOINT_DIR, SWEEP_ID, TRIAL_INDEX, TRIAL_PARAMS
from tx.config.recovery import checkpoint_root, checkpoint_url
from tx.schedulers.api import PartialListError, Scheduler
from tx.schedulers.plane import one_look
from tx.specs.api import AppDef, AppDryRunInfo, AppState, check_app_name, is_terminal
from tx.specs.files import appdef_from_dict, appdef_to_dict
from tx.specs.handles import make_app_handle
from tx.runner.engine import Engine
from tx.runner.handles import AppRef, parse
from tx.runner._records import capture_context, in_context
from tx.runner._sweep_views import SweepDryRunInfo, SweepStatus, TrialStatus, _params_text, collapse_listed
from tx.runner._sweep_records import (
    SweepRecord, TrialMetric, TrialRecord, UnknownSweepError, _write, best_trials, cancel_trial, describe_sweep,
    is_sweep_handle, is_sweep_id, list_records, load_record, record_path, track, trial, trial_handle, updating)
from tx.specs.sweep import (SweepFormatError, SweepSpec, count_trials, expand_trials, format_value, referenced_params,
                            substitute)


__all__ = [
    "MAX_TRIALS", "RESUMABLE", "SweepCancel", "SweepDryRunInfo", "SweepRecord", "SweepStatus", "TrialRecord",
    "TrialStatus", "TrialMetric", "UnknownSweepError", "best_trials", "cancel_trial", "collapse_listed",
    "describe_sweep", "is_sweep_handle", "is_sweep_id", "list_records", "load_record", "record_path", "track",
    "trial_appdef",
]

#: states after which ``resume`` submits a trial again
RESUMABLE = (AppState.FAILED, AppState.CANCELLED)


def _a_look(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make a verb one look (:func:`tx.schedulers.plane.one_look`): its listing and its
    describes of the trials share one snapshot per backend, however long its own work takes
    (on a loaded host 100 describes outlast a 1 s snapshot)."""
    @functools.wraps(fn)
    def look(*args: Any, **kwargs: Any) -> Any:
        with one_look():
            return fn(*args, **kwargs)
    return look



def _in_bulk(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a verb that makes an object or more for each of up to 10,000 trials with Python's
    cyclic garbage collector paused (reference counting still frees what it drops; what it
    leaves in cycles is collected once the collector is back). Else the collector sweeps
    every object made so far again and again as they add up: a fifth to a third of a
    10,000-trial dryrun's CPU (bench/RESULTS-scale.md). The collector is back on at the end
    where it was on at the start (nested verbs leave it to the outermost)."""
    @functools.wraps(fn)
    def bulk(*args: Any, **kwargs: Any) -> Any:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()
    return bulk


# -- building the trials -----------------------------------------------------------------
def _new_id(name: str) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:24]
    return f"sweep-{stem + '-' if stem else ''}{secrets.token_hex(4)}"


def _component_params(component: str) -> List[str]:
    return list(inspect.signature(finder.get_component(component).fn).parameters)


def _check_params(source: Mapping[str, Any], names: Sequence[str], env: Mapping[str, str]) -> List[str]:
    """The parameters to pass as ``--name=value`` component arguments: those that are
    arguments of the component and not given in its arguments already. Every other
    parameter must appear as ``${name}`` in the arguments, the app or ``env``.

    Raises:
        SweepFormatError: a parameter the app does not take.
    """
    if "component" in source:
        args = list(source["args"])
        own = args[:args.index("--")] if "--" in args else args
        given = {a[2:].split("=", 1)[0] for a in own if a.startswith("--")}
        takes = _component_params(source["component"])
        as_args = [n for n in names if n in takes and n not in given]
        texts = [*args, *env.values()]
    else:
        app = source["appdef"]
        as_args, takes = [], []
        texts = [*env.values()] + [str(t) for r in app.get("roles", [])
                                   for t in [*r.get("args", []), *r.get("env", {}).values(), r.get("entrypoint", "")]]
    used = set(referenced_params(texts, names))
    for n in names:
        if n in used or n in as_args:
            continue
        if "component" not in source:
            raise SweepFormatError(f"parameter {n!r} is not used: put ${{{n}}} in the app's args or env (or --env)")
        raise SweepFormatError(
            f"parameter {n!r} is not an argument of component {source['component']} "
            f"(it takes {', '.join(takes) or 'none'}) and ${{{n}}} is not in its arguments or --env")
    return as_args


def trial_app(engine: Engine, rec: SweepRecord, trial: TrialRecord, as_args: Sequence[str] = (),
              base: Optional[AppDef] = None, ckpt_root: Optional[str] = None,
              make: Optional[Callable[[Sequence[str]], AppDef]] = None) -> AppDef:
    """The AppDef of ``trial``: its parameters in the app, and the sweep's env in every role
    (``base``: the sweep's AppDef where its source is one, already read; ``ckpt_root``:
    :func:`tx.config.recovery.checkpoint_root` of the scheduler, where already read;
    ``make``: :meth:`Engine.component_maker` of the sweep's component, where already made).

    Raises:
        SweepFormatError: the component rejected the trial's values (one line naming the
            trial).
    """
    params = trial.params
    try:
        if "component" in rec.source:
            args = [f"--{n}={format_value(params[n])}" for n in as_args]
            args += [substitute(a, params) for a in rec.source["args"]]
            app = make(args) if make is not None else engine.component_app(rec.source["component"], args)
        else:
            app = base if base is not None else appdef_from_dict(rec.source["appdef"])
        if rec.source.get("app_name"):  # `tx sweep --name`: every trial's app takes it
            app = attrs.evolve(app, name=rec.source["app_name"])
    except (ComponentError, ValueError) as e:
        raise SweepFormatError(f"trial {trial.index} ({_params_text(params)}): {e}") from None
    extra = {k: substitute(v, params) for k, v in rec.env.items()}
    extra[SWEEP_ID] = rec.handle
    extra[TRIAL_INDEX] = str(trial.index)
    extra[TRIAL_PARAMS] = json.dumps(params, sort_keys=True)
    # each trial resumes only its own checkpoints (every attempt of the trial shares them;
    # the trials' apps share one name, which would give them one TX_CHECKPOINT_DIR)
    ckpt = {CHECKPOINT_DIR: checkpoint_url(rec.scheduler, rec.session, f"{rec.sweep_id}/trial-{trial.index}",
                                           root=ckpt_root)}
    roles = [attrs.evolve(r, args=[substitute(a, params) for a in r.args],
                          entrypoint=substitute(r.entrypoint, params),
                          env={**ckpt, **{k: substitute(v, params) for k, v in r.env.items()}, **extra})
             for r in app.roles]
    return attrs.evolve(app, roles=roles)


def _maker(engine: Engine, rec: SweepRecord) -> Optional[Callable[[Sequence[str]], AppDef]]:
    """The sweep's component, found and its parser built once for all its trials, with the
    component defaults captured at launch (None: the sweep's source is an AppDef). Raises
    as :meth:`Engine.component_maker`."""
    if "component" not in rec.source:
        return None
    if rec.context is None:  # a record written before the launch's defaults were kept
        return engine.component_maker(rec.source["component"])
    return engine.component_maker(rec.source["component"], rec.component_defaults or {})


#: the most trials of one sweep on a scheduler that states no array limit of its own
#: (:attr:`tx.schedulers.Scheduler.sweep_array_limit`): every trial's request is made before
#: the first is submitted, and the sweep's record holds every trial
MAX_TRIALS = 10_000


def check_trial_count(sched: "Scheduler[Any]", scheduler: str, count: int) -> None:
    """Refuse ``count`` trials (:func:`tx.specs.sweep.count_trials`, not expanded) beyond
    ``scheduler``'s limit: its native request's (Slurm's MaxJobCount, AWS Batch's 10,000...),
    else :data:`MAX_TRIALS`.

    Raises:
        SweepFormatError: too many trials (one line, with the limit and whose it is).
    """
    limit = sched.sweep_array_limit
    if limit is not None:
        if count > limit:
            raise SweepFormatError(f"{count} trials are more than {scheduler}'s {sched.sweep_limit_name} of {limit}")
    elif count > MAX_TRIALS:
        raise SweepFormatError(f"{count} trials are more than a sweep on {scheduler} may have ({MAX_TRIALS}): "
                               "split it into several sweeps")


@_in_bulk
def dryrun_sweep(
    engine: Engine,
    app_or_component: Any,
    spec: SweepSpec,
    scheduler: str,
    component_args: Sequence[str] = (),
    cfg: Optional[Mapping[str, Any]] = None,
    max_parallel: Optional[int] = None,
    env: Optional[Mapping[str, str]] = None,
    name: Optional[str] = None,
) -> SweepDryRunInfo:
    """See :meth:`tx.runner.Runner.dryrun_sweep`."""
    if max_parallel is not None and max_parallel < 1:
        raise SweepFormatError(f"max_parallel must be at least 1, got {max_parallel}")
    check_trial_count(engine.scheduler(scheduler), scheduler, count_trials(spec))  # before anything is expanded
    trials = expand_trials(spec)
    if isinstance(app_or_component, AppDef):
        source: Dict[str, Any] = {"appdef": appdef_to_dict(app_or_component)}
        default_name = app_or_component.name
    else:
        source = {"component": str(app_or_component), "args": list(component_args)}
        default_name = str(app_or_component).rsplit(":", 1)[-1].rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    if name is not None:  # the trials' apps take it (trial_app), so it must be an app name
        source["app_name"] = check_app_name(name)
    env = dict(env or {})
    as_args = _check_params(source, spec.names, env)
    sched = engine.scheduler(scheduler)
    # the launch's options (merged by Runner.dryrun_sweep), component defaults and context:
    # every later submission uses them as they are
    defaults = engine.component_defaults.get(source["component"]) if "component" in source else None
    rec = SweepRecord(sweep_id=_new_id(name or default_name), scheduler=scheduler, session=engine.session,
                      name=name or default_name, source=source, env=env, cfg=dict(cfg or {}),
                      max_parallel=max_parallel, native="apps",
                      trials=[TrialRecord(i, p) for i, p in enumerate(trials)],
                      component_defaults=dict(defaults) if defaults else None, context=capture_context())
    base = app_or_component if isinstance(app_or_component, AppDef) else None
    root = checkpoint_root(scheduler)  # once for all trials: it reads the config files
    make = _maker(engine, rec)
    apps = [trial_app(engine, rec, t, as_args, base, root, make) for t in rec.trials]
    names = {a.name for a in apps}
    if name is None and len(names) == 1:  # the row is named as its trials are (utils.python -> train)
        rec.name = names.pop()
    infos = engine.dryrun_many(apps, scheduler, dict(rec.cfg), parent_run_id=rec.handle)
    native = sched.submit_sweep_dryrun(infos, max_parallel)
    if native is not None:
        rec.native = "array"
    return SweepDryRunInfo(record=rec, trials=infos, native=native,
                           not_native="" if native is not None else sched.sweep_not_an_array(infos))


@_in_bulk
def run_sweep(engine: Engine, info: SweepDryRunInfo, supervise: bool = True) -> str:
    """See :meth:`tx.runner.Runner.schedule_sweep`."""
    rec = info.record
    rec.created = time.time()
    sched = engine.scheduler(rec.scheduler)
    if info.native is not None:
        ids = sched.schedule_sweep(info.native)
        now = time.time()
        for t, app_id in zip(rec.trials, ids):
            t.attempts.append(app_id)
            t.submitted.append(now)
        _write(rec)
        track(rec, rec.trials)
        return rec.handle
    for t in rec.trials:
        t.pending = True
    _write(rec)  # before any trial starts, so that its TX_SWEEP_ID resolves
    left = submit_pending(engine, rec.handle, dict(enumerate(info.trials)))
    if left and supervise:
        start_supervisor(rec)
    return rec.handle


@_in_bulk
@_a_look
def submit_pending(engine: Engine, handle: str, infos: Optional[Dict[int, AppDryRunInfo[Any]]] = None) -> int:
    """Submit pending trials, in index order, while fewer than ``max_parallel`` run;
    returns how many stay pending (0 too when the sweep is cancelled). ``infos``: trial
    index -> its dry run, where already made. A sweep launched as a native array
    (``rec.native == "array"``) has all its pending trials submitted as one array request
    (:meth:`tx.schedulers.Scheduler.submit_sweep_dryrun`; its bound the room left under
    ``max_parallel``), where the scheduler makes one of them; else one request per trial."""
    with updating(handle) as rec:
        pending = [t for t in rec.trials if t.pending]
        if rec.cancelled or not pending:
            return 0
        room = len(pending)
        if rec.max_parallel is not None:
            running, now = 0, time.time()
            live = [t for t in rec.trials if not t.pending and t.attempts and t.ended is None]
            listed_ended: Dict[str, float] = {}
            listed = _listed_states(engine, rec, live, listed_ended)
            for t in live:
                if is_terminal(_trial_state(engine, rec, t, listed)[0]):
                    t.started, t.ended = _times(engine, rec, t, now, listed_ended, describe=not listed)
                else:
                    running += 1
            room = max(0, min(room, rec.max_parallel - running))
        # a sweep launched as one native array is resumed as one: its pending trials are one
        # request (one sbatch on Slurm), at most `room` of them running at once where bounded
        native = rec.native == "array" and room > 0
        todo = pending if native else pending[:room]
        missing = [t for t in todo if t.index not in (infos or {})]
        with in_context(rec):  # the launch's environment and directory, whichever process submits
            if missing:
                as_args = _check_params(rec.source, list(rec.trials[0].params), rec.env)
                base = appdef_from_dict(rec.source["appdef"]) if "appdef" in rec.source else None
                root = checkpoint_root(rec.scheduler)
                make = _maker(engine, rec)
                made = engine.dryrun_many([trial_app(engine, rec, t, as_args, base, root, make) for t in missing],
                                          rec.scheduler, dict(rec.cfg), parent_run_id=rec.handle)
                infos = {**(infos or {}), **{t.index: i for t, i in zip(missing, made)}}
            ids: Optional[List[str]] = None
            if native:
                sched = engine.scheduler(rec.scheduler)
                req = sched.submit_sweep_dryrun([infos[t.index] for t in todo],
                                                room if rec.max_parallel is not None else None)
                if req is not None:
                    ids = sched.schedule_sweep(req)
                    assert len(ids) == len(todo), (len(ids), len(todo))
                else:  # these trials cannot be one array (one trial on AWS Batch): one request each
                    todo = todo[:room]
            for k, t in enumerate(todo):
                t.attempts.append(ids[k] if ids is not None else engine.schedule(infos[t.index]).app_id)
                t.submitted.append(time.time())
                t.started = t.ended = None
                t.pending = False
        track(rec, todo)
        return len(pending) - len(todo)


def start_supervisor(rec: SweepRecord) -> None:
    """Start the process that submits the pending trials as others finish (it outlives this
    one; its output goes to the record's ``.log`` beside it)."""
    log = record_path(rec.scheduler, rec.sweep_id)[:-len(".json")] + ".log"
    with open(log, "ab") as out:
        subprocess.Popen(  # noqa: S603 - our own module, with the record's handle
            [sys.executable, "-m", "tx.runner._sweep_supervisor", rec.handle],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True)


#: above this many trials to look at, one ``Scheduler.list`` gives their states (one
#: squeue on Slurm, O(pages) elsewhere) and only failed or unlisted trials are described
LIST_OVER = 8


def _listed_states(engine: Engine, rec: SweepRecord, trials: Sequence[TrialRecord],
                   ended: Optional[Dict[str, float]] = None) -> Dict[str, AppState]:
    """App id -> state of the listed apps: the scheduler's own query of many apps
    (``Scheduler.states_of``) where it has one, else one list when ``trials`` are many
    enough (else {}). ``ended``, given, gets app id -> when it ended, where the listing
    says (the local schedulers' ``ended``)."""
    if trials:
        states = engine.scheduler(rec.scheduler).states_of([t.attempts[-1] for t in trials])
        if states is not None:
            return states
    if len(trials) <= LIST_OVER:
        return {}
    try:
        apps = engine.list(rec.scheduler)
    except PartialListError as e:
        apps = e.apps
    if ended is not None:
        ended.update((a.app_id, float(a.ended)) for a in apps  # type: ignore[attr-defined]
                     if isinstance(getattr(a, "ended", None), (int, float)))
    return {a.app_id: a.state for a in apps}


def _trial_state(engine: Engine, rec: SweepRecord, t: TrialRecord,
                 listed: Optional[Mapping[str, AppState]] = None) -> "tuple[AppState, str]":
    if t.pending or not t.attempts:
        return (AppState.CANCELLED if rec.cancelled or t.cancelled else AppState.UNSUBMITTED), ""
    state = (listed or {}).get(t.attempts[-1])
    if state is not None and state != AppState.FAILED:
        return state, ""
    status = engine.status(AppRef(rec.scheduler, rec.session, t.attempts[-1]))
    if status is None:
        return AppState.UNKNOWN, "the scheduler no longer knows this app"
    why = ""
    if status.state == AppState.FAILED:
        why = (status.structured_error_msg if status.structured_error_msg not in ("", "<NONE>") else status.msg)
        why = " ".join(str(why).split())[:120]
    return status.state, why


@_in_bulk
@_a_look
def sweep_status(engine: Engine, handle: str) -> SweepStatus:
    """See :meth:`tx.runner.Runner.sweep_status`."""
    rec = load_record(handle)
    now = time.time()
    out = []
    newly_ended: Dict[int, "tuple[Optional[float], float]"] = {}
    listed_ended: Dict[str, float] = {}
    listed = _listed_states(engine, rec, [t for t in rec.trials if t.attempts and not t.pending], listed_ended)
    for t in rec.trials:
        state, why = _trial_state(engine, rec, t, listed)
        started, ended = t.started, t.ended
        if ended is None and is_terminal(state) and t.attempts and not t.pending:
            started, ended = newly_ended[t.index] = _times(engine, rec, t, now, listed_ended, describe=not listed)
        duration = None if not t.submitted or t.pending else (ended or now) - (started or t.submitted[-1])
        out.append(TrialStatus(t.index, t.params, state,
                               make_app_handle(rec.scheduler, rec.session, t.attempts[-1]) if t.attempts else None,
                               len(t.attempts), duration, why))
    if newly_ended:
        with updating(handle) as fresh:
            for t in fresh.trials:
                if (t.index in newly_ended and t.ended is None and not t.pending
                        and len(t.attempts) == out[t.index].attempts):
                    t.started, t.ended = newly_ended[t.index]
    return SweepStatus(handle, out, rec.cancelled)


def _times(engine: Engine, rec: SweepRecord, t: TrialRecord, now: float, listed_ended: Mapping[str, float],
           describe: bool) -> "tuple[Optional[float], float]":
    """``(started, ended)`` of the ended trial ``t``'s last attempt, in epoch seconds, as its
    scheduler recorded them: the listing's end time where the trials were listed (many
    trials: no call per trial; the start is then its submission), else the description's
    (``describe``: few trials, each described anyway; the local schedulers' ``started`` and
    ``ended`` metadata). Where the scheduler records none: (None, ``now``), when tx saw it
    ended. The times are then kept in the record: once per trial's attempt."""
    if t.attempts[-1] in listed_ended:
        return None, listed_ended[t.attempts[-1]]
    desc = None
    if describe:
        try:
            desc = engine.scheduler(rec.scheduler).describe(t.attempts[-1])
        except Exception:  # noqa: BLE001 - the times are a courtesy: the state was read already
            desc = None
    meta = desc.metadata if desc is not None else {}

    def num(key: str) -> Optional[float]:
        v = meta.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return num("started"), (num("ended") or now)


@attrs.frozen
class SweepCancel:
    """What :meth:`tx.runner.Runner.cancel_sweep` did.

    Attributes:
        stopped: the trials whose (last) app was running and was asked to stop.
        unsubmitted: the pending trials that will not be submitted now (``resume`` does).
    """

    stopped: List[int]
    unsubmitted: List[int]


@_in_bulk
@_a_look
def cancel_sweep(engine: Engine, handle: str) -> SweepCancel:
    """See :meth:`tx.runner.Runner.cancel_sweep`."""
    with updating(handle) as rec:
        # the pending trials stop being submitted now (not when an earlier cancel did)
        unsubmitted = [] if rec.cancelled else [t.index for t in rec.trials if t.pending]
        rec.cancelled = True
    live = [t for t in rec.trials if t.attempts and not t.pending]
    listed = _listed_states(engine, rec, live)
    stop = [t for t in live if not is_terminal(listed[t.attempts[-1]] if t.attempts[-1] in listed
                                               else _trial_state(engine, rec, t)[0])]
    if stop:  # one call where the backend cancels many at once (Scheduler.cancel_many)
        engine.scheduler(rec.scheduler).cancel_many([t.attempts[-1] for t in stop])
    return SweepCancel([t.index for t in stop], unsubmitted)


def trial_appdef(engine: Engine, handle: str, index: int) -> Optional[AppDef]:
    """``tx describe SWEEP/TRIAL``: the AppDef of the trial's last attempt as its scheduler
    describes it (None: the scheduler no longer knows it), or, before it is submitted,
    the AppDef it will be submitted with.

    Raises:
        UnknownSweepError: no such sweep or trial.
    """
    rec, t = trial(handle, index)
    app_handle = trial_handle(rec, t)
    if app_handle is not None:
        return engine.describe(parse(app_handle))  # type: ignore[arg-type]
    as_args = _check_params(rec.source, list(t.params), rec.env)
    return trial_app(engine, rec, t, as_args, make=_maker(engine, rec))


@_in_bulk
@_a_look
def resume_sweep(engine: Engine, handle: str, supervise: bool = True) -> List[int]:
    """See :meth:`tx.runner.Runner.resume_sweep`."""
    status = sweep_status(engine, handle)
    todo = [t.index for t in status.trials if t.state in RESUMABLE]
    with updating(handle) as rec:
        rec.cancelled = False
        for i in todo:
            rec.trials[i].pending = True
            rec.trials[i].cancelled = False
            rec.trials[i].started = rec.trials[i].ended = None
    left = submit_pending(engine, handle)
    if left and supervise:
        start_supervisor(rec)
    return todo
