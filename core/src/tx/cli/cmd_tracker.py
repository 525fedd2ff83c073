"""``tx tracker``: what trackers recorded about runs (TorchX's ``torchx tracker``).

    tx tracker list jobs [--parent-run-id ID]        runs the tracker knows (children of ID)
    tx tracker list metadata RUN_ID                  a run's metadata
    tx tracker list artifacts [--artifact NAME] RUN_ID
    tx tracker lineage RUN_ID                        parents and children, with their artifacts

Each prints a table, or JSON with ``--json``. The tracker is the first one configured
(``[tx:tracker]`` in ``.txconfig`` or ``TX_TRACKERS``), or the one ``--tracker`` names.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from tx.cli.command import Command
from tx.cli.errors import CLIError

if TYPE_CHECKING:
    from tx.tracker.api import Lineage, TrackerBase

__all__ = ["COMMAND", "NO_TRACKER"]

#: the error when ``tx tracker`` finds no tracker to query
NO_TRACKER = (
    "no tracker is configured: add a [tx:tracker] section to .txconfig (e.g. `file =`), "
    "or set TX_TRACKERS=file"
)


def _configure(p: argparse.ArgumentParser) -> None:
    """``tx tracker list jobs|metadata|artifacts|lineage`` and ``tx tracker lineage``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tracker", default=None, metavar="NAME",
                        help="tracker to query (default: the first configured one)")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub = p.add_subparsers(dest="tracker_command", metavar="{list,lineage}", parser_class=type(p))
    sub.required = True
    lst = sub.add_parser("list", prog=f"{p.prog} list", help="list jobs, metadata or artifacts")
    what = lst.add_subparsers(dest="tracker_list", metavar="{jobs,metadata,artifacts,lineage}",
                              parser_class=type(p))
    what.required = True
    jobs = what.add_parser("jobs", prog=f"{p.prog} list jobs", parents=[common],
                           help="the runs the tracker knows")
    jobs.add_argument("--parent-run-id", "--parent_run_id", dest="parent_run_id", default=None,
                      metavar="ID", help="only the runs that consumed run ID (its children)")
    md = what.add_parser("metadata", prog=f"{p.prog} list metadata", parents=[common],
                         help="a run's metadata")
    md.add_argument("run_id", metavar="RUN_ID")
    arts = what.add_parser("artifacts", prog=f"{p.prog} list artifacts", parents=[common],
                           help="a run's artifacts")
    arts.add_argument("--artifact", default=None, metavar="NAME", help="only this artifact")
    arts.add_argument("run_id", metavar="RUN_ID")
    for parser, prog in ((what, f"{p.prog} list lineage"), (sub, f"{p.prog} lineage")):
        lin = parser.add_parser("lineage", prog=prog, parents=[common],
                                help="a run's parents and children, with their artifacts")
        lin.add_argument("run_id", metavar="RUN_ID")


def _select(name: Optional[str]) -> Tuple[str, TrackerBase]:
    """(name, tracker): the tracker ``name`` or the first configured one.

    Raises:
        CLIError: none is configured, or ``name`` is not installed.
    """
    # the registry, the settings and the tracker API are imported when the command runs
    from tx.plugins import get_registry, not_installed_hint
    from tx.config import configured_trackers
    from tx.tracker.api import build_trackers

    configured = configured_trackers()
    if name is None:
        if not configured:
            raise CLIError(NO_TRACKER)
        name = next(iter(configured))
    if name in configured:
        config = configured[name]
    else:  # a tracker not in [tx:tracker]: its TX_TRACKER_<NAME>_CONFIG, else [tracker:NAME] config
        config = configured_trackers(environ={**os.environ, "TX_TRACKERS": name}).get(name)
    registry = get_registry()
    if registry.get("trackers", name) is None and ":" not in name:
        hint = not_installed_hint("trackers", name)
        raise CLIError(f"tracker {name!r} is not installed: {hint}" if hint else
                       f"unknown tracker {name!r} (installed: {', '.join(registry.names('trackers')) or 'none'})")
    trackers = build_trackers({name: config})
    if not trackers:
        raise CLIError(f"tracker {name!r} cannot be made (see the warning above)")
    return name, trackers[0]


def _value(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v, default=str)


def _artifact_dict(a: Any) -> Dict[str, Any]:
    return {"name": a.name, "path": a.path, "metadata": dict(a.metadata) if a.metadata is not None else None}


def _dump(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def _table(rows: List[Tuple[Any, ...]], headers: List[str]) -> None:
    from tabulate import tabulate  # ~75 ms to import: only when a table is printed

    print(tabulate(rows, headers=headers, disable_numparse=True))


def _check_known(tracker: TrackerBase, name: str, run_id: str, empty: bool) -> None:
    """A run with nothing recorded that the tracker does not know is a user error."""
    if empty and run_id not in set(tracker.run_ids()):
        raise CLIError(f"run {run_id!r} is not known to tracker {name!r} (see `tx tracker list jobs`)")


def _run(args: argparse.Namespace) -> int:
    name, tracker = _select(args.tracker)
    command = args.tracker_list if args.tracker_command == "list" else "lineage"
    if command == "jobs":
        filters = {"parent_run_id": args.parent_run_id} if args.parent_run_id else {}
        ids = list(tracker.run_ids(**filters))
        if args.json:
            _dump(ids)
        else:
            _table([(i,) for i in ids], ["RUN ID"])
        return 0
    if command == "metadata":
        md: Mapping[str, object] = tracker.metadata(args.run_id)
        _check_known(tracker, name, args.run_id, not md)
        if args.json:
            _dump(dict(md))
        else:
            _table([(k, _value(v)) for k, v in md.items()], ["KEY", "VALUE"])
        return 0
    if command == "artifacts":
        arts = dict(tracker.artifacts(args.run_id))
        _check_known(tracker, name, args.run_id, not arts)
        if args.artifact is not None:
            if args.artifact not in arts:
                raise CLIError(f"run {args.run_id!r} has no artifact {args.artifact!r}"
                               f" (it has: {', '.join(arts) or 'none'})")
            arts = {args.artifact: arts[args.artifact]}
        if args.json:
            _dump({n: _artifact_dict(a) for n, a in arts.items()})
        else:
            _table([(a.name, a.path, _value(a.metadata) if a.metadata else "") for a in arts.values()],
                   ["NAME", "PATH", "METADATA"])
        return 0
    lin = tracker.lineage(args.run_id)
    _check_known(tracker, name, args.run_id, not (lin.artifacts or lin.parents or lin.children))
    if args.json:
        _dump(lin.to_dict())
        return 0
    _print_lineage(lin)
    return 0


def _print_lineage(lin: Lineage) -> None:
    out = sys.stdout

    def section(rows: List[Tuple[Any, ...]], headers: List[str]) -> None:
        if rows:
            _table(rows, headers)
        else:
            out.write("(none)\n")

    out.write(f"run: {lin.run_id}\n\nartifacts:\n")
    section([(a.name, a.path, _value(a.metadata) if a.metadata else "") for a in lin.artifacts.values()],
            ["NAME", "PATH", "METADATA"])

    def links(title: str, runs: List[Any], used: str) -> None:
        out.write(f"\n{title}:\n")
        rows = [(r.run_id, r.artifact_name or "(whole run)",
                 ", ".join(f"{a.name}={a.path}" for a in r.artifacts.values()))
                for r in runs]
        section(rows, ["RUN ID", used, "ITS ARTIFACTS"])

    links("parents (runs it consumed)", lin.parents, "ARTIFACT USED")
    links("children (runs that consumed it)", lin.children, "ARTIFACT USED")


#: ``tx tracker``: list runs, metadata, artifacts and lineage that trackers recorded
COMMAND = Command(run=_run, configure=_configure)
