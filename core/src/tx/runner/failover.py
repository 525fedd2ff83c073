"""Failover: one run over a chain of schedulers (``tx run -s slurm --fallback local_docker,local_cwd
--pending_timeout 10m``; docs/recovery.md).

A run has a handle like an app's, ``{first scheduler}://{session}/{run_id}`` with a run id
``run-<name>-<8 hex>``, and a record, a JSON file ``state_dir()/runs/{run_id}.json``: the
AppDef, the chain of schedulers with their run options, the pending timeout, and each
*hop* (one submission on one scheduler: its app id, when it was submitted, why tx left
it). The run's live app is its last hop's.

A hop is left, and the same AppDef submitted to the next scheduler of the chain, when it is
still PENDING (or SUBMITTED) ``pending_timeout`` seconds after its submission, or when it
FAILED and its last attempt's failure was the infrastructure's
(:class:`tx.specs.FailureKind`: after the scheduler's own ``infra_retries``). Before the next
submission the hop is cancelled and the cancel confirmed (the app is seen terminal): a run
never runs on two backends at once. Every hop keeps the run's ``TX_CHECKPOINT_DIR`` (fixed
when the run is created), its tracker run (``TX_JOB_ID`` is the run handle in every hop)
and its parent run.

:func:`step` makes that decision for one run under an exclusive lock on the record (a
``flock``, released by the kernel when its holder dies): two tx processes never both fail
a run over. A step interrupted mid-failover is finished by the next: the record says a
failover is under way before the cancel, and a hop is recorded (without an app id) before
it is submitted; a hop found without an app id is looked for on its scheduler (an app of
the run's name submitted since) before it is submitted again.

What follows a run: a detached watcher (:mod:`tx.runner._failover_watcher`, one per state
directory, holding the ``flock`` of :func:`watcher_lock_path`) follows every unfinished run
(but those created with ``watch=False``), with one status call per backend per poll; and
every tx command that looks at a run (status, log, wait, cancel) takes a step of it first
and, with :func:`ensure_watcher`, starts a watcher when unfinished runs are left and none
holds the lock (one killed, or lost to a reboot).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any, ContextManager, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence, Tuple

import attrs

from tx.config.environ import CHECKPOINT_DIR, failover_pause, state_dir
from tx.config.recovery import checkpoint_url
from tx.durations import format_duration
from tx.errors import UserError
from tx.log import get_logger
from tx.runner._records import flocked, read_all, write_json
from tx.schedulers.api import ListAppResponse, PartialListError
from tx.specs.api import AppDef, AppDryRunInfo, AppState, is_terminal
from tx.specs.files import appdef_from_dict, appdef_to_dict
from tx.specs.handles import make_app_handle, parse_app_handle
from tx.specs.status import AppStatus, FailureKind

if TYPE_CHECKING:
    from tx.schedulers.api import Scheduler

__all__ = [
    "CANCEL_CONFIRM_S", "Hop", "RunRecord", "RunStatus", "UnknownRunError", "cancel", "collapse_listed", "create",
    "ensure_watcher", "is_run_handle", "list_records", "load_record", "poll", "prune", "record_path", "run_status",
    "start_watcher", "step", "watcher_lock_path",
]

log = get_logger(__name__)

_ID = re.compile(r"^run-[a-z0-9-]*[0-9a-f]{8}$")
#: the most seconds tx waits for a cancelled hop to be seen terminal before it submits the next
CANCEL_CONFIRM_S = 120.0


class _Runner(Protocol):
    """What failover needs of :class:`tx.runner.Runner` (which passes itself); a protocol, so
    that this module does not import the runner that imports it."""

    def name(self) -> str: ...

    def scheduler(self, scheduler: str) -> "Scheduler[Any]": ...

    def dryrun(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, Any]] = None,
               workspace: Optional[str] = None, parent_run_id: Optional[str] = None,
               job_id: Optional[str] = None) -> AppDryRunInfo[Any]: ...

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str: ...

    def status(self, app_handle: str) -> Optional[AppStatus]: ...

    def cancel(self, app_handle: str) -> None: ...

    def wait(self, app_handle: str, wait_interval: float = 10,
             timeout: Optional[float] = None) -> Optional[AppStatus]: ...

    def list(self, scheduler: str) -> List[ListAppResponse]: ...


class UnknownRunError(UserError, LookupError):
    """No run with this handle is recorded on this host."""


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


def _write(rec: RunRecord) -> None:
    write_json(record_path(rec.run_id), rec.to_json())


def _locked(run_id: str, blocking: bool = True) -> ContextManager[bool]:
    """Hold the run's lock (yields False, holding nothing, when ``blocking`` is False and
    another process holds it)."""
    return flocked(record_path(run_id) + ".lock", blocking)


def list_records(session: Optional[str] = None, unfinished: bool = False, watched: bool = False) -> List[RunRecord]:
    """The runs recorded on this host (of ``session`` if given; only those not ended with
    ``unfinished``; only those a watcher follows, :attr:`RunRecord.watch`, with
    ``watched``), oldest first."""
    recs = read_all(os.path.join(state_dir(), "runs"), RunRecord.from_json)
    return sorted((r for r in recs if (session is None or r.session == session) and not (unfinished and r.final)
                   and not (watched and not r.watch)), key=lambda r: r.created)


def create(runner: _Runner, app: AppDef, chain: Sequence[Tuple[str, Mapping[str, Any]]],
           pending_timeout: Optional[float], workspace: Optional[str] = None,
           parent_run_id: Optional[str] = None, watch: bool = True) -> RunRecord:
    """Record a new run of ``app`` over ``chain`` (``[(scheduler, cfg), ...]``) and submit
    its first hop; returns the record (its ``handle`` is the run handle). ``watch``: a
    watcher follows the run (it is not started here: :func:`ensure_watcher`).

    Raises:
        ValueError: an empty chain, a scheduler twice, a pending timeout <= 0.
        what :meth:`tx.runner.Runner.dryrun` and ``schedule`` raise, for the first scheduler
        (nothing is recorded then).
    """
    names = [s for s, _cfg in chain]
    if not names:
        raise ValueError("a run needs at least one scheduler")
    if len(set(names)) != len(names):
        raise ValueError(f"a scheduler appears twice in the fallback chain: {', '.join(names)}")
    if pending_timeout is not None and pending_timeout <= 0:
        raise ValueError(f"pending_timeout must be > 0 seconds, got {pending_timeout:g}")
    session = runner.name()
    stem = re.sub(r"[^a-z0-9]+", "-", app.name.lower()).strip("-")[:24]
    run_id = f"run-{stem + '-' if stem else ''}{secrets.token_hex(4)}"
    ckpt = checkpoint_url(names[0], session, run_id)  # this run's alone; every hop keeps it
    app = attrs.evolve(app, roles=[attrs.evolve(r, env={CHECKPOINT_DIR: ckpt, **r.env}) for r in app.roles])
    rec = RunRecord(run_id=run_id, session=session, name=app.name, appdef=appdef_to_dict(app),
                    chain=[{"scheduler": s, "cfg": dict(c)} for s, c in chain],
                    pending_timeout=pending_timeout, workspace=workspace,
                    parent_run_id=parent_run_id, created=time.time(), watch=watch)
    info = _dryrun(runner, rec, names[0])  # errors of the first scheduler before anything is recorded
    hop = Hop(scheduler=names[0], submitted=time.time())
    rec.hops.append(hop)
    with _locked(run_id):
        _write(rec)
        hop.app_id = parse_app_handle(runner.schedule(info)).app_id
        _write(rec)
    return rec


def _dryrun(runner: _Runner, rec: RunRecord, scheduler: str) -> AppDryRunInfo[Any]:
    cfg = next(c["cfg"] for c in rec.chain if c["scheduler"] == scheduler)
    return runner.dryrun(appdef_from_dict(rec.appdef), scheduler, cfg, workspace=rec.workspace,
                         parent_run_id=rec.parent_run_id, job_id=rec.handle)


def _pause(point: str) -> None:
    """Stop here for a while when ``TX_FAILOVER_PAUSE`` names ``point`` (fault tests: a
    watcher SIGKILLed mid-failover)."""
    if failover_pause() == point:
        time.sleep(60)


def _infra_failed(status: AppStatus) -> Optional[str]:
    """The reason when ``status`` (FAILED) ended with an infrastructure failure, else None."""
    attempts = list(status.attempts or [])
    if attempts and attempts[-1].kind == FailureKind.INFRA:
        return attempts[-1].reason or "infrastructure"
    return None


def _first_line(text: Any) -> str:
    s = "" if text in (None, "<NONE>") else str(text)
    return next((ln.strip() for ln in s.splitlines() if ln.strip()), "")[:100]


def _pending_reason(state: AppState, status: Optional[AppStatus]) -> str:
    """The backend's short word for why the app waits (Slurm's ``Resources``,
    ``Dependency``), from the first line of its status message."""
    text = _first_line(status.msg) if status is not None else ""
    for prefix in (f"{state.name}:", "PENDING:"):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    return text.split(":", 1)[0].strip()


def step(runner: _Runner, handle: str, listed: Optional[Mapping[Tuple[str, str], AppState]] = None,
         blocking: bool = True) -> RunRecord:
    """Look at the run's live hop once and act: record that it ended, or fail it over to
    the next scheduler (cancel, confirm, submit), or finish an interrupted failover. Holds
    the run's lock throughout; with ``blocking`` False, does nothing while another process
    holds it. ``listed``: ``(scheduler, app_id) -> state`` from a batched list (a hop
    listed RUNNING, or PENDING within its timeout, costs no call). Returns the record as
    it is after the step.

    Raises:
        UnknownRunError: no such run.
        tx.schedulers.SchedulerError: a backend cannot be reached (the run is left as it was).
    """
    _s, _session, run_id = parse_app_handle(handle)
    with _locked(run_id, blocking) as held:
        rec = load_record(handle)
        if not held or rec.final:
            return rec
        hop = rec.hops[-1]
        if hop.app_id is None:  # a submission interrupted: find it, or submit it
            _resubmit(runner, rec, hop)
            return rec
        now = time.time()
        hop_handle = hop.handle(rec.session) or ""
        state = (listed or {}).get((hop.scheduler, hop.app_id))
        status: Optional[AppStatus] = None
        nxt = len(rec.hops) < len(rec.chain) and not rec.cancelled
        over = rec.pending_timeout is not None and now - hop.submitted >= rec.pending_timeout
        needs_detail = state is None or state == AppState.FAILED or (state in (AppState.PENDING, AppState.SUBMITTED)
                                                                     and over and nxt)
        if needs_detail or rec.failing_over:
            status = runner.status(hop_handle)
            state = status.state if status is not None else AppState.UNKNOWN
        assert state is not None
        why = ""
        if rec.failing_over:
            why = hop.why or "failover"
        elif nxt and state in (AppState.PENDING, AppState.SUBMITTED) and over:
            reason = _pending_reason(state, status)
            why = f"{state.name} {format_duration(now - hop.submitted)}" + (f" ({reason})" if reason else "")
        elif nxt and state == AppState.FAILED and status is not None and _infra_failed(status):
            why = f"FAILED (infra: {_infra_failed(status)})"
        if why:
            _fail_over(runner, rec, hop, hop_handle, why)
            return rec
        changed = hop.state != state.name
        hop.state = state.name
        if is_terminal(state) or state == AppState.UNKNOWN:
            hop.ended = hop.ended or now
            rec.final = state.name
            changed = True
        if changed:
            _write(rec)
        return rec


def _fail_over(runner: _Runner, rec: RunRecord, hop: Hop, hop_handle: str, why: str) -> None:
    if not rec.failing_over:
        hop.why = why
        rec.failing_over = True
        _write(rec)  # before the cancel: a successor finishes what this step began
    runner.cancel(hop_handle)
    status = runner.wait(hop_handle, wait_interval=0.5, timeout=CANCEL_CONFIRM_S)
    if status is not None and not status.is_terminal():
        log.warning(f"{rec.handle}: {hop_handle} is still {status.state.name} after it was cancelled; "
                    "the next scheduler is tried once it has ended")
        return
    hop.state = status.state.name if status is not None else "UNKNOWN"
    hop.ended = time.time()
    _pause("after_cancel")
    if rec.cancelled:  # tx cancel came while the hop was being left
        rec.failing_over = False
        rec.final = "CANCELLED"
        _write(rec)
        return
    nxt = Hop(scheduler=rec.chain[len(rec.hops)]["scheduler"], submitted=time.time())
    rec.hops.append(nxt)
    _write(rec)  # the hop is recorded before it is submitted: see _resubmit
    log.warning(f"{rec.handle}: left {hop.scheduler} ({why}); submitting to {nxt.scheduler}")
    _submit(runner, rec, nxt)


def _submit(runner: _Runner, rec: RunRecord, hop: Hop) -> None:
    info = _dryrun(runner, rec, hop.scheduler)
    app_id = parse_app_handle(runner.schedule(info)).app_id
    _pause("after_submit")
    hop.app_id = app_id
    rec.failing_over = False
    _write(rec)


def _resubmit(runner: _Runner, rec: RunRecord, hop: Hop) -> None:
    """A hop recorded without an app id: its process died around ``schedule``. An app of
    the run's name submitted on the hop's scheduler since the hop began is adopted; else
    the hop is submitted now."""
    try:
        apps = runner.list(hop.scheduler)
    except PartialListError as e:
        apps = e.apps
    except NotImplementedError:
        apps = []
    known = {h.app_id for h in rec.hops}
    found = [a for a in apps if a.app_id not in known and (a.name == rec.name or a.app_id.startswith(rec.name))
             and (a.submitted is None or a.submitted >= hop.submitted - 1)]
    if found:
        hop.app_id = max(found, key=lambda a: a.submitted or 0).app_id
        rec.failing_over = False
        _write(rec)
        log.warning(f"{rec.handle}: adopted {hop.app_id} on {hop.scheduler}, submitted by a tx process that died")
        return
    _submit(runner, rec, hop)


def cancel(runner: _Runner, handle: str) -> None:
    """Cancel the run: no hop is submitted any more, and the live hop is cancelled
    (non-blocking, as :meth:`tx.runner.Runner.cancel`); a watcher is started if none
    follows the unfinished runs (:func:`ensure_watcher`).

    Raises:
        UnknownRunError: no such run.
    """
    _s, _session, run_id = parse_app_handle(handle)
    with _locked(run_id):
        rec = load_record(handle)
        rec.cancelled = True
        _write(rec)
    ensure_watcher()
    hop = rec.live
    if hop is not None and hop.app_id is not None:
        runner.cancel(hop.handle(rec.session) or "")


def run_status(runner: _Runner, handle: str) -> Tuple[RunStatus, Optional[AppStatus]]:
    """The run's :class:`RunStatus` and its live app's status (None: no live app yet), after
    a step that does not wait for another process's (and :func:`ensure_watcher`)."""
    ensure_watcher()
    rec = step(runner, handle, blocking=False)
    hop = rec.live
    live = hop.handle(rec.session) if hop is not None else None
    status = runner.status(live) if live else None
    state = AppState[rec.final] if rec.final else AppState.PENDING if (
        rec.failing_over or status is None or status.is_terminal()) else status.state
    parts = []
    now = time.time()
    for h in rec.hops:
        if h.why:
            parts.append(f"{h.scheduler}: {h.why}")
        elif h is hop:
            st = status.state.name if status is not None else (rec.final or h.state)
            parts.append(f"{h.scheduler}: {st}")
        else:
            parts.append(f"{h.scheduler}: {h.state} {format_duration((h.ended or now) - h.submitted)}")
    if rec.failing_over:
        parts.append(f"{rec.chain[len(rec.hops)]['scheduler'] if len(rec.hops) < len(rec.chain) else '?'}: "
                     "(failing over)")
    return RunStatus(rec.handle, state, " -> ".join(parts), list(rec.hops), live), status


def log_blocks(runner: Any, handle: str, role: str, k: int, should_tail: bool,
               streams: Optional[str]) -> Iterator[bytes]:
    """The replica's log over every hop, oldest first; following (``should_tail``), the
    next hop's once one hop's ends, until the run has ended. A hop whose scheduler has no
    log of the replica (it never started there) adds nothing; ``streams`` a scheduler does
    not keep apart gives its combined log for ``stdout`` and nothing for ``stderr``. Starts
    a watcher first if none follows the unfinished runs (:func:`ensure_watcher`)."""
    ensure_watcher()
    seen = 0
    while True:
        rec = load_record(handle)
        hops = [h for h in rec.hops if h.app_id is not None]
        for h in hops[seen:]:
            yield from _hop_blocks(runner, h.handle(rec.session) or "", role, k, should_tail, streams)
            seen += 1
        if not should_tail:
            return
        rec = step(runner, handle, blocking=False)
        if rec.final and seen >= len([h for h in rec.hops if h.app_id is not None]):
            return
        if seen >= len([h for h in rec.hops if h.app_id is not None]):
            time.sleep(0.5)


def _hop_blocks(runner: Any, hop_handle: str, role: str, k: int, should_tail: bool,
                streams: Optional[str]) -> Iterator[bytes]:
    try:
        yield from runner.log_blocks(hop_handle, role, k, should_tail=should_tail, streams=streams)
    except ValueError:  # the scheduler keeps no such stream
        if streams == "stderr":
            return
        yield from _hop_blocks(runner, hop_handle, role, k, should_tail, None)
    except Exception as e:  # noqa: BLE001 - a hop that never started there has no log
        log.debug("no log of a hop", hop=hop_handle, error=str(e))


def wait(runner: _Runner, handle: str, wait_interval: float, timeout: Optional[float]) -> Optional[AppStatus]:
    """Follow the run (stepping it) until it has ended or ``timeout`` seconds pass; returns
    the live app's status with the run's state (PENDING between hops)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        run, status = run_status(runner, handle)
        left = None if deadline is None else deadline - time.monotonic()
        if is_terminal(run.state) or run.state == AppState.UNKNOWN or (left is not None and left <= 0):
            if status is None:
                return AppStatus(state=run.state, msg=run.chain)
            return status if status.state == run.state else attrs.evolve(status, state=run.state)
        time.sleep(max(0.05, min(wait_interval, 1.0, left if left is not None else 1.0)))


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
        with _locked(rec.run_id, blocking=False) as held:
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
def collapse_listed(apps: Sequence[Any], records: Sequence[RunRecord], scheduler: str) -> List[Any]:
    """``apps`` (listings with handles) with the hops of each run in ``records`` that are on
    ``scheduler`` left out, and one row for each run whose live hop is on ``scheduler`` (its
    run handle, its state as recorded or as listed, its name with the schedulers it went
    over): a run shows once."""
    by_handle = {a.app_handle: a for a in apps}
    taken = set()
    rows = []
    for rec in records:
        taken |= {h.handle(rec.session) for h in rec.hops if h.scheduler == scheduler and h.app_id}
        hop = rec.live
        if hop is None or hop.scheduler != scheduler:
            continue
        listed = by_handle.get(hop.handle(rec.session) or "")
        state = AppState[rec.final] if rec.final else (listed.state if listed is not None else AppState.PENDING)
        chain = " -> ".join(h.scheduler for h in rec.hops)
        rows.append(ListAppResponse(app_id=rec.run_id, state=state, app_handle=rec.handle,
                                    name=f"{rec.name} [{chain}]", submitted=rec.created))
    return rows + [a for a in apps if a.app_handle not in taken]


# -- the watcher -------------------------------------------------------------------------
def watcher_lock_path() -> str:
    """The lock the one watcher of this state directory holds."""
    return os.path.join(state_dir(), "runs", "watcher.lock")


#: lock path -> the watcher this process started last for it (a look does not probe while
#: it lives: it holds the lock, or is about to take it, or exits finding it held, or exits
#: having seen no unfinished run, so none that a look could be at)
_started: Dict[str, "subprocess.Popen[bytes]"] = {}
#: lock paths whose watcher started by this process failed (warned once)
_failed: set = set()


def start_watcher() -> None:
    """Start the watcher process that follows every unfinished run of this state directory
    (it exits at once when another holds the watcher lock, and when no run is left; its
    output goes to ``runs/watcher.log``). :func:`ensure_watcher` starts one only when needed.

    Raises:
        OSError: the state directory cannot be written, or the process cannot be started.
    """
    path = os.path.join(state_dir(), "runs", "watcher.log")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "ab") as out:
        _started[watcher_lock_path()] = subprocess.Popen(  # noqa: S603 - our own module
            [sys.executable, "-m", "tx.runner._failover_watcher"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True)


def _watcher_lives() -> bool:
    """Whether a watcher holds the lock: one non-blocking ``flock`` attempt, released at
    once (no lock file: none ever ran)."""
    try:
        fd = os.open(watcher_lock_path(), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases the lock if this took it
    return False


def ensure_watcher(new_run: bool = False) -> bool:
    """Start a watcher (:func:`start_watcher`) when no process holds the watcher lock and
    unfinished runs that a watcher follows (:attr:`RunRecord.watch`) are recorded: after a
    watcher was killed or lost to a reboot, the next look at any run restarts it. While a
    watcher lives this costs one ``open`` and one non-blocking ``flock`` (nothing while the
    one this process started runs); without one, a read of the run records too.

    Race-free with the watcher's own start and exit (:func:`tx.runner._failover_watcher.main`):
    the lock is released before the records are read, so a watcher that found it held by
    this probe and exited is followed by this look at the records it saw, which starts
    another; a watcher that exits finding no run is followed by the run created after
    (:meth:`tx.runner.Runner.run_with_fallback` calls this after the record is written).

    Args:
        new_run: a run was just recorded: probe even while the watcher this process started
            lives (it may be exiting, having seen no run).

    Returns:
        True when it started a watcher. Never raises: a state directory it cannot read, a
        process it cannot start, or one that it started and that failed (exit status > 0:
        not started again by this process, no storm of them in a wait) is logged, and the
        run is still stepped by its lookers.
    """
    path = watcher_lock_path()
    mine = _started.get(path)
    if mine is not None and mine.poll() is None and not new_run:
        return False
    if mine is not None and (mine.returncode or 0) > 0:
        if path not in _failed:
            _failed.add(path)
            log.warning(f"the failover watcher exited with status {mine.returncode} (its output is in "
                        f"{os.path.join(os.path.dirname(path), 'watcher.log')}); not starting it again")
        return False
    try:
        if _watcher_lives() or not list_records(unfinished=True, watched=True):
            return False
        start_watcher()
    except OSError as e:
        log.warning(f"cannot start the failover watcher: {e}")
        return False
    return True


def poll(runner: _Runner, records: Sequence[RunRecord]) -> Dict[str, int]:
    """One poll of the watcher over ``records``: per scheduler with live hops, one call
    for their states (``Scheduler.list`` when it holds several, else the hop's status in
    :func:`step`), then a step of each run. Returns scheduler -> list calls made."""
    by_sched: Dict[str, List[RunRecord]] = {}
    for rec in records:
        hop = rec.live
        if hop is not None and hop.app_id is not None:
            by_sched.setdefault(hop.scheduler, []).append(rec)
    listed: Dict[Tuple[str, str], AppState] = {}
    calls: Dict[str, int] = {}
    for sched, recs in by_sched.items():
        if len(recs) < 2:
            continue
        try:
            apps = runner.list(sched)
        except PartialListError as e:
            apps = e.apps
        except NotImplementedError:
            continue
        calls[sched] = 1
        listed.update({(sched, a.app_id): a.state for a in apps})
    for rec in records:
        try:
            step(runner, rec.handle, listed, blocking=False)
        except Exception as e:  # noqa: BLE001 - one run's backend down must not stop the others
            log.warning(f"{rec.handle}: {e}")
    return calls
