"""``tx gc``: delete the state and logs of apps that finished long ago (never a running app)."""
from __future__ import annotations

import argparse
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--scheduler", action="append", default=[],
                   help="scheduler whose finished apps to delete (default: the local schedulers)")
    p.add_argument("--keep", default=None, metavar="DURATION",
                   help="keep apps that ended less than this long ago: a number and a unit s, m, h, d "
                        "or w, e.g. 7d (default: keep in [cli:gc] of .txconfig)")
    p.add_argument("--dry-run", "--dryrun", dest="dry_run", action="store_true",
                   help="print what would be deleted, delete nothing")


def run(args: argparse.Namespace) -> int:
    from tx.cli._common import make_runner

    with make_runner() as runner:
        return _gc(runner, args)


def _gc(runner: Any, args: argparse.Namespace) -> int:
    """Delete the state and logs of finished apps older than the retention; never an app
    that has not finished."""
    from tx.cli.errors import CLIError
    from tx.runner import config

    text = args.keep if args.keep is not None else config.get_config(*config.GC_SECTION, config.GC_KEEP)
    if text is None:
        raise CLIError("how long to keep finished apps? give --keep DURATION (e.g. --keep 7d) "
                       f"or set {config.GC_KEEP} in [cli:gc] of .txconfig", 2)
    try:
        keep = config.parse_duration(text)
    except ValueError as e:
        raise CLIError(f"--keep: {e}" if args.keep is not None else f"[cli:gc] {config.GC_KEEP}: {e}", 2) from None
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
    removed = len(seen)
    verb = "would delete" if args.dry_run else "deleted"
    print(f"tx gc: {verb} {removed} finished app(s) that ended more than {text} ago", file=sys.stderr)
    return 0


def prune(runner: Any, scheduler: str, keep: float, dry_run: bool = False) -> Any:
    """The apps ``scheduler`` deleted (state and logs of apps that ended more than ``keep``
    seconds ago), or None when the scheduler cannot prune (it has no ``prune(keep,
    dry_run)`` method, as the local schedulers have)."""
    sched = runner.scheduler(scheduler)
    fn = getattr(sched, "prune", None)
    if fn is None:
        return None
    return fn(keep, dry_run=dry_run)


def auto_gc(runner: Any, scheduler: str) -> None:
    """After ``tx run`` on a local scheduler: prune finished apps when ``[cli:gc] keep`` is
    set in .txconfig. Never fails the run (a bad value is reported by ``tx gc``)."""
    from tx.runner import config

    try:
        text = config.get_config(*config.GC_SECTION, config.GC_KEEP)
        if text is not None and runner.scheduler_runs_on_host(scheduler):
            prune(runner, scheduler, config.parse_duration(text))
    except Exception as e:  # noqa: BLE001 - housekeeping must not turn a run into a failure
        from tx.log import get_logger

        get_logger(__name__).warning("automatic gc failed", error=str(e))


class GcCommand:
    """``tx gc``: delete the state and logs of apps that finished long ago."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        add_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        return run(args)
