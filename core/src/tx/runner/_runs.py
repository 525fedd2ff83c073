"""The records of runs with failover (:mod:`tx.runner.failover`, which re-exports every
public name here): a run's :class:`RunRecord` and its :class:`Hop` s, kept as JSON files
under ``state_dir()/runs`` (written whole, readable by their owner only: a record holds the
run's launch context), locked across processes with ``flock``; listing them, pruning those
that ended, and a run as one row of ``tx list``."""
from __future__ import annotations

import json
import os
import time
from typing import Any, ContextManager, Dict, List, Mapping, Optional, Sequence, Union

import attrs

from tx.config.environ import state_dir
from tx.errors import UserError
from tx.runner.handles import RUN_ID
from tx.runner._records import capture_context, flocked, in_context, read_all, write_json
from tx.schedulers.api import ListAppResponse
from tx.specs.api import AppState
from tx.specs.handles import make_app_handle, parse_app_handle

__all__ = [
    "ChainRefusedError", "Hop", "RunDryRunInfo", "RunListAppResponse", "RunRecord", "RunStatus", "UnknownRunError",
    "capture_context", "collapse_listed", "in_context", "is_run_handle", "list_records", "load_record", "locked", "prune", "record_path",
    "write_record",
]

_ID = RUN_ID  # the form of the ids (tx.runner.handles): one definition


class UnknownRunError(UserError, LookupError):
    """No run with this handle is recorded on this host."""


class ChainRefusedError(UserError, ValueError):
    """A scheduler of the fallback chain would refuse the app (its dryrun failed): the run
    is refused before anything is submitted."""


@attrs.define
class Hop:
    """One submission of a run on one scheduler.

    Attributes:
        scheduler: the scheduler's name.
        app_id: the app's id there; None while it is being submitted.
        submitted: when it was (or began to be) submitted, seconds since the epoch.
        ended: when tx saw it end or left it (None: live).
        state: its state when tx last looked (an :class:`tx.specs.AppState` name).
        why: why tx left it for the next scheduler (``PENDING 10 min 00 s (Resources)``,
            ``FAILED (infra: NODE_FAIL)``); "" for the live or the last hop.
    """

    scheduler: str
    app_id: Optional[str] = None
    submitted: float = 0.0
    ended: Optional[float] = None
    state: str = "SUBMITTED"
    why: str = ""

    def handle(self, session: str) -> Optional[str]:
        """The hop's app handle in ``session``; None while it has no app id (being submitted)."""
        return None if self.app_id is None else make_app_handle(self.scheduler, session, self.app_id)


@attrs.define
class RunRecord:
    """What tx keeps of a run with failover (the JSON file :func:`record_path` names).

    Attributes:
        run_id, session: the run handle's parts (its scheduler is ``chain[0]``).
        name: the app's name.
        appdef: the AppDef as a dict (:func:`tx.specs.files.appdef_to_dict`), with the
            run's ``TX_CHECKPOINT_DIR`` in every role.
        chain: ``[{"scheduler": name, "cfg": {...}}, ...]``, the first scheduler first.
        pending_timeout: seconds a hop may stay PENDING before the next scheduler is tried.
        workspace: the workspace every hop is built with (None: none).
        parent_run_id: the tracker parent run of every hop.
        hops: the submissions, oldest first.
        failing_over: a failover of the last hop is under way (it may be cancelled).
        cancelled: ``tx cancel`` was asked.
        final: the run's final state name (None: not ended).
        created: when the run was created (seconds since the epoch).
        watch: a watcher follows the run (False: only the tx processes that look at it).
        context: the launch context every later hop is dry-run and submitted in:
            ``{"env": {...}, "cwd": "..."}``, the environment and working directory of the
            process that created the run (None: a record written before tx kept it; the
            stepping process's own).
    """

    run_id: str
    session: str
    name: str
    appdef: Dict[str, Any]
    chain: List[Dict[str, Any]]
    pending_timeout: Optional[float]
    workspace: Optional[str] = None
    parent_run_id: Optional[str] = None
    hops: List[Hop] = attrs.field(factory=list)
    failing_over: bool = False
    cancelled: bool = False
    final: Optional[str] = None
    created: float = 0.0
    watch: bool = True
    context: Optional[Dict[str, Any]] = None

    @property
    def handle(self) -> str:
        """The run handle, ``{first scheduler}://{session}/{run_id}``."""
        return make_app_handle(self.chain[0]["scheduler"], self.session, self.run_id)

    @property
    def live(self) -> Optional[Hop]:
        """The last hop (the one running or last run), None before the first."""
        return self.hops[-1] if self.hops else None

    def to_json(self) -> Dict[str, Any]:
        """The record as JSON-ready data (what ``runs/<run_id>.json`` holds)."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunRecord":
        """The record :meth:`to_json` wrote.

        Raises:
            TypeError: a field is missing or unknown (a damaged record).
        """
        d = dict(data)
        d["hops"] = [Hop(**h) for h in d.get("hops", [])]
        return cls(**d)


@attrs.define
class RunStatus:
    """A run's state and its chain of hops (what ``tx status`` shows above the live app).

    Attributes:
        handle: the run handle.
        state: the run's state: the live hop's, PENDING while a failover is under way.
        chain: one line, ``slurm: PENDING 10 min 00 s (Resources) -> local_docker: RUNNING``.
        hops: the record's hops.
        live: the live hop's app handle (None: being submitted).
    """

    handle: str
    state: AppState
    chain: str
    hops: List[Hop]
    live: Optional[str]

    def to_json(self) -> Dict[str, Any]:
        """``tx status --json``'s run part: handle, state name, chain line, live handle, hops."""
        return {"handle": self.handle, "state": self.state.name, "chain": self.chain,
                "live": self.live, "hops": [attrs.asdict(h) for h in self.hops]}


# -- the record on disk ------------------------------------------------------------------
def record_path(run_id: str) -> str:
    """Where the record of run ``run_id`` is kept."""
    return os.path.join(state_dir(), "runs", f"{run_id}.json")


def is_run_handle(handle: str) -> bool:
    """Whether ``handle`` names a run with failover recorded on this host (a stat)."""
    try:
        _scheduler, _session, run_id = parse_app_handle(handle)
    except ValueError:
        return False
    return bool(_ID.match(run_id)) and os.path.exists(record_path(run_id))


def load_record(handle: str) -> RunRecord:
    """The record of run ``handle``.

    Raises:
        UnknownRunError: none on this host.
        MalformedAppHandleException: not ``{scheduler}://{session}/{run_id}``.
    """
    _scheduler, session, run_id = parse_app_handle(handle)
    try:
        with open(record_path(run_id), encoding="utf-8") as f:
            rec = RunRecord.from_json(json.load(f))
    except FileNotFoundError:
        raise UnknownRunError(f"no run {handle} on this host (runs are kept in {state_dir()}/runs)") from None
    if rec.session != session:
        raise UnknownRunError(f"no run {handle}: {run_id} belongs to session {rec.session!r}")
    return rec


def write_record(rec: RunRecord) -> None:
    """Write the run's record (mode 0600)."""
    # private: the launch context holds the launching process's environment
    write_json(record_path(rec.run_id), rec.to_json(), private=True)


def locked(run_id: str, blocking: bool = True) -> ContextManager[bool]:
    """Hold the run's lock (yields False, holding nothing, when ``blocking`` is False and
    another process holds it)."""
    return flocked(record_path(run_id) + ".lock", blocking)


def list_records(session: Optional[str] = None, unfinished: bool = False, watched: bool = False,
                 cache: Optional[Dict[str, Any]] = None) -> List[RunRecord]:
    """The runs recorded on this host (of ``session`` if given; only those not ended with
    ``unfinished``; only those a watcher follows, :attr:`RunRecord.watch`, with
    ``watched``), oldest first. ``cache``: as :func:`tx.runner._records.read_all`'s (the
    watcher's: a record not changed since the last call is not read again; the records
    returned are shared with that cache and must not be changed)."""
    recs = read_all(os.path.join(state_dir(), "runs"), RunRecord.from_json, cache)
    return sorted((r for r in recs if (session is None or r.session == session) and not (unfinished and r.final)
                   and not (watched and not r.watch)), key=lambda r: r.created)


def prune(keep: float, dry_run: bool = False, now: Optional[float] = None,
          schedulers: Optional[Sequence[str]] = None) -> List[str]:
    """Delete the records of runs that ended more than ``keep`` seconds ago (``tx gc``):
    only runs with a final state, each under its lock (a run a step holds is kept for the
    next time); of every scheduler, or of the runs whose last hop is on one of
    ``schedulers``. A run's end is its last hop's, else the record's last write.

    Returns:
        the run handles of the deleted (``dry_run``: deletable) records.
    """
    now = time.time() if now is None else now
    gone: List[str] = []
    for rec in list_records():
        hop = rec.live
        if not rec.final or (schedulers is not None and (hop is None or hop.scheduler not in schedulers)):
            continue
        path = record_path(rec.run_id)
        with locked(rec.run_id, blocking=False) as held:
            try:
                ended = hop.ended if hop is not None and hop.ended else os.path.getmtime(path)
            except OSError:
                continue
            if not held or now - ended <= keep:
                continue
            if not dry_run:
                for p in (path, path + ".lock"):  # a step that opens the lock after this finds no record
                    try:
                        os.unlink(p)
                    except FileNotFoundError:
                        pass
            gone.append(rec.handle)
    return gone


# -- listing -----------------------------------------------------------------------------
@attrs.define
class RunListAppResponse(ListAppResponse):
    """A run with failover as one listed row (:func:`collapse_listed`): ``app_handle`` is the
    run handle, ``app_id`` the run id, ``name`` the app's name with the schedulers it went
    over (``train [slurm -> local_cwd]``), ``submitted`` when the run was created.

    Attributes:
        hops: the app handles of its hops, oldest first (a hop being submitted: none).
        ended: when its last hop ended (epoch seconds; None while it runs).
    """

    hops: List[str] = attrs.field(factory=list)
    ended: Optional[float] = None


def collapse_listed(apps: Sequence[Any], records: Sequence[RunRecord],
                    scheduler: Union[str, Sequence[str]]) -> List[Any]:
    """``apps`` (listings with handles, of the scheduler or schedulers ``scheduler`` names)
    with every hop of the runs in ``records`` left out, and one row
    (:class:`RunListAppResponse`) for each run that has a hop on one of them or whose handle
    is of one of them: a run shows once, under its run handle, with its hops inside, however
    many of its schedulers are listed. Its state: the recorded final state, else its live
    hop's as listed, else as last recorded (PENDING while it fails over)."""
    wanted = {scheduler} if isinstance(scheduler, str) else set(scheduler)
    by_handle = {a.app_handle: a for a in apps}
    taken = set()
    rows = []
    for rec in records:
        hops = [h.handle(rec.session) for h in rec.hops if h.app_id]
        taken |= set(hops)
        if rec.chain[0]["scheduler"] not in wanted and not any(h.scheduler in wanted for h in rec.hops):
            continue
        hop = rec.live
        listed = by_handle.get(hop.handle(rec.session) or "") if hop is not None else None
        if rec.final:
            state = AppState[rec.final]
        elif rec.failing_over or hop is None:
            state = AppState.PENDING
        else:
            state = listed.state if listed is not None else AppState[hop.state]
        chain = " -> ".join(h.scheduler for h in rec.hops)
        rows.append(RunListAppResponse(app_id=rec.run_id, state=state, app_handle=rec.handle,
                                       name=f"{rec.name} [{chain}]", submitted=rec.created,
                                       hops=[h for h in hops if h], ended=hop.ended if rec.final and hop else None))
    return rows + [a for a in apps if a.app_handle not in taken]


@attrs.define
class RunDryRunInfo:
    """A run checked but not recorded or submitted (:func:`tx.runner.failover.prepare`):
    ``record``, its record as it will be written; ``first``, its first hop's dryrun (what
    is submitted, as it is: the first hop is dry-run once)."""

    record: RunRecord
    first: Any

    @property
    def handle(self) -> str:
        """The run handle it will have."""
        return self.record.handle

    def __str__(self) -> str:
        return str(self.first)
