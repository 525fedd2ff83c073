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
it is submitted; a hop found without an app id is looked for on its scheduler (an app
whose ``TX_JOB_ID`` is the run handle, which only this run's hops carry: identity, never a
name) before it is submitted again.

A chain is checked before its first submit: every hop is dry-run, with its scheduler's run
options and the workspace, and a hop that would refuse the app refuses the run up front
(:class:`ChainRefusedError`, nothing submitted). The run's *launch context* (the
environment and the working directory of the process that created it, and each hop's run
options merged with ``.txconfig`` and ``TX_*``/``TORCHX_*`` then) is kept in the record, and
every later hop is dry-run and submitted in it, whichever process takes the step.

The records, their listing and pruning live in :mod:`tx.runner._runs` (re-exported here).

It takes the engine (:class:`tx.runner.engine.Engine`) for every app it submits or looks at.
What follows a run: a detached watcher (:mod:`tx.runner._failover_watcher`, one per state
directory, holding the ``flock`` of :func:`watcher_lock_path`) follows every unfinished run
(but those created with ``watch=False``), with one status call per backend per poll; and
every tx command that looks at a run (status, log, wait, cancel) takes a step of it first
and, with :func:`ensure_watcher`, starts a watcher when unfinished runs are left and none
holds the lock (one killed, or lost to a reboot).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import attrs

from tx.config.environ import CHECKPOINT_DIR, JOB_ID, failover_pause, state_dir
from tx.config.recovery import checkpoint_url
from tx.config.run_options import env_run_opts
from tx.durations import format_duration
from tx.errors import UserError
from tx.log import get_logger
from tx.runner._runs import (ChainRefusedError, Hop, RunDryRunInfo, RunListAppResponse, RunRecord, RunStatus,
                             UnknownRunError, capture_context, collapse_listed, in_context, is_run_handle, list_records,
                             load_record, locked, prune, record_path, write_record)
from tx.runner.engine import Engine
from tx.runner.handles import AppRef, new_run_id
from tx.schedulers.api import PartialListError, SchedulerError
from tx.specs.api import AppDef, AppDryRunInfo, AppState, is_terminal
from tx.specs.files import appdef_from_dict, appdef_to_dict
from tx.specs.handles import make_app_handle, parse_app_handle
from tx.specs.status import AppStatus, FailureKind

__all__ = [
    "CANCEL_CONFIRM_S", "ChainRefusedError", "Hop", "RunDryRunInfo", "RunListAppResponse", "RunRecord", "RunStatus",
    "UnknownRunError", "HopReader", "cancel", "collapse_listed", "create", "launch", "prepare", "ensure_watcher", "is_run_handle", "list_records", "load_record", "poll",
    "prune", "record_path", "run_status", "start_watcher", "step", "watcher_lock_path",
]

log = get_logger(__name__)

#: the most seconds tx waits for a cancelled hop to be seen terminal before it submits the next
CANCEL_CONFIRM_S = 120.0


def create(engine: Engine, app: AppDef, chain: Sequence[Tuple[str, Mapping[str, Any]]],
           pending_timeout: Optional[float], workspace: Optional[str] = None,
           parent_run_id: Optional[str] = None, watch: bool = True) -> RunRecord:
    """Record a new run of ``app`` over ``chain`` (``[(scheduler, cfg), ...]``) and submit
    its first hop: :func:`prepare`, then :func:`launch`; returns the record (its ``handle``
    is the run handle). Raises what they raise."""
    return launch(engine, prepare(engine, app, chain, pending_timeout, workspace, parent_run_id, watch))


def prepare(engine: Engine, app: AppDef, chain: Sequence[Tuple[str, Mapping[str, Any]]],
            pending_timeout: Optional[float], workspace: Optional[str] = None,
            parent_run_id: Optional[str] = None, watch: bool = True) -> RunDryRunInfo:
    """A new run of ``app`` over ``chain``, checked but not recorded or submitted: every
    scheduler of the chain dry-runs the app once (its run options, the workspace), in this
    process; the environment and working directory are kept in the record as the run's
    launch context, and each hop's run options with the ``TX_*``/``TORCHX_*`` variables of
    this environment merged in. ``watch``: a watcher is to follow the run (it is not
    started here: :func:`ensure_watcher`).

    Raises:
        ValueError: an empty chain, a scheduler twice, a pending timeout <= 0.
        ChainRefusedError: a fallback scheduler's dryrun refused the app.
        what :meth:`tx.runner.Runner.dryrun` raises, for the first scheduler.
    """
    names = [s for s, _cfg in chain]
    if not names:
        raise ValueError("a run needs at least one scheduler")
    if len(set(names)) != len(names):
        raise ValueError(f"a scheduler appears twice in the fallback chain: {', '.join(names)}")
    if pending_timeout is not None and pending_timeout <= 0:
        raise ValueError(f"pending_timeout must be > 0 seconds, got {pending_timeout:g}")
    session = engine.session
    run_id = new_run_id(app.name)
    ckpt = checkpoint_url(names[0], session, run_id)  # this run's alone; every hop keeps it
    app = attrs.evolve(app, roles=[attrs.evolve(r, env={CHECKPOINT_DIR: ckpt, **r.env}) for r in app.roles])
    rec = RunRecord(run_id=run_id, session=session, name=app.name, appdef=appdef_to_dict(app),
                    chain=[{"scheduler": s, "cfg": env_run_opts(s, engine.run_opts(s), dict(c))}
                           for s, c in chain],
                    pending_timeout=pending_timeout, workspace=workspace,
                    parent_run_id=parent_run_id, created=time.time(), watch=watch,
                    context=capture_context())
    info = _dryrun(engine, rec, names[0])  # errors of the first scheduler before anything is recorded
    for name in names[1:]:  # and of every other: a chain a hop would refuse is refused now
        try:
            _dryrun(engine, rec, name)
        except (ValueError, UserError) as e:
            raise ChainRefusedError(f"fallback scheduler {name} refuses this app (nothing was submitted): "
                                    f"{_one_line(e)}") from None
    return RunDryRunInfo(rec, info)


def launch(engine: Engine, prepared: RunDryRunInfo) -> RunRecord:
    """Record the run :func:`prepare` checked and submit its first hop, as dry-run then
    (no second dryrun); returns the record. Raises what ``Engine.schedule`` raises."""
    rec = prepared.record
    hop = Hop(scheduler=rec.chain[0]["scheduler"], submitted=time.time())
    rec.hops.append(hop)
    with locked(rec.run_id):
        write_record(rec)
        hop.app_id = engine.schedule(prepared.first).app_id
        write_record(rec)
    return rec


def _ref(hop: Hop, session: str) -> AppRef:
    """The app of ``hop`` (which has an app id)."""
    assert hop.app_id is not None
    return AppRef(hop.scheduler, session, hop.app_id)


def _dryrun(engine: Engine, rec: RunRecord, scheduler: str) -> AppDryRunInfo[Any]:
    cfg = next(c["cfg"] for c in rec.chain if c["scheduler"] == scheduler)
    return engine.dryrun(appdef_from_dict(rec.appdef), scheduler, cfg, workspace=rec.workspace,
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


def _first_line(text: Any) -> str:  # of a status message, at most 100 characters
    s = "" if text in (None, "<NONE>") else str(text)
    return next((ln.strip() for ln in s.splitlines() if ln.strip()), "")[:100]


def _one_line(e: BaseException) -> str:
    """The first line of an error's message, whole (its type's name when it has none)."""
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)


def _pending_reason(state: AppState, status: Optional[AppStatus]) -> str:
    """The backend's short word for why the app waits (Slurm's ``Resources``,
    ``Dependency``), from the first line of its status message."""
    text = _first_line(status.msg) if status is not None else ""
    for prefix in (f"{state.name}:", "PENDING:"):
        if text.startswith(prefix):
            text = text[len(prefix):].strip()
    return text.split(":", 1)[0].strip()


def step(engine: Engine, handle: str, listed: Optional[Mapping[Tuple[str, str], AppState]] = None,
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
    with locked(run_id, blocking) as held:
        rec = load_record(handle)
        if not held or rec.final:
            return rec
        hop = rec.hops[-1]
        if hop.app_id is None:  # a submission interrupted: find it, or submit it
            _resubmit(engine, rec, hop)
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
            status = engine.status(_ref(hop, rec.session))
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
            _fail_over(engine, rec, hop, hop_handle, why)
            return rec
        changed = hop.state != state.name
        hop.state = state.name
        if is_terminal(state) or state == AppState.UNKNOWN:
            hop.ended = hop.ended or now
            rec.final = state.name
            changed = True
        if changed:
            write_record(rec)
        return rec


def _fail_over(engine: Engine, rec: RunRecord, hop: Hop, hop_handle: str, why: str) -> None:
    if not rec.failing_over:
        hop.why = why
        rec.failing_over = True
        write_record(rec)  # before the cancel: a successor finishes what this step began
    engine.cancel(_ref(hop, rec.session))
    status = engine.wait(_ref(hop, rec.session), wait_interval=0.5, timeout=CANCEL_CONFIRM_S)
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
        write_record(rec)
        return
    nxt = Hop(scheduler=rec.chain[len(rec.hops)]["scheduler"], submitted=time.time())
    rec.hops.append(nxt)
    write_record(rec)  # the hop is recorded before it is submitted: see _resubmit
    log.warning(f"{rec.handle}: left {hop.scheduler} ({why}); submitting to {nxt.scheduler}")
    _submit(engine, rec, nxt)


def _submit(engine: Engine, rec: RunRecord, hop: Hop) -> None:
    """Dry-run and submit ``hop`` in the run's launch context. A dryrun that refuses the app
    (checked at the run's creation; a workspace or a directory gone since) ends the hop and
    the run FAILED, with why, instead of being tried again at every step."""
    refused: Optional[BaseException] = None
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(in_context(rec))
            info = _dryrun(engine, rec, hop.scheduler)
        except (ValueError, UserError) as e:
            if isinstance(e, SchedulerError):  # the backend cannot be reached now: the next step tries again
                raise
            refused = e
        else:
            app_id = engine.schedule(info).app_id
    if refused is not None:
        hop.state, hop.ended, hop.why = "FAILED", time.time(), f"refused: {_one_line(refused)}"
        rec.failing_over, rec.final = False, "FAILED"
        write_record(rec)
        log.warning(f"{rec.handle}: {hop.scheduler} refused the app: {_one_line(refused)}")
        return
    _pause("after_submit")
    hop.app_id = app_id
    rec.failing_over = False
    write_record(rec)


def _ours(engine: Engine, rec: RunRecord, handle: str) -> bool:
    """Whether the app ``handle`` was submitted as a hop of ``rec``: its AppDef, as its
    scheduler keeps it, has the run handle as ``TX_JOB_ID`` (every hop's replicas have it,
    no other app does). An app whose scheduler cannot tell is not this run's."""
    try:
        app = engine.describe(AppRef(*parse_app_handle(handle)))
    except Exception as e:  # noqa: BLE001 - an app that cannot be described is not adopted
        log.debug("cannot describe an app to adopt", app=handle, error=str(e))
        return False
    return app is not None and bool(app.roles) and all(r.env.get(JOB_ID) == rec.handle for r in app.roles)


def _resubmit(engine: Engine, rec: RunRecord, hop: Hop) -> None:
    """A hop recorded without an app id: its process died around ``schedule``. An app on
    the hop's scheduler submitted since the hop began and carrying the run's identity (its
    ``TX_JOB_ID`` is the run handle, :func:`_ours`) is adopted; else the hop is submitted
    now. An app of the run's name that another ``tx run`` made is never adopted."""
    try:
        apps = engine.list(hop.scheduler)
    except PartialListError as e:
        apps = e.apps
    except NotImplementedError:
        apps = []
    known = {h.app_id for h in rec.hops}
    found = [a for a in apps if a.app_id not in known and (a.submitted is None or a.submitted >= hop.submitted - 1)
             and _ours(engine, rec, a.app_handle or make_app_handle(hop.scheduler, rec.session, a.app_id))]
    if found:
        hop.app_id = max(found, key=lambda a: a.submitted or 0).app_id
        rec.failing_over = False
        write_record(rec)
        log.warning(f"{rec.handle}: adopted {hop.app_id} on {hop.scheduler}, submitted by a tx process that died")
        return
    _submit(engine, rec, hop)


def cancel(engine: Engine, handle: str) -> None:
    """Cancel the run: no hop is submitted any more, and the live hop is cancelled
    (non-blocking, as :meth:`tx.runner.Runner.cancel`). The caller starts a watcher if none
    follows the unfinished runs (:func:`ensure_watcher`; :meth:`tx.runner.Runner.cancel` does).

    Raises:
        UnknownRunError: no such run.
    """
    _s, _session, run_id = parse_app_handle(handle)
    with locked(run_id):
        rec = load_record(handle)
        rec.cancelled = True
        write_record(rec)
    hop = rec.live
    if hop is not None and hop.app_id is not None:
        engine.cancel(_ref(hop, rec.session))


def run_status(engine: Engine, handle: str, rec: Optional[RunRecord] = None) -> Tuple[RunStatus, Optional[AppStatus]]:
    """The run's :class:`RunStatus` and its live app's status (None: no live app yet), as
    ``rec`` (default: the record on disk) says: a look, no step. The caller takes a step
    first where one is due (:func:`step`; :meth:`tx.runner.Runner.status` does).

    Raises:
        UnknownRunError: no such run.
    """
    rec = load_record(handle) if rec is None else rec
    hop = rec.live
    live = hop.handle(rec.session) if hop is not None else None
    status = engine.status(_ref(hop, rec.session)) if hop is not None and live else None
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


#: ``(hop handle, role, k, should_tail, streams) -> blocks``: how :func:`log_blocks` reads one
#: hop's log (the facade passes :meth:`tx.runner.Runner.log_blocks`, which falls back to the archive)
HopReader = Callable[[str, str, int, bool, Optional[str]], Iterator[bytes]]


def log_blocks(engine: Engine, handle: str, role: str, k: int, should_tail: bool,
               streams: Optional[str], read: HopReader) -> Iterator[bytes]:
    """The replica's log over every hop, oldest first, each hop's read by ``read``;
    following (``should_tail``), the next hop's once one hop's ends, stepping the run, until
    the run has ended. A hop whose scheduler has no log of the replica (it never started
    there) adds nothing; ``streams`` a scheduler does not keep apart gives its combined log
    for ``stdout`` and nothing for ``stderr``."""
    seen = 0
    while True:
        rec = load_record(handle)
        hops = [h for h in rec.hops if h.app_id is not None]
        for h in hops[seen:]:
            yield from _hop_blocks(read, h.handle(rec.session) or "", role, k, should_tail, streams)
            seen += 1
        if not should_tail:
            return
        rec = step(engine, handle, blocking=False)
        if rec.final and seen >= len([h for h in rec.hops if h.app_id is not None]):
            return
        if seen >= len([h for h in rec.hops if h.app_id is not None]):
            time.sleep(0.5)


def _hop_blocks(read: HopReader, hop_handle: str, role: str, k: int, should_tail: bool,
                streams: Optional[str]) -> Iterator[bytes]:
    try:
        yield from read(hop_handle, role, k, should_tail, streams)
    except ValueError:  # the scheduler keeps no such stream
        if streams == "stderr":
            return
        yield from _hop_blocks(read, hop_handle, role, k, should_tail, None)
    except Exception as e:  # noqa: BLE001 - a hop that never started there has no log
        log.debug("no log of a hop", hop=hop_handle, error=str(e))


def wait(engine: Engine, handle: str, wait_interval: float, timeout: Optional[float]) -> Optional[AppStatus]:
    """Follow the run, stepping it (:func:`step`), until it has ended or ``timeout`` seconds
    pass; returns the live app's status with the run's state (PENDING between hops)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        run, status = run_status(engine, handle, step(engine, handle, blocking=False))
        left = None if deadline is None else deadline - time.monotonic()
        if is_terminal(run.state) or run.state == AppState.UNKNOWN or (left is not None and left <= 0):
            if status is None:
                return AppStatus(state=run.state, msg=run.chain)
            return status if status.state == run.state else attrs.evolve(status, state=run.state)
        time.sleep(max(0.05, min(wait_interval, 1.0, left if left is not None else 1.0)))


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


def _settled(rec: RunRecord, listed: Mapping[Tuple[str, str], AppState]) -> bool:
    """Whether :func:`step` of ``rec`` would do nothing with ``listed``: its live hop is
    listed in the state its record has (RUNNING, or PENDING/SUBMITTED within the pending
    timeout) and no failover is under way. The watcher then takes no lock and reads no
    record again: its work per followed run is a dict look-up."""
    hop = rec.live
    if hop is None or hop.app_id is None or rec.failing_over or rec.final:
        return False
    state = listed.get((hop.scheduler, hop.app_id))
    if state is None or state.name != hop.state:
        return False
    if state == AppState.RUNNING:
        return True
    if state in (AppState.PENDING, AppState.SUBMITTED):
        nxt = len(rec.hops) < len(rec.chain) and not rec.cancelled
        return not (nxt and rec.pending_timeout is not None and time.time() - hop.submitted >= rec.pending_timeout)
    return False


def poll(engine: Engine, records: Sequence[RunRecord]) -> Dict[str, int]:
    """One poll of the watcher over ``records``: per scheduler with live hops, one call
    for their states (``Scheduler.list`` when it holds several, else the hop's status in
    :func:`step`), then a step of each run whose listed state asks for one (a run listed
    as its record has it, and not due to fail over, is left: :func:`_settled`). Returns
    scheduler -> list calls made."""
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
            apps = engine.list(sched)
        except PartialListError as e:
            apps = e.apps
        except NotImplementedError:
            continue
        calls[sched] = 1
        listed.update({(sched, a.app_id): a.state for a in apps})
    for rec in records:
        if _settled(rec, listed):
            continue
        try:
            step(engine, rec.handle, listed, blocking=False)
        except Exception as e:  # noqa: BLE001 - one run's backend down must not stop the others
            log.warning(f"{rec.handle}: {e}")
    return calls
