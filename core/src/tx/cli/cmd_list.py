"""``tx list``: a scheduler's apps, newest first, bounded, filtered by state; how long each
ran where the scheduler records its end; states colored on a terminal (``NO_COLOR`` turns
that off); a line on stderr instead of an empty table when no app matches. The first page
asks each scheduler for that page only (the local schedulers stream their index: 10,000
apps cost a page's memory), unless sweeps or runs with failover recorded here need the
whole list to fold their apps into one row each."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from tx.cli._common import default_scheduler, make_runner
from tx.cli._format import color_state, format_age, format_duration, table
from tx.cli.cmd_sweep import collapse_sweeps
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError
from tx.views import ACTIVE_STATES, newest_first, submitted  # what tx ui shows too

if TYPE_CHECKING:
    from tx.runner import Runner

__all__ = ["COMMAND", "DEFAULT_LIST_LIMIT", "format_age", "newest_first", "table"]

#: ``tx list`` shows this many apps unless ``--limit``/``--all`` say otherwise
DEFAULT_LIST_LIMIT = 20


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return n


def _state_filter(texts: Any) -> Any:
    """The set of state names ``--state`` asks for (None: all).

    Raises:
        CLIError: an unknown state name.
    """
    # the model is imported when the command runs, not when its parser is built
    from tx.specs.api import AppState

    names = {t.strip().upper() for text in texts for t in text.split(",") if t.strip()}
    if not names:
        return None
    if "ACTIVE" in names:
        names.discard("ACTIVE")
        names |= ACTIVE_STATES
    bad = sorted(names - set(AppState.__members__))
    if bad:
        raise CLIError(f"unknown state {bad[0]!r} in --state; states: {', '.join(AppState.__members__)}, active", 2)
    return names


def _duration(app: Any) -> str:
    """How long a listed app ran (submit to end) where the scheduler records its end
    (``ended``, epoch seconds); ``-`` otherwise."""
    t0, t1 = submitted(app), getattr(app, "ended", None)
    if t0 is None or not isinstance(t1, (int, float)):
        return "-"
    return format_duration(max(0.0, t1 - t0))


def _run(args: argparse.Namespace) -> int:
    if args.fresh:
        from tx.schedulers.plane import force_fresh  # only with --fresh

        force_fresh()
    with make_runner() as runner:
        return _list(runner, args)


def _gather(runner: Runner, schedulers: List[str]) -> Tuple[List[Any], List[str]]:
    """The apps of every scheduler in ``schedulers``, and one line for each that could not be
    read in whole: what it could list is kept (a :class:`PartialListError`'s apps). With one
    scheduler, one that cannot be read at all is an error; with several, the others still show.

    Raises:
        tx.schedulers.SchedulerError: the only scheduler asked for cannot be read.
    """
    # the scheduler errors are imported when the command runs, not when its parser is built
    from tx.errors import UserError
    from tx.schedulers.api import PartialListError

    apps: List[Any] = []
    problems: List[str] = []
    for scheduler in schedulers:
        try:
            apps.extend(runner.list(scheduler))
        except PartialListError as e:
            apps.extend(e.apps)
            problems.append(f"{scheduler}: {e} (the apps it could list are shown)")
        except UserError as e:
            if len(schedulers) == 1:
                raise
            problems.append(f"{scheduler}: {e} (none of its apps are shown)")
    return apps, problems


def _runs(runner: Runner) -> List[Any]:
    """The runs with failover of the runner's session recorded on this host."""
    from tx.runner.failover import list_records  # the run records: only when listing

    return list_records(runner.name())


def _collapse_runs(runs: List[Any], schedulers: List[str], apps: List[Any]) -> List[Any]:
    """Each run with failover as one row under its run handle, its hops inside, once
    whichever of its schedulers are listed."""
    from tx.runner.failover import collapse_listed  # see _runs

    return collapse_listed(apps, runs, schedulers) if runs else apps


def _first_page(runner: Runner, schedulers: List[str], wanted: Any, limit: int) -> Optional[Tuple[List[Any], int]]:
    """The newest ``limit`` apps of ``schedulers`` in states ``wanted``, and how many match in
    all, asking each scheduler for its first page only (:meth:`tx.runner.engine.Engine.list_page`:
    the local schedulers keep only the page in memory). None where the whole list is needed:
    sweeps or runs with failover recorded here (their rows fold many apps into one), a
    scheduler that gives no ages, one that cannot be read in whole, or no app matching."""
    # the errors and the sweep records are imported when the command runs, not when its parser is built
    from tx.errors import UserError
    from tx.runner.sweep import list_records
    from tx.schedulers.api import PartialListError

    if _runs(runner) or any(list_records(s, runner.name()) for s in schedulers):
        return None
    apps: List[Any] = []
    total = 0
    for scheduler in schedulers:
        try:
            page = runner.engine.list_page(scheduler, limit, 0, wanted)
        except (PartialListError, UserError):
            return None  # the whole list says what could not be read
        if not page.ordered:
            return None
        apps.extend(page.apps)
        total += page.total
    return (newest_first(apps)[0][:limit], total) if total else None


def _list(runner: Runner, args: argparse.Namespace) -> int:
    wanted = _state_filter(args.state)
    schedulers = [s.strip() for s in (args.scheduler or "").split(",") if s.strip()] or [default_scheduler(runner)]
    names = list(dict.fromkeys(schedulers))
    paged = None if args.all_apps else _first_page(runner, names, wanted, args.limit or DEFAULT_LIST_LIMIT)
    if paged is not None:
        (apps, total), found, problems = paged, [], []
    else:
        found, problems = _gather(runner, names)
        for scheduler in names:  # each sweep's trials as one row
            found = collapse_sweeps(runner, scheduler, found)
        found = _collapse_runs(_runs(runner), names, found)
        apps, ordered = newest_first(found)
        if wanted is not None:
            apps = [a for a in apps if a.state.name in wanted]
        total = len(apps)
        # without ages the newest apps are unknown: bound only when asked, never hide the newest
        limit = args.limit or (DEFAULT_LIST_LIMIT if ordered else None)
        if not args.all_apps and limit is not None:
            apps = apps[:limit]
    now = time.time()
    if args.json:
        for a in apps:
            t = submitted(a)
            row = {"app_handle": a.app_handle, "state": str(a.state), "name": a.name,
                   "submitted": t, "age_s": None if t is None else round(now - t, 3)}
            if getattr(a, "hops", None) is not None:  # a run with failover: its hops' handles
                row["hops"] = list(a.hops)
            print(json.dumps(row))
    elif apps:
        from tx.cli._text import use_color  # its regexes cost ~0.6 ms: only for a table

        color = use_color(sys.stdout)
        rows = [(a.app_handle, str(a.state), format_age(None if submitted(a) is None else now - submitted(a)),
                 _duration(a), a.name) for a in apps]
        sys.stdout.write(table(["APP HANDLE", "APP STATUS", "AGE", "DURATION", "APP NAME"], rows,
                               paint=lambda col, text: color_state(text, color) if col == 1 else text))
    else:
        asked = f" in state {', '.join(sorted(wanted))}" if wanted is not None else ""
        print(f"tx list: no apps{asked} on {', '.join(dict.fromkeys(schedulers))}"
              + (f" ({len(found)} in other states)" if wanted is not None and found else ""), file=sys.stderr)
    if len(apps) < total:
        print(f"tx list: showing the newest {len(apps)} of {total} apps (--limit N or --all for more)",
              file=sys.stderr)
    for problem in problems:
        print(f"tx list: could not read all of {problem}", file=sys.stderr)
    return 1 if problems else 0


#: ``tx list``: list the apps a scheduler knows
COMMAND = Command(run=_run, arguments=(
    Argument("-s", "--scheduler", default=None,
             help="scheduler whose apps to list, or several, comma-separated (default: as for `tx run`); "
                  "one that cannot be read in whole is named on stderr, the rest still shows, exit status 1"),
    Argument("--json", action="store_true", help="print JSON lines"),
    Argument("-n", "--limit", type=_positive_int, default=None,
             help=f"show at most this many apps, newest first (default: {DEFAULT_LIST_LIMIT} where the "
                  "scheduler tells the age of its apps, else all)"),
    Argument("--all", dest="all_apps", action="store_true", help="show every app (no limit)"),
    Argument("--state", action="append", default=[], metavar="STATE",
             help="only apps in these states (repeat or comma-separate; e.g. RUNNING,FAILED; "
                  "`active`: not finished)"),
    Argument("--fresh", action="store_true",
             help="ask the backends now instead of reading the host's shared status (docs/scale.md)"),
))
