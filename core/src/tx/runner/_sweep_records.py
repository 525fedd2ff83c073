"""What tx keeps of a sweep: its record on disk (a JSON file under
``state_dir()/sweeps/{scheduler}/{sweep_id}.json``, read and updated under a lock by every
process that follows the sweep), the look-ups by sweep and trial handle that read only the
record, and the sweep and its trials in the configured trackers. :mod:`tx.runner.sweep`
re-exports the public names; this module calls no scheduler.
"""
from __future__ import annotations

import contextlib
import json
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import attrs

from tx.config.environ import state_dir
from tx.config.trackers import configured_trackers
from tx.errors import UserError
from tx.runner.handles import SWEEP_ID
from tx.runner._records import flocked, read_all, write_json
from tx.specs.handles import make_app_handle, parse_app_handle
from tx.specs.sweep import SweepFormatError
from tx.tracker.api import build_trackers

__all__: List[str] = []  # private: tx.runner.sweep re-exports what is public

_ID = SWEEP_ID  # the form of the ids (tx.runner.handles): one definition


class UnknownSweepError(UserError, LookupError):
    """No sweep with this handle is recorded on this host."""


@attrs.define
class TrialRecord:
    """One trial of a recorded sweep.

    Attributes:
        index: the trial's index (0-based), its ``TX_TRIAL_INDEX``.
        params: its parameter values.
        attempts: the app ids of its submissions, oldest first (empty: not submitted yet).
        submitted: when each attempt was submitted (seconds since the epoch).
        ended: when the last attempt ended, as its scheduler recorded it (where it records
            none: when tx first saw it terminal); None: not seen terminal yet.
        pending: waiting to be submitted (by the run, ``resume`` or the supervisor) when
            fewer than ``max_parallel`` trials run.
        started: when the last attempt started, as its scheduler recorded it (None: not
            recorded; its submission time stands in).
        cancelled: ``tx cancel SWEEP/TRIAL`` took it off the pending ones before it was
            submitted (``resume`` submits it again).
    """

    index: int
    params: Dict[str, Any]
    attempts: List[str] = attrs.field(factory=list)
    submitted: List[float] = attrs.field(factory=list)
    ended: Optional[float] = None
    pending: bool = False
    started: Optional[float] = None
    cancelled: bool = False


@attrs.define
class SweepRecord:
    """What tx keeps of a sweep (the JSON file :func:`record_path` names).

    Attributes:
        sweep_id, scheduler, session: the parts of the handle.
        name: the app's name.
        source: ``{"component": name, "args": [...]}`` or ``{"appdef": {...}}``.
        env: env added to every role (``${name}`` substituted per trial).
        cfg: the trials' run options as merged at launch (-cfg, ``.txconfig``, ``TX_*``:
            :meth:`tx.runner.Runner.dryrun_sweep`); every later submission (the
            supervisor's, ``tx sweep resume``'s) uses them as they are, merging nothing.
        max_parallel: the most trials running at once (None: no bound).
        native: how the backend holds the trials (``"array"`` or ``"apps"``).
        cancelled: ``tx cancel`` was asked (no trial is submitted any more until resumed).
        created: when the sweep was submitted (seconds since the epoch).
        trials: the trials.
        component_defaults: the component's ``[component:NAME]`` defaults at launch (None:
            none, or a record written before tx kept them: the submitting process's).
        context: the launch context every later submission is dry-run and submitted in
            (:func:`tx.runner._records.capture_context`: the environment and working
            directory of the process that ran ``tx sweep``; None: a record written before
            tx kept it; the submitting process's own).
    """

    sweep_id: str
    scheduler: str
    session: str
    name: str
    source: Dict[str, Any]
    env: Dict[str, str]
    cfg: Dict[str, Any]
    max_parallel: Optional[int]
    native: str
    cancelled: bool = False
    created: float = 0.0
    trials: List[TrialRecord] = attrs.field(factory=list)
    component_defaults: Optional[Dict[str, str]] = None
    context: Optional[Dict[str, Any]] = None

    @property
    def handle(self) -> str:
        return make_app_handle(self.scheduler, self.session, self.sweep_id)

    def to_json(self) -> Dict[str, Any]:
        """The record as JSON types, in field order, for :func:`_write`: the trials written
        field by field (a sweep of 10,000 trials through ``attrs.asdict`` cost 0.1 s), their
        lists and dicts shared with the record (write it, do not keep it)."""
        data = attrs.asdict(self, filter=lambda a, _: a.name != "trials")
        trials = [{n: getattr(t, n) for n in _TRIAL_FIELDS} for t in self.trials]
        return {n: trials if n == "trials" else data[n] for n in _RECORD_FIELDS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SweepRecord":
        fields = dict(data)
        fields["trials"] = [TrialRecord(**t) for t in fields.get("trials", [])]
        return cls(**fields)


#: the fields of a trial and of a sweep, in order, as :meth:`SweepRecord.to_json` writes them
_TRIAL_FIELDS = tuple(a.name for a in attrs.fields(TrialRecord))
_RECORD_FIELDS = tuple(a.name for a in attrs.fields(SweepRecord))


# -- the record on disk ------------------------------------------------------------------
def record_path(scheduler: str, sweep_id: str) -> str:
    """Where the record of sweep ``sweep_id`` on ``scheduler`` is kept."""
    return os.path.join(state_dir(), "sweeps", scheduler, f"{sweep_id}.json")


def is_sweep_handle(handle: str) -> bool:
    """Whether ``handle`` names a sweep recorded on this host (a stat, no scheduler call)."""
    try:
        scheduler, _session, sweep_id = parse_app_handle(handle)
    except ValueError:
        return False
    return is_sweep_id(sweep_id) and os.path.exists(record_path(scheduler, sweep_id))


def is_sweep_id(app_id: str) -> bool:
    """Whether ``app_id`` has the form of a sweep's id (``sweep-NAME-1a2b3c4d``: what
    :meth:`tx.runner.Runner.run_sweep` names a sweep, and the id of a sweep's row in
    :func:`collapse_listed`); no file or scheduler is read. An app whose name starts with
    ``sweep-`` may look alike: :func:`is_sweep_handle` says whether one is recorded."""
    return bool(_ID.match(app_id or ""))


def load_record(handle: str) -> SweepRecord:
    """The record of the sweep ``handle``.

    Raises:
        UnknownSweepError: none on this host.
        MalformedAppHandleException: not ``{scheduler}://{session}/{sweep_id}``.
    """
    scheduler, session, sweep_id = parse_app_handle(handle)
    try:
        with open(record_path(scheduler, sweep_id), encoding="utf-8") as f:
            rec = SweepRecord.from_json(json.load(f))
    except FileNotFoundError:
        raise UnknownSweepError(f"no sweep {handle} on this host (sweeps are kept in {state_dir()}/sweeps)") from None
    if rec.session != session:
        raise UnknownSweepError(f"no sweep {handle}: {sweep_id} belongs to session {rec.session!r}")
    return rec


def _write(rec: SweepRecord) -> None:
    # private: the launch context holds the launching process's environment
    write_json(record_path(rec.scheduler, rec.sweep_id), rec.to_json(), private=True)


@contextlib.contextmanager
def updating(handle: str) -> Iterator[SweepRecord]:
    """Load the record under an exclusive lock, yield it, and write it back: the CLI and a
    supervisor never lose each other's updates."""
    scheduler, _session, sweep_id = parse_app_handle(handle)
    with flocked(record_path(scheduler, sweep_id) + ".lock"):
        rec = load_record(handle)
        yield rec
        _write(rec)


def list_records(scheduler: Optional[str], session: Optional[str] = None) -> List[SweepRecord]:
    """The sweeps recorded for ``scheduler`` (None: for every scheduler) of ``session`` if
    given, oldest first."""
    root = os.path.join(state_dir(), "sweeps")
    if scheduler is None:
        names = sorted(os.listdir(root)) if os.path.isdir(root) else []
        recs = [r for n in names for r in read_all(os.path.join(root, n), SweepRecord.from_json)]
    else:
        recs = read_all(os.path.join(root, scheduler), SweepRecord.from_json)
    return sorted((r for r in recs if session is None or r.session == session), key=lambda r: r.created)


def trial(handle: str, index: int) -> "tuple[SweepRecord, TrialRecord]":
    """The record of sweep ``handle`` and its trial ``index``.

    Raises:
        UnknownSweepError: no such sweep on this host, or no such trial in it.
    """
    rec = load_record(handle)
    if not 0 <= index < len(rec.trials):
        raise UnknownSweepError(f"sweep {handle} has no trial {index}: it has {len(rec.trials)} "
                                f"(0-{len(rec.trials) - 1})")
    return rec, rec.trials[index]


def trial_handle(rec: SweepRecord, t: TrialRecord) -> Optional[str]:
    """The app handle of trial ``t``'s last attempt; None while it was not submitted."""
    if t.pending or not t.attempts:
        return None
    return make_app_handle(rec.scheduler, rec.session, t.attempts[-1])


def cancel_trial(handle: str, index: int) -> Optional[str]:
    """``tx cancel SWEEP/TRIAL``: a pending trial is taken off the pending ones (CANCELLED;
    ``resume`` submits it again) and None returned; else the app handle of its last
    attempt, for the caller to cancel as any app.

    Raises:
        UnknownSweepError: no such sweep or trial.
    """
    trial(handle, index)
    with updating(handle) as rec:
        t = rec.trials[index]
        if t.pending or not t.attempts:
            t.pending, t.cancelled = False, True
            return None
        return trial_handle(rec, t)


def describe_sweep(handle: str) -> Dict[str, Any]:
    """``tx describe SWEEP``: what the sweep runs and over what, from its record: handle,
    name, scheduler, the app (component and arguments, or AppDef), env, run options,
    ``max_parallel``, how the backend holds it, and each trial's parameters and app
    handles (oldest attempt first). No scheduler call.

    Raises:
        UnknownSweepError: no such sweep on this host.
    """
    rec = load_record(handle)
    return {"sweep_handle": rec.handle, "name": rec.name, "scheduler": rec.scheduler, **rec.source,
            "env": rec.env, "cfg": rec.cfg, "max_parallel": rec.max_parallel, "native": rec.native,
            "cancelled": rec.cancelled, "created": rec.created,
            "parameters": list(rec.trials[0].params) if rec.trials else [],
            "trials": [{"index": t.index, "params": t.params,
                        "app_handles": [make_app_handle(rec.scheduler, rec.session, a) for a in t.attempts]}
                       for t in rec.trials]}


# -- trackers ----------------------------------------------------------------------------
def track(rec: SweepRecord, trials: Sequence[TrialRecord]) -> None:
    """Record the sweep and ``trials`` (their last attempts) in the configured trackers
    (``.txconfig`` / ``TX_TRACKERS``; none: nothing): the sweep is a run (id: its handle)
    with metadata ``sweep_parameters`` and ``trials``; each trial is a run (id: its app
    handle, the ``TX_JOB_ID`` its replicas see) with its parameters as metadata, plus
    ``sweep`` and ``trial_index``, and the sweep as its source, so that ``tx tracker
    lineage SWEEP`` lists the trials, and a trial's lineage names the sweep."""
    trackers = build_trackers(configured_trackers())
    for tracker in trackers:
        tracker.add_metadata(rec.handle, kind="sweep", sweep_parameters=list(rec.trials[0].params) if rec.trials
                             else [], trials=len(rec.trials), name=rec.name)
        for t in trials:
            run = make_app_handle(rec.scheduler, rec.session, t.attempts[-1])
            tracker.add_metadata(run, **t.params, sweep=rec.handle, trial_index=t.index)
            tracker.add_source(run, rec.handle)


@attrs.frozen
class TrialMetric:
    """A trial's value of a metric its runs recorded (see :func:`best_trials`)."""

    index: int
    params: Dict[str, Any]
    app_handle: str
    value: float


def best_trials(runner: Any, handle: str, metric: str, maximize: bool = False) -> List[TrialMetric]:
    """The trials whose last attempt recorded metadata ``metric`` (a number) in the first
    configured tracker, best first (lowest, or highest with ``maximize``).

    Raises:
        UnknownSweepError: no such sweep.
        SweepFormatError: no tracker is configured, or no trial recorded ``metric``.
    """
    rec = load_record(handle)
    trackers = build_trackers(configured_trackers())
    if not trackers:
        raise SweepFormatError("no tracker is configured: set [tx:tracker] in .txconfig or TX_TRACKERS "
                               "(docs/sweeps.md), and record the metric from the trials")
    out = []
    for t in rec.trials:
        if t.pending or not t.attempts:
            continue
        run = make_app_handle(rec.scheduler, rec.session, t.attempts[-1])
        value = trackers[0].metadata(run).get(metric)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(TrialMetric(t.index, t.params, run, float(value)))
    if not out:
        raise SweepFormatError(f"no trial of {handle} recorded metric {metric!r} (AppRun.run_from_env()"
                               f".add_metadata({metric}=...) in the trial)")
    return sorted(out, key=lambda m: (-m.value if maximize else m.value, m.index))
