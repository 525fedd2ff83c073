"""``tx status``, ``tx describe``, ``tx list``, ``tx cancel`` and ``tx gc``."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    if name == "list":
        p.add_argument("-s", "--scheduler", default=None,
                       help="scheduler whose apps to list (default: as for `tx run`)")
        p.add_argument("--json", action="store_true", help="print JSON lines")
        p.add_argument("-n", "--limit", type=_positive_int, default=None,
                       help=f"show at most this many apps, newest first (default: {DEFAULT_LIST_LIMIT} where the "
                            "scheduler tells the age of its apps, else all)")
        p.add_argument("--all", dest="all_apps", action="store_true", help="show every app (no limit)")
        p.add_argument("--state", action="append", default=[], metavar="STATE",
                       help="only apps in these states (repeat or comma-separate; e.g. RUNNING,FAILED; "
                            "`active`: not finished)")
        return
    if name == "gc":
        p.add_argument("-s", "--scheduler", action="append", default=[],
                       help="scheduler whose finished apps to delete (default: the local schedulers)")
        p.add_argument("--keep", default=None, metavar="DURATION",
                       help="keep apps that ended less than this long ago: a number and a unit s, m, h, d "
                            "or w, e.g. 7d (default: keep in [cli:gc] of .txconfig)")
        p.add_argument("--dry-run", "--dryrun", dest="dry_run", action="store_true",
                       help="print what would be deleted, delete nothing")
        return
    p.add_argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id")
    if name == "status":
        p.add_argument("--roles", default="", help="only these roles (comma separated)")
        p.add_argument("--json", action="store_true", help="print the status as JSON")
    if name == "describe":
        p.add_argument("--json", action="store_true", help="print JSON instead of YAML")


def _unknown(handle: str) -> Any:
    from tx.cli.main import CLIError

    return CLIError(f"app {handle} does not exist (or its scheduler no longer keeps it)")


def run(args: argparse.Namespace) -> int:
    from tx.cli._common import make_runner

    with make_runner() as runner:
        return int(globals()[f"_{args.command}"](runner, args) or 0)


def _status(runner: Any, args: argparse.Namespace) -> int:
    status = runner.status(args.app_handle)
    if status is None:
        raise _unknown(args.app_handle)
    roles = [r for r in args.roles.split(",") if r] or None
    if args.json:
        print(json.dumps(status.to_json(roles), indent=2))
    else:
        sys.stdout.write(status.format(roles))
    return 0


def _describe(runner: Any, args: argparse.Namespace) -> int:
    app = runner.describe(args.app_handle)
    if app is None:
        raise _unknown(args.app_handle)
    from tx.specs.files import appdef_to_json, appdef_to_yaml

    sys.stdout.write(appdef_to_json(app) + "\n" if args.json else appdef_to_yaml(app))
    return 0


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
    from tx.cli.main import CLIError
    from tx.specs.api import AppState

    names = {t.strip().upper() for text in texts for t in text.split(",") if t.strip()}
    if not names:
        return None
    if "ACTIVE" in names:
        names.discard("ACTIVE")
        names |= {"SUBMITTED", "PENDING", "RUNNING", "UNSUBMITTED"}
    bad = sorted(names - set(AppState.__members__))
    if bad:
        raise CLIError(f"unknown state {bad[0]!r} in --state; states: {', '.join(AppState.__members__)}, active", 2)
    return names


def _submitted(app: Any) -> Any:
    """When a listed app was submitted (epoch seconds), where its scheduler says."""
    t = getattr(app, "submitted", None)
    return float(t) if isinstance(t, (int, float)) else None


def newest_first(apps: Any) -> Any:
    """``(apps, ordered)``: apps newest first by submit time where the scheduler gives one,
    else by numeric id (Slurm, batch systems); else in the scheduler's order, with
    ``ordered`` False."""
    apps = list(apps)
    if any(_submitted(a) is not None for a in apps):
        return sorted(apps, key=lambda a: _submitted(a) or 0.0, reverse=True), True
    if apps and all(str(a.app_id).isdigit() for a in apps):
        return sorted(apps, key=lambda a: int(a.app_id), reverse=True), True
    return apps, False


def table(headers: Any, rows: Any) -> str:
    """Columns padded to their widest cell, two spaces apart, headers underlined with
    dashes (the look of ``tabulate``'s "simple" format, without its cost on thousands of rows)."""
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(str(c))) for w, c in zip(widths, r)]

    def line(cells: Any) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip() + "\n"

    return line(headers) + line("-" * w for w in widths) + "".join(line(r) for r in rows)


def format_age(seconds: Any) -> str:
    """``42s``, ``5m``, ``3h``, ``12d``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def _list(runner: Any, args: argparse.Namespace) -> int:
    import time

    from tx.cli._common import default_scheduler

    wanted = _state_filter(args.state)
    scheduler = args.scheduler or default_scheduler(runner)
    apps, ordered = newest_first(runner.list(scheduler))
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
            t = _submitted(a)
            print(json.dumps({"app_handle": a.app_handle, "state": str(a.state), "name": a.name,
                              "submitted": t, "age_s": None if t is None else round(now - t, 3)}))
    else:
        rows = [(a.app_handle, str(a.state), format_age(None if _submitted(a) is None else now - _submitted(a)),
                 a.name) for a in apps]
        sys.stdout.write(table(["APP HANDLE", "APP STATUS", "AGE", "APP NAME"], rows))
    if len(apps) < total:
        print(f"tx list: showing the newest {len(apps)} of {total} apps (--limit N or --all for more)",
              file=sys.stderr)
    return 0


def _cancel(runner: Any, args: argparse.Namespace) -> int:
    if runner.status(args.app_handle) is None:
        raise _unknown(args.app_handle)
    runner.cancel(args.app_handle)
    return 0


def _gc(runner: Any, args: argparse.Namespace) -> int:
    """Delete the state and logs of finished apps older than the retention; never an app
    that has not finished."""
    from tx.cli.main import CLIError
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
    if not names:
        names = [n for n in runner.scheduler_backends() if runner.scheduler_runs_on_host(n)]
    seen = set()  # schedulers that share a registry (local_cwd, local_dir) list an app once
    for name in names:
        gone = prune(runner, name, keep, dry_run=args.dry_run)
        if gone is None:
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
