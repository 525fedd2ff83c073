"""``tx status APP_HANDLE``: an app's state, replicas, why it waits or failed (of a sweep:
its trial table; of ``SWEEP/TRIAL``: the trial, then its last attempt's status).

The text keeps the labels of TorchX's ``torchx status`` block (``State:``, ``Roles:``,
``Structured Error Msg:``, ``UI URL:``) without its ``<NONE>`` placeholders: a field the
scheduler did not fill is left out, a message of several lines is indented under its label,
and where the scheduler records when the app started and ended, a ``Duration:`` line says
how long it ran. On a terminal the states are colored (``NO_COLOR`` turns that off).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, Optional

from tx.cli._common import make_runner
from tx.cli._format import STATE_COLORS, color_state
from tx.cli.cmd_sweep import sweep_status
from tx.cli.command import Argument, Command
from tx.cli.errors import unknown_app
from tx.views import status_text as render  # the text tx ui shows too


__all__ = ["COMMAND", "STATE_COLORS", "color_state", "render"]

def _times(runner: Any, handle: str) -> Any:
    """``(started, ended)`` epoch seconds where the scheduler's description records them
    (the local schedulers' metadata), else ``(None, None)``."""
    from tx.specs.handles import parse_app_handle  # the model is imported when the command runs

    scheduler, _session, app_id = parse_app_handle(handle)
    try:
        desc = runner.scheduler(scheduler).describe(app_id)
    except Exception:  # noqa: BLE001 - the duration is a courtesy; the status itself was read
        return None, None
    meta = desc.metadata if desc is not None else {}

    def num(key: str) -> Optional[float]:
        v = meta.get(key)
        return float(v) if isinstance(v, (int, float)) else None

    return num("started"), num("ended")


def _as_of(runner: Any, handle: str) -> str:
    """``Status as of: 1.2 s ago (shared status plane; --fresh asks the backend)\n`` where
    the scheduler answered from a shared snapshot (docs/scale.md), else ""."""
    age = _age(runner, handle)["status_age_s"]
    if age is None:
        return ""
    return f"Status as of: {age:.1f} s ago (shared status plane; --fresh asks the backend)\n"


def _age(runner: Any, handle: Optional[str]) -> Dict[str, Optional[float]]:
    """The JSON's ``status_as_of`` (epoch s: when the backend was asked, where a shared
    snapshot answered for the app ``handle``) and ``status_age_s`` (s since then, at this
    print); both None where no shared snapshot answered (a scheduler without the plane)."""
    import time  # only for this field

    as_of = runner.engine.status_as_of.get(handle) if handle else None
    if as_of is None:
        return {"status_as_of": None, "status_age_s": None}
    return {"status_as_of": as_of, "status_age_s": round(max(0.0, time.time() - as_of), 3)}


def _status(args: argparse.Namespace) -> int:
    handle, trial = args.app_handle, None
    if args.fresh:
        from tx.schedulers.plane import force_fresh  # only with --fresh

        force_fresh()
    with make_runner() as runner:
        # the handles floor (the runner is loaded by now): the kind follows from the syntax
        from tx.runner.handles import RunRef, SweepRef, TrialRef, parse

        ref = parse(handle)
        if isinstance(ref, (SweepRef, TrialRef)):  # no such sweep or trial: UnknownSweepError
            trial = sweep_status(runner, ref, args.json)
            if trial is None:
                return 0
            handle = trial[0]  # a submitted trial: its last attempt's app, headed by the trial
        status = runner.status(handle)  # of a run with no record here: UnknownRunError
        if status is None:
            raise unknown_app(handle, runner)
        roles = [r for r in args.roles.split(",") if r] or None
        if trial is not None:
            if args.json:
                print(json.dumps({"trial": trial[2], "status": status.to_json(roles), **_age(runner, handle)},
                                 indent=2))
                return 0
            sys.stdout.write(trial[1])
        if isinstance(ref, RunRef):
            run = runner.run_status(handle)
            if args.json:
                print(json.dumps({"run": run.to_json(), "status": status.to_json(roles), **_age(runner, run.live)},
                                 indent=2))
                return 0
            sys.stdout.write(f"Run: {run.handle}\n  Chain: {run.chain}\n  Live: {run.live or '-'}\n")
            from tx.cli._text import use_color  # its regexes: only for the text

            sys.stdout.write(render(status, roles, color=use_color(sys.stdout)))
            return 0
        if args.json:
            print(json.dumps({**status.to_json(roles), **_age(runner, handle)}, indent=2))
        else:
            from tx.cli._text import use_color  # its regexes: only for the text

            as_of = _as_of(runner, handle)  # before _times' look, which may fetch anew
            started, ended = _times(runner, handle)
            sys.stdout.write(render(status, roles, started, ended, color=use_color(sys.stdout)))
            sys.stdout.write(as_of)
    return 0


#: ``tx status``: show an app's status
COMMAND = Command(run=_status, arguments=(
    Argument("app_handle", metavar="APP_HANDLE",
             help="scheduler://session/app_id, a run's handle, a sweep handle, or SWEEP_HANDLE/TRIAL"),
    Argument("--roles", default="", help="only these roles (comma separated)"),
    Argument("--json", action="store_true", help="print the status as JSON"),
    Argument("--fresh", action="store_true",
             help="ask the backend now instead of reading the host's shared status (docs/scale.md)"),
))
