"""``tx status APP_HANDLE``: an app's state, replicas, why it waits or failed."""
from __future__ import annotations

import argparse
import json
import sys

from tx.cli._common import make_runner
from tx.cli.cmd_sweep import looks_like_sweep, sweep_status
from tx.cli.command import Argument, Command
from tx.cli.errors import unknown_app

__all__ = ["COMMAND"]


def _status(args: argparse.Namespace) -> int:
    with make_runner() as runner:
        if looks_like_sweep(args.app_handle):
            return sweep_status(runner, args.app_handle, args.json)
        status = runner.status(args.app_handle)
        if status is None:
            raise unknown_app(args.app_handle)
        roles = [r for r in args.roles.split(",") if r] or None
        if args.json:
            print(json.dumps(status.to_json(roles), indent=2))
        else:
            sys.stdout.write(status.format(roles))
    return 0


#: ``tx status``: show an app's status
COMMAND = Command(run=_status, arguments=(
    Argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id, or a sweep handle"),
    Argument("--roles", default="", help="only these roles (comma separated)"),
    Argument("--json", action="store_true", help="print the status as JSON"),
))
