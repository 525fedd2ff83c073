"""``tx describe APP_HANDLE``: an app's AppDef, as YAML or JSON."""
from __future__ import annotations

import argparse
import sys

from tx.cli._common import make_runner
from tx.cli.command import Argument, Command
from tx.cli.errors import unknown_app

__all__ = ["COMMAND"]


def _describe(args: argparse.Namespace) -> int:
    with make_runner() as runner:
        app = runner.describe(args.app_handle)
        if app is None:
            raise unknown_app(args.app_handle, runner)
        # serialization (yaml) is imported when the command runs, not when its parser is built
        from tx.specs.files import appdef_to_json, appdef_to_yaml

        sys.stdout.write(appdef_to_json(app) + "\n" if args.json else appdef_to_yaml(app))
    return 0


#: ``tx describe``: show an app's definition
COMMAND = Command(run=_describe, arguments=(
    Argument("app_handle", metavar="APP_HANDLE", help="scheduler://session/app_id"),
    Argument("--json", action="store_true", help="print JSON instead of YAML"),
))
