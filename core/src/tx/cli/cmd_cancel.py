"""``tx cancel APP_HANDLE``."""
from __future__ import annotations

import argparse

from tx.cli._common import make_runner
from tx.cli.cmd_sweep import looks_like_sweep, sweep_cancel
from tx.cli.command import Argument, Command
from tx.cli.errors import unknown_app

__all__ = ["COMMAND"]


def _cancel(args: argparse.Namespace) -> int:
    with make_runner() as runner:
        if looks_like_sweep(args.app_handle):
            return sweep_cancel(runner, args.app_handle)
        if runner.status(args.app_handle) is None:
            raise unknown_app(args.app_handle)
        runner.cancel(args.app_handle)
    return 0


#: ``tx cancel``: cancel an app
COMMAND = Command(run=_cancel, arguments=(
    Argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id, or a sweep handle (cancels every trial)"),
))
