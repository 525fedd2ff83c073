"""``tx log``: print (``-f``: follow) the logs of an app, a role or some replicas.

Identifier: ``scheduler://session/app_id[/role[/id1,id2,...]]`` (TorchX's grammar). Lines
are prefixed ``role/replica``; lines of different replicas never interleave mid-line.
``-t``/``--tail`` alone follows, as in TorchX; ``--tail N`` (a number) prints the last N
lines of each replica, as ``tail -n N`` does.
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Tuple

from tx.cli._common import make_runner
from tx.cli._relay import Relay
from tx.cli.cmd_sweep import sweep_log_identifier
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError, unknown_app

if TYPE_CHECKING:
    from tx.runner import Runner

__all__ = ["COMMAND", "parse_identifier", "parse_time"]

_IDENT = re.compile(
    r"^(?P<sched>[A-Za-z0-9_.\-]+)://(?P<session>[^/]*)/(?P<app_id>[^/]+)"
    r"(?:/(?P<role>[^/]+)(?:/(?P<ids>\d+(?:,\d+)*,?))?)?/?$"
)
_REL = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_identifier(text: str) -> Tuple[str, Optional[str], Optional[List[int]]]:
    """Split an identifier into (app handle, role or None, replica ids or None).

    Raises:
        CLIError: the text does not follow the grammar.
    """
    m = _IDENT.match(text)
    if not m:
        raise CLIError(
            f"malformed log identifier {text!r}: expected scheduler://session/app_id[/role[/0,1]]", 2
        )
    handle = f"{m['sched']}://{m['session']}/{m['app_id']}"
    ids = [int(i) for i in m["ids"].split(",") if i] if m["ids"] else None
    return handle, m["role"], ids


def parse_time(text: Optional[str], now: Optional[datetime] = None) -> Optional[datetime]:
    """``30s``/``10m``/``2h``/``1d`` ago, or an ISO 8601 time (local time if no zone).

    Raises:
        CLIError: neither form.
    """
    if text is None:
        return None
    m = _REL.match(text.strip())
    if m:
        return (now or datetime.now()) - timedelta(seconds=float(m[1]) * _UNIT[m[2]])
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise CLIError(f"bad time {text!r}: use ISO 8601 (2026-01-02T10:00) or an age like 10m", 2) from None


def _archived_replicas(runner: Runner, handle: str, role: Optional[str], missing: Exception) -> List[Tuple[str, int]]:
    """The replicas (of ``role``, or all) whose logs tx's archive holds for ``handle``;
    ``missing`` is raised where the archive holds none of the app."""
    archived = runner.archived_replicas(handle)
    if not archived:
        raise missing
    if role is not None and role not in {r for r, _k in archived}:
        raise CLIError(f"the log archive has no role {role!r} of {handle}")
    return [(r, k) for r, k in archived if role is None or r == role]


def _replicas(runner: Runner, handle: str, role: Optional[str], ids: Optional[List[int]]) -> List[Tuple[str, int]]:
    if role is not None and ids is not None:
        return [(role, k) for k in ids]
    # the runner has loaded tx.schedulers by now; cmd_log stays light for `tx --help`
    from tx.schedulers import SchedulerError

    waited = False
    while True:
        try:
            status = runner.status(handle)
        except SchedulerError:  # the backend is unreachable (a Ray head down): the archive may stand in
            if not runner.archived_replicas(handle):
                raise
            status = None
        if status is None:  # gone from the backend: the log archive may still have its logs
            return _archived_replicas(runner, handle, role, unknown_app(handle))
        if status.state.name not in ("UNSUBMITTED", "SUBMITTED", "PENDING"):
            break
        if not waited:
            print(f"waiting for {handle} to start...", file=sys.stderr, flush=True)
            waited = True
        time.sleep(1)
    app = runner.describe(handle)
    roles: Dict[str, int] = {r.name: r.num_replicas for r in app.roles} if app else {}
    if not roles:  # schedulers that cannot rebuild roles: use the status
        roles = {rs.role: len(rs.replicas) for rs in status.roles}
    if not roles:  # the backend keeps the app but nothing of its replicas: the archive may
        return _archived_replicas(runner, handle, role, CLIError(
            f"{handle} has no roles or replicas on its backend (state {status.state.name}) "
            "and none in the log archive: no log to read"))
    if role is not None:
        if role not in roles:
            raise CLIError(f"app {handle} has no role {role!r}; roles: {', '.join(roles) or 'none'}")
        return [(role, k) for k in range(roles[role])]
    return [(r, k) for r, n in roles.items() for k in range(n)]


class _TailAction(argparse.Action):
    """``-t``/``--tail`` [N]: alone, follow (TorchX's meaning); with a number, the last N
    lines; with anything else, follow, and the word is the identifier (``--tail HANDLE``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        if values is not None and re.fullmatch(r"[0-9]+", values):
            if int(values) < 1:
                parser.error(f"argument {option_string}: the number of lines must be >= 1, got {values}")
            namespace.last = int(values)
            return
        namespace.tail = True
        if values is not None:
            namespace.tail_identifier = values


def _last(lines: Iterable[str], n: int) -> Iterator[bytes]:
    """The last ``n`` of ``lines``, as one block of bytes."""
    kept = collections.deque(lines, maxlen=n)
    if kept:
        yield "".join(kept).encode("utf-8", "replace")


def _log(args: argparse.Namespace) -> int:
    identifier = args.identifier or getattr(args, "tail_identifier", None)
    if identifier is None:
        raise CLIError("the following arguments are required: IDENTIFIER (see `tx log --help`)", 2)
    if args.identifier and getattr(args, "tail_identifier", None):
        raise CLIError(f"two identifiers: {args.tail_identifier!r} and {args.identifier!r}; "
                       "--tail takes a number of lines, or nothing (follow)", 2)
    last = getattr(args, "last", None)
    if last is not None and args.tail:
        raise CLIError(f"--tail {last} prints the last {last} lines; -f follows: give one of them", 2)
    since, until = parse_time(args.since), parse_time(args.until)
    filtered = bool(args.regex or since or until)
    with make_runner() as runner:
        # the handles floor (the runner is loaded by now): the kind follows from the syntax
        from tx.runner.handles import SweepRef, TrialRef, split
        from tx.specs.api import MalformedAppHandleException

        try:
            ref, tail = split(identifier)
        except MalformedAppHandleException:
            parse_identifier(identifier)  # the log grammar's own error, where it has one (exit 2)
            raise
        if isinstance(ref, (SweepRef, TrialRef)):  # no such sweep or trial: UnknownSweepError
            identifier = sweep_log_identifier(ref, tail)
        handle, role, ids = parse_identifier(identifier)
        replicas = _replicas(runner, handle, role, ids)
        relay = Relay(sys.stdout.buffer)
        for r, k in replicas:
            if last is not None:
                def blocks(r: str = r, k: int = k) -> Any:
                    return _last(runner.log_lines(handle, r, k, regex=args.regex, since=since, until=until,
                                                  streams=args.streams), last)
            elif filtered:
                def blocks(r: str = r, k: int = k) -> Any:
                    for line in runner.log_lines(handle, r, k, regex=args.regex, since=since,
                                                 until=until, should_tail=args.tail,
                                                 streams=args.streams):
                        yield line.encode("utf-8", "replace")
            else:
                def blocks(r: str = r, k: int = k) -> Any:
                    return runner.log_blocks(handle, r, k, should_tail=args.tail, streams=args.streams)
            relay.add(f"{r}/{k}", blocks)
        relay.join()
    return 0


#: ``tx log``: print or follow an app's logs
COMMAND = Command(run=_log, arguments=(
    Argument("identifier", metavar="IDENTIFIER", nargs="?",
             help="scheduler://session/app_id[/role[/replica_ids]], e.g. local_cwd://tx/train-x1/train/0,1; "
                  "of a sweep's trial: SWEEP_HANDLE/TRIAL[/role[/replica_ids]]"),
    Argument("-f", "--follow", dest="tail", action="store_true",
             help="follow the logs until the app ends"),
    Argument("-t", "--tail", dest="tail", nargs="?", action=_TailAction, metavar="N",
             help="alone: follow, as -f (TorchX's meaning); with a number N: only the last N lines of each replica"),
    Argument("--regex", default=None, help="only lines matching this regular expression"),
    Argument("--since", default=None,
             help="only lines after this time: ISO 8601 (2026-01-02T10:00) or an age (30s, 10m, 2h, 1d)"),
    Argument("--until", default=None, help="only lines before this time (same formats as --since)"),
    Argument("--streams", choices=["stdout", "stderr", "combined"], default=None,
             help="which output (default: the scheduler's, usually combined)"),
))
