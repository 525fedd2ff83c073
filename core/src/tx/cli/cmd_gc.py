"""``tx gc``: delete the state and logs of apps that finished long ago (never a running app),
their copies in the log archive (:mod:`tx.runner.archive`) and the records of runs with
failover that ended (:mod:`tx.runner.failover`)."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, List, Optional

from tx.cli._common import make_runner
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError
from tx.log import get_logger

if TYPE_CHECKING:
    from tx.runner import Runner

__all__ = ["COMMAND", "auto_gc", "prune"]


def _run(args: argparse.Namespace) -> int:
    with make_runner() as runner:
        return _gc(runner, args)


def _gc(runner: Runner, args: argparse.Namespace) -> int:
    """Delete the state and logs of finished apps older than the retention; never an app
    that has not finished."""
    # the settings are imported when the command runs, not when its parser is built
    from tx.config import GC_KEEP, GC_SECTION, get_config, parse_duration

    text = args.keep if args.keep is not None else get_config(*GC_SECTION, GC_KEEP)
    if text is None:
        raise CLIError("how long to keep finished apps? give --keep DURATION (e.g. --keep 7d) "
                       f"or set {GC_KEEP} in [cli:gc] of .txconfig", 2)
    try:
        keep = parse_duration(text)
    except ValueError as e:
        raise CLIError(f"--keep: {e}" if args.keep is not None else f"[cli:gc] {GC_KEEP}: {e}", 2) from None
    names = [n for text in args.scheduler for n in text.split(",") if n]
    named = bool(names)
    if not named:  # the schedulers of this host that keep app state tx can delete
        names = [n for n in runner.scheduler_backends() if runner.scheduler_runs_on_host(n)]
    seen = set()  # schedulers that share a registry (local_cwd, local_dir) list an app once
    for name in names:
        gone = prune(runner, name, keep, dry_run=args.dry_run)
        if gone is None:
            if not named:
                continue  # e.g. local_docker: the engine keeps the containers
            raise CLIError(f"scheduler {name!r} keeps no app state that tx can delete "
                           "(its backend's own retention applies)")
        for a in gone:
            if a.app_handle not in seen:
                seen.add(a.app_handle)
                print(a.app_handle)
    from tx.runner import failover  # the run records: only when gc runs

    for h in failover.prune(keep, dry_run=args.dry_run, schedulers=names if named else None):
        seen.add(h)
        print(h)
    archive = runner.log_archive  # the log archive: apps that ended before the retention
    if archive is not None:
        for h in archive.prune(keep, dry_run=args.dry_run, schedulers=names if named else None):
            if h not in seen:
                seen.add(h)
                print(h)
    removed = len(seen)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"tx gc: {verb} {removed} finished app(s) that ended more than {text} ago", file=sys.stderr)
    return 0


def prune(runner: Runner, scheduler: str, keep: float, dry_run: bool = False) -> Optional[List[Any]]:
    """The apps ``scheduler`` deleted (state and logs of apps that ended more than ``keep``
    seconds ago), or None when the scheduler cannot prune (it has no ``prune(keep,
    dry_run)`` method, as the local schedulers have)."""
    sched = runner.scheduler(scheduler)
    fn = getattr(sched, "prune", None)
    if fn is None:
        return None
    return fn(keep, dry_run=dry_run)


def auto_gc(runner: Runner, scheduler: str) -> None:
    """After ``tx run`` on a local scheduler: prune finished apps when ``[cli:gc] keep`` is
    set in .txconfig. Never fails the run (a bad value is reported by ``tx gc``)."""
    # the settings are imported when the command runs, not when its parser is built
    from tx.config import GC_KEEP, GC_SECTION, get_config, parse_duration

    try:
        text = get_config(*GC_SECTION, GC_KEEP)
        if text is not None and runner.scheduler_runs_on_host(scheduler):
            prune(runner, scheduler, parse_duration(text))
    except Exception as e:  # noqa: BLE001 - housekeeping must not turn a run into a failure
        get_logger(__name__).warning("automatic gc failed", error=str(e))


#: ``tx gc``: delete the state and logs of apps that finished long ago
COMMAND = Command(run=_run, arguments=(
    Argument("-s", "--scheduler", action="append", default=[],
             help="scheduler whose finished apps to delete (default: the local schedulers)"),
    Argument("--keep", default=None, metavar="DURATION",
             help="keep apps that ended less than this long ago: a number and a unit s, m, h, d "
                  "or w, e.g. 7d (default: keep in [cli:gc] of .txconfig)"),
    Argument("--dry-run", "--dryrun", dest="dry_run", action="store_true",
             help="print what would be deleted, delete nothing"),
))
